"""LIBRA's synthesis: one design problem solved for its objective (``formulations.libra``)."""

from __future__ import annotations

from formulations.libra.model import bandwidth_bounds, build_model, gbps
from formulations.libra.optimize import equal_bw, perf_opt, perf_opt_scipy, perf_per_cost
from formulations.libra.options import LibraOptions
from workbench.kit.deadline import Deadline
from workbench.plugin.registry import DesignProblem, DesignResult
from workbench.util.lazy import lazy_module

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["synthesize"]


def synthesize(problem: DesignProblem, *, time_limit: float, options: LibraOptions) -> DesignResult:
    """Solve one design problem for its objective (perf, perf-per-cost or equal-bw) with the
    options' solver (``formulations.libra``)."""
    backend = options.backend
    deadline = Deadline(time_limit)
    model = build_model(problem)
    constraints = dict(problem.constraints)
    total = gbps(constraints["total_bandwidth"]) if "total_bandwidth" in constraints else None
    cost_cap = float(constraints["cost_cap"]) if "cost_cap" in constraints else None
    if total is None and cost_cap is None:
        raise ValueError("libra: give constraints.total_bandwidth or constraints.cost_cap")
    lower, upper = bandwidth_bounds(model, constraints)
    objective = problem.objective.replace("_", "-")
    if objective in ("perf", "performance", "perf-opt"):
        if backend == "highs":
            b, status, rounds = perf_opt(model, total, cost_cap, lower, upper, deadline)
        elif backend == "scipy":
            b, status, rounds = perf_opt_scipy(model, total, cost_cap, lower, upper), "optimal", 0
        else:
            raise ValueError(f"libra: backend must be highs or scipy, got {backend!r}")
    elif objective in ("perf-per-cost", "perfpercost"):
        b, status = perf_per_cost(model, total, lower, upper, deadline)
        rounds = 0
    elif objective in ("equal-bw", "equal"):  # the workload-blind baseline
        b, status, rounds = np.maximum(equal_bw(model, total, cost_cap), lower), "feasible", 0
    else:
        raise ValueError(f"libra: objective must be perf or perf-per-cost, got {problem.objective!r}")
    equal = equal_bw(model, total, cost_cap)
    t, c = model.time(b), model.cost(b)
    t_eq, c_eq = model.time(equal), model.cost(equal)
    stats = {"bandwidth_gbps": [float(x) for x in b], "split": [float(x) for x in b / b.sum()],
             "time_ns": t, "cost": c, "equal_bw_gbps": [float(x) for x in equal], "equal_bw_time_ns": t_eq,
             "equal_bw_cost": c_eq, "speedup": t_eq / t, "perf_per_cost_gain": (t_eq * c_eq) / (t * c),
             "bandwidth_vs_equal": float(b.sum() / equal.sum()),
             "kappa": [float(k) for k in model.kappas], "collectives": len(model.vectors), "rounds": rounds,
             "objective": objective, "backend": backend}
    return DesignResult([float(x) * 1e9 for x in b], t * 1e-9, c, status, deadline.elapsed(), stats)
