"""Cut bounds over node sets: every subset of a small fabric, and sweep cuts for All-to-All at any size.

What must enter a set of nodes crosses the links into it: ``need(A) * chunk / cap(A)`` plus the
smallest alpha of those links (docs/methods/sccl.md section 4). ``cut_bound`` enumerates every
subset (up to 16 nodes); ``alltoall_cut_bound`` takes the prefixes of two node orders, valid for
every set though not a maximum over all of them. The cuts around a cluster's boxes and leaf groups
are ``workbench.bounds.group_cuts``.
"""

from __future__ import annotations

from workbench.util.lazy import lazy_module
from workbench.model.collective import Collective
from workbench.topology import Topology

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["cut_bound", "alltoall_cut_bound"]


def cut_bound(topology: Topology, collective: Collective, chunk_bytes: float, max_nodes: int = 16) -> float | None:
    """Max over node subsets A of ``need(A) * chunk / cap(A) + min alpha into A``; None if too many nodes."""
    n = topology.num_nodes
    if n > max_nodes or n > 62:
        return None
    subsets = np.arange(1, (1 << n) - 1, dtype=np.int64)
    need = np.zeros(len(subsets))
    for pre, post, count in collective.groups():
        pre_mask = sum(1 << r for r in pre)
        post_mask = sum(1 << r for r in post)
        enters = (subsets & post_mask) != 0
        if collective.combining:
            missing = (subsets & pre_mask) != pre_mask  # some contribution lives outside A
        else:
            missing = (subsets & pre_mask) == 0
        need += count * (enters & missing)
    capacity = np.zeros(len(subsets))
    min_alpha = np.full(len(subsets), np.inf)
    for link in topology.links:
        crossing = (((subsets >> link.dst) & 1) == 1) & (((subsets >> link.src) & 1) == 0)
        capacity += crossing * link.bandwidth
        min_alpha = np.where(crossing, np.minimum(min_alpha, link.alpha), min_alpha)
    useful = (need > 0) & (capacity > 0)
    if not useful.any():
        return 0.0
    values = need[useful] * chunk_bytes / capacity[useful] + min_alpha[useful]
    return float(values.max()) + topology.min_overhead()


def alltoall_cut_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> float | None:
    """All-to-All at any size: ``k |S∩C| |C\\S| chunk / min(B+(S), B-(S))`` over sweep cuts.

    The sets are the prefixes of two orders of the nodes (by id, which is row-major for the grid
    and dimension builders, so the prefixes include every plane cut; and breadth-first from node 0).
    Valid for every set; not a maximum over all sets.
    """
    if collective.kind != "alltoall" or collective.num_ranks != topology.num_npus:
        return None
    n, k = collective.num_ranks, collective.chunks_per_rank
    nodes = topology.num_nodes
    src = np.array([l.src for l in topology.links])
    dst = np.array([l.dst for l in topology.links])
    bw = np.array([l.bandwidth for l in topology.links])
    alpha = np.array([l.alpha for l in topology.links])
    from workbench.util.graphs import bfs

    # links followed both ways, out-neighbours then in-neighbours, each by id: the order of
    # scipy's breadth_first_order(directed=False), which this replaced without its import
    both_ways = [topology.out_neighbors(u) + topology.in_neighbors(u) for u in range(nodes)]
    orders = [np.arange(nodes), np.array(bfs(both_ways, (0,)).order, dtype=np.int64)]
    best = 0.0
    for order in orders:
        if len(order) < nodes:
            continue
        position = np.empty(nodes, dtype=np.int64)
        position[order] = np.arange(nodes)
        # prefix m (the first m nodes) is left by links with position[src] < m <= position[dst]
        out_diff, in_diff = np.zeros(nodes + 1), np.zeros(nodes + 1)
        forward = position[src] < position[dst]
        np.add.at(out_diff, position[src][forward] + 1, bw[forward])
        np.add.at(out_diff, position[dst][forward] + 1, -bw[forward])
        backward = ~forward
        np.add.at(in_diff, position[dst][backward] + 1, bw[backward])
        np.add.at(in_diff, position[src][backward] + 1, -bw[backward])
        leaving, entering = np.cumsum(out_diff)[1:nodes], np.cumsum(in_diff)[1:nodes]
        npus_inside = np.cumsum(order < n)[: nodes - 1]
        pieces = k * npus_inside * (n - npus_inside)
        capacity = np.minimum(leaving, entering)
        useful = (pieces > 0) & (capacity > 0)
        if useful.any():
            best = max(best, float((pieces[useful] * chunk_bytes / capacity[useful]).max()))
    return best * (1 - 1e-12) + float(alpha.min()) + topology.min_overhead() if best > 0 else None
