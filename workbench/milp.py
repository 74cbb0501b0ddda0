"""A sparse MILP model that formulations build row by row and solve on HiGHS or CBC.

Formulations with big time-indexed or routing models (TACCL, TE-CCL) add variables and rows
here instead of creating one PuLP object per variable: the model is a set of flat lists handed to
HiGHS in one call (``passModel``), or, for cross-checks on small instances, to CBC through PuLP.

* ``add_var``/``add_vars`` return column indices; ``add_row(cols, vals, lo, hi)`` adds
  ``lo <= sum(vals * x[cols]) <= hi``. Repeated columns in a row are summed (variable
  substitution makes them common), rows that become empty are checked and dropped, and with
  ``dedupe=True`` a row identical to an earlier one is not added again.
* ``solve`` applies a time limit, a relative gap target and an optional MIP start, and reports
  the workbench status (``workbench.solvers``): a search ended by its time limit is ``timeout``
  with its incumbent attached, whatever the library calls it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from workbench.lazy import lazy_module
from workbench.solvers import pulp_status, solve_lp

np = lazy_module("numpy")  # imported on first use (workbench.lazy)

__all__ = ["MilpModel", "MilpOutcome", "INF", "BACKENDS"]

INF = math.inf
BACKENDS = ("highs", "cbc")


@dataclass
class MilpOutcome:
    status: str
    objective: float | None
    x: np.ndarray | None
    seconds: float
    bound: float | None = None  # the solver's proven bound on the objective (minimisation)
    gap: float | None = None
    message: str = ""
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def has_solution(self) -> bool:
        return self.x is not None

    def value(self, col: int) -> float:
        assert self.x is not None
        return float(self.x[col])


class MilpModel:
    """Minimise ``cost @ x`` subject to row bounds, column bounds and integrality."""

    def __init__(self, name: str = "model") -> None:
        self.name = name
        self.lower: list[float] = []
        self.upper: list[float] = []
        self.cost: list[float] = []
        self.integer: list[bool] = []
        self.row_lower: list[float] = []
        self.row_upper: list[float] = []
        self._row_index: list[int] = []
        self._col_index: list[int] = []
        self._values: list[float] = []
        self._row_keys: set = set()
        self.objective_offset = 0.0

    # ------------------------------------------------------------------ building
    @property
    def num_cols(self) -> int:
        return len(self.lower)

    @property
    def num_rows(self) -> int:
        return len(self.row_lower)

    def add_var(self, lower: float = 0.0, upper: float = INF, cost: float = 0.0, integer: bool = False) -> int:
        self.lower.append(float(lower))
        self.upper.append(float(upper))
        self.cost.append(float(cost))
        self.integer.append(bool(integer))
        return len(self.lower) - 1

    def add_binary(self, cost: float = 0.0) -> int:
        return self.add_var(0.0, 1.0, cost, True)

    def fix(self, col: int, value: float) -> None:
        self.lower[col] = self.upper[col] = float(value)

    def add_row(self, cols: Sequence[int], vals: Sequence[float], lower: float = -INF, upper: float = INF,
                dedupe: bool = False) -> bool:
        """Add ``lower <= vals . x[cols] <= upper``; returns False when nothing was added."""
        merged: dict[int, float] = {}
        for c, v in zip(cols, vals):
            merged[c] = merged.get(c, 0.0) + v
        entries = [(c, v) for c, v in merged.items() if abs(v) > 1e-12]
        if not entries:
            if lower > 1e-9 or upper < -1e-9:
                raise ValueError(f"{self.name}: a constraint reduces to {lower} <= 0 <= {upper}")
            return False
        if dedupe:
            key = (tuple(sorted(entries)), lower, upper)
            if key in self._row_keys:
                return False
            self._row_keys.add(key)
        row = len(self.row_lower)
        self.row_lower.append(float(lower))
        self.row_upper.append(float(upper))
        for c, v in entries:
            self._row_index.append(row)
            self._col_index.append(c)
            self._values.append(v)
        return True

    def stats(self) -> dict[str, int]:
        integers = int(sum(self.integer))
        return {"variables": self.num_cols, "binaries": integers, "constraints": self.num_rows,
                "nonzeros": len(self._values)}

    # ------------------------------------------------------------------ solving
    def solve(self, backend: str = "highs", time_limit: float = 60.0, mip_gap: float = 1e-6,
              threads: int = 1, seed: int = 0, start: Sequence[float] | None = None,
              options: dict[str, Any] | None = None) -> MilpOutcome:
        """``options``: extra HiGHS options by name (e.g. ``{"solver": "ipm"}``, ``mip_heuristic_effort``)."""
        if backend not in BACKENDS:
            raise ValueError(f"unknown MILP backend {backend!r} (choose from {', '.join(BACKENDS)})")
        if backend == "cbc":
            return self._solve_cbc(time_limit, mip_gap, threads, start)
        return self._solve_highs(time_limit, mip_gap, threads, seed, start, options or {})

    def _solve_highs(self, time_limit: float, mip_gap: float, threads: int, seed: int,
                     start: Sequence[float] | None, options: dict[str, Any]) -> MilpOutcome:
        is_mip = any(self.integer)
        rows = (np.asarray(self._row_index, dtype=np.int64), np.asarray(self._col_index, dtype=np.int64),
                np.asarray(self._values, dtype=float))
        outcome = solve_lp(np.asarray(self.cost), np.asarray(self.lower), np.asarray(self.upper), rows,
                           np.asarray(self.row_lower), np.asarray(self.row_upper), time_limit,
                           integrality=np.asarray(self.integer) if is_mip else None, threads=threads,
                           mip_gap=mip_gap, seed=seed, start=start, options=options, offset=self.objective_offset)
        status, bound, gap = outcome.status, outcome.stats.get("bound"), outcome.stats.get("gap")
        if not is_mip and status == "optimal":
            bound, gap = outcome.objective, 0.0
        if status == "optimal" and is_mip and gap is not None and gap > max(mip_gap, 1e-9) * 1.0001:
            status = "feasible"
        stats = dict(self.stats(), nodes=outcome.stats.get("nodes", 0))
        return MilpOutcome(status, outcome.objective, outcome.x, outcome.seconds, bound, gap, outcome.message, stats)

    def _solve_cbc(self, time_limit: float, mip_gap: float, threads: int,
                   start: Sequence[float] | None) -> MilpOutcome:
        import pulp

        started = time.perf_counter()
        problem = pulp.LpProblem(self.name.replace(" ", "_"), pulp.LpMinimize)
        variables = []
        for j in range(self.num_cols):
            lo = None if self.lower[j] == -INF else self.lower[j]
            hi = None if self.upper[j] == INF else self.upper[j]
            variables.append(pulp.LpVariable(f"x{j}", lo, hi, pulp.LpInteger if self.integer[j] else pulp.LpContinuous))
        problem += pulp.lpSum(c * variables[j] for j, c in enumerate(self.cost) if c) + self.objective_offset
        rows: list[list[tuple[int, float]]] = [[] for _ in range(self.num_rows)]
        for r, c, v in zip(self._row_index, self._col_index, self._values):
            rows[r].append((c, v))
        for r, entries in enumerate(rows):
            expr = pulp.lpSum(v * variables[c] for c, v in entries)
            lo, hi = self.row_lower[r], self.row_upper[r]
            if lo == hi:
                problem += expr == lo
            else:
                if lo != -INF:
                    problem += expr >= lo
                if hi != INF:
                    problem += expr <= hi
        if start is not None:
            for var, value in zip(variables, start):
                var.setInitialValue(float(value))
        solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=max(1, int(math.ceil(time_limit))), gapRel=mip_gap,
                                   threads=threads, warmStart=start is not None)
        try:
            problem.solve(solver)
        except pulp.PulpSolverError as exc:
            return MilpOutcome("error", None, None, time.perf_counter() - started, message=str(exc),
                               stats=self.stats())
        elapsed = time.perf_counter() - started
        status = pulp_status(problem, elapsed, time_limit)
        x = None
        objective = None
        if status in ("optimal", "feasible", "timeout") and all(v.varValue is not None for v in variables):
            x = np.array([v.varValue for v in variables], dtype=float)
            objective = float(np.dot(self.cost, x)) + self.objective_offset
        if status == "timeout" and x is None:
            objective = None
        bound = objective if status == "optimal" else None
        gap = 0.0 if status == "optimal" else None
        return MilpOutcome(status, objective, x, elapsed, bound, gap, pulp.LpStatus[problem.status], self.stats())
