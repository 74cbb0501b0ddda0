"""All-Reduce's two-hop bound: each rank's contribution arrives raw, or inside a sum that took two deliveries.

A delivery from NPU w carries what w holds when it sends. Take an NPU v and another rank u. Every
byte position of v's result holds u's contribution, which reached v either *raw* (in a delivery
carrying u's input alone, relayed or not: one delivery per byte position, M bytes per such u over
v's in-links) or inside a *combined* value, summed first at some NPU. Summed at u itself, the value
leaves u only after a delivery into u has ended (``a(u)``, the shortest message chain from another
NPU to u: ``Topology.message_distances``) and reaches v no sooner than ``a(u) + d(u, v)``; summed at
another NPU w (not v: that would be v adding a raw input), it reaches w no sooner than ``d(u, w)`` and
v no sooner than ``d(u, w) + d(w, v)``. So a combined value with u's contribution reaches v no sooner
than ``c_u(v) = min(a(u) + d(u, v), min over w not in {u, v} of d(u, w) + d(w, v))``.

If the All-Reduce ends at ``T``, every rank u with ``c_u(v) > T`` sends v its contribution raw for
every byte position: with ``k(T)`` such ranks, v's in-links carry ``k(T) M`` bytes, the first no
sooner than ``a(v)``, so ``T >= k(T) M / B_in(v) + a(v)``. Sorting ``c_u(v)`` in decreasing order
``c_1 >= c_2 >= ...``: either ``T >= c_{j+1}`` or at least ``j`` ranks are raw, so
``T >= min over j of max(c_{j+1}, j M / B_in(v) + a(v))`` (``c_N = 0``: everyone raw), and the
bound is the largest over v. It is never below the first form of this bound (``c_u(v) >= two(v) =
min over w of a(w) + d(w, v)``: ``max_v min(two(v), (N - 1) M / B_in(v) + a(v))``): on switch:8 at
4 KB both give about 1.0 us where the gossip and cut bounds give 0.57 us; on a leaf-spine, where a
remote rank's sum needs a detour through a third NPU, it is higher (leafspine:4x4x2 at 64 KB:
14.1 us against 9.6 us).

Valid while switches do not reduce (a switch that sums would deliver a combined value in one hop):
on a fabric with a switch that reduces (``workbench.topology.abilities``) the bound is None; the
proof is docs/bounds.md, "The two-hop bound". ``c_u(v)`` is a min-plus product of the distance
matrix with itself, ``N^3`` additions, computed in blocks of destinations; past ``EXACT_NPUS`` NPUs
the detour term is replaced by its lower bound ``max(two(v), d(u, v))`` (a triangle inequality), so
the bound stays valid and cheap.
"""

from __future__ import annotations

from workbench.model.collective import Collective
from workbench.topology import Topology
from workbench.util.lazy import lazy_module

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["two_hop_bound", "EXACT_NPUS"]

EXACT_NPUS = 512  # the min-plus product up to here (about 1e8 additions, a second or two); its lower bound beyond
_BLOCK_CELLS = 1 << 24  # float64 cells per block of the min-plus product (128 MB)


def two_hop_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> float | None:
    """``max over v of min over j of max(c_{j+1}(v), j M / B_in(v) + a(v))`` (module docstring), in
    seconds; None for another collective, where an NPU cannot be reached, or on a fabric with a
    switch that reduces (module docstring)."""
    n = collective.num_ranks
    if collective.kind != "allreduce" or n != topology.num_npus or n < 2:
        return None
    if topology.reducing_switches():  # a sum formed in a switch needs no second delivery
        return None
    dist = np.array(topology.message_distances()[:n, :n], dtype=float)
    np.fill_diagonal(dist, np.inf)
    first = dist.min(axis=0)  # a(w): the earliest a delivery into w can end
    if not np.isfinite(first).all():
        return None
    combined = _combined_arrivals(dist, first)
    size = collective.size_bytes(chunk_bytes)
    best = 0.0
    for v in range(n):
        per_rank = size / sum(l.bandwidth for l in topology.in_links(v)) * (1 - 1e-12)
        c = np.sort(np.delete(combined[:, v], v))[::-1]  # c_1 >= c_2 >= ... over the other ranks
        raw_ends = np.arange(n) * per_rank + float(first[v])  # j ranks raw: j M / B_in(v) + a(v)
        beyond = np.append(c, 0.0)  # c_{j+1} for j = 0 .. N-1
        best = max(best, float(np.maximum(beyond, raw_ends).min()))
    return best


def _combined_arrivals(dist, first):
    """``c[u, v]``: the earliest a combined value holding u's contribution can reach v (module
    docstring); the diagonal is meaningless."""
    n = len(first)
    via_own = first[:, None] + dist  # summed at u, then u -> v
    if n > EXACT_NPUS:  # a detour through w is at least the direct chain, and at least two(v)
        two = via_own.min(axis=0)
        return np.minimum(via_own, np.maximum(dist, two[None, :]))
    detour = np.full((n, n), np.inf)
    step = max(1, _BLOCK_CELLS // (n * n))
    for start in range(0, n, step):
        block = slice(start, min(n, start + step))
        # [u, w, v] = d(u, w) + d(w, v); w = u is excluded by the infinite diagonal, w = v likewise
        detour[:, block] = (dist[:, :, None] + dist[None, :, block]).min(axis=1)
    return np.minimum(via_own, detour)
