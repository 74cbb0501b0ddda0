"""What ``optimal`` means in a schedule row: the simulated time meets the problem's best valid bound.

A formulation can prove optimality only in its own model (SCCL's steps, TE-CCL's epochs,
ForestColl's throughput); none of these is the simulator's time at the problem's size, where
alpha, chunking and link contention all count. So the floor decides a schedule row's ``status``
after verification and simulation, by one rule for every formulation:

* a formulation's ``optimal`` or ``feasible`` becomes ``optimal`` when the fastest schedule's
  simulated time in the default model is within ``OPTIMAL_WITHIN`` (1%) of the problem's best
  valid lower bound (``workbench.bounds.problem_bounds``), and ``feasible`` otherwise;
* ``timeout``, ``infeasible`` and ``error`` stay as they are.

The formulation's own status is kept in the row as ``solver_status`` and its proof, if any, as
``model_optimal``: the name of the model it holds in (``"forestcoll-throughput"``,
``"sccl-steps"``, ``"teccl-epochs"``), read from the algorithm's ``meta`` or the result's
``stats``. Design formulations keep their solver status (nothing is simulated for them).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

__all__ = ["OPTIMAL_WITHIN", "SIMULATED", "floor_status", "model_optimal_of", "settle_status"]

OPTIMAL_WITHIN = 0.01  # relative distance to the bound within which a schedule is called optimal
SIMULATED = ("optimal", "feasible", "timeout")  # statuses whose row has a verified, simulated schedule
_SETTLED = ("optimal", "feasible")  # the statuses the rule may change; the others say why there is no answer


def floor_status(solver_status: str, simulated: float | None, bound: float | None) -> str:
    """The row status for a formulation's ``solver_status``, its schedule's simulated time (default
    model) and the problem's best bound; unchanged where either time is missing or not positive."""
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
    invalid algorithm is ``error`` whatever the formulation said) keeps it."""
    current = fields.get("status") or "error"
    fields.setdefault("solver_status", current)
    fields.setdefault("model_optimal", None)
    simulated = fields.get("default_collective_time", fields.get("collective_time"))
    fields["status"] = floor_status(current, simulated, fields.get("bound"))
