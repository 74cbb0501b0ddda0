"""Canonical forms of the LP/MILP models a few small instances hand to HiGHS.

Every model reaches HiGHS through ``workbench.kit.solvers.solve_lp``; ``captured_models`` records the
arguments of each call. ``fingerprint`` reduces one model to a hash of its canonical form: the
columns in order (bounds, cost, integrality) and the rows as a sorted multiset of (lower, upper,
sorted entries), numbers rounded to 12 significant digits, so the order rows are added in and the
order of entries within a row do not matter, while any change to a coefficient, a bound or a row
count does. ``exact`` is stricter: a hash of the arrays HiGHS is handed (costs, bounds, integrality,
the column-wise matrix, the offset and a MIP start) in their order, so the rows' order counts too; it
is recorded for the TE-CCL and LIBRA instances and checked wherever it was recorded. Its numbers are
rounded like the canonical form's: LIBRA's cost-cap instances, built by the same code, differed in
last bits on another CPU (their cut points come from ``np.geomspace``, whose logarithms and powers
are not bit-identical across machines), and that is not a change of model.
``python tests/model_fingerprints.py [names]`` rewrites ``tests/data/model_fingerprints.json``
(only when a model is meant to change).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import math
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from workbench.plugin import call as plugin_call

DATA = Path(__file__).resolve().parent / "data" / "model_fingerprints.json"


def _number(value: float) -> str:
    value = float(value)
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value + 0.0:.12g}"  # + 0.0: -0.0 and 0.0 are the same bound


def fingerprint(call: dict[str, Any]) -> dict[str, Any]:
    cost, lower, upper = call["cost"], call["col_lower"], call["col_upper"]
    integrality = call["integrality"]
    integer = [False] * len(cost) if integrality is None else [bool(v) for v in integrality]
    columns = [(_number(c), _number(lo), _number(hi), i) for c, lo, hi, i in zip(cost, lower, upper, integer)]
    row_idx, col_idx, values = (np.asarray(a) for a in call["rows"])
    entries: list[list[tuple[int, str]]] = [[] for _ in range(len(call["row_lower"]))]
    for r, c, v in zip(row_idx.tolist(), col_idx.tolist(), values.tolist()):
        entries[r].append((c, _number(v)))
    rows = sorted((_number(lo), _number(hi), tuple(sorted(e))) for lo, hi, e in
                  zip(call["row_lower"], call["row_upper"], entries))
    digest = hashlib.sha256(repr((columns, rows, _number(call["offset"]))).encode()).hexdigest()[:20]
    return {"columns": len(columns), "rows": len(rows), "nonzeros": int(len(values)), "hash": digest}


def exact_digest(call: dict[str, Any], start: Any = None) -> str:
    """A hash of exactly what ``solve_lp`` passes to HiGHS (the rows' order included)."""
    from scipy.sparse import csc_matrix

    row_idx, col_idx, values = call["rows"]
    shape = (len(call["row_lower"]), len(call["cost"]))
    matrix = csc_matrix((np.asarray(values, dtype=float), (row_idx, col_idx)), shape=shape)
    digest = hashlib.sha256()

    def numbers(values: Any) -> bytes:
        return ",".join(_number(v) for v in np.asarray(values, dtype=float).ravel().tolist()).encode()

    for key in ("cost", "col_lower", "col_upper", "row_lower", "row_upper"):
        digest.update(numbers(call[key]))
    for part in (matrix.indptr, matrix.indices):
        digest.update(np.ascontiguousarray(part, dtype=np.int64).tobytes())
    digest.update(numbers(matrix.data))
    integrality = call["integrality"]
    is_mip = integrality is not None and any(integrality)
    digest.update(np.ascontiguousarray(integrality, dtype=bool).tobytes() if is_mip else b"lp")
    digest.update(repr(float(call["offset"])).encode())
    if is_mip and start is not None:
        digest.update(numbers(start))
    return digest.hexdigest()[:20]


@contextlib.contextmanager
def captured_models() -> Iterator[list[dict[str, Any]]]:
    """Record every ``solve_lp`` call (arguments, fingerprint and objective) while the block runs."""
    import workbench.kit.milp  # noqa: F401
    import workbench.kit.solvers

    original = workbench.kit.solvers.solve_lp
    calls: list[dict[str, Any]] = []

    def recording(cost, col_lower, col_upper, rows, row_lower, row_upper, time_limit, integrality=None,
                  offset=0.0, **kwargs):
        call = {"cost": cost, "col_lower": col_lower, "col_upper": col_upper, "rows": rows,
                "row_lower": row_lower, "row_upper": row_upper, "integrality": integrality, "offset": offset}
        outcome = original(cost, col_lower, col_upper, rows, row_lower, row_upper, time_limit,
                           integrality=integrality, offset=offset, **kwargs)
        record = fingerprint(call)
        record["exact"] = exact_digest(call, kwargs.get("start"))
        record["objective"] = outcome.objective if outcome.status == "optimal" else None
        calls.append(record)
        return outcome

    importlib.import_module("formulations.libra.optimize")  # before patching, should it hold its own solve_lp

    # every module holding solve_lp under that name calls the recorder while the block runs
    holders = [m for m in list(sys.modules.values()) if getattr(m, "solve_lp", None) is original]
    for module in holders:
        module.solve_lp = recording
    try:
        yield calls
    finally:
        for module in holders:
            module.solve_lp = original


# the limits are far above what any instance needs: a solve that stopped at its limit on a loaded
# machine would hand the next stage another model
def _taccl(spec: str, kind: str, size: float, sketch: Any) -> Callable[[], None]:
    def run() -> None:
        from formulations.taccl import Taccl
        from workbench.model.collective import make_collective
        from workbench.plugin.registry import Problem
        from workbench.topology import build

        topo = build(spec)
        problem = Problem(topo, make_collective(kind, topo.num_npus, 1), size)
        plugin_call.synthesize(Taccl(), problem, time_limit=1200, seed=0, sketch=sketch)
    return run


def _build_alpha0(spec: str) -> Any:
    from workbench.topology import build

    return build(spec, alpha=0.0)


def _flow(spec: str, kind: str, chunk: float, **options: Any) -> Callable[[], None]:
    def run() -> None:
        from workbench.model.collective import make_collective
        from workbench.bounds.flow_lp import flow_lp_bound
        from workbench.topology import build

        topo = build(spec, **options)
        flow_lp_bound(topo, make_collective(kind, topo.num_npus), chunk)
    return run


def _teccl(spec: str | Callable[[], Any], kind: str, size: float, chunks: int = 1, **params: Any) -> Callable[[], None]:
    def run() -> None:
        from formulations.teccl import Teccl
        from workbench.model.collective import make_collective
        from workbench.plugin.registry import Problem
        from workbench.topology import build

        topo = spec() if callable(spec) else build(spec)
        problem = Problem(topo, make_collective(kind, topo.num_npus, chunks), size)
        plugin_call.synthesize(Teccl(), problem, time_limit=1200, seed=0, **params)
    return run


def _fig2c() -> Any:
    """TE-CCL Fig. 2c without rank 2's own demand: s1, s2 -> h -> d and s3 -> d (1 MB/s links)."""
    from workbench.topology import Link, Topology

    return Topology.create(5, [Link(0, 3, 0.0, 1e6), Link(1, 3, 0.0, 1e6), Link(3, 4, 0.0, 1e6), Link(2, 4, 0.0, 1e6)])


def _ring_and_switch() -> Any:
    """A 4-ring (1 GB/s) whose ranks also reach one switch (2 GB/s, alpha 0.6 ms: a = 2 epochs of 4 MB)."""
    from workbench.topology import Link, Topology

    ring = [Link(i, (i + 1) % 4, 1e-7, 1e9) for i in range(4)] + [Link((i + 1) % 4, i, 1e-7, 1e9) for i in range(4)]
    star = [Link(i, 4, 6e-4, 2e9) for i in range(4)] + [Link(4, i, 6e-4, 2e9) for i in range(4)]
    return Topology.create(4, ring + star, num_switches=1, name="ring+switch")


def _teccl_fig2c(buffer_limit: int | None) -> Callable[[], None]:
    def run() -> None:
        from formulations.teccl import Teccl
        from workbench.model.collective import custom_collective
        from workbench.plugin.registry import Problem

        collective = custom_collective(5, [[0], [1], [2]], [[4], [4], [4]])
        plugin_call.synthesize(Teccl(), Problem(_fig2c(), collective, 3e6), time_limit=1200, seed=0, method="milp",
                           buffer_limit=buffer_limit)
    return run


LIBRA_DATA = Path(__file__).resolve().parents[1] / "data" / "libra"


def _libra(workload: str, net: str, objective: str = "perf", **constraints: Any) -> Callable[[], None]:
    def run() -> None:
        from formulations.libra import Libra
        from workbench.plugin.registry import DesignProblem

        comm = f"Turing_NLG_{net.upper()}" if workload == "Turing_NLG" else f"{workload}_{net}"
        cost = constraints.pop("kappa", None)
        problem = DesignProblem(dimensions={"file": f"{LIBRA_DATA}/network/{net}_network.yml"},
                                workloads=[{"workload": f"{LIBRA_DATA}/workload/{workload}.txt",
                                            "communicator": f"{LIBRA_DATA}/communicator/{comm}.yml"}],
                                cost_model={"kappa": cost} if cost else
                                {"file": f"{LIBRA_DATA}/cost_model/{net}_cost_model.yml"},
                                constraints=dict(constraints), objective=objective)
        plugin_call.synthesize(Libra(), problem, time_limit=1200, seed=0)
    return run


def _libra_single_allreduce(objective: str) -> Callable[[], None]:
    def run() -> None:
        import tempfile

        from formulations.libra import Libra
        from workbench.plugin.registry import DesignProblem

        with tempfile.TemporaryDirectory() as folder:
            trace, comm = Path(folder) / "ar.txt", Path(folder) / "comm.yml"
            trace.write_text("layer -1 0 NONE 0 0 NONE 0 0 ALLREDUCE 1000000000 0\n")
            comm.write_text("Forward: [-1, -1, -1]\nInputGrad: [-1, -1, -1]\nWeightGrad: [4, 4, 4]\n")
            dims = [{"kind": "ring", "size": 4, "cost_label": "a"} for _ in range(3)]
            problem = DesignProblem(dimensions=dims, workloads=[{"workload": str(trace), "communicator": str(comm)}],
                                    cost_model={"kappa": [4.0, 4.0, 7.8]}, constraints={"total_bandwidth": 1000},
                                    objective=objective)
            plugin_call.synthesize(Libra(), problem, time_limit=1200, seed=0)
    return run


UC_MAX = {"intranode": {"strategy": "switch", "switches": [list(range(16))], "hyperedge_policy": "uc-max"},
          "symmetry": [[2, 16]]}

# name -> builder; each TACCL instance solves every stage to optimality well inside its limit, so
# the later stages' models (built from the earlier stages' solutions) are reproducible too
INSTANCES: dict[str, Callable[[], None]] = {
    "taccl ring:4 allgather": _taccl("ring:4", "allgather", 4e6, None),
    "taccl ndv2-taccl:1 allgather": _taccl("ndv2-taccl:1", "allgather", 8e6, None),
    "taccl ndv2-taccl:2 allgather ndv2-sk-1": _taccl("ndv2-taccl:2", "allgather", 16e6, "ndv2-sk-1"),
    "taccl ndv2-taccl:2 reducescatter ndv2-sk-1": _taccl("ndv2-taccl:2", "reducescatter", 16e6, "ndv2-sk-1"),
    "taccl dgx2-taccl-nic:2 allgather dgx2-sk-1": _taccl("dgx2-taccl-nic:2", "allgather", 32e6, "dgx2-sk-1"),
    "taccl dgx2-taccl:1 allgather uc-max": _taccl("dgx2-taccl:1", "allgather", 16e6, UC_MAX),
    "flow dgx1 allgather": _flow("dgx1", "allgather", 1.0, alpha=0.0, bandwidth=1.0),
    "flow uniring:4 reducescatter": _flow("uniring:4", "reducescatter", 1.0, alpha=0.0, bandwidth=1.0),
    "flow torus:4x4 alltoall": _flow("torus:4x4", "alltoall", 1e6),
    "flow line:4 broadcast": _flow("line:4", "broadcast", 1e6),
    # TE-CCL: the MILP (docs/methods/teccl.md 2.10) with each switch model and a buffer limit, the LP (3.6), A* rounds (4)
    "teccl ring:4 allgather milp": _teccl("ring:4", "allgather", 4e6, method="milp"),
    "teccl dgx1 allgather milp slow k=2": _teccl(lambda: _build_alpha0("dgx1"), "allgather", 4e5, 2, method="milp",
                                                 epoch="slowest", epochs=3),
    "teccl fig2c milp": _teccl_fig2c(None),
    "teccl fig2c milp buffer_limit=1": _teccl_fig2c(1),
    "teccl switch:4 allgather milp copy": _teccl("switch:4", "allgather", 4e6, method="milp"),
    "teccl ring+switch allgather milp copy": _teccl(_ring_and_switch, "allgather", 8e6, 2, method="milp"),
    "teccl ring+switch allgather milp no-copy": _teccl(_ring_and_switch, "allgather", 8e6, 2, method="milp",
                                                       switch_model="no-copy"),
    "teccl ring+switch allgather milp hyperedge": _teccl(_ring_and_switch, "allgather", 8e6, 2, method="milp",
                                                         switch_model="hyperedge"),
    "teccl ring+switch allgather milp single-beta code": _teccl(_ring_and_switch, "allgather", 8e6, 2,
                                                                method="milp", single_beta=True, objective="code"),
    "teccl ring+switch allgather milp buffer_limit=2": _teccl(_ring_and_switch, "allgather", 8e6, 2, method="milp",
                                                              buffer_limit=2),
    "teccl ring+switch reducescatter milp": _teccl(_ring_and_switch, "reducescatter", 8e6, 2, method="milp"),
    "teccl ring:4 alltoall lp": _teccl("ring:4", "alltoall", 4e6, method="lp"),
    "teccl ring+switch alltoall lp": _teccl(_ring_and_switch, "alltoall", 8e6, 2, method="lp"),
    "teccl ring:4 allgather astar": _teccl("ring:4", "allgather", 4e6, 2, method="astar", round_epochs=3),
    "teccl switch:4 alltoall astar": _teccl("switch:4", "alltoall", 4e6, method="astar", round_epochs=3),
    "teccl ring+switch allgather astar copy": _teccl(_ring_and_switch, "allgather", 8e6, 2, method="astar",
                                                     round_epochs=3),
    "teccl ring+switch allgather astar no-copy": _teccl(_ring_and_switch, "allgather", 8e6, 2, method="astar",
                                                        round_epochs=3, switch_model="no-copy"),
    # LIBRA: every Kelley round of PerfOpt (spec libra 3.2 recipe 2), and PerfPerCost's sweep of cost caps
    "libra GPT_3 4d perf 1000": _libra("GPT_3", "4d", total_bandwidth=1000),
    "libra MSFT_1T 3d perf 100": _libra("MSFT_1T", "3d", total_bandwidth=100),
    "libra GPT_3 4d perf cost cap": _libra("GPT_3", "4d", cost_cap=15e6, kappa=[2.0, 4.0, 4.0, 57.4]),
    "libra single allreduce perf": _libra_single_allreduce("perf"),
    "libra single allreduce perf-per-cost": _libra_single_allreduce("perf-per-cost"),
}


def record(name: str) -> list[dict[str, Any]]:
    with captured_models() as calls:
        INSTANCES[name]()
    return calls


if __name__ == "__main__":
    names = sys.argv[1:] or list(INSTANCES)
    stored = json.loads(DATA.read_text()) if DATA.exists() else {}
    for name in names:
        stored[name] = record(name)
        print(name, [(c["rows"], c["objective"]) for c in stored[name]], flush=True)
    DATA.parent.mkdir(exist_ok=True)
    DATA.write_text(json.dumps(stored, indent=1) + "\n")
