"""All-Reduce's two-hop bound: a sum arrives either as raw inputs, one per rank, or after two deliveries.

A delivery from NPU w carries what w holds when it sends. Until a delivery into w has ended, w
holds only its own input, and no delivery into w ends before ``a(w)``, the shortest message chain
from another NPU to w (``Topology.message_distances``). So a delivery into NPU v that carries more
than its sender's own input ends no earlier than ``two(v) = min over w != v of a(w) + d(w, v)``.
Before ``two(v)`` every byte v receives is a single rank's raw input, and v needs the other N - 1
ranks' inputs of every byte position: ``(N - 1) M`` bytes over v's in-links. No byte enters an
in-link of v before its first byte could have come from another NPU, and the last one still crosses
the link, so ``raw(v) = (N - 1) M / B_in(v) + D(v)``, with ``D(v)`` the shortest message chain from
another NPU to v. So the All-Reduce ends no earlier than ``max over v of min(two(v), raw(v))``.

On switch:8 at 4 KB this is about 1 us where the gossip and cut bounds give 0.57 us: a schedule
either sends seven raw inputs through every NPU's one in-link or waits for two hops. Valid while
switches do not reduce (a switch that sums would deliver a combined value in one hop); the proof
is docs/bounds.md, "The two-hop bound".
"""

from __future__ import annotations

from workbench.model.collective import Collective
from workbench.topology import Topology
from workbench.util.lazy import lazy_module

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["two_hop_bound"]


def two_hop_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> float | None:
    """``max over v of min(two(v), raw(v))`` (module docstring), in seconds; None for another
    collective, or where an NPU cannot be reached."""
    n = collective.num_ranks
    if collective.kind != "allreduce" or n != topology.num_npus or n < 2:
        return None
    dist = np.array(topology.message_distances()[:n, :n], dtype=float)
    np.fill_diagonal(dist, np.inf)
    first = dist.min(axis=0)  # a(w): the earliest a delivery into w can end
    if not np.isfinite(first).all():
        return None
    chained = first[:, None] + dist  # [w, v]: a delivery into w, then w -> v
    two = chained.min(axis=0)
    size = collective.size_bytes(chunk_bytes)
    best = 0.0
    for v in range(n):
        raw = (n - 1) * size / sum(l.bandwidth for l in topology.in_links(v)) * (1 - 1e-12) + float(first[v])
        best = max(best, min(float(two[v]), raw))
    return best
