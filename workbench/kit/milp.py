"""A sparse MILP model that formulations build row by row and solve on HiGHS or CBC.

Formulations with big time-indexed or routing models (TACCL, TE-CCL) add variables and rows
here instead of creating one PuLP object per variable: the model is a set of flat lists handed to
HiGHS in one call (``passModel``), or, for cross-checks on small instances, to CBC through PuLP.

* ``add_var``/``add_binary`` return column indices; ``add_row(cols, vals, lo, hi)`` adds
  ``lo <= sum(vals * x[cols]) <= hi``. Repeated columns in a row are summed (variable
  substitution makes them common), rows that become empty are checked and dropped, and with
  ``dedupe=True`` a row identical to an earlier one is not added again.
* The same rows written as equations (``workbench.kit.milp_expressions``): ``var``/``family`` give
  variables as ``LinearExpr``, a comparison of expressions is a ``Constraint``, and
  ``add(constraint, tag="(4)")`` adds it through the same path as ``add_row``, keeping the tag
  (the paper's equation number) in ``row_tags``, so ``describe_row`` can name a row and
  ``tag_counts`` count them; ``minimise(expr)`` sets the objective.
* ``solve`` applies a time limit, a relative gap target and an optional MIP start, and reports
  the workbench status (``workbench.kit.solvers``): a search ended by its time limit is ``timeout``
  with its incumbent attached, whatever the library calls it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Sequence

from workbench.util.lazy import lazy_module
from workbench.kit.milp_expressions import Constraint, LinearExpr, VarFamily, total
from workbench.kit.solvers import pulp_status, solve_lp

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["MilpModel", "MilpOutcome", "INF", "BACKENDS", "LinearExpr", "Constraint", "VarFamily", "total"]

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
        """True when the solver returned a point ``x``."""
        return self.x is not None

    def value(self, col: int) -> float:
        """Column ``col``'s value in the solution (there must be one)."""
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
        self.row_tags: list[str | None] = []  # per row: the equation it comes from (None: untagged)
        self._names: dict[int, str] = {}  # columns of named single variables
        self._families: list[VarFamily] = []  # for column_name (a family holds its keys)
        self.objective_offset = 0.0

    # ------------------------------------------------------------------ building
    @property
    def num_cols(self) -> int:
        """Columns (variables) added so far."""
        return len(self.lower)

    @property
    def num_rows(self) -> int:
        """Rows (constraints) added so far."""
        return len(self.row_lower)

    def add_var(self, lower: float = 0.0, upper: float = INF, cost: float = 0.0, integer: bool = False) -> int:
        """Add one column with its bounds, objective cost and integrality; returns its index."""
        self.lower.append(float(lower))
        self.upper.append(float(upper))
        self.cost.append(float(cost))
        self.integer.append(bool(integer))
        return len(self.lower) - 1

    def add_vars(self, count: int, lower: float = 0.0, upper: float | Sequence[float] = INF, cost: float = 0.0,
                 integer: bool = False) -> range:
        """``count`` columns at once, as many ``add_var`` calls would add them; ``upper`` is one bound
        for all or one per column."""
        first = len(self.lower)
        self.lower.extend([float(lower)] * count)
        if isinstance(upper, (int, float)):
            self.upper.extend([float(upper)] * count)
        else:
            bounds = list(map(float, upper))
            if len(bounds) != count:
                raise ValueError(f"{self.name}: {len(bounds)} upper bounds for {count} columns")
            self.upper.extend(bounds)
        self.cost.extend([float(cost)] * count)
        self.integer.extend([bool(integer)] * count)
        return range(first, first + count)

    def add_binary(self, cost: float = 0.0) -> int:
        """Add a 0/1 integer column with objective ``cost``; returns its index."""
        return self.add_var(0.0, 1.0, cost, True)

    def fix(self, col: int, value: float) -> None:
        """Fix column ``col`` at ``value`` (both bounds)."""
        self.lower[col] = self.upper[col] = float(value)

    def add_row(self, cols: Sequence[int], vals: Sequence[float], lower: float = -INF, upper: float = INF,
                dedupe: bool = False, tag: str | None = None) -> bool:
        """Add ``lower <= vals . x[cols] <= upper``; returns False when nothing was added."""
        merged: dict[int, float] = {}
        for c, v in zip(cols, vals):
            merged[c] = merged.get(c, 0.0) + v
        return self.add(Constraint(merged, lower, upper), tag, dedupe)

    def add(self, constraint: Constraint, tag: str | None = None, dedupe: bool = False) -> bool:
        """Add a row written as a comparison of expressions (``model.add(a <= b, tag="(4)")``);
        returns False when nothing was added (an empty row, or with ``dedupe`` a repeated one).

        The one path into the row lists (``add_row`` comes here too): zero coefficients are
        dropped, a row left empty is checked and dropped, and with ``dedupe`` a row equal to an
        earlier one (same entries and bounds) is skipped."""
        if type(constraint) is not Constraint:
            raise TypeError(f"{self.name}: add() takes a comparison of expressions, not {type(constraint).__name__}"
                            + (" (a comparison of numbers is already decided)" if isinstance(constraint, bool) else ""))
        terms = constraint.terms
        lower, upper = constraint.lower, constraint.upper
        if type(lower) is not float or type(upper) is not float:
            lower, upper = float(lower), float(upper)
        if not terms or min(map(abs, terms.values())) <= 1e-12:  # C-speed test; filter only when needed
            terms = {c: v for c, v in terms.items() if not -1e-12 <= v <= 1e-12}
            if not terms:
                if lower > 1e-9 or upper < -1e-9:
                    where = f" {tag}" if tag else ""
                    raise ValueError(f"{self.name}: a constraint{where} reduces to {lower} <= 0 <= {upper}")
                return False
        if dedupe:
            key = (tuple(sorted(terms.items())), lower, upper)
            if key in self._row_keys:
                return False
            self._row_keys.add(key)
        row = len(self.row_lower)
        self.row_lower.append(lower)
        self.row_upper.append(upper)
        self.row_tags.append(tag)
        self._row_index.extend([row] * len(terms))
        self._col_index.extend(terms)
        self._values.extend(map(float, terms.values()))
        return True

    # ------------------------------------------------------------------ expressions
    def var(self, lower: float = 0.0, upper: float = INF, cost: float = 0.0, integer: bool = False,
            name: str | None = None) -> LinearExpr:
        """One variable as an expression (``time = model.var(0, T, name="time")``)."""
        col = self.add_var(lower, upper, cost, integer)
        if name is not None:
            self._names[col] = name
        return LinearExpr({col: 1.0})

    def family(self, name: str, keys: Iterable[Hashable] | None = None, *, lower: float = 0.0,
               upper: float | Callable[[Any], float] = INF, cost: float = 0.0, integer: bool = False) -> VarFamily:
        """Variables ``name[key]`` with common bounds: all of ``keys`` now, or (``keys=None``) each
        the first time its key is looked up. With ``keys``, ``upper`` may be a function of the key."""
        uppers: float | list[float] = upper  # type: ignore[assignment]
        if callable(upper):
            if keys is None:
                raise ValueError(f"{self.name}: family {name!r}: an upper bound per key needs the keys up front")
            keys = list(keys)
            uppers = list(map(upper, keys))  # eager: every column is made here, in key order
        family = VarFamily(name, lambda: self.add_var(lower, upper, cost, integer), keys,
                           lambda count: self.add_vars(count, lower, uppers, cost, integer))
        self._families.append(family)
        return family

    def minimise(self, objective: LinearExpr | float) -> None:
        """Replace the objective by ``objective`` (costs of every column and the constant offset)."""
        objective = total([objective])
        self.cost = [0.0] * self.num_cols
        for c, v in objective.terms.items():
            self.cost[c] = float(v)
        self.objective_offset = float(objective.constant)

    def column_name(self, col: int) -> str:
        """``send[3, 7]`` for a family's variable, the name of a named one, else ``x[col]`` (for messages)."""
        if col in self._names:
            return self._names[col]
        for family in self._families:
            for key, var in family.items():
                if col in var.terms:
                    return f"{family.name}[{', '.join(map(str, key)) if isinstance(key, tuple) else key}]"
        return f"x[{col}]"

    def describe_row(self, row: int) -> str:
        """A row as its tag and the inequality it states, in the families' names (for messages)."""
        terms = [f"{v:+g} {self.column_name(c)}" for r, c, v in zip(self._row_index, self._col_index, self._values)
                 if r == row]
        lo, hi = self.row_lower[row], self.row_upper[row]
        body = " ".join(terms) if terms else "0"
        if lo == hi:
            text = f"{body} = {lo:g}"
        elif hi == INF:
            text = f"{body} >= {lo:g}"
        elif lo == -INF:
            text = f"{body} <= {hi:g}"
        else:
            text = f"{lo:g} <= {body} <= {hi:g}"
        return f"{self.row_tags[row] or '(untagged)'}: {text}"

    def tag_counts(self) -> dict[str, int]:
        """Rows per tag (untagged rows under ``"untagged"``), in order of first appearance."""
        counts: dict[str, int] = {}
        for tag in self.row_tags:
            key = tag or "untagged"
            counts[key] = counts.get(key, 0) + 1
        return counts

    def stats(self, by_tag: bool = False) -> dict[str, Any]:
        """Model size; with ``by_tag`` also ``rows_by_tag`` (``tag_counts``)."""
        integers = int(sum(self.integer))
        result: dict[str, Any] = {"variables": self.num_cols, "binaries": integers, "constraints": self.num_rows,
                                  "nonzeros": len(self._values)}
        if by_tag:
            result["rows_by_tag"] = self.tag_counts()
        return result

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
