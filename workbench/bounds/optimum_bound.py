"""The max-flow throughput optimum as a bound in seconds: the optimum's bandwidth term plus its cut's alpha.

All-Gather, Reduce-Scatter (the reversed graph), broadcast, reduce, scatter and gather over every
NPU of the topology; the optima themselves are ``workbench.bounds.optimum``.
"""

from __future__ import annotations

from workbench.model.collective import Collective
from workbench.topology import Topology

__all__ = ["optimum_bound"]


_GATHER_LIKE = ("allgather", "reducescatter", "broadcast", "reduce", "scatter", "gather")


def optimum_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> tuple[float, bool] | None:
    """(seconds, exact) of the max-flow optimum plus its cut's alpha; None for other collectives.

    Applies to the standard all-gather, reduce-scatter, broadcast, reduce, scatter and gather over
    every NPU of the topology. ``exact`` is False only when bandwidths had to be quantised (the
    cut found is then still a real cut, so the value is still a valid bound).
    """
    from workbench.bounds.optimum import allgather_cut_ratio, broadcast_cut, scatter_cut_ratio

    kind, n = collective.kind, collective.num_ranks
    if kind not in _GATHER_LIKE or n != topology.num_npus or n < 2:
        return None
    size = collective.size_bytes(chunk_bytes)
    graph = topology.reversed() if kind in ("reducescatter", "reduce", "gather") else topology
    if kind in ("allgather", "reducescatter"):
        cut = allgather_cut_ratio(graph)
        seconds = size / n * cut.seconds_per_byte
    elif kind in ("broadcast", "reduce"):
        cut = broadcast_cut(graph, collective.root)
        seconds = size * cut.seconds_per_byte
    else:
        cut = scatter_cut_ratio(graph, collective.root)
        seconds = size / n * cut.seconds_per_byte
    return seconds * (1 - 1e-12) + cut.alpha + topology.min_overhead(), cut.exact
