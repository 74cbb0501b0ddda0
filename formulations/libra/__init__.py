"""LIBRA: workload-aware per-dimension bandwidth of a multi-dimensional network.

Paper: W. Won et al., "LIBRA: Enabling Workload-aware Multi-dimensional Network Topology
Optimization for Distributed Training of Large AI Models" (ISPASS 2024); method note
``docs/methods/libra.md`` ("spec N" and "spec AN" in this package are its section N and ambiguity AN).

Paper symbol -> code name:

* B_i, per-NPU bandwidth of dimension i (GB/s)  -> ``bandwidth[i]`` (returned in B/s in the
  ``DesignResult``, as the topology builders take them)
* V_{c,i}, bytes collective c moves on dimension i (spec 1.4)  -> ``network.volumes``
* T(B) = C0 + sum_c max_i V_ci / B_i (no-overlap loop, spec 1.6)  -> ``model.LibraModel.time``
* Cost(B) = P sum_i kappa_i B_i (spec 2.2)  -> ``model.LibraModel.cost``, kappa_i from the cost
  model file by ``network.kappa``
* PerfOptBW: min T(B) s.t. linear constraints  -> ``optimize.perf_opt``: convex (spec 2.4), solved
  exactly as an HiGHS LP with outer-approximation cuts x_i >= 2/b - B_i/b^2 of x_i >= 1/B_i (Kelley,
  spec 3.2 recipe 2), to a relative gap of 1e-8; ``backend="scipy"`` solves the smooth epigraph form
  with SLSQP as a cross-check (``optimize.perf_opt_scipy``)
* PerfPerCostOptBW: min T(B) Cost(B) (non-convex)  -> ``optimize.perf_per_cost``: the parametric cost
  sweep of spec 3.2 recipe 5 (PerfOpt under Cost <= c over a log grid of c, then bounded Brent near
  the best)
* EqualBW baseline: B_i = B_tot / N (or, under a cost cap alone, the equal split that costs the cap)
  -> ``optimize.equal_bw``; ``objective="equal-bw"`` returns it as a design
* a workload is a trace plus a communicator, or one collective (``{collective, size, groups}``)
  (``model.build_model``)
* constraints: total bandwidth (equality, spec A6), per-dimension bounds, cost cap; every B_i >= eps
  (``model.bandwidth_bounds``)

Layout: ``network`` (the input files: network, workload traces, communicators, cost models; the
per-dimension volumes and kappa), ``model`` (one design problem's T(B) and Cost(B)), ``optimize``
(the solvers), ``options`` (the parameters), ``synthesis`` (one design problem solved), ``cli`` (the ``workbench libra`` command, registered through the
``workbench.commands`` entry points), this file (the formulation). It imports none of them until a
design is solved, so listing formulations and building the command line stay cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from formulations.libra.options import LibraOptions

if TYPE_CHECKING:
    from workbench.plugin.registry import DesignProblem, DesignResult

__all__ = ["Libra", "LibraOptions", "LibraModel", "build_model"]


class Libra:
    """LIBRA's PerfOpt / PerfPerCost network design (see the module docstring)."""

    name = "libra"
    kind = "design"
    options = LibraOptions
    # statistics of the result a design table may show (``table.metrics``), each a ratio to EqualBW
    metrics = ("speedup", "perf_per_cost_gain", "bandwidth_vs_equal")

    def synthesize(self, problem: DesignProblem, *, time_limit: float, seed: int, options: LibraOptions,
                   on_incumbent: Callable | None = None) -> DesignResult:
        """The design (module docstring)."""
        from formulations.libra.synthesis import synthesize

        return synthesize(problem, time_limit=time_limit, options=options)


def __getattr__(name: str) -> Any:
    """``LibraModel`` and ``build_model`` (and the solvers), imported when first asked for."""
    if name in ("LibraModel", "build_model"):
        from formulations.libra import model

        return getattr(model, name)
    if name in ("perf_opt", "perf_opt_scipy", "perf_per_cost", "equal_bw"):
        from formulations.libra import optimize

        return getattr(optimize, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
