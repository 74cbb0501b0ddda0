"""The latency bound: a needed byte travels at least the alpha-shortest path from its holders.

From the nearest holder for a copy, from every contributor for a reduction. No serialisation term:
a schedule may cut its data into pieces as small as it likes, so the only piece every chunking
must send is of 0 bytes. With per-message overheads the path also pays, per segment, its first
link's overhead (``Topology.message_distances``).
"""

from __future__ import annotations

from workbench.util.lazy import lazy_module
from workbench.model.collective import Collective
from workbench.topology import Topology

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["latency_bound"]


def latency_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> float:
    """The alpha-shortest path from the holders of each needed byte (module docstring).

    ``chunk_bytes`` is not used: the bound holds for every chunking, so it has no serialisation
    term (a chunk's own ``chunk / bandwidth`` would hold for that chunking only).
    """
    dist = topology.message_distances()  # with overheads, every segment of a chain pays its first link's
    best = 0.0
    for pre, post, _ in collective.groups():
        holders = np.array(sorted(pre))
        for rank in post:
            if collective.combining:
                others = holders[holders != rank]
                if len(others) == 0:
                    continue
                travel = dist[others, rank].max()
            else:
                if rank in pre:
                    continue
                travel = dist[holders, rank].min()
            best = max(best, float(travel))
    return float(best)
