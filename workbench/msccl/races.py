"""Happens-before analysis of an MSCCL XML: two steps that touch one buffer slot, one of them writing,
with nothing ordering them, race on a GPU.

A threadblock runs its steps in order; a step with ``depid/deps`` starts after that step of its
rank has finished; the k-th message on a connection (sender, receiver, channel) is the k-th send
of the sending threadblock and the k-th receive of the receiving one, and the receive finishes
after the send. Those three orders are the only ones the runtimes guarantee: threadblocks otherwise
run concurrently, in any interleaving. The interpreter's value run (``run.run_xml``) follows one
interleaving; a race-free program gives the same result in all of them, so a race is reported
before the value run, with both steps named.

The order and the search are ``workbench.checking.happens_before``; this module says what the steps of an
MSCCL file order and touch.
"""

from __future__ import annotations

from collections import defaultdict

from workbench.checking.happens_before import first_race
from workbench.msccl.parse import XmlAlgo, XmlStep

__all__ = ["find_race"]

_READS_SRC = {"s", "rrc", "rrs", "rrcs", "cpy", "re"}
_WRITES_DST = {"r", "rcs", "rrc", "rrcs", "cpy", "re"}
_READS_DST = {"rcs", "re"}  # rcs sends what it stored; re adds into its destination


def _add_message_edges(blocks: list, first: list[int], preds: list[list[int]]) -> None:
    """The k-th send on a connection happens before the k-th receive on it."""
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


def _touched(algo: XmlAlgo, rank: int, step: XmlStep) -> dict[tuple[int, str, int], bool]:
    """The slots a step touches, True for those it writes."""
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
    return touched


def find_race(algo: XmlAlgo) -> str | None:
    """The first race found (a sentence naming both steps), or None. Cycles and unmatched messages are
    left to the value run, which names them."""
    blocks = [(rank, tb) for rank in sorted(algo.tbs) for tb in algo.tbs[rank].values()]
    block_index = {(rank, tb.id): b for b, (rank, tb) in enumerate(blocks)}
    steps: list[tuple[int, XmlStep]] = []
    first: list[int] = []  # id of each threadblock's first step
    for rank, tb in blocks:
        first.append(len(steps))
        steps.extend((rank, step) for step in tb.steps)
    preds: list[list[int]] = [[] for _ in steps]
    for b, (rank, tb) in enumerate(blocks):
        for i, step in enumerate(tb.steps):
            if step.depid >= 0:
                target = block_index.get((rank, step.depid))
                if target is not None and 0 <= step.deps < len(blocks[target][1].steps):
                    preds[first[b] + i].append(first[target] + step.deps)
    _add_message_edges(blocks, first, preds)
    accesses = [_touched(algo, rank, step) for rank, step in steps]

    def describe(e: int) -> str:
        step = steps[e][1]
        return f"tb {step.tb} step {step.index} ({step.type})"

    return first_race([len(tb.steps) for _, tb in blocks], preds, accesses, describe,
                      lambda slot: f"rank {slot[0]} {slot[1]}[{slot[2]}]")
