"""Shortest-path trees: a tree from each chunk's origin along breadth-first search.

Not from a paper (method note: ``docs/methods/baselines.md`` section 11). Every chunk travels from
its origin along a breadth-first-search tree of the NPU graph (two NPUs are adjacent when a direct
link, or a path through switches only, joins them; ``workbench.util.graphs.bfs``), pruned to the
branches that lead to ranks that need the chunk. Transfers are emitted level by level (all chunks'
first hops, then second hops, ...), each waiting for the transfer that delivered its chunk
(``workbench.kit.schedule.DeliveryChain``), so the plan order follows the planned start.

Mapping to the workbench:

* non-combining collectives (all-gather, broadcast, gather, scatter, all-to-all, custom):
  trees from each chunk's origin, copies;
* reduce-scatter / reduce: the all-gather / broadcast of the reversed graph, reversed in time
  and direction; all-reduce: reduce-scatter then all-gather (``workbench.kit.duality.by_duality``).
* ``seed`` shuffles the order in which a node's neighbours are explored, so different seeds
  give different (equally short) trees; ``restarts`` is not needed, the search is exact per seed.
* ``switches``: ``route`` (default) searches the NPU graph above, each tree edge one transfer the
  simulator routes through the switches on its way; ``multicast`` searches the whole graph,
  switches included, and sends hop by hop, so a switch that feeds several branches receives the
  chunk once and copies it onto each (a switch may hold and copy: docs/algorithm-format.md, "The
  transfers"). On a two-tier fabric this sends each chunk up a leaf and across the spine once
  instead of once per destination.
  It needs every switch to multicast (``multicast: false`` is refused), and a combining
  collective needs every switch to reduce (``hgx:K,sharp``, ``nvl72``): the reversal turns each
  multicast into a sum in the switch (``Algorithm.reverse``).

Claimed time: the schedule's own time in the simulator's default model (``meta.claim_model`` =
``pipelined/in-order/cut-through``; ``workbench.kit.schedule.claim_in_model``): the formulation has no
timing model of its own, so it claims what its level-by-level order gives there. It is simulated
after the trees are built and not counted in the synthesis seconds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from workbench.model.algorithm import Algorithm
from workbench.plugin.closed_form import ClosedForm
from workbench.plugin.formulation import Unsupported
from workbench.model.collective import Collective
from workbench.kit.duality import by_duality
from workbench.util.graphs import Bfs, bfs
from workbench.topology.structure import npu_neighbours
from workbench.plugin.parameters import Options, option
from workbench.plugin.registry import Problem
from workbench.kit.schedule import DeliveryChain
from workbench.topology import Topology

__all__ = ["BfsTrees"]


def _gather_like(topology: Topology, collective: Collective, chunk_bytes: float, seed: int,
                 multicast: bool = False) -> Algorithm:
    """Copies along pruned BFS trees, for a non-combining collective."""
    rng = random.Random(seed)
    if multicast:
        neighbours = [sorted(topology.out_neighbors(v)) for v in range(topology.num_nodes)]
    else:
        neighbours = npu_neighbours(topology)
    trees: dict[int, Bfs] = {}
    hops: list[tuple[int, int, int, int, int]] = []  # (depth, chunk, parent, child, origin)
    for chunk, needers in enumerate(collective.post):
        origin = collective.origin(chunk)
        if origin not in trees:  # each searched node's neighbours in a seeded order
            trees[origin] = bfs(neighbours, (origin,), shuffle=rng.shuffle)
        _, parent, depth = trees[origin]
        edges: set[tuple[int, int]] = set()
        for rank in needers:
            if rank in collective.pre[chunk]:
                continue
            if parent[rank] < 0:
                raise Unsupported(f"bfs-trees: rank {rank} cannot be reached from rank {origin} (chunk {chunk})")
            node = rank
            while node != origin and (parent[node], node) not in edges:
                edges.add((parent[node], node))
                node = parent[node]
        for u, v in edges:
            hops.append((depth[v], chunk, u, v, origin))
    hops.sort()
    chain = DeliveryChain()  # each hop waits for the hop that brought its chunk to its sender
    for _, chunk, u, v, _origin in hops:
        chain.send(chunk, u, v)
    return chain.build(topology, collective, chunk_bytes)


def _synthesize(topology: Topology, collective: Collective, chunk_bytes: float, seed: int,
                switches: str) -> Algorithm:
    if collective.combining and collective.kind not in ("reducescatter", "reduce", "allreduce"):
        raise Unsupported("bfs-trees handles combining collectives only as reduce-scatter, reduce or all-reduce")
    multicast = switches == "multicast" and topology.num_switches > 0
    silent = [s for s in topology.switches if not topology.ability(s).multicast] if multicast else []
    if silent:
        raise Unsupported(f"bfs-trees: switches=multicast copies in switches, and switch {silent[0]} does not "
                          f"multicast; use switches=route")
    if multicast and collective.combining and len(topology.reducing_switches()) < topology.num_switches:
        raise Unsupported("bfs-trees: switches=multicast copies in switches, which do not all reduce; "
                          f"{collective.kind} needs switches=route")
    return by_duality(topology, collective, chunk_bytes,
                      lambda view, gather, size: _gather_like(view, gather, size, seed, multicast))


@dataclass(frozen=True)
class BfsTreesOptions(Options):
    """Whether switches route the tree edges or copy (multicast) in them."""

    switches: str = option("route", "route tree edges through switches, or multicast in them",
                           choices=("route", "multicast"))


class BfsTrees(ClosedForm):
    """Shortest-path-tree schedules (see the module docstring)."""

    name = "bfs-trees"
    options = BfsTreesOptions

    def build(self, problem: Problem, seed: int, options: BfsTreesOptions) -> Algorithm:
        """The trees, each searched node's neighbours in an order drawn from ``seed``."""
        return _synthesize(problem.topology, problem.collective, problem.chunk_bytes, seed, options.switches)
