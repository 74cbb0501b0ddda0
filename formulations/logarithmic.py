"""Logarithmic-step collectives for any rank count: Bruck and PAT.

Both move every rank's block along a *shifted binomial tree*: with n ranks and L = ceil(log2 n),
a block is at offset o in 1..n-1 from each rank that needs it, and o's binary digits are the
distances 2^b (b < L) it travels, one digit per step. Step by step, with distance d:

    rank x sends to rank (x - d) mod n the blocks x + h for every h that is a sum of the distances
    already stepped and h + d <= n - 1.

Every needed offset is a sum of distinct distances, so every rank gets every block, each exactly
once, for any n (no power-of-two restriction, no final rotation: chunks keep their identity in
the workbench's IR).

* ``bruck``: J. Bruck, C.-T. Ho, S. Kipnis, E. Upfal, D. Weathersby, "Efficient algorithms for
  all-to-all communications in multiport message-passing systems", IEEE TPDS 8(11), 1997.
  Distances ascend (1, 2, 4, ...), so step d carries min(d, n - d) blocks: the largest message goes
  farthest. All-gather as above; all-to-all by the same paper's index algorithm: the piece from s
  to t has offset o = t - s, and at the step of distance d every rank forwards, as one message to
  x + d, the pieces it holds whose offset has digit d.
* ``pat``: S. Jeaugey, "PAT: a new algorithm for all-gather and reduce-scatter operations at
  scale", arXiv:2506.20252, 2025. Parallel Aggregated Trees are Bruck's trees with the dimensions
  reversed: distances descend (2^(L-1), ..., 2, 1), so the first, farthest step carries one block
  and the last, nearest step the most, which keeps long-distance traffic small. The paper bounds
  the intermediate buffer, which caps how many ranks' blocks one message aggregates (its R_agg);
  ``aggregation`` is that cap (0: unbounded, the paper's case when the buffer holds the largest
  step), and a step's blocks then go as several messages, each waiting only for its own blocks.

Reduce-scatter is the dual of all-gather run backwards on the reversed graph, and all-reduce is
reduce-scatter then all-gather (``workbench.kit.duality.by_duality``), the way PAT's paper derives its
reduce-scatter. A rank's block is all of its chunks (``k`` chunks per rank travel together).
Method note with the alpha-beta costs: ``docs/methods/baselines.md`` (sections 2, 8 and 9).

Claimed time: the schedule's own time in the simulator's default model (``workbench.plugin.closed_form``).
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.model.algorithm import Algorithm
from workbench.plugin.closed_form import ClosedForm, require_kind
from workbench.plugin.formulation import Unsupported
from workbench.model.collective import Collective
from workbench.kit.duality import by_duality
from workbench.plugin.parameters import Options, option
from workbench.plugin.registry import Problem
from workbench.kit.schedule import DeliveryChain
from workbench.topology import Topology

__all__ = ["Bruck", "Pat", "tree_steps"]

_DEFINED = ("allgather", "reducescatter", "allreduce")


def tree_steps(n: int, descending: bool) -> list[tuple[int, list[int]]]:
    """Per step, (distance d, offsets h): rank x sends blocks x + h to x - d (module docstring)."""
    levels = (n - 1).bit_length()
    distances = [1 << b for b in range(levels)]
    if descending:
        distances.reverse()
    steps = []
    reached = [0]  # sums of the distances already stepped
    for d in distances:
        steps.append((d, sorted(h for h in reached if h + d <= n - 1)))
        reached = reached + [h + d for h in reached if h + d <= n - 1]
    return steps


def _blocks(collective: Collective) -> list[list[int]]:
    """The chunks each rank starts with (its block)."""
    blocks: list[list[int]] = [[] for _ in range(collective.num_ranks)]
    for chunk in range(collective.num_chunks):
        blocks[collective.origin(chunk)].append(chunk)
    return blocks


def _tree_allgather(topology: Topology, collective: Collective, chunk_bytes: float, descending: bool,
                    aggregation: int) -> Algorithm:
    n = collective.num_ranks
    blocks = _blocks(collective)
    chain = DeliveryChain()
    steps = tree_steps(n, descending)
    for d, offsets in steps:
        groups = [offsets] if aggregation <= 0 else [offsets[i:i + aggregation]
                                                     for i in range(0, len(offsets), aggregation)]
        for group in groups:
            for x in range(n):
                chunks = [c for h in group for c in blocks[(x + h) % n]]
                chain.send(chunks, x, (x - d) % n)
    return chain.build(topology, collective, chunk_bytes, {"steps": len(steps)})


def _bruck_alltoall(problem: Problem) -> Algorithm:
    collective = problem.collective
    n = collective.num_ranks
    source = [collective.origin(c) for c in range(collective.num_chunks)]
    target = [min(post) for post in collective.post]
    holder = list(source)
    chain = DeliveryChain()
    steps = tree_steps(n, descending=False)
    for d, _ in steps:
        moving: dict[int, list[int]] = {}
        for c in range(collective.num_chunks):
            if (target[c] - source[c]) % n & d:
                moving.setdefault(holder[c], []).append(c)
        for x in sorted(moving):
            chain.send(moving[x], x, (x + d) % n)
            for c in moving[x]:
                holder[c] = (x + d) % n
    return chain.build(problem.topology, collective, problem.chunk_bytes, {"steps": len(steps)})


def _check(collective: Collective, name: str, defined: tuple[str, ...]) -> None:
    require_kind(collective, name, defined)
    if collective.num_ranks < 2:
        raise Unsupported(f"{name} needs at least 2 ranks")


def bruck_schedule(problem: Problem) -> Algorithm:
    """Bruck's log-step schedule: All-Gather (and its dual reductions) and All-to-All in
    ceil(log2 n) rounds of doubling distance."""
    collective = problem.collective
    _check(collective, "bruck", _DEFINED + ("alltoall",))
    if collective.kind == "alltoall":
        if any(len(post) != 1 for post in collective.post):
            raise Unsupported("bruck's all-to-all needs one destination per piece")
        return _bruck_alltoall(problem)
    return by_duality(problem.topology, collective, problem.chunk_bytes,
                      lambda view, gather, size: _tree_allgather(view, gather, size, False, 0))


def pat_schedule(problem: Problem, aggregation: int = 0) -> Algorithm:
    """PAT (parallel aggregated trees) for All-Gather and its dual reductions; ``aggregation`` is
    the most ranks' blocks one message carries (the paper's R_agg; 0: unbounded)."""
    collective = problem.collective
    _check(collective, "pat", _DEFINED)
    algorithm = by_duality(problem.topology, collective, problem.chunk_bytes,
                           lambda view, gather, size: _tree_allgather(view, gather, size, True, aggregation))
    algorithm.meta["aggregation"] = aggregation
    return algorithm


class Bruck(ClosedForm):
    name = "bruck"
    builder = staticmethod(bruck_schedule)


@dataclass(frozen=True)
class PatOptions(Options):
    """PAT's message aggregation."""

    aggregation: int = option(0, "most ranks' blocks in one message (the paper's R_agg); 0: unbounded", minimum=0)


class Pat(ClosedForm):
    name = "pat"
    builder = staticmethod(pat_schedule)
    options = PatOptions
