"""Reference schedules built by hand: small, exact, and used by tests and benchmarks.

These are not formulations (they take no problem and search nothing); they exist so the
verifier and simulator can be exercised on known algorithms at any scale.
"""

from __future__ import annotations

from workbench.model.algorithm import Algorithm
from workbench.model.collective import make_collective
from workbench.kit.schedule import DeliveryChain
from workbench.topology.builders import build
from workbench.topology import Topology

__all__ = ["ring_allgather", "ring_reducescatter", "ring_allreduce"]


def ring_allgather(num_ranks: int, chunk_bytes: float, topology: Topology | None = None,
                   chunks_per_rank: int = 1, descending: bool = False) -> Algorithm:
    """Unidirectional ring all-gather over ranks 0 -> 1 -> ... -> n-1 -> 0 (routed if no direct link).

    ``descending`` runs the ring the other way (r -> r-1).
    """
    topology = topology or build(f"uniring:{num_ranks}")
    n, k = num_ranks, chunks_per_rank
    direction = -1 if descending else 1
    collective = make_collective("allgather", n, k)
    chain = DeliveryChain()  # each send waits for the send that brought its chunk to the rank
    for step in range(n - 1):
        for j in range(k):
            for rank in range(n):
                chain.send(j * n + (rank - direction * step) % n, rank, (rank + direction) % n)
    return chain.build(topology, collective, chunk_bytes, {"formulation": "example-ring", "claimed_time": None})


def ring_reducescatter(num_ranks: int, chunk_bytes: float, topology: Topology | None = None,
                       chunks_per_rank: int = 1) -> Algorithm:
    """Unidirectional ring reduce-scatter: the reverse of the ring all-gather on the reversed ring."""
    topology = topology or build(f"uniring:{num_ranks}")
    gather = ring_allgather(num_ranks, chunk_bytes, topology.reversed(), chunks_per_rank, descending=True)
    return gather.reverse(topology)


def ring_allreduce(num_ranks: int, chunk_bytes: float, topology: Topology | None = None,
                   chunks_per_rank: int = 1) -> Algorithm:
    """Ring reduce-scatter then ring all-gather (2 (n-1) steps)."""
    topology = topology or build(f"uniring:{num_ranks}")
    reduce_scatter = ring_reducescatter(num_ranks, chunk_bytes, topology, chunks_per_rank)
    return reduce_scatter.concat(ring_allgather(num_ranks, chunk_bytes, topology, chunks_per_rank))
