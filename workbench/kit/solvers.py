"""A thin solver layer: time limits and one status vocabulary for HiGHS, PuLP/CBC, z3 and CP-SAT.

Whatever a solver library calls its result, the workbench labels it by one rule (docs/architecture.md, "Statuses"):
``optimal`` (proven), ``feasible`` (stopped at a gap target or a heuristic's own end),
``timeout`` (a time limit ended the search; the best answer, if any, is attached),
``infeasible`` (proven impossible), ``error``. PuLP reports "Optimal" for a time-limited MILP
that has only an incumbent, so its ``sol_status`` is read instead of ``status``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # numpy is imported by the solve itself (the CLI's start-up stays light)
    import numpy as np

__all__ = [
    "Status",
    "STATUSES",
    "LpOutcome",
    "highs_status",
    "pulp_status",
    "smt_status",
    "solve_lp",
]

Status = Literal["optimal", "feasible", "timeout", "infeasible", "error"]
STATUSES: tuple[str, ...] = ("optimal", "feasible", "timeout", "infeasible", "error")


@dataclass
class LpOutcome:
    status: str
    objective: float | None
    x: np.ndarray | None
    seconds: float
    message: str = ""
    stats: dict[str, Any] = field(default_factory=dict)


def highs_status(model_status_name: str, has_solution: bool) -> str:
    """Map a HiGHS model status name (e.g. ``'kTimeLimit'``) to the workbench status."""
    name = model_status_name.split(".")[-1]
    if name == "kOptimal":
        return "optimal"
    if name == "kInfeasible":
        return "infeasible"
    if name in ("kTimeLimit", "kIterationLimit", "kInterrupt", "kHighsInterrupt", "kMemoryLimit"):
        return "timeout"
    if name in ("kObjectiveBound", "kObjectiveTarget", "kSolutionLimit"):
        return "feasible" if has_solution else "timeout"
    return "error"


def pulp_status(problem: Any, elapsed: float, time_limit: float | None) -> str:
    """The workbench status of a solved ``pulp.LpProblem`` (reads ``sol_status``, not ``status``)."""
    import pulp

    sol = problem.sol_status
    hit_limit = time_limit is not None and elapsed >= 0.95 * time_limit
    if sol == pulp.LpSolutionOptimal:
        return "optimal"
    if sol == pulp.LpSolutionIntegerFeasible:
        return "timeout" if hit_limit else "feasible"
    if sol == pulp.LpSolutionInfeasible:
        return "infeasible"
    if sol in (pulp.LpSolutionNoSolutionFound, pulp.LpSolutionNotSolved):
        return "timeout" if hit_limit else "error"
    return "error"


def smt_status(answer: Any, proven_optimal: bool = False) -> str:
    """z3: sat -> feasible (optimal when a lower bound proves it), unsat -> infeasible, unknown -> timeout."""
    text = str(answer)
    if text == "sat":
        return "optimal" if proven_optimal else "feasible"
    if text == "unsat":
        return "infeasible"
    if text == "unknown":
        return "timeout"
    return "error"


def coo_to_csc(row_idx, col_idx, values, num_rows: int, num_cols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HiGHS's column-wise matrix (column starts, row indices, values) from a COO triple, entries
    of one (row, column) summed in the order given, rows ascending within a column: what
    ``scipy.sparse.csc_matrix`` gives, without its import (a third of a second in a fresh process)."""
    import numpy as np

    rows = np.asarray(row_idx, dtype=np.int64).ravel()
    cols = np.asarray(col_idx, dtype=np.int64).ravel()
    vals = np.asarray(values, dtype=float).ravel()
    if not (len(rows) == len(cols) == len(vals)):
        raise ValueError(f"a COO triple of unequal lengths: {len(rows)}, {len(cols)}, {len(vals)}")
    if len(vals) and (rows.min() < 0 or rows.max() >= num_rows or cols.min() < 0 or cols.max() >= num_cols):
        raise ValueError(f"a COO entry outside the {num_rows} x {num_cols} matrix")
    key = cols * max(num_rows, 1) + rows
    order = np.argsort(key, kind="stable")
    key, vals = key[order], vals[order]
    first = np.ones(len(key), dtype=bool)
    first[1:] = key[1:] != key[:-1]
    if not first.all():  # duplicates (rare): added one by one in the order given, as scipy does
        group = np.cumsum(first) - 1
        sums = vals[first].copy()
        for i in np.flatnonzero(~first).tolist():
            sums[group[i]] += vals[i]
        vals, key = sums, key[first]
    index_type = np.int32 if max(num_rows, num_cols, len(key)) < 2**31 else np.int64
    counts = np.bincount(key // max(num_rows, 1), minlength=num_cols) if len(key) else np.zeros(num_cols, np.int64)
    starts = np.zeros(num_cols + 1, dtype=index_type)
    np.cumsum(counts, out=starts[1:])
    return starts, (key % max(num_rows, 1)).astype(index_type), vals


def solve_lp(
    cost: np.ndarray,
    col_lower: np.ndarray,
    col_upper: np.ndarray,
    rows: tuple[np.ndarray, np.ndarray, np.ndarray],
    row_lower: np.ndarray,
    row_upper: np.ndarray,
    time_limit: float,
    integrality: np.ndarray | None = None,
    threads: int = 1,
    mip_gap: float | None = None,
    seed: int = 0,
    start: np.ndarray | None = None,
    options: dict[str, Any] | None = None,
    offset: float = 0.0,
) -> LpOutcome:
    """Minimise ``cost @ x + offset`` on HiGHS. ``rows`` is a COO triple (row index, column index, value).

    The model is passed as arrays in one call (no per-variable Python objects), so models with
    millions of nonzeros build in seconds. For a MIP, ``mip_gap`` is the relative gap target,
    ``start`` a MIP start, and ``stats`` carries the solver's ``bound``, ``gap`` and ``nodes``;
    ``options`` are extra HiGHS options by name (e.g. ``{"solver": "ipm"}``).
    """
    import highspy
    import numpy as np

    started = time.perf_counter()
    num_cols = len(cost)
    num_rows = len(row_lower)
    row_idx, col_idx, values = rows
    starts, indices, data = coo_to_csc(row_idx, col_idx, values, num_rows, num_cols)
    lp = highspy.HighsLp()
    lp.num_col_ = num_cols
    lp.num_row_ = num_rows
    lp.col_cost_ = np.asarray(cost, dtype=float)
    lp.col_lower_ = np.asarray(col_lower, dtype=float)
    lp.col_upper_ = np.asarray(col_upper, dtype=float)
    lp.row_lower_ = np.asarray(row_lower, dtype=float)
    lp.row_upper_ = np.asarray(row_upper, dtype=float)
    lp.offset_ = float(offset)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = starts
    lp.a_matrix_.index_ = indices
    lp.a_matrix_.value_ = data
    is_mip = integrality is not None and any(integrality)
    if is_mip:
        lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                           for i in integrality]
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("time_limit", float(max(time_limit, 0.01)))
    highs.setOptionValue("threads", int(threads))
    highs.setOptionValue("random_seed", int(seed))
    if mip_gap is not None:
        highs.setOptionValue("mip_rel_gap", float(mip_gap))
    for name, value in (options or {}).items():
        highs.setOptionValue(name, value)
    highs.passModel(lp)
    if start is not None and is_mip:
        solution = highspy.HighsSolution()
        solution.col_value = [float(v) for v in start]
        solution.value_valid = True
        highs.setSolution(solution)
    highs.run()
    model_status = highs.getModelStatus()
    name = highs.modelStatusToString(model_status)
    info = highs.getInfo()
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    status = highs_status(str(model_status), has_solution)
    x = np.asarray(highs.getSolution().col_value) if has_solution else None
    objective = info.objective_function_value if has_solution else None
    stats: dict[str, Any] = {"variables": num_cols, "constraints": num_rows, "nonzeros": int(len(values))}
    if is_mip:
        stats["bound"] = info.mip_dual_bound if np.isfinite(info.mip_dual_bound) else None
        stats["gap"] = info.mip_gap if has_solution and np.isfinite(info.mip_gap) else None
        stats["nodes"] = int(getattr(info, "mip_node_count", 0) or 0)
    return LpOutcome(status, objective, x, time.perf_counter() - started, name, stats)
