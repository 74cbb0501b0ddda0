"""All-to-All cut bounds over the groups a cluster is built from: boxes, leaf groups, their unions.

For any set S of ranks, every byte an All-to-All sends from S to the other ranks crosses every cut
that separates S from them: ``T >= k |S| (N - |S|) chunk / c(S)`` where ``c(S)`` is the smallest
capacity of such a cut, in the out direction (S to the rest) or the in direction (the rest to S),
and switches may sit on either side. ``c(S)`` is a max-flow from S to the other ranks (and back);
the bound holds for every S, and is strongest on the sets a fabric is built around:

* each **box** (its GPUs' NICs carry everything that leaves it: the NIC cut);
* each **leaf group** of a rail fabric (beyond a scalable unit, its leaves' spine uplinks carry
  everything that leaves it, so a 2:1 oversubscribed spine halves the cut and doubles the bound);
* the unions of the first ``j`` leaf groups.

The sets come from ``workbench.topology.structure`` (recorded by a builder, or found in the links), so a
file without dimensions gets the same bound as the builder's twin. The sweep cuts of
``bounds.alltoall_cut_bound`` remain for fabrics without boxes; the larger of the two is kept.
"""

from __future__ import annotations

from typing import Iterable

from workbench.model.collective import Collective
from workbench.util.lazy import lazy_module
from workbench.kit.maxflow import FlowNetwork, integer_capacities
from workbench.topology.structure import boxes_and_rails
from workbench.topology import Topology

np = lazy_module("numpy")

__all__ = ["group_cut_bound", "candidate_groups"]

MAX_GROUPS = 2048  # max-flows per direction: a few ms each at 1,024 GPUs


def candidate_groups(topology: Topology) -> list[list[int]]:
    """Boxes, leaf groups and unions of the first leaf groups (none without a boxes-by-rails structure)."""
    found = boxes_and_rails(topology)
    if found is None:
        return []
    sets = [list(box) for box in found.boxes]
    count = len(found.groups)
    if count > 1:
        sets += [found.members(g) for g in range(count)]
        union = found.members(0)
        for g in range(1, count - 1):  # the first j groups, 1 < j < count
            union = union + found.members(g)
            sets.append(union)
    return sets[:MAX_GROUPS]


def group_cut_bound(topology: Topology, collective: Collective, chunk_bytes: float,
                    groups: Iterable[list[int]] | None = None) -> float | None:
    """The best All-to-All cut bound over ``groups`` (default: ``candidate_groups``), or None.

    Bandwidths are made integers as for the exact bounds; where they had to be rounded, the
    rounding is upward, so a cut's capacity is never below its real one and the bound stays valid.
    """
    if collective.kind != "alltoall" or collective.num_ranks != topology.num_npus:
        return None
    sets = list(groups) if groups is not None else candidate_groups(topology)
    if not sets:
        return None
    n, k = collective.num_ranks, collective.chunks_per_rank
    nodes = topology.num_nodes
    source, sink = nodes, nodes + 1
    capacities = integer_capacities([l.bandwidth for l in topology.links])
    link_src = [l.src for l in topology.links]
    link_dst = [l.dst for l in topology.links]
    ranks = list(range(n))
    # arcs: the links, then source -> every rank, then every rank -> sink (capacities set per set)
    network = FlowNetwork(nodes + 2, link_src + [source] * n + ranks, link_dst + ranks + [sink] * n)
    backward = FlowNetwork(nodes + 2, link_dst + [source] * n + ranks, link_src + ranks + [sink] * n)
    finite = capacities.values.astype(np.int64)
    unbounded = int(finite.sum()) + 1
    best = 0.0
    for members in sets:
        inside = np.zeros(n, dtype=bool)
        inside[members] = True
        size = int(inside.sum())
        if size == 0 or size == n:
            continue
        terminals = np.concatenate([np.where(inside, unbounded, 0), np.where(inside, 0, unbounded)])
        arcs = np.concatenate([finite, terminals])
        # out of S on the links, and into S (the same cut on the reversed links)
        smallest = min(network.value(arcs, source, sink), backward.value(arcs, source, sink))
        if smallest <= 0:
            continue
        best = max(best, k * size * (n - size) * chunk_bytes / (smallest * capacities.unit))
    if best <= 0:
        return None
    alpha = min(l.alpha for l in topology.links)
    return best * (1 - 1e-12) + alpha + topology.min_overhead()
