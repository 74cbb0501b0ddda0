"""Races in a program of concurrent sequences (GPU threadblocks): the happens-before order and the
first two unordered accesses to one memory slot of which one writes.

Each sequence runs its events in order; ``preds`` adds the cross-sequence orders (a dependency, a
message, a signal consumed by a wait). Vector clocks answer "a before b" in O(1):
``clock[b][seq(a)]`` counts the events of ``a``'s sequence known to have finished when ``b`` runs.
Used by the MSCCL XML and MSCCL++ plan interpreters.

The search is one pass over the events in happens-before order, keeping per slot its last write and
the reads since (the vector-clock race detectors' scheme): a write is checked against both, a read
against the last write, so the work grows with the accesses, not with their pairs (a plan whose
50,000 operations all touch one slot once took minutes pair by pair). The report names the first
racy slot (by its ``repr``) and, where that slot has at most ``EXACT_PAIRS_UP_TO`` accesses, its
first racing pair in event order, as the pairwise search did.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Callable, Hashable, Sequence

from workbench.util.lazy import lazy_module

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["first_race", "MAX_CLOCK_CELLS", "EXACT_PAIRS_UP_TO"]

# events x sequences of vector-clock memory (int32): 50M cells = 200 MB; bigger programs are refused
MAX_CLOCK_CELLS = 50_000_000
# a racy slot touched this often or less is reported by its first racing pair in event order (a
# pairwise look); a busier one by the pair the single pass found
EXACT_PAIRS_UP_TO = 200


def _topological_order(before: list[list[int]]) -> list[int]:
    """The events in an order where each follows all of ``before[e]`` (Kahn's algorithm, ready events
    first in, first out); shorter than the events when the order has a cycle."""
    total = len(before)
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
    return order


def _vector_clocks(order: list[int], before: list[list[int]], owner, position, sequences: int):
    """Each event's vector clock: per sequence, how many of its events happen before or at it."""
    clock = np.zeros((len(before), sequences), dtype=np.int32)
    for e in order:
        row = clock[e]
        for q in before[e]:
            np.maximum(row, clock[q], out=row)
        row[owner[e]] = position[e] + 1
    return clock


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
    order = _topological_order(before)
    if len(order) < total:
        return None
    clock = _vector_clocks(order, before, owner, position, len(lengths))

    def ordered(a: int, b: int) -> bool:
        return bool(clock[b][owner[a]] > position[a] or clock[a][owner[b]] > position[b])

    # one pass in the happens-before order: per slot, its last write and the reads since. A write is
    # checked against both, a read against the last write; every earlier access is ordered before
    # those (or was reported), so no pair is missed, and each access is checked about once
    found: dict[Hashable, tuple[int, int]] = {}  # a racy slot -> the first racing pair seen
    last_write: dict[Hashable, int] = {}
    reads: dict[Hashable, list[int]] = defaultdict(list)
    for b in order:
        for slot, writes in accesses[b].items():
            if slot in found:
                continue
            a = last_write.get(slot, -1)
            if a >= 0 and not ordered(a, b):
                found[slot] = (a, b)
            elif writes:
                a = next((r for r in reads.get(slot, ()) if not ordered(r, b)), -1)
                if a >= 0:
                    found[slot] = (a, b)
                else:
                    last_write[slot] = b
                    reads.pop(slot, None)
            else:
                reads[slot].append(b)
    if not found:
        return None
    slot = min(found, key=repr)  # the first racy slot in the order the report has always used
    a, b = min(found[slot]), max(found[slot])
    seen = [(e, accesses[e][slot]) for e in range(total) if slot in accesses[e]]
    if len(seen) <= EXACT_PAIRS_UP_TO:  # the slot's first racing pair by event number, as reported before
        a, b = next(((x, y) for i, (x, x_writes) in enumerate(seen) for y, y_writes in seen[i + 1:]
                     if (x_writes or y_writes) and owner[x] != owner[y] and not ordered(x, y)), (a, b))
    return (f"race on {slot_name(slot)}: {describe(a)} {'writes' if accesses[a][slot] else 'reads'} it and "
            f"{describe(b)} {'writes' if accesses[b][slot] else 'reads'} it, and no dependency orders them")
