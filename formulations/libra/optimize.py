"""LIBRA's optimisation: PerfOptBW and PerfPerCostOptBW over the model (spec libra 2.4 and 3.2).

* ``perf_opt``: min T(B) under the linear constraints, convex (spec 2.4): an HiGHS LP with
  outer-approximation cuts x_i >= 2/b - B_i/b^2 of x_i >= 1/B_i (Kelley, spec 3.2 recipe 2), to a
  relative gap of 1e-8;
* ``perf_opt_scipy``: the smooth epigraph form with SLSQP, a cross-check (``backend="scipy"``);
* ``perf_per_cost``: min T(B) Cost(B), non-convex: PerfOpt under Cost <= c over a log grid of c, then
  bounded Brent near the best (spec 3.2 recipe 5);
* ``equal_bw``: the workload-blind EqualBW baseline, B_i = B_tot / N (or the equal split costing the cap).

PerfOpt's LP of one Kelley round (``_kelley_lp``) is written as equations on ``workbench.kit.milp``.
Neither the paper nor the spec numbers its equations, so each row is tagged with the spec section
that states it (``MilpModel.row_tags``). In scaled units (volumes over the largest, bandwidths over
the budget or the largest bound):

==========================  ====================================================================
``B_i``                     ``B[i]`` in [max(eps, min_i), max_i] (``model.bandwidth_bounds``)
``1 / B_i``                 ``x[i]`` (>= 0), bounded below by the cuts
``max_i V_ci / B_i``        ``t[c]`` (>= 0), one per collective, weight ``w_c`` in the objective
``V_ci``, ``kappa_i``       ``vectors[c][i]``, ``kappas[i]`` (P kappa_i, scaled)
==========================  ====================================================================

Rows: ``(3.2 epigraph)`` ``t_c >= V_ci x_i`` where V_ci > 0; ``(3.2 cut)`` the tangent
``x_i + B_i / b^2 >= 2 / b`` of ``x_i >= 1 / B_i`` at each cut point b (12 geometric ones, then one
per round at the round's B_i); ``(2.1 total)`` ``sum_i B_i = B_tot`` (an equality, as the reference
code states it); ``(2.2 cost cap)`` ``P sum_i kappa_i B_i <= cap``. Objective ``min sum_c w_c t_c``
(C0 is a constant left out). The LP is rebuilt every round so that its rows keep the order they
had as COO arrays (each round is well under a millisecond to build).
"""

from __future__ import annotations

import math
from formulations.libra.model import LibraModel
from workbench.kit.deadline import Deadline
from workbench.util.lazy import lazy_module
from workbench.kit.milp import INF, MilpModel
from workbench.kit.milp import total as total_of

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["perf_opt", "perf_opt_scipy", "perf_per_cost", "equal_bw"]


def perf_opt(model: LibraModel, total: float | None, cost_cap: float | None, lower: np.ndarray,
             upper: np.ndarray, deadline: Deadline, tolerance: float = 1e-8) -> tuple[np.ndarray, str, int]:
    """min T(B) by Kelley cutting planes on HiGHS. Returns (B in GB/s, status, rounds)."""
    n, m = model.dims, len(model.vectors)
    if m == 0:
        start = np.full(n, (total or 1.0) / n)
        return np.clip(start, lower, upper), "optimal", 0
    # scale: volumes in units of the largest one, bandwidths in units of the budget (cuts stay well conditioned)
    top = np.where(np.isfinite(upper), upper, total if total else (cost_cap / (model.network.npus * model.kappas)
                                                                     if cost_cap else 1e6))
    unit = total if total else float(np.max(top))
    scale = max(float(np.max(v)) for v in model.vectors)
    vectors = [v / scale for v in model.vectors]
    lower, upper, top = lower / unit, upper / unit, top / unit
    total = 1.0 if total is not None else None
    kappas = model.kappas * model.network.npus * unit
    cuts: list[list[float]] = [list(np.geomspace(max(lower[i], 1e-3), max(top[i], lower[i] * 10), 12))
                               for i in range(n)]
    rounds = 0
    best_ub, best_b = math.inf, None
    while True:
        rounds += 1
        outcome = _kelley_lp(vectors, model.weights, cuts, lower, upper, total, cost_cap, kappas).solve(
            "highs", time_limit=deadline.limit(floor=0.05))
        if outcome.status != "optimal":
            fallback = best_b if best_b is not None else np.clip(np.full(n, (total or 1.0) / n), lower, upper)
            return fallback * unit, "infeasible" if outcome.status == "infeasible" else outcome.status, rounds
        b = np.maximum(outcome.x[:n], lower)
        lower_bound = float(outcome.objective)
        upper_bound = sum(w * float(np.max(np.where(v > 0, v / b, 0.0))) for w, v in zip(model.weights, vectors))
        if upper_bound < best_ub:
            best_ub, best_b = upper_bound, b.copy()
        if (best_ub - lower_bound) <= tolerance * best_ub:
            return best_b * unit, "optimal", rounds
        if deadline.expired or rounds >= 300:
            return best_b * unit, "timeout", rounds
        for i in range(n):
            cuts[i].append(float(b[i]))


def _kelley_lp(vectors: list[np.ndarray], weights: list[float], cuts: list[list[float]], lower: np.ndarray,
               upper: np.ndarray, total: float | None, cost_cap: float | None, kappas: np.ndarray) -> MilpModel:
    """One round's outer approximation of PerfOptBW (scaled units; see the module docstring)."""
    model = MilpModel("libra-perf-opt")
    n = len(lower)
    B = [model.var(lower[i], upper[i], name=f"B[{i}]") for i in range(n)]
    x = [model.var(0.0, INF, name=f"x[{i}]") for i in range(n)]  # x_i >= 1 / B_i, through the cuts
    t = [model.var(0.0, INF, name=f"t[{c}]") for c in range(len(vectors))]  # t_c = max_i V_ci / B_i
    for c, v in enumerate(vectors):
        for i in range(n):
            if v[i] > 0:
                model.add(t[c] >= v[i] * x[i], tag="(3.2 epigraph)")
    for i in range(n):
        for b in cuts[i]:  # the tangent of 1/B at b
            model.add(x[i] + B[i] / b**2 >= 2.0 / b, tag="(3.2 cut)")
    if total is not None:
        model.add(total_of(B) == total, tag="(2.1 total)")
    if cost_cap is not None:
        model.add(total_of(kappas[i] * B[i] for i in range(n)) <= cost_cap, tag="(2.2 cost cap)")
    model.minimise(total_of(w * t[c] for c, w in enumerate(weights)))
    return model


def perf_opt_scipy(model: LibraModel, total: float | None, cost_cap: float | None, lower: np.ndarray,
                   upper: np.ndarray) -> np.ndarray:
    """The smooth epigraph form with SLSQP (convex, so the local optimum is global): a cross-check."""
    from scipy.optimize import minimize

    n, m = model.dims, len(model.vectors)
    scale = max(float(np.max(v)) for v in model.vectors)
    vectors = [v / scale for v in model.vectors]
    start_b = np.clip(np.full(n, (total or 1.0) / n), lower, upper)
    start_t = [max(v[i] / start_b[i] for i in range(n) if v[i] > 0) for v in vectors]
    weights = np.asarray(model.weights)

    constraints = []
    for c, v in enumerate(vectors):
        for i in range(n):
            if v[i] > 0:
                constraints.append({"type": "ineq", "fun": lambda z, c=c, i=i, vi=v[i]: z[n + c] * z[i] - vi})
    if total is not None:
        constraints.append({"type": "eq", "fun": lambda z: np.sum(z[:n]) - total})
    if cost_cap is not None:
        constraints.append({"type": "ineq", "fun": lambda z: cost_cap - model.network.npus * np.dot(model.kappas,
                                                                                                     z[:n])})
    bounds = [(lower[i], None if not np.isfinite(upper[i]) else upper[i]) for i in range(n)] + [(0, None)] * m
    result = minimize(lambda z: float(np.dot(weights, z[n:])), np.concatenate([start_b, start_t]),
                      method="SLSQP", bounds=bounds, constraints=constraints,
                      options={"ftol": 1e-15, "maxiter": 2000})
    return np.maximum(result.x[:n], lower)


def equal_bw(model: LibraModel, total: float | None, cost_cap: float | None) -> np.ndarray:
    """The same bandwidth (GB/s) on every dimension: ``total`` split evenly, or without it the share
    that spends exactly ``cost_cap``."""
    if total is not None:
        return np.full(model.dims, total / model.dims)
    share = cost_cap / (model.network.npus * float(np.sum(model.kappas)))
    return np.full(model.dims, share)


def perf_per_cost(model: LibraModel, total: float | None, lower: np.ndarray, upper: np.ndarray, deadline: Deadline,
                  grid: int = 60) -> tuple[np.ndarray, str]:
    """min T(B) Cost(B): the best over cost caps c of PerfOpt under Cost <= c (spec 3.2 recipe 5)."""
    from scipy.optimize import minimize_scalar

    if total is None:
        raise ValueError("libra: perf-per-cost needs constraints.total_bandwidth (an equality; spec 2.4 item 5)")
    npus = model.network.npus
    c_min = total * npus * float(np.min(model.kappas)) * (1 + 1e-9)
    c_max = total * npus * float(np.max(model.kappas))
    cache: dict[float, tuple[float, np.ndarray]] = {}

    def value(cap: float) -> float:
        if cap not in cache:
            b, status, _ = perf_opt(model, total, cap, lower, upper, deadline)
            cache[cap] = (model.time(b) * model.cost(b) if status == "optimal" else math.inf, b)
        return cache[cap][0]

    caps = np.geomspace(c_min, c_max, grid)
    values = [value(c) for c in caps]
    best = int(np.argmin(values))
    left, right = caps[max(best - 1, 0)], caps[min(best + 1, grid - 1)]
    if right > left:
        minimize_scalar(lambda c: value(float(c)), bounds=(left, right), method="bounded",
                        options={"xatol": left * 1e-9})
    cap = min(cache, key=lambda c: cache[c][0])
    status = "timeout" if deadline.expired else "feasible"
    return cache[cap][1], status
