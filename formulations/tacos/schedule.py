"""A TACOS matching turned into a workbench algorithm (transfers with explicit dependencies).

Each delivery waits for the delivery that brought its chunk to the sender (none if the sender
started with it). Transfers are listed in the order they can start: by effective start (the
later of the planned start and the payload's arrival), then planned start, end, sender,
receiver and delivery order.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any

from workbench.util.lazy import lazy_module

from formulations.tacos.matching import MatchResult
from workbench.model.algorithm import Algorithm, Transfer, no_cyclic_gc
from workbench.model.collective import Collective
from workbench.topology import Topology

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)


def to_algorithm(physical: Topology, collective: Collective, chunk_bytes: float, result: MatchResult,
                 meta: dict[str, Any]) -> Algorithm:
    """Matches -> transfers in planned order with explicit deps (the delivery of the payload to u)."""
    count = len(result.src)
    if count != result.deliveries:
        raise ValueError("tacos: this matching did not record its schedule (record=False)")
    n, num_chunks = collective.num_ranks, len(collective.pre)
    src, dst, chunk, started, ended = result.src, result.dst, result.chunk, result.started, result.ended
    started_with = np.zeros((n, num_chunks), dtype=bool)
    for c, holders in enumerate(collective.pre):
        started_with[list(holders), c] = True
    # the delivery chain of workbench.kit.schedule.DeliveryChain, in numpy: a matching holds up to
    # millions of deliveries, and the file order is only known once every dep's arrival is
    delivery = np.full(n * num_chunks, -1, dtype=np.int64)
    delivery[dst * num_chunks + chunk] = np.arange(count)
    dep = np.where(started_with[src, chunk], -1, delivery[src * num_chunks + chunk])
    ready = np.where(dep >= 0, ended[np.maximum(dep, 0)], 0.0)
    effective = np.maximum(started, ready)
    order = np.lexsort((np.arange(count), dst, src, ended, started, effective))
    new_id = np.empty(count, dtype=np.int64)
    new_id[order] = np.arange(count)
    dep = np.where(dep >= 0, new_id[np.maximum(dep, 0)], -1)[order]
    single = [(c,) for c in range(num_chunks)]  # one shared 1-tuple per chunk
    with no_cyclic_gc():  # a million small objects: collection passes would find nothing to free
        transfers = list(map(Transfer, range(count), [single[c] for c in chunk[order].tolist()],
                             src[order].tolist(), dst[order].tolist(), repeat("copy"),
                             [() if d < 0 else (d,) for d in dep.tolist()],
                             started[order].tolist(), ended[order].tolist()))
    return Algorithm(physical, collective, chunk_bytes, transfers, dict(meta))
