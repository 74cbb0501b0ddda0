"""LIBRA's inputs and closed forms: multi-dimensional networks, workloads, costs (spec libra sections 1-2).

* network file (``Topology: [Ring, FullyConnected, Ring, Switch]``, ``NpusCount``, ``CostDimension``),
  workload traces (ASTRA-sim 1.0 lines, 12 fields), communicators (``Forward/InputGrad/WeightGrad``
  group sizes per dimension, -1 = unused) and cost models ($ per GB/s per label) from the files in
  ``data/libra/``; every error names the file and the line or field;
* per-dimension traffic of multi-rail collectives (spec 1.4): V_i in bytes, T = max_i V_i / B_i;
* the no-overlap training loop T(B) = C0 + sum_c max_i V_ci / B_i (and the TP-DP overlap loop);
* the linear cost model Cost(B) = P * sum_i kappa_i B_i (spec 2.2).

``model.LibraModel`` is the same model over numpy arrays, the form the solvers use.

Units: bytes, GB/s (1e9 B/s) and ns inside the model, as the reference code (bytes / (GB/s) = ns).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DesignInputError", "Network", "Layer", "Workload", "load_network", "load_workload",
           "load_communicator", "load_cost_model", "volumes", "workload_volumes", "kappa", "network_cost",
           "no_overlap_time", "KINDS"]

KINDS = {"ring": "R", "fullyconnected": "F", "switch": "S"}
COLLECTIVES = ("NONE", "ALLREDUCE", "REDUCESCATTER", "ALLGATHER", "ALLTOALL")
PHASES = ("Forward", "InputGrad", "WeightGrad")


class DesignInputError(ValueError):
    """A malformed network, workload, communicator or cost file; names the file and line or field."""


@dataclass
class Network:
    kinds: list[str]  # "ring" | "fullyconnected" | "switch"
    sizes: list[int]
    cost_labels: list[str]

    @property
    def npus(self) -> int:
        """NPUs in all: the product of the dimension sizes."""
        return math.prod(self.sizes)

    def builder_spec(self) -> str:
        """The ``md:`` topology spec, e.g. ``md:R4,F8,R4,S32``."""
        return "md:" + ",".join(f"{KINDS[k]}{n}" for k, n in zip(self.kinds, self.sizes))


@dataclass
class Layer:
    name: str
    phases: list[tuple[float, str, float]]  # (compute ns, collective, size bytes) for F, IG, WG


@dataclass
class Workload:
    layers: list[Layer]
    communicator: dict[str, list[int]]
    weight: float = 1.0
    name: str = "workload"

    @property
    def compute(self) -> float:
        """Compute time (ns) of every layer's three phases, summed."""
        return sum(phase[0] for layer in self.layers for phase in layer.phases)


def _yaml(path: str | Path) -> Any:
    """A YAML input read safely (``workbench.util.safe_load``): a FIFO or folder, a binary file, duplicate
    keys, an alias bomb are one line naming the file."""
    from workbench.util.safe_load import load_file

    return load_file(path, "file", DesignInputError, syntax="yaml")


def load_network(path: str | Path) -> Network:
    """A network file: ``Topology``, ``NpusCount`` and ``CostDimension`` lists of one length."""
    data = _yaml(path)
    if not isinstance(data, dict):
        raise DesignInputError(f"{path}: expected Topology, NpusCount and CostDimension")
    for key in ("Topology", "NpusCount", "CostDimension"):
        if key not in data or not isinstance(data[key], list):
            raise DesignInputError(f"{path}: field {key}: expected a list")
    kinds = []
    for i, kind in enumerate(data["Topology"]):
        key = str(kind).lower()
        if key not in KINDS:
            raise DesignInputError(f"{path}: Topology[{i}]: expected Ring, FullyConnected or Switch, got {kind!r}")
        kinds.append(key)
    sizes = []
    for i, size in enumerate(data["NpusCount"]):
        if not isinstance(size, int) or size < 2:
            raise DesignInputError(f"{path}: NpusCount[{i}]: expected an integer >= 2, got {size!r}")
        sizes.append(size)
    labels = [str(x) for x in data["CostDimension"]]
    if not (len(kinds) == len(sizes) == len(labels)):
        raise DesignInputError(f"{path}: Topology, NpusCount and CostDimension must have the same length")
    return Network(kinds, sizes, labels)


def load_workload(path: str | Path) -> list[Layer]:
    """The layers of a workload trace: 12 fields a line (name, -1, compute ns, collective and bytes
    for each of Forward, InputGrad, WeightGrad, then update time); blank and ``#`` lines skipped."""
    from workbench.util.safe_load import read_input

    path = Path(path)
    lines = read_input(path, "file", DesignInputError).splitlines()
    layers = []
    for number, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != 12:
            raise DesignInputError(f"{path}: line {number}: expected 12 fields (name, -1, then compute, type, size "
                                   f"for Forward, InputGrad, WeightGrad, then update time), got {len(fields)}")
        phases = []
        for p, start in enumerate((2, 5, 8)):
            compute, kind, size = fields[start:start + 3]
            kind = kind.upper().replace("-", "").replace("_", "")
            if kind not in COLLECTIVES:
                raise DesignInputError(f"{path}: line {number}: {PHASES[p]} collective {fields[start + 1]!r} is not "
                                       f"one of {', '.join(COLLECTIVES)}")
            try:
                phases.append((float(compute), kind, float(size)))
            except ValueError:
                raise DesignInputError(f"{path}: line {number}: {PHASES[p]} compute time and size must be numbers")
            if not (0 <= phases[-1][0] < math.inf and 0 <= phases[-1][2] < math.inf):  # NaN fails both
                raise DesignInputError(f"{path}: line {number}: {PHASES[p]} compute time and size must be finite "
                                       "and non-negative")
        layers.append(Layer(fields[0], phases))
    if not layers:
        raise DesignInputError(f"{path}: no layers")
    return layers


def load_communicator(path: str | Path, dimensions: int) -> dict[str, list[int]]:
    """Per phase (Forward, InputGrad, WeightGrad), the group size in each of ``dimensions``
    dimensions (-1: unused), from a communicator file."""
    data = _yaml(path)
    if not isinstance(data, dict):
        raise DesignInputError(f"{path}: expected Forward, InputGrad and WeightGrad lists")
    result = {}
    for phase in PHASES:
        groups = data.get(phase)
        if not isinstance(groups, list) or len(groups) != dimensions:
            raise DesignInputError(f"{path}: field {phase}: expected a list of {dimensions} group sizes (-1 = unused)")
        for i, g in enumerate(groups):
            if not isinstance(g, int) or not (g == -1 or g >= 2):
                raise DesignInputError(f"{path}: {phase}[{i}]: expected -1 or an integer >= 2, got {g!r}")
        result[phase] = groups
    return result


def load_cost_model(path: str | Path) -> dict[str, dict[str, float]]:
    """Prices per cost label: ``{label: {Link | Switch | Nic: $ per GB/s}}``, each non-negative."""
    data = _yaml(path)
    if not isinstance(data, dict):
        raise DesignInputError(f"{path}: expected one mapping per cost label")
    prices = {}
    for label, entry in data.items():
        if not isinstance(entry, dict):
            raise DesignInputError(f"{path}: {label}: expected Link/Switch/Nic prices")
        for part, value in entry.items():
            if (part not in ("Link", "Switch", "Nic") or isinstance(value, bool)
                    or not isinstance(value, (int, float)) or not 0 <= value <= 1e300):  # NaN, inf too
                raise DesignInputError(f"{path}: {label}.{part}: expected a non-negative price for Link, Switch or Nic")
        prices[str(label)] = {k: float(v) for k, v in entry.items()}
    return prices


def volumes(kind: str, size: float, communicator: list[int]) -> list[float]:
    """Per-dimension bytes each NPU moves for one multi-rail collective (spec 1.4; AG size = per-NPU input)."""
    v = [0.0] * len(communicator)
    used = [i for i, k in enumerate(communicator) if k != -1]
    if kind in ("NONE",) or not used or size == 0:
        return v
    if kind == "ALLREDUCE":
        s = size
        for i in used:
            v[i] = 2 * s * (communicator[i] - 1) / communicator[i]
            s /= communicator[i]
    elif kind == "REDUCESCATTER":
        s = size
        for i in used:
            v[i] = s * (communicator[i] - 1) / communicator[i]
            s /= communicator[i]
    elif kind == "ALLGATHER":
        s = size
        for i in reversed(used):
            v[i] = s * (communicator[i] - 1)
            s *= communicator[i]
    elif kind == "ALLTOALL":
        for i in used:
            v[i] = size * (communicator[i] - 1) / communicator[i]
    else:
        raise DesignInputError(f"unknown collective {kind!r}")
    return v


def workload_volumes(workload: Workload) -> list[list[float]]:
    """One volume vector per collective of the workload (Forward/InputGrad use TP groups, WeightGrad DP)."""
    result = []
    for layer in workload.layers:
        for phase, (_, kind, size) in zip(PHASES, layer.phases):
            if kind != "NONE" and size > 0:
                vector = volumes(kind, size, workload.communicator[phase])
                if any(vector):
                    result.append(vector)
    return result


def kappa(network: Network, prices: dict[str, dict[str, float]]) -> list[float]:
    """Per-NPU $ per GB/s of each dimension: link price, plus switch and NIC prices on switch dims."""
    result = []
    for kind, label in zip(network.kinds, network.cost_labels):
        if label not in prices:
            raise DesignInputError(f"cost model has no prices for {label!r}")
        entry = prices[label]
        k = entry.get("Link", 0.0)
        if kind == "switch":
            k += entry.get("Switch", 0.0) + entry.get("Nic", 0.0)
        result.append(k)
    return result


def network_cost(network_npus: int, kappas: list[float], bandwidths_gbps: list[float]) -> float:
    """Cost(B) = P sum_i kappa_i B_i in $ (B in GB/s), P being ``network_npus``."""
    return network_npus * sum(k * b for k, b in zip(kappas, bandwidths_gbps))


def no_overlap_time(compute_ns: float, vectors: list[list[float]], bandwidths_gbps: list[float]) -> float:
    """T(B) in ns: compute plus every collective's slowest dimension."""
    return compute_ns + sum(max(v / b for v, b in zip(vector, bandwidths_gbps) if v > 0) for vector in vectors)
