"""Races in a program of concurrent sequences (GPU threadblocks): the happens-before order and the
first two unordered accesses to one memory slot of which one writes.

Each sequence runs its events in order; ``preds`` adds the cross-sequence orders (a dependency, a
message, a signal consumed by a wait). Vector clocks answer "a before b" in O(1):
``clock[b][seq(a)]`` counts the events of ``a``'s sequence known to have finished when ``b`` runs.
Used by the MSCCL XML and MSCCL++ plan interpreters.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Callable, Hashable, Sequence

from workbench.util.lazy import lazy_module

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["first_race", "MAX_CLOCK_CELLS"]

# events x sequences of vector-clock memory (int32): 50M cells = 200 MB; bigger programs are refused
MAX_CLOCK_CELLS = 50_000_000


def first_race(lengths: Sequence[int], preds: Sequence[Sequence[int]],
               accesses: Sequence[dict[Hashable, bool]], describe: Callable[[int], str],
               slot_name: Callable[[Hashable], str]) -> str | None:
    """The first race as a sentence naming both events, or None (also None when the order has a cycle,
    a deadlock that an execution reports better).

    ``lengths``: events per sequence; events are numbered sequence by sequence. ``preds[e]``: events
    that must finish before ``e`` besides its predecessor in its own sequence. ``accesses[e]``: slot ->
    True when ``e`` writes it, False when it only reads it.
    """
    total = sum(lengths)
    if total * max(len(lengths), 1) > MAX_CLOCK_CELLS:
        raise ValueError(f"{total} events in {len(lengths)} sequences is too large for the race analysis "
                         f"(limit {MAX_CLOCK_CELLS:,} event-sequence cells)")
    owner = np.repeat(np.arange(len(lengths)), lengths)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64) if lengths else np.zeros(0, np.int64)
    position = np.arange(total) - starts[owner] if total else np.zeros(0, np.int64)
    before: list[list[int]] = [list(p) for p in preds]
    for e in range(total):
        if position[e]:
            before[e].append(e - 1)
    successors: list[list[int]] = [[] for _ in range(total)]
    missing = [len(b) for b in before]
    for e, b in enumerate(before):
        for q in b:
            successors[q].append(e)
    ready = deque(e for e in range(total) if missing[e] == 0)
    order = []
    while ready:
        e = ready.popleft()
        order.append(e)
        for nxt in successors[e]:
            missing[nxt] -= 1
            if missing[nxt] == 0:
                ready.append(nxt)
    if len(order) < total:
        return None
    clock = np.zeros((total, len(lengths)), dtype=np.int32)
    for e in order:
        row = clock[e]
        for q in before[e]:
            np.maximum(row, clock[q], out=row)
        row[owner[e]] = position[e] + 1
    by_slot: dict[Hashable, list[tuple[int, bool]]] = defaultdict(list)
    for e, touched in enumerate(accesses):
        for slot, writes in touched.items():
            by_slot[slot].append((e, writes))

    def ordered(a: int, b: int) -> bool:
        return bool(clock[b][owner[a]] > position[a] or clock[a][owner[b]] > position[b])

    for slot in sorted(by_slot, key=repr):
        seen = by_slot[slot]
        for x in range(len(seen)):
            a, a_writes = seen[x]
            for y in range(x + 1, len(seen)):
                b, b_writes = seen[y]
                if (a_writes or b_writes) and owner[a] != owner[b] and not ordered(a, b):
                    return (f"race on {slot_name(slot)}: {describe(a)} {'writes' if a_writes else 'reads'} it and "
                            f"{describe(b)} {'writes' if b_writes else 'reads'} it, and no dependency orders them")
    return None
