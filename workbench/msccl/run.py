"""The MSCCL interpreter: runs an XML over contribution sets as the runtimes would."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any, Callable

from workbench.model.collective import Collective, make_collective
from workbench.msccl.common import COLL_NAMES, KNOWN_STEPS, RECEIVING, REDUCING, SENDING, MscclError, raise_race
from workbench.msccl.layout import buffer_layout
from workbench.msccl.parse import XmlAlgo, parse_xml
from workbench.msccl.races import find_race

__all__ = ["run_xml", "collective_of", "initial_buffers", "interpret", "check_races", "check_outputs", "RunResult"]


@dataclass
class _Message:
    values: list
    rank: int
    tb: int
    step: int
    wbid: int | None
    transfer: int = -1
    sent_from: tuple[str, int] = ("i", -1)  # the sender's slot the data left from
    named_src: tuple[str, int] = ("i", -1)  # the sending step's own src field (msccl-tools names this one)
    sent_to: tuple[str, int] = ("o", -1)  # a plain send's peer field: the receiver's slot it names


class RunResult:
    def __init__(self, buffers, transfers, peer_mismatches=()) -> None:
        self.buffers = buffers
        self.transfers = transfers  # (src, dst, chunk ids, op, wbid, dep transfer ids) per matched send/recv
        self.peer_mismatches = list(peer_mismatches)  # sends and receives whose peer fields disagree


def _add(local: list, received: list, where: str) -> list:
    """Slot-wise sum of contribution sets; the two sides must hold the same chunk and no common rank."""
    total = []
    for (chunk, bits), (other, more) in zip(local, received):
        if chunk != other:
            raise MscclError(f"{where}: adds chunk {other} to a slot holding chunk {chunk}")
        if bits & more:
            raise MscclError(f"{where}: the reduction double counts contributions")
        total.append((chunk, bits | more))
    return total


class _Run:
    """One execution of an XML: the slots, the per-threadblock progress, the channel queues and the
    matched transfers, with the steps that move them."""

    def __init__(self, algo: XmlAlgo, initial: dict[tuple[int, str, int], tuple[int, int]], source: str) -> None:
        self.algo = algo
        self.source = source
        self.buffers: dict[tuple[int, str, int], tuple[int, int]] = {
            self.key(*slot): value for slot, value in initial.items()}
        self.writers: dict[tuple[int, str, int], list[int]] = {}
        self.done = {(r, tb.id): 0 for r in algo.tbs for tb in algo.tbs[r].values()}
        self.fifos: dict[tuple[int, int, int], list[_Message]] = {}
        self.transfers: list[dict[str, Any]] = []
        self.step_transfer: dict[tuple[int, int, int], int] = {}
        self.pending_deps: dict[tuple[int, int], list[int]] = {}
        self.mismatches: list[str] = []

    def key(self, rank: int, buf: str, off: int) -> tuple[int, str, int]:
        return (rank, *self.algo.slot(rank, buf, off))

    def place(self, rank: int, buf: str, off: int, where: str) -> tuple[int, str, int]:
        alias, index = self.algo.slot(rank, buf, off)
        limit = self.algo.limit(rank, alias)
        if not 0 <= index < limit:
            raise MscclError(f"{self.source}: {where}: {buf}[{off}] is outside the buffer ({buf}_chunks="
                             f"{self.algo.buffers[rank].get(buf, 0)})")
        return rank, alias, index

    def read(self, rank: int, buf: str, off: int, cnt: int, where: str) -> list:
        values = []
        for i in range(cnt):
            key = self.place(rank, buf, off + i, where)
            if key not in self.buffers:
                raise MscclError(f"{self.source}: {where}: reads {buf}[{off + i}], which holds no data yet")
            values.append(self.buffers[key])
        return values

    def write(self, rank: int, buf: str, off: int, values: list, reduce: bool, where: str, transfer: int) -> None:
        buffers, writers = self.buffers, self.writers
        for i, (chunk, bits) in enumerate(values):
            key = self.place(rank, buf, off + i, where)
            if reduce and key in buffers:
                old_chunk, old_bits = buffers[key]
                if old_bits & bits:
                    raise MscclError(f"{self.source}: {where}: reduce into {buf}[{off + i}] double counts "
                                     "contributions")
                buffers[key] = (old_chunk, old_bits | bits)
                if transfer >= 0:
                    writers.setdefault(key, []).append(transfer)
            else:
                buffers[key] = (chunk, bits)
                writers[key] = [transfer] if transfer >= 0 else []

    def written_by(self, rank: int, buf: str, off: int, cnt: int) -> list[int]:
        """The transfers that wrote ``cnt`` slots from ``buf[off]``, slot by slot."""
        return [w for i in range(cnt) for w in self.writers.get(self.key(rank, buf, off + i), [])]

    def run(self, rng: random.Random | None) -> RunResult:
        algo = self.algo
        remaining = sum(len(tb.steps) for r in algo.tbs for tb in algo.tbs[r].values())
        while remaining:
            progressed = False
            visits = [(rank, tb) for rank in sorted(algo.tbs) for tb in algo.tbs[rank].values()]
            if rng is not None:
                rng.shuffle(visits)
            for rank, tb in visits:
                budget = rng.randint(1, 3) if rng is not None else -1
                while self.done[(rank, tb.id)] < len(tb.steps) and budget != 0:
                    budget -= 1
                    if not self.try_step(rank, tb, tb.steps[self.done[(rank, tb.id)]]):
                        break
                    self.done[(rank, tb.id)] += 1
                    remaining -= 1
                    progressed = True
            if not progressed:
                raise self.deadlock()
        self.check_queues_drained()
        return RunResult(self.buffers, self.transfers, self.mismatches)

    def try_step(self, rank: int, tb, step) -> bool:
        """Run ``step`` of threadblock ``tb``; False (nothing changed) while it must wait."""
        where = f"rank {rank} tb {tb.id} step {step.index} ({step.type})"
        if step.depid >= 0:
            if (rank, step.depid) not in self.done:
                raise MscclError(f"{self.source}: {where}: depends on tb {step.depid}, which does not exist")
            if self.done[(rank, step.depid)] <= step.deps:
                return False
            dep_transfer = self.step_transfer.get((rank, step.depid, step.deps))
            if dep_transfer is not None:
                self.pending_deps.setdefault((rank, tb.id), []).append(dep_transfer)
        message = None
        if step.type in RECEIVING:
            queue = self.fifos.get((tb.recv, rank, tb.chan))
            if not queue:
                return False
            message = queue.pop(0)
            self.check_received(rank, step, message, where)
        inherited = self.pending_deps.pop((rank, tb.id), [])
        self.local_op(rank, tb, step, inherited, where)
        outgoing = None if message is None else self.land(rank, tb, step, message, inherited, where)
        if step.type in SENDING:
            self.send(rank, tb, step, message is not None, outgoing, inherited, where)
        return True

    def check_received(self, rank: int, step, message: _Message, where: str) -> None:
        """The count must match the sender's; peer fields that disagree are noted as mismatches."""
        algo = self.algo
        if len(message.values) != step.cnt:
            raise MscclError(f"{self.source}: {where}: receives cnt {step.cnt} but rank {message.rank} "
                             f"tb {message.tb} step {message.step} sent {len(message.values)}")
        sender = f"rank {message.rank} tb {message.tb} step {message.step}"
        if message.sent_to[1] >= 0 and step.type != "rrs" \
                and algo.slot(rank, *message.sent_to) != algo.slot(rank, step.dstbuf, step.dstoff):
            self.mismatches.append(f"{sender} names {message.sent_to[0]}[{message.sent_to[1]}] as the "
                                   f"destination, but {where} receives into {step.dstbuf}[{step.dstoff}]")
        known = {algo.slot(message.rank, *message.sent_from), algo.slot(message.rank, *message.named_src)}
        if step.type in ("r", "rcs") and step.srcoff >= 0 \
                and algo.slot(message.rank, step.srcbuf, step.srcoff) not in known:
            self.mismatches.append(f"{where} names {step.srcbuf}[{step.srcoff}] as the source, but "
                                   f"{sender} sends from {message.sent_from[0]}[{message.sent_from[1]}]")

    def local_op(self, rank: int, tb, step, inherited: list[int], where: str) -> None:
        """The steps that touch only the rank's own slots: nop (passes its dependencies on), cpy, re."""
        if step.type == "nop":
            self.pending_deps.setdefault((rank, tb.id), []).extend(inherited)
        elif step.type == "cpy":  # the copy keeps what wrote its source (a kept value depends on them)
            writers = [self.writers.get(self.key(rank, step.srcbuf, step.srcoff + i), []) for i in range(step.cnt)]
            self.write(rank, step.dstbuf, step.dstoff, self.read(rank, step.srcbuf, step.srcoff, step.cnt, where),
                       False, where, -1)
            for i in range(step.cnt):
                self.writers[self.key(rank, step.dstbuf, step.dstoff + i)] = list(writers[i])
        elif step.type == "re":
            self.local_reduce(rank, step, where)
        elif step.type not in KNOWN_STEPS:
            raise MscclError(f"{self.source}: {where}: unknown step type {step.type!r} (known: "
                             f"{', '.join(sorted(KNOWN_STEPS))})")

    def local_reduce(self, rank: int, step, where: str) -> None:
        added = self.read(rank, step.srcbuf, step.srcoff, step.cnt, where)
        if any(self.buffers.get(self.key(rank, step.dstbuf, step.dstoff + i), (c, 0))[0] != c
               for i, (c, _) in enumerate(added)):
            raise MscclError(f"{self.source}: {where}: adds a slot holding another chunk")
        self.write(rank, step.dstbuf, step.dstoff, added, True, where, -1)
        for i in range(step.cnt):  # a partial sum landed apart and added here: a reduction
            landed = self.writers.get(self.key(rank, step.srcbuf, step.srcoff + i), [])
            for t in landed:
                if self.transfers[t]["dst"] == rank:
                    self.transfers[t]["op"] = "reduce"
            target = self.writers.setdefault(self.key(rank, step.dstbuf, step.dstoff + i), [])
            target.extend(w for w in landed if w not in target)

    def land(self, rank: int, tb, step, message: _Message, inherited: list[int], where: str) -> tuple | None:
        """Store what arrived (reduced with the local src slots when the step reduces); for ``rrs``
        nothing is stored and the (values, transfers) to send on are returned instead."""
        transfer = message.transfer
        self.transfers[transfer]["deps"].update(inherited)
        self.transfers[transfer]["op"] = "reduce" if step.type in REDUCING else "copy"
        self.step_transfer[(rank, tb.id, step.index)] = transfer
        values, sources = message.values, [transfer]
        if step.type in REDUCING:  # the runtime adds the local src slots to what arrived
            local = self.read(rank, step.srcbuf, step.srcoff, step.cnt, where)
            values = _add(local, values, f"{self.source}: {where}")
            sources = self.written_by(rank, step.srcbuf, step.srcoff, step.cnt) + [transfer]
        if step.type == "rrs":  # reduce and send on, nothing stored
            return values, sources
        self.write(rank, step.dstbuf, step.dstoff, values, False, where, transfer)
        for i in range(step.cnt):
            self.writers[self.key(rank, step.dstbuf, step.dstoff + i)] = list(dict.fromkeys(sources))
        return None

    def send(self, rank: int, tb, step, received: bool, outgoing: tuple | None, inherited: list[int],
             where: str) -> None:
        if tb.send < 0:
            raise MscclError(f"{self.source}: {where}: sends, but the threadblock has no send peer")
        buf, off = (step.dstbuf, step.dstoff) if received else (step.srcbuf, step.srcoff)
        if step.type == "rrs":
            buf, off = step.srcbuf, step.srcoff
        if outgoing is None:
            values = self.read(rank, buf, off, step.cnt, where)
            written = self.written_by(rank, buf, off, step.cnt)
        else:
            values, written = outgoing
        deps = set(inherited) | set(written)
        transfer = len(self.transfers)
        wbid = step.wbid_send if step.wbid_send is not None else step.wbid
        self.transfers.append({"src": rank, "dst": tb.send, "chunks": [v[0] for v in values],
                               "bits": [v[1] for v in values], "wbid": wbid, "deps": deps, "op": "copy"})
        self.step_transfer[(rank, tb.id, step.index)] = transfer
        self.fifos.setdefault((rank, tb.send, tb.chan), []).append(
            _Message(values, rank, tb.id, step.index, wbid, transfer, (buf, off),
                     (step.srcbuf, step.srcoff),
                     (step.dstbuf, step.dstoff) if step.type == "s" else ("o", -1)))

    def deadlock(self) -> MscclError:
        blocked = []
        for rank in sorted(self.algo.tbs):
            for tb in self.algo.tbs[rank].values():
                if self.done[(rank, tb.id)] < len(tb.steps):
                    step = tb.steps[self.done[(rank, tb.id)]]
                    if step.depid >= 0 and self.done.get((rank, step.depid), 0) <= step.deps:
                        why = f"waits on tb {step.depid} step {step.deps}"
                    else:
                        why = f"waits for a message from rank {tb.recv} on channel {tb.chan}"
                    blocked.append(f"rank {rank} tb {tb.id} step {step.index} ({step.type}) {why}")
        return MscclError(f"{self.source}: deadlock: no step can make progress; " + "; ".join(blocked[:3])
                          + (f"; and {len(blocked) - 3} more" if len(blocked) > 3 else ""))

    def check_queues_drained(self) -> None:
        for (src, dst, chan), queue in self.fifos.items():
            if queue:
                m = queue[0]
                raise MscclError(f"{self.source}: send/receive mismatch: rank {m.rank} tb {m.tb} step {m.step} "
                                 f"sends to rank {dst} on channel {chan}, but no receive takes it")


def run_xml(algo: XmlAlgo, initial: dict[tuple[int, str, int], tuple[int, int]], source: str,
            rng: random.Random | None = None) -> RunResult:
    """Execute; each slot holds (chunk id, contribution bitset).

    Without ``rng`` the threadblocks run in one fixed order (rank, then threadblock, each as far as it
    can); with it, every pass visits them in a random order and runs each for a random 1-3 steps, one
    of the interleavings a GPU may produce.
    """
    return _Run(algo, initial, source).run(rng)


def collective_of(algo: XmlAlgo, root: int | None = None) -> Collective:
    """The workbench collective an MSCCL XML algorithm implements: ``nchunksperloop`` chunks for
    broadcast and reduce, that over ``ngpus`` per rank otherwise; ``MscclError`` when unsupported."""
    kind = {"reduce_scatter": "reducescatter"}.get(algo.coll, algo.coll)
    n = algo.ngpus
    if kind not in COLL_NAMES:
        raise MscclError(f"collective {algo.coll!r} is not one the workbench can check")
    per = algo.nchunksperloop if kind in ("broadcast", "reduce") else algo.nchunksperloop // n
    if per < 1:
        raise MscclError(f"nchunksperloop={algo.nchunksperloop} is too small for {n} ranks")
    return make_collective(kind, n, per, root)


def initial_buffers(collective: Collective) -> dict:
    """Input buffers before the run: ``(rank, "i", offset) -> (chunk, contribution bitset)``, the
    rank's own bit in a combining collective, the chunk's full set otherwise."""
    inputs, _, _, _ = buffer_layout(collective)
    full, _ = collective.masks()
    initial = {}
    for (rank, chunk), off in inputs.items():
        bits = (1 << rank) if collective.combining else full[chunk]
        initial[(rank, "i", off)] = (chunk, bits)
    return initial


def check_races(algo: XmlAlgo, source: str) -> None:
    """MscclError naming both steps of the first race (``races.find_race``)."""
    raise_race(lambda: find_race(algo), source)


def check_outputs(collective: Collective, value_at: Callable[[int, int], tuple[int, int] | None], source: str,
                  schedule: str = "", who: str = "rank") -> None:
    """MscclError naming the first output slot that does not hold its chunk's full data at the end;
    ``value_at(rank, offset)`` is the (chunk, contributions) of output slot ``o[offset]``."""
    _, outputs, _, _ = buffer_layout(collective)
    full, _ = collective.masks()
    for (rank, chunk), off in sorted(outputs.items()):
        value = value_at(rank, off)
        if value is None or value[1] != full[chunk]:
            have = "nothing" if value is None else f"contributions {bin(value[1])}"
            raise MscclError(f"{source}: {schedule}{who} {rank}: output o[{off}] (chunk {chunk}) must hold the full "
                             f"data at the end, holds {have}")


def _check_outputs(algo: XmlAlgo, result: RunResult, collective: Collective, source: str,
                   schedule: str = "") -> None:
    check_outputs(collective, lambda rank, off: result.buffers.get((rank, *algo.slot(rank, "o", off))), source,
                  schedule)


def interpret(text: str, source: str = "xml", root: int | None = None, schedules: int = 0,
              seed: int = 0) -> dict[str, Any]:
    """Run the XML as the runtime would and check it; MscclError on failure.

    Checks, in order: what the file declares (``validate``: sizes against the memory budget, with
    ``schedules`` x steps under the size guard's cap, and every index it names), then for each
    aliasing the file declares (``XmlAlgo.aliasings``: out of place, in place, or both for a file with
    ``inplace="1" outofplace="1"``): a happens-before analysis over all interleavings (``races``), one
    run in a fixed order (deadlocks, send/receive mismatches, reads of empty slots), the peer fields
    of every matched send and receive (when filled, they must name each other's slots), the
    postconditions; then ``schedules`` more runs in random interleavings (seeds ``seed``, ``seed + 1``, ...).
    """
    from workbench.util import size_guard

    algo = parse_xml(text, source)
    aliasings = algo.aliasings()
    size_guard.check_runs(source, schedules,  # each run once per aliasing
                          len(aliasings) * sum(len(tb.steps) for r in algo.tbs for tb in algo.tbs[r].values()))
    collective = collective_of(algo, root)
    transfers = 0
    for in_place in aliasings:
        checked = replace(algo, checked_in_place=in_place)
        where = f"{source} (in place)" if in_place and len(aliasings) > 1 else source
        transfers = _check_one_aliasing(checked, collective, where, schedules, seed)
    return {"ranks": algo.ngpus, "transfers": transfers, "collective": collective.kind,
            "schedules": schedules, "in_place": algo.in_place,
            "aliasings": ["in place" if a else "out of place" for a in aliasings]}


def _check_one_aliasing(algo: XmlAlgo, collective: Collective, source: str, schedules: int, seed: int) -> int:
    """Races, the fixed-order run, peer fields, postconditions and the random runs of ``interpret``
    for the aliasing ``algo`` is set to; the number of matched transfers."""
    check_races(algo, source)
    result = run_xml(algo, initial_buffers(collective), source)
    if result.peer_mismatches:
        more = len(result.peer_mismatches) - 1
        raise MscclError(f"{source}: peer fields disagree: {result.peer_mismatches[0]}"
                         + (f" (and {more} more)" if more else ""))
    _check_outputs(algo, result, collective, source)
    for i in range(schedules):
        label = f"random schedule {i + 1} (seed {seed + i}): "
        try:
            other = run_xml(algo, initial_buffers(collective), source, random.Random(seed + i))
        except MscclError as exc:
            raise MscclError(f"{label}{exc}") from None
        _check_outputs(algo, other, collective, source, label)
    return len(result.transfers)
