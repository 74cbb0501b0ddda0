"""The egress bound: each NPU's whole input must leave it, and the last of it still travels to the farthest NPU.

All-Reduce over every NPU: every byte position of NPU v's result holds rank u's input at that
position, so for every other NPU w and every byte position p some chain of transfers carries
u's contribution at p from u to w (a chain starts at u: only u holds its input). Take, on the
chain to w of each p, its *last* departure from u: M distinct bytes (one per position) on u's
out-links, each followed by a walk from u to w that does not pass through u again. Some out-link
e carries at least its share ``M b_e / B_L(u)`` of them, so the last of them on e finishes
crossing no sooner than ``M / B_L(u)`` plus e's overhead, and then still needs the rest of its walk
to w: the bound is

    ``max over NPUs u of ( M / B_L(u) + max over NPUs w != u of d(u, w) )``

with ``d`` the shortest message chain (``Topology.message_distances``: alphas, and the overhead of
every link that leaves an NPU, which a chain's segments pay at least) and ``B_L(u)`` the bandwidth
of u's out-links from whose head another NPU is reachable without passing through u (a byte that
goes out on another link can only come back to u, so it is never a last departure; on ``hgx:1``
the NIC into a rail leaf that no other GPU shares is such a link). The proof is docs/bounds.md,
"The egress bound".

Nothing in it asks where values are summed: a switch that reduces (NVLS, SHARP) still receives
u's input from u, and the sum it sends on still travels from u's out-link to w. It holds on every
fabric, with or without reducing switches, in every simulator model. Its overhead is inside
``d`` (the first link's overhead is paid by every segment that leaves u), so no separate per-message
term is added.

The same argument bounds any reduction (``egress_bound`` takes the collective's groups): u's
contributions to the byte positions some rank at least ``D`` away needs must all leave u, the last
of them travelling at least ``D`` after, so ``max over u and D of bytes(u, D) / B_L(u) + D``.
For All-Reduce ``D`` is the farthest NPU's distance and every byte counts; for Reduce-Scatter it is
the ``j`` farthest owners' ``j M / N`` bytes and the ``j``-th farthest distance; for reduce it is
``M / B_L(u) + d(u, root)``.
"""

from __future__ import annotations

from workbench.model.collective import Collective
from workbench.topology import Topology
from workbench.util.lazy import lazy_module

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["egress_bound", "leaving_bandwidth"]


def egress_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> float | None:
    """``max over ranks u and distances D of bytes(u, D) / B_L(u) + D`` (module docstring), in
    seconds; None for a collective that does not combine, with fewer than two ranks, or where no
    rank's contribution is needed elsewhere."""
    n = collective.num_ranks
    if not collective.combining or n < 2:
        return None
    dist = np.asarray(topology.message_distances(), dtype=float)
    needs: dict[int, list[tuple[float, int]]] = {}  # u -> (distance to its farthest needer, chunks) per group
    for pre, post, count in collective.groups():
        holders = np.array(sorted(pre), dtype=np.int64)
        needers = np.array(sorted(post), dtype=np.int64)
        if not len(holders) or not len(needers):
            continue
        reach = dist[np.ix_(holders, needers)].copy()
        reach[holders[:, None] == needers[None, :]] = -np.inf  # u needs nothing from itself
        farthest = reach.max(axis=1)
        for u, far in zip(holders.tolist(), farthest.tolist()):
            if far > -np.inf:
                needs.setdefault(u, []).append((far, count))
    best = None
    for u, pairs in needs.items():
        bandwidth = leaving_bandwidth(topology, u)
        if not bandwidth > 0:
            continue  # u reaches nobody: no All-Reduce exists (check_reachable says so), no bound to give
        pairs.sort(key=lambda pair: -pair[0])
        chunks = 0
        for far, count in pairs:  # the bytes needed at least ``far`` away: this group and every farther one
            chunks += count
            if not np.isfinite(far):
                continue
            value = chunks * chunk_bytes / bandwidth * (1 - 1e-12) + far
            best = value if best is None else max(best, value)
    return best


def leaving_bandwidth(topology: Topology, u: int) -> float:
    """``B_L(u)``: the bandwidth of NPU u's out-links from whose head another NPU is reachable
    without passing through u (module docstring)."""
    total = 0.0
    for link in topology.out_links(u):
        if _reaches_another_npu(topology, link.dst, u):
            total += link.bandwidth
    return total


def _reaches_another_npu(topology: Topology, start: int, avoid: int) -> bool:
    """Whether an NPU other than ``avoid`` is reachable from ``start`` without passing ``avoid``
    (a breadth-first search that stops at the first such NPU: one or two steps on real fabrics)."""
    if start == avoid:
        return False
    seen = {start, avoid}
    frontier = [start]
    while frontier:
        node = frontier.pop()
        if not topology.is_switch(node):
            return True
        for nxt in topology.out_neighbors(node):
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return False
