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
the same chunk twice cannot be reversed (a switch does not reduce); ``reverse`` raises ValueError
naming the transfer.
"""

from __future__ import annotations

from typing import Callable

from workbench.algorithm import Algorithm
from workbench.collective import Collective, make_collective
from workbench.topology import Topology

__all__ = ["by_duality", "GatherSynthesizer"]

GatherSynthesizer = Callable[[Topology, Collective, float], Algorithm]

_DUAL = {"reducescatter": "allgather", "reduce": "broadcast"}


def by_duality(topology: Topology, collective: Collective, chunk_bytes: float, gather: GatherSynthesizer) -> Algorithm:
    """An algorithm for ``collective`` on ``topology``, built from ``gather`` (module docstring).

    reducescatter / reduce: ``gather`` on ``topology.reversed()`` for the dual kind, reversed;
    allreduce: reducescatter then allgather; any other kind: ``gather`` itself.
    """
    kind, n, k = collective.kind, collective.num_ranks, collective.chunks_per_rank
    if kind in _DUAL:
        reversed_topology = topology.reversed()
        dual = make_collective(_DUAL[kind], n, k, collective.root)
        return gather(reversed_topology, dual, chunk_bytes).reverse(topology)
    if kind == "allreduce":
        rs = by_duality(topology, make_collective("reducescatter", n, k), chunk_bytes, gather)
        ag = gather(topology, make_collective("allgather", n, k), chunk_bytes)
        return rs.concat(ag)
    return gather(topology, collective, chunk_bytes)
