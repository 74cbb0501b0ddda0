"""LIBRA's analytical model of one design problem (spec libra 1.6 and 2.2).

* ``build_model``: a ``DesignProblem`` (network file or dimension list, workloads as trace plus
  communicator or as one collective, cost model file or per-NPU kappa) to a ``LibraModel``;
* ``LibraModel.time``: T(B) = C0 + sum_c w_c max_i V_ci / B_i (ns, B in GB/s; the no-overlap loop);
* ``LibraModel.cost``: Cost(B) = P sum_i kappa_i B_i;
* ``bandwidth_bounds``: every B_i >= eps (spec A12), with the per-dimension ``min``/``max`` constraints.

This module builds no LP rows: the bounds become the columns' bounds of ``optimize._kelley_lp``,
the LP written as tagged equations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from formulations.libra.network import (Layer, Network, Workload, kappa, load_communicator, load_cost_model,
                                        load_network, load_workload, workload_volumes)
from workbench.util.lazy import lazy_module
from workbench.util.units import parse_bandwidth

if TYPE_CHECKING:
    from workbench.plugin.registry import DesignProblem

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["LibraModel", "build_model", "gbps", "bandwidth_bounds", "EPS"]

EPS = 1e-3  # GB/s, every dimension's lower bound (spec A12)


class LibraModel:
    """The analytical model of one design problem, scaled to GB and seconds inside the solvers."""

    def __init__(self, network: Network, workloads: list[Workload], kappas: list[float]) -> None:
        self.network = network
        self.kappas = np.asarray(kappas, dtype=float)
        self.vectors: list[np.ndarray] = []
        self.weights: list[float] = []
        self.compute = 0.0
        for w in workloads:
            for v in workload_volumes(w):
                self.vectors.append(np.asarray(v, dtype=float))
                self.weights.append(w.weight)
            self.compute += w.weight * w.compute
        self.dims = len(network.sizes)

    def time(self, bandwidth_gbps: np.ndarray) -> float:
        """Training time in ns for per-NPU bandwidths in GB/s."""
        comm = sum(w * float(np.max(np.where(v > 0, v / bandwidth_gbps, 0.0)))
                   for w, v in zip(self.weights, self.vectors))
        return self.compute + comm

    def cost(self, bandwidth_gbps: np.ndarray) -> float:
        """Cost(B) in $: NPUs times the kappa-weighted sum of the per-NPU bandwidths (GB/s)."""
        return float(self.network.npus * np.dot(self.kappas, bandwidth_gbps))


def build_model(problem: DesignProblem) -> LibraModel:
    """The ``LibraModel`` of a design problem: network (file or dimension list), workloads (trace
    and communicator files, or one collective) and kappas (cost model file or given per dimension)."""
    dims = problem.dimensions
    if isinstance(dims, dict) and "file" in dims:
        network = load_network(dims["file"])
    elif isinstance(dims, list) and dims and all(isinstance(d, dict) for d in dims):
        network = Network([str(d["kind"]).lower() for d in dims], [int(d["size"]) for d in dims],
                          [str(d.get("cost_label", "")) for d in dims])
    else:
        raise ValueError("libra: problem.dimensions must be {file: network.yml} or a list of {kind, size, cost_label}")
    workloads = []
    for i, entry in enumerate(problem.workloads):
        if isinstance(entry, dict) and "collective" in entry:  # one collective, e.g. TACOS co-design (spec 4.8)
            groups = [int(g) for g in entry["groups"]]
            if len(groups) != len(network.sizes):
                raise ValueError(f"libra: workloads[{i}].groups needs {len(network.sizes)} entries")
            layer = Layer("collective", [(0.0, "NONE", 0.0), (0.0, "NONE", 0.0),
                                         (0.0, str(entry["collective"]).upper(), float(entry["size"]))])
            none = [-1] * len(groups)
            workloads.append(Workload([layer], {"Forward": none, "InputGrad": none, "WeightGrad": groups},
                                      float(entry.get("weight", 1.0)), "collective"))
            continue
        if not isinstance(entry, dict) or "workload" not in entry or "communicator" not in entry:
            raise ValueError(f"libra: workloads[{i}] needs 'workload' and 'communicator' files "
                             "(or 'collective', 'size' and 'groups')")
        workloads.append(Workload(load_workload(entry["workload"]),
                                  load_communicator(entry["communicator"], len(network.sizes)),
                                  float(entry.get("weight", 1.0)), str(entry.get("name", entry["workload"]))))
    cost = problem.cost_model
    if "kappa" in cost:
        kappas = [float(k) for k in cost["kappa"]]
    elif "file" in cost:
        kappas = kappa(network, load_cost_model(cost["file"]))
    else:
        raise ValueError("libra: cost_model needs 'file' (a cost model YAML) or 'kappa' (per-NPU $ per GB/s)")
    return LibraModel(network, workloads, kappas)


def gbps(value: Any) -> float:
    """A bandwidth in GB/s: a number as given, a string with its unit (``"1000GB/s"``) converted."""
    return parse_bandwidth(value) / 1e9 if isinstance(value, str) else float(value)


def bandwidth_bounds(model: LibraModel, constraints: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Per-dimension lower and upper bandwidths (GB/s): at least ``EPS``, tightened by the
    constraints' ``min`` / ``max`` lists (one value per dimension)."""
    lower = np.full(model.dims, EPS)
    upper = np.full(model.dims, np.inf)
    for key, target in (("min", lower), ("max", upper)):
        if key in constraints:
            values = [gbps(v) for v in constraints[key]]
            if len(values) != model.dims:
                raise ValueError(f"libra: constraints.{key} needs {model.dims} values")
            target[:] = np.maximum(target, values) if key == "min" else np.minimum(target, values)
    return lower, upper
