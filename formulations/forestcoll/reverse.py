"""Reduce-scatter / reduce built directly from a gather whose switches forward a chunk more than once.

When a logical tree edge is sent hop by hop through a switch, two edges of one tree that cross the
same switch make it forward the same chunk twice. ``Algorithm.reverse`` rejects that (reversed,
two partial sums would meet in one switch buffer, and a switch cannot add them). Here the reversal
is done anyway and then each switch buffer is used by one pass at a time: a copy into switch
buffer ``(w, c)`` is listed, and waits, after the transfer that forwarded the previous partial sum
out of it. Transfers keep the reversed order otherwise, so the per-link order stays the plan.
A forest staggered by ``stagger.stagger_switch_visits`` already keeps such visits two rounds apart,
so there the added dependencies are met before they are needed and no link waits for them.

A periodic gather (``workbench.algorithm/3``) is reversed on its period (``reverse_periodic``): the
template and lags as ``Algorithm.reverse`` turns them, and each copy into a switch buffer waiting for
the transfer that forwarded its previous partial sum, found in one piece's expansion order. Nothing
is relisted, so that order must already free each buffer before it is entered again, which the
staggered rounds (the lags) give; where it does not, ``ValueError`` says so.
"""

from __future__ import annotations

import heapq
from collections import defaultdict

from workbench.model.algorithm import Algorithm, Transfer
from workbench.model.collective import make_collective
from workbench.model.periodic import reversed_lags
from workbench.topology import Topology

__all__ = ["reverse_serialised", "reverse_periodic"]


def _plain_reversal(gather: Algorithm, topology: Topology) -> list[tuple]:
    """Position i holds the reverse of transfer count-1-i: (chunks, src, dst, op, deps), copying into
    a switch and reducing into an NPU, each waiting for the reverses of its dependants."""
    count = len(gather.transfers)
    dependants: list[list[int]] = [[] for _ in range(count)]
    for t in gather.transfers:
        for d in t.deps:
            dependants[d].append(t.id)
    reversed_list = []
    for i in range(count):
        old = gather.transfers[count - 1 - i]
        op = "copy" if topology.is_switch(old.src) else "reduce"
        deps = tuple(sorted(count - 1 - s for s in dependants[old.id]))
        reversed_list.append((old.chunks, old.dst, old.src, op, deps))
    return reversed_list


def reverse_serialised(gather: Algorithm, topology: Topology) -> Algorithm:
    """``gather`` (all-gather / broadcast on ``topology.reversed()``) as reduce-scatter / reduce on ``topology``."""
    target_kind = {"allgather": "reducescatter", "broadcast": "reduce"}[gather.collective.kind]
    count = len(gather.transfers)
    reversed_list = _plain_reversal(gather, topology)
    # list scheduling in the reversed order: always emit the earliest-listed transfer whose deps are
    # emitted and whose destination switch buffers are free, so the plan's order changes only locally
    emitted: dict[int, int] = {}
    busy: set[tuple[int, int]] = set()
    freed_by: dict[tuple[int, int], int] = {}
    parked: dict[tuple[int, int], list[int]] = defaultdict(list)
    missing = [len(entry[4]) for entry in reversed_list]
    later: list[list[int]] = [[] for _ in range(count)]
    for i, entry in enumerate(reversed_list):
        for d in entry[4]:
            later[d].append(i)
    ready = [i for i in range(count) if missing[i] == 0]
    heapq.heapify(ready)
    transfers: list[Transfer] = []
    while ready:
        i = heapq.heappop(ready)
        chunks, src, dst, op, deps = reversed_list[i]
        if topology.is_switch(dst):
            taken = next(((dst, c) for c in chunks if (dst, c) in busy), None)
            if taken is not None:
                parked[taken].append(i)
                continue
        new_deps = {emitted[d] for d in deps}
        if topology.is_switch(dst):
            new_deps.update(freed_by[(dst, c)] for c in chunks if (dst, c) in freed_by)
        tid = len(transfers)
        transfers.append(Transfer(tid, chunks, src, dst, op, tuple(sorted(new_deps))))
        emitted[i] = tid
        if topology.is_switch(src):
            for c in chunks:
                busy.discard((src, c))
                freed_by[(src, c)] = tid
                for j in parked.pop((src, c), []):
                    heapq.heappush(ready, j)
        if topology.is_switch(dst):
            busy.update((dst, c) for c in chunks)
        for j in later[i]:
            missing[j] -= 1
            if missing[j] == 0:
                heapq.heappush(ready, j)
    if len(transfers) != count:  # two visits hold each other's switch buffers (an unstaggered forest)
        raise ValueError(f"reverse_serialised: {count - len(transfers)} of {count} transfers wait for switch "
                         f"buffers held by each other; stagger the forest's switch visits first")
    c = gather.collective
    collective = make_collective(target_kind, c.num_ranks, c.chunks_per_rank, c.root)
    meta = dict(gather.meta)
    meta["reversed_from"] = c.kind
    return Algorithm(topology, collective, gather.chunk_bytes, transfers, meta)


def reverse_periodic(gather: Algorithm, topology: Topology) -> Algorithm:
    """A periodic ``gather`` (all-gather / broadcast on ``topology.reversed()``) as a periodic
    reduce-scatter / reduce on ``topology`` with serialised switch buffers (module docstring)."""
    target_kind = {"allgather": "reducescatter", "broadcast": "reduce"}[gather.collective.kind]
    entries = _plain_reversal(gather, topology)
    lags = reversed_lags([t.lag for t in gather.transfers])
    waits = _buffer_waits(entries, sorted(range(len(entries)), key=lambda i: (lags[i], i)), topology)
    transfers = [Transfer(i, chunks, src, dst, op, tuple(sorted(set(deps) | waits.get(i, set()))), lag=lags[i])
                 for i, (chunks, src, dst, op, deps) in enumerate(entries)]
    c = gather.collective
    meta = dict(gather.meta)
    meta["reversed_from"] = c.kind
    return Algorithm(topology, make_collective(target_kind, c.num_ranks, c.chunks_per_rank, c.root),
                     gather.chunk_bytes, transfers, meta, gather.period)


def _buffer_waits(entries: list[tuple], order: list[int], topology: Topology) -> dict[int, set[int]]:
    """For each copy into a switch buffer (a template position), the transfer that forwarded the
    buffer's previous partial sum, walking one piece in ``order`` (pieces use disjoint buffers);
    ``ValueError`` where a partial sum would enter a buffer still holding another."""
    holding: dict[tuple[int, int], int] = {}  # (switch, chunk) -> the copy that filled it, until forwarded
    freed_by: dict[tuple[int, int], int] = {}
    waits: dict[int, set[int]] = defaultdict(set)
    for i in order:
        chunks, src, dst, _, _ = entries[i]
        if topology.is_switch(src):
            for c in chunks:
                holding.pop((src, c), None)
                freed_by[(src, c)] = i
        if topology.is_switch(dst):
            for c in chunks:
                if (dst, c) in holding:
                    raise ValueError(f"reverse_periodic: template transfer {i} brings a partial sum of chunk {c} to "
                                     f"switch {dst} while transfer {holding[(dst, c)]}'s is still there; stagger "
                                     f"the forest's switch visits first")
                if (dst, c) in freed_by:
                    waits[i].add(freed_by[(dst, c)])
                holding[(dst, c)] = i
    return waits
