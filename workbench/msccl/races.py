"""Happens-before analysis of an MSCCL XML: two steps that touch one buffer slot, one of them writing,
with nothing ordering them, race on a GPU.

A threadblock runs its steps in order; a step with ``depid/deps`` starts after that step of its
rank has finished; the k-th message on a connection (sender, receiver, channel) is the k-th send
of the sending threadblock and the k-th receive of the receiving one, and the receive finishes
after the send. Those three orders are the only ones the runtimes guarantee: threadblocks otherwise
run concurrently, in any interleaving. The interpreter's value run (``run.run_xml``) follows one
interleaving; a race-free program gives the same result in all of them, so a race is reported
before the value run, with both steps named.

Vector clocks give "a happens before b" in O(1): ``clock[b][tb(a)]`` counts the steps of ``a``'s
threadblock known to have finished when ``b`` runs.
"""

from __future__ import annotations

from collections import defaultdict, deque

import numpy as np

from workbench.msccl.parse import XmlAlgo, XmlStep

__all__ = ["find_race", "MAX_CLOCK_CELLS"]

# steps x threadblocks of vector-clock memory (int32): 50M cells = 200 MB; bigger files are refused
MAX_CLOCK_CELLS = 50_000_000

_READS_SRC = {"s", "rrc", "rrs", "rrcs", "cpy", "re"}
_WRITES_DST = {"r", "rcs", "rrc", "rrcs", "cpy", "re"}
_READS_DST = {"rcs", "re"}  # rcs sends what it stored; re adds into its destination


def _name(step: XmlStep) -> str:
    return f"tb {step.tb} step {step.index} ({step.type})"


def find_race(algo: XmlAlgo) -> str | None:
    """The first race found (a sentence naming both steps), or None. Cycles and unmatched messages are
    left to the value run, which names them."""
    blocks = [(rank, tb) for rank in sorted(algo.tbs) for tb in algo.tbs[rank].values()]
    block_index = {(rank, tb.id): b for b, (rank, tb) in enumerate(blocks)}
    steps: list[XmlStep] = []
    first: list[int] = []  # id of each threadblock's first step
    for _, tb in blocks:
        first.append(len(steps))
        steps.extend(tb.steps)
    if len(steps) * max(len(blocks), 1) > MAX_CLOCK_CELLS:
        raise ValueError(f"{len(steps)} steps in {len(blocks)} threadblocks is too large for the race analysis "
                         f"(limit {MAX_CLOCK_CELLS:,} step-threadblock cells)")
    owner = np.repeat(np.arange(len(blocks)), [len(tb.steps) for _, tb in blocks])
    preds: list[list[int]] = [[] for _ in steps]
    for b, (rank, tb) in enumerate(blocks):
        for i, step in enumerate(tb.steps):
            sid = first[b] + i
            if i:
                preds[sid].append(sid - 1)
            if step.depid >= 0:
                target = block_index.get((rank, step.depid))
                if target is not None and 0 <= step.deps < len(blocks[target][1].steps):
                    preds[sid].append(first[target] + step.deps)
    # k-th send on a connection -> k-th receive on it
    sends: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    receives: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for b, (rank, tb) in enumerate(blocks):
        for i, step in enumerate(tb.steps):
            if step.type in ("s", "rcs", "rrs", "rrcs") and tb.send >= 0:
                sends[(rank, tb.send, tb.chan)].append(first[b] + i)
            if step.type in ("r", "rcs", "rrc", "rrs", "rrcs") and tb.recv >= 0:
                receives[(tb.recv, rank, tb.chan)].append(first[b] + i)
    for key, sent in sends.items():
        for s, r in zip(sent, receives.get(key, [])):
            preds[r].append(s)
    # topological order (Kahn); a cycle is a deadlock, which the value run reports
    successors: list[list[int]] = [[] for _ in steps]
    missing = [len(p) for p in preds]
    for sid, p in enumerate(preds):
        for q in p:
            successors[q].append(sid)
    ready = deque(sid for sid in range(len(steps)) if missing[sid] == 0)
    order = []
    while ready:
        sid = ready.popleft()
        order.append(sid)
        for nxt in successors[sid]:
            missing[nxt] -= 1
            if missing[nxt] == 0:
                ready.append(nxt)
    if len(order) < len(steps):
        return None
    clock = np.zeros((len(steps), len(blocks)), dtype=np.int32)
    position = np.arange(len(steps)) - np.asarray(first, dtype=np.int64)[owner] if steps else np.zeros(0, int)
    for sid in order:
        row = clock[sid]
        for q in preds[sid]:
            np.maximum(row, clock[q], out=row)
        row[owner[sid]] = position[sid] + 1
    # accesses per slot, then every unordered pair with a write
    accesses: dict[tuple[int, str, int], list[tuple[int, bool]]] = defaultdict(list)
    for b, (rank, tb) in enumerate(blocks):
        for i, step in enumerate(tb.steps):
            sid = first[b] + i
            touched: dict[tuple[int, str, int], bool] = {}
            if step.type in _READS_SRC and step.srcoff >= 0:
                for k in range(step.cnt):
                    touched.setdefault((rank, *algo.slot(rank, step.srcbuf, step.srcoff + k)), False)
            if step.type in _READS_DST and step.dstoff >= 0:
                for k in range(step.cnt):
                    touched.setdefault((rank, *algo.slot(rank, step.dstbuf, step.dstoff + k)), False)
            if step.type in _WRITES_DST and step.dstoff >= 0:
                for k in range(step.cnt):
                    touched[(rank, *algo.slot(rank, step.dstbuf, step.dstoff + k))] = True
            for slot, writes in touched.items():
                accesses[slot].append((sid, writes))

    def ordered(a: int, b: int) -> bool:
        return bool(clock[b][owner[a]] > position[a] or clock[a][owner[b]] > position[b])

    for slot in sorted(accesses):
        seen = accesses[slot]
        for x in range(len(seen)):
            a, a_writes = seen[x]
            for y in range(x + 1, len(seen)):
                b, b_writes = seen[y]
                if (a_writes or b_writes) and owner[a] != owner[b] and not ordered(a, b):
                    rank, buf, off = slot
                    return (f"race on rank {rank} {buf}[{off}]: {_name(steps[a])} "
                            f"{'writes' if a_writes else 'reads'} it and {_name(steps[b])} "
                            f"{'writes' if b_writes else 'reads'} it, and no dependency orders them")
    return None
