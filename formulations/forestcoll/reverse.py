"""Reduce-scatter / reduce built directly from a gather whose switches forward a chunk more than once.

When a logical tree edge is sent hop by hop through a switch, two edges of one tree that cross the
same switch make it forward the same chunk twice. ``Algorithm.reverse`` rejects that (reversed,
two partial sums would meet in one switch buffer, and a switch cannot add them). Here the reversal
is done anyway and then each switch buffer is used by one pass at a time: a copy into switch
buffer ``(w, c)`` is listed, and waits, after the transfer that forwarded the previous partial sum
out of it. Transfers keep the reversed order otherwise, so the per-link order stays the plan.
"""

from __future__ import annotations

from collections import defaultdict

from workbench.algorithm import Algorithm, Transfer
from workbench.collective import make_collective
from workbench.topology import Topology

__all__ = ["reverse_serialised"]


def reverse_serialised(gather: Algorithm, topology: Topology) -> Algorithm:
    """``gather`` (all-gather / broadcast on ``topology.reversed()``) as reduce-scatter / reduce on ``topology``."""
    target_kind = {"allgather": "reducescatter", "broadcast": "reduce"}[gather.collective.kind]
    count = len(gather.transfers)
    dependants: list[list[int]] = [[] for _ in range(count)]
    for t in gather.transfers:
        for d in t.deps:
            dependants[d].append(t.id)
    # plain reversal: position i holds the reverse of transfer count-1-i
    reversed_list = []
    for i in range(count):
        old = gather.transfers[count - 1 - i]
        op = "copy" if topology.is_switch(old.src) else "reduce"
        deps = tuple(sorted(count - 1 - s for s in dependants[old.id]))
        reversed_list.append((old.chunks, old.dst, old.src, op, deps))
    emitted: dict[int, int] = {}
    busy: dict[tuple[int, int], bool] = {}
    freed_by: dict[tuple[int, int], int] = {}
    waiting_on_dep: dict[int, list[int]] = defaultdict(list)
    waiting_on_buffer: dict[tuple[int, int], list[int]] = defaultdict(list)
    transfers: list[Transfer] = []

    def blocker(i: int):
        chunks, src, dst, _, deps = reversed_list[i]
        for d in deps:
            if d not in emitted:
                return ("dep", d)
        if topology.is_switch(dst):
            for c in chunks:
                if busy.get((dst, c)):
                    return ("buffer", (dst, c))
        return None

    def emit(i: int) -> list[int]:
        chunks, src, dst, op, deps = reversed_list[i]
        new_deps = {emitted[d] for d in deps}
        woken: list[int] = []
        if topology.is_switch(dst):
            for c in chunks:
                if (dst, c) in freed_by:
                    new_deps.add(freed_by[(dst, c)])
        tid = len(transfers)
        transfers.append(Transfer(tid, chunks, src, dst, op, tuple(sorted(new_deps))))
        emitted[i] = tid
        if topology.is_switch(src):
            for c in chunks:
                busy.pop((src, c), None)
                freed_by[(src, c)] = tid
                woken += waiting_on_buffer.pop((src, c), [])
        if topology.is_switch(dst):
            for c in chunks:
                busy[(dst, c)] = True
        woken += waiting_on_dep.pop(i, [])
        return woken

    def attempt(start: int) -> None:
        work = [start]
        while work:
            i = work.pop()
            if i in emitted:
                continue
            block = blocker(i)
            if block is None:
                woken = emit(i)
                work.extend(sorted(woken, reverse=True))  # earliest listed first
            elif block[0] == "dep":
                waiting_on_dep[block[1]].append(i)
            else:
                waiting_on_buffer[block[1]].append(i)

    for i in range(count):
        attempt(i)
    if len(transfers) != count:
        raise ValueError("forestcoll: could not order the reversed schedule through its switch buffers")
    c = gather.collective
    collective = make_collective(target_kind, c.num_ranks, c.chunks_per_rank, c.root)
    meta = dict(gather.meta)
    meta["reversed_from"] = c.kind
    return Algorithm(topology, collective, gather.chunk_bytes, transfers, meta)
