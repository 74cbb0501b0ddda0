"""What ``optimal`` means in a schedule row: the simulated time meets the problem's best valid bound.

A formulation can prove optimality only in its own model (SCCL's steps, TE-CCL's epochs,
ForestColl's throughput); none of these is the simulator's time at the problem's size, where
alpha, chunking and link contention all count. So the workbench decides a schedule row's ``status``
after verification and simulation, by one rule for every formulation:

* a formulation's ``optimal`` or ``feasible`` becomes ``optimal`` when the fastest schedule's
  simulated time in the default model is within ``OPTIMAL_WITHIN`` (1%) of the problem's best
  valid lower bound (``workbench.bounds.problem_bounds``), and ``feasible`` otherwise;
* ``timeout``, ``infeasible`` and ``error`` stay as they are.

A lower bound is never above a verified schedule's simulated time, in any of the simulator's
models. A bound that is (by more than ``workbench.bounds.TIGHT`` relative, float sums aside)
proves nothing: the row is ``feasible``, not ``optimal``, its ``efficiency`` is None (never above
1) and its ``bounds.notes.above_schedule`` records the contradiction (a bug in the bounds, or a
cached bound that is not this problem's: ``workbench.run.bounds_cache`` discards such an entry).

The formulation's own status is kept in the row as ``solver_status`` and its proof, if any, as
``model_optimal``: the name of the model it holds in (``"forestcoll-throughput"``,
``"sccl-steps"``, ``"teccl-epochs"``), read from the algorithm's ``meta`` or the result's
``stats``. Design formulations keep their solver status (nothing is simulated for them).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from workbench.bounds import TIGHT

__all__ = ["OPTIMAL_WITHIN", "SIMULATED", "floor_status", "bound_above", "model_optimal_of", "settle_status"]

OPTIMAL_WITHIN = 0.01  # relative distance to the bound within which a schedule is called optimal
SIMULATED = ("optimal", "feasible", "timeout")  # statuses whose row has a verified, simulated schedule
_SETTLED = ("optimal", "feasible")  # the statuses the rule may change; the others say why there is no answer


def bound_above(bound: float | None, *simulated: float | None) -> bool:
    """True when ``bound`` is above the fastest of the ``simulated`` times (the schedule's, in any
    model) by more than ``TIGHT`` relative: a lower bound that proves nothing (module docstring)."""
    times = [t for t in simulated if isinstance(t, (int, float)) and not isinstance(t, bool)]
    return isinstance(bound, (int, float)) and bool(times) and bound > min(times) * (1 + TIGHT)


def floor_status(solver_status: str, simulated: float | None, bound: float | None) -> str:
    """The row status for a formulation's ``solver_status``, its schedule's simulated time (default
    model) and the problem's best bound; unchanged where either time is missing or not positive. A
    bound above the simulated time is ``settle_status``'s to demote (it looks at both models)."""
    if solver_status not in _SETTLED or simulated is None or bound is None or not bound > 0:
        return solver_status
    return "optimal" if simulated <= bound * (1 + OPTIMAL_WITHIN) else "feasible"


def model_optimal_of(algorithms: Iterable[Any], stats: Mapping[str, Any] | None) -> str | None:
    """The model a formulation proved its answer optimal in: the first algorithm's
    ``meta["model_optimal"]`` that is set, else ``stats["model_optimal"]``, else None."""
    for algorithm in algorithms:
        model = algorithm.meta.get("model_optimal")
        if model:
            return str(model)
    model = (stats or {}).get("model_optimal")
    return str(model) if model else None


def settle_status(fields: dict[str, Any]) -> None:
    """Apply the rule to a schedule row in place: keep the formulation's status as
    ``solver_status`` (the first time; a row settled again, e.g. by ``workbench rebound`` with a new
    bound, keeps it) and decide ``status`` from ``default_collective_time`` (else
    ``collective_time``) and ``bound``. A row whose status is not ``optimal`` or ``feasible`` (an
    invalid algorithm is ``error`` whatever the formulation said) keeps it. A bound above the
    schedule's simulated time (in either model the row has) leaves ``efficiency`` None and the
    status short of ``optimal``."""
    current = fields.get("status") or "error"
    fields.setdefault("solver_status", current)
    fields.setdefault("model_optimal", None)
    simulated = fields.get("default_collective_time", fields.get("collective_time"))
    fields["status"] = floor_status(current, simulated, fields.get("bound"))
    if bound_above(fields.get("bound"), fields.get("default_collective_time"), fields.get("collective_time")):
        fields["efficiency"] = None  # a bound above the schedule's time: no fraction of it is meaningful
        if fields["status"] == "optimal":
            fields["status"] = "feasible"
