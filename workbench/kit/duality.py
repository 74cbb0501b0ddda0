"""Combining collectives from non-combining ones by duality (reversal in time and direction).

A reduce-scatter on graph G is an all-gather on the reversed graph, run backwards: every copy
``u -> v`` becomes a reduce ``v -> u`` and the dependency order flips (``Algorithm.reverse``). The
same turns a broadcast into a reduce. All-reduce is reduce-scatter followed by all-gather
(``Algorithm.concat``). A synthesizer that only knows the "gather-like" collectives (all-gather,
broadcast, ...) therefore gets the combining ones for free:

    algorithm = by_duality(topology, collective, chunk_bytes, gather)

``gather(topology, collective, chunk_bytes)`` must return an algorithm for exactly ``collective``
(same kind, ranks, chunks per rank and root) on ``topology``; the phases of an all-reduce are then
built with the same chunking, which ``concat`` requires. A gather schedule in which a switch sends
the same chunk twice reverses into a sum in that switch, which it must be able to do (``Topology.reduces``); else ``reverse`` raises ValueError
naming the transfer.

A solver that needs to know which run it is doing (its own options for the reversed phase, a
seed per phase, a share of the time limit) uses ``by_duality_phases``: its gather also receives
a ``Phase`` (the role of the run, its index, its deadline). With a ``deadline``, the
reduce-scatter half of an all-reduce gets ``first_share`` of the time left and the all-gather
half the rest. Both functions carry the formulation's ``claimed_time``: a reversed schedule
claims what its gather claimed, and an all-reduce the sum of its two halves. They carry its
``claim_model`` only where that stays true, a formulation's own model (``sccl-steps``): a
schedule's time in a simulator model is not its reversal's, nor are two halves' times their
concatenation's, so a formulation claiming in one times the result itself
(``workbench.kit.schedule.claim_in_model``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from workbench.model.algorithm import Algorithm
from workbench.model.collective import Collective, make_collective
from workbench.kit.deadline import Deadline
from workbench.checking.simulate import parse_model
from workbench.topology import Topology

__all__ = ["by_duality", "by_duality_phases", "GatherSynthesizer", "Phase", "PhasedGather"]

GatherSynthesizer = Callable[[Topology, Collective, float], Algorithm]


@dataclass(frozen=True)
class Phase:
    """One gather run inside a duality.

    ``role``: what the run becomes, ``reducescatter`` / ``reduce`` (run on the reversed graph,
    then reversed) or ``allgather`` / ``broadcast`` / ... (used as it is); ``index``: 0 for the
    first run, 1 for the all-gather half of an all-reduce; ``deadline``: the run's own.
    """

    role: str
    index: int
    deadline: Deadline | None = None

    @property
    def reversed(self) -> bool:
        """True when the run is a reduction's dual gather: run on the reversed graph, then reversed."""
        return self.role in _DUAL


PhasedGather = Callable[[Topology, Collective, float, Phase], Algorithm]

_DUAL = {"reducescatter": "allgather", "reduce": "broadcast"}


def by_duality(topology: Topology, collective: Collective, chunk_bytes: float, gather: GatherSynthesizer) -> Algorithm:
    """An algorithm for ``collective`` on ``topology``, built from ``gather`` (module docstring).

    reducescatter / reduce: ``gather`` on ``topology.reversed()`` for the dual kind, reversed;
    allreduce: reducescatter then allgather; any other kind: ``gather`` itself.
    """
    return by_duality_phases(topology, collective, chunk_bytes,
                             lambda view, target, size, phase: gather(view, target, size))


def by_duality_phases(topology: Topology, collective: Collective, chunk_bytes: float, gather: PhasedGather, *,
                      deadline: Deadline | None = None, first_share: float = 0.5) -> Algorithm:
    """``by_duality`` with a ``Phase`` handed to every gather run (module docstring)."""
    kind, n, k = collective.kind, collective.num_ranks, collective.chunks_per_rank
    if kind == "allreduce":
        first = deadline.share(first_share) if deadline is not None else None
        rs = _reversed(topology, make_collective("reducescatter", n, k), chunk_bytes, gather, Phase("reducescatter", 0,
                                                                                                    first))
        ag = gather(topology, make_collective("allgather", n, k), chunk_bytes, Phase("allgather", 1, deadline))
        combined = rs.concat(ag)
        claims = (rs.meta.get("claimed_time"), ag.meta.get("claimed_time"))
        if None not in claims:
            combined.meta["claimed_time"] = claims[0] + claims[1]
        model = rs.meta.get("claim_model")
        if model is not None and model == ag.meta.get("claim_model") and _own_model(model):
            combined.meta["claim_model"] = model
        return combined
    if kind in _DUAL:
        return _reversed(topology, collective, chunk_bytes, gather, Phase(kind, 0, deadline))
    return gather(topology, collective, chunk_bytes, Phase(kind, 0, deadline))


def _reversed(topology: Topology, collective: Collective, chunk_bytes: float, gather: PhasedGather,
              phase: Phase) -> Algorithm:
    dual = make_collective(_DUAL[collective.kind], collective.num_ranks, collective.chunks_per_rank, collective.root)
    forward = gather(topology.reversed(), dual, chunk_bytes, phase)
    algorithm = forward.reverse(topology)
    if forward.meta.get("claimed_time") is not None:
        algorithm.meta["claimed_time"] = forward.meta["claimed_time"]
    if not _own_model(algorithm.meta.get("claim_model", "")):  # reverse() copied the forward meta
        algorithm.meta.pop("claim_model", None)
    return algorithm


def _own_model(name: str) -> bool:
    """A claim model that is a formulation's own (no simulator model: its claims add up by its rules)."""
    return parse_model(name) is None
