"""The injection bound: the busiest NPU's own links serialise every byte it must receive or send.

Every rank must receive (send) the bytes of every chunk it needs (each of its contributions someone
else needs); its in-links (out-links) serialise those bytes, and the last one still pays the
smallest alpha and overhead of those links. Chunk count times chunk bytes is the bytes themselves,
so the value is the same for every chunking of the problem.
"""

from __future__ import annotations

from workbench.util.lazy import lazy_module
from workbench.model.collective import Collective
from workbench.topology import Topology

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["injection_bound"]


def injection_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> float:
    """Seconds the busiest NPU needs to receive (or send) the chunks it must, at the summed bandwidth
    of its in- (out-) links, plus the smallest alpha and overhead among those links."""
    n = collective.num_ranks
    must_receive = np.zeros(n)
    must_send = np.zeros(n)
    for pre, post, count in collective.groups():
        for rank in post:
            needs = (pre != {rank}) if collective.combining else (rank not in pre)
            if needs:
                must_receive[rank] += count
        if collective.combining:
            for rank in pre:
                if post - {rank}:
                    must_send[rank] += count
        elif len(pre) == 1:
            (rank,) = pre
            if post - {rank}:
                must_send[rank] += count
    best = 0.0
    for rank in range(n):
        if must_receive[rank]:
            links = topology.in_links(rank)
            bw = sum(l.bandwidth for l in links)
            best = max(best, must_receive[rank] * chunk_bytes / bw + min(l.alpha for l in links)
                       + min(l.overhead for l in links))
        if must_send[rank]:
            links = topology.out_links(rank)
            bw = sum(l.bandwidth for l in links)
            best = max(best, must_send[rank] * chunk_bytes / bw + min(l.alpha for l in links)
                       + min(l.overhead for l in links))
    return float(best)
