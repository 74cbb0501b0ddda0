"""Lowering an algorithm into MSCCL XML (see the package docstring)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from workbench.model.algorithm import Algorithm
from workbench.msccl.common import COLL_NAMES, LIMITS, MscclError
from workbench.msccl.kept import ScratchPlaces
from workbench.msccl.layout import contiguous_runs, in_place_slot, refine, working_slots

__all__ = ["export_xml"]


@dataclass(eq=False)
class _Step:
    type: str
    srcbuf: str = "i"
    srcoff: int = -1
    dstbuf: str = "o"
    dstoff: int = -1
    cnt: int = 1
    wbid: int = -1  # the transfer a send or receive belongs to
    wbid_send: int = -1  # for a fused receive-and-forward: the forwarded transfer
    order: tuple = ()  # plan position, for merging threadblocks
    waits: list["_Step"] = field(default_factory=list)
    block: Any = None


@dataclass(eq=False)
class _Tb:
    send: int = -1
    recv: int = -1
    chan: int = 0
    steps: list[_Step] = field(default_factory=list)


class _Hazards:
    """Per buffer slot, the last step that wrote it and the steps that read it since. A slot is keyed
    as it is out of place and as it is in place (``layout.in_place_slot``), so the order holds in both.

    Threadblocks run concurrently on a GPU, so two steps of different threadblocks that touch one
    slot, one writing, must be ordered by a dependency: two reductions into one slot (two
    neighbours' partial sums) would otherwise lose an update, and a receive could overwrite data a
    send is still reading. The plan's order decides who goes first; every write waits for the
    slot's previous write and reads, every read for its previous write.
    """

    def __init__(self) -> None:
        self.last_write: dict[tuple, _Step] = {}
        self.reads: dict[tuple, list[_Step]] = {}

    def before_read(self, slots: list[tuple]) -> list[_Step]:
        return [self.last_write[s] for s in slots if s in self.last_write]

    def before_write(self, slots: list[tuple]) -> list[_Step]:
        return self.before_read(slots) + [r for s in slots for r in self.reads.get(s, [])]

    def concurrent_reduction(self, slots: list[tuple], block: "_Tb", waits: list[_Step]) -> bool:
        """Whether a reduction into ``slots`` may overlap one received by another threadblock: the last
        write of a slot is a network receive elsewhere that the plan does not directly wait for."""
        for s in slots:
            last = self.last_write.get(s)
            if last is not None and last.type in ("r", "rrc", "re") and last.block is not block \
                    and last not in waits:
                return True
        return False

    def read(self, slots: list[tuple], step: _Step) -> None:
        for s in slots:
            self.reads.setdefault(s, []).append(step)

    def write(self, slots: list[tuple], step: _Step) -> None:
        for s in slots:
            self.last_write[s] = step
            self.reads[s] = []


def _place(block: _Tb, step: _Step, waits: list[_Step]) -> _Step:
    step.waits = list(dict.fromkeys(waits))
    step.block = block
    block.steps.append(step)
    return step


class _Lowering:
    """The threadblocks of every rank being built from a refined algorithm: the local copies in (and
    the kept inputs, ``kept``), one send and one receive per contiguous run of each transfer (and the
    values kept after it), the local copies out."""

    def __init__(self, algorithm: Algorithm, base_count: int) -> None:
        self.algorithm = algorithm
        self.base_count = base_count
        n = algorithm.collective.num_ranks
        (self.location, self.copies_in, self.copies_out, s_chunks, self.inputs, self.outputs,
         self.i_chunks, self.o_chunks) = working_slots(algorithm)
        self.tbs: list[dict[Any, _Tb]] = [{} for _ in range(n)]
        self.copy_step: dict[tuple[int, int], _Step] = {}
        self.hazards = _Hazards()
        self.send_at: dict[int, list[_Step]] = {}
        self.recv_at: dict[int, list[_Step]] = {}
        self.writes_into: dict[tuple[int, int], list[_Step]] = {}
        self.places = ScratchPlaces(algorithm, self.location, self.outputs, self.copies_in, s_chunks)

    def keys(self, rank: int, place: tuple[str, int]) -> list[tuple]:
        """The slot ``place`` of ``rank`` as the hazards know it: out of place and in place."""
        c = self.algorithm.collective
        aliased = (rank, *in_place_slot(c.kind, c.chunks_per_rank, rank, *place))
        own = (rank, *place)
        return [own] if aliased == own else [own, aliased]

    def tb(self, rank: int, key) -> _Tb:
        if key not in self.tbs[rank]:
            kind, peer, chan = key
            self.tbs[rank][key] = _Tb(send=peer if kind == "send" else -1, recv=peer if kind == "recv" else -1,
                                      chan=chan)
        return self.tbs[rank][key]

    def local_copy(self, rank: int, block: _Tb, source: tuple[str, int], target: tuple[str, int],
                   order: tuple, waits: list[_Step], count: int = 1) -> _Step:
        """A ``cpy`` of ``count`` slots, ordered after the slots' earlier accesses."""
        hazards = self.hazards
        reads = [key for i in range(count) for key in self.keys(rank, (source[0], source[1] + i))]
        writes = [key for i in range(count) for key in self.keys(rank, (target[0], target[1] + i))]
        step = _place(block, _Step("cpy", *source, *target, count, order=order),
                      waits + hazards.before_read(reads) + hazards.before_write(writes))
        hazards.read(reads, step)
        hazards.write(writes, step)
        return step

    def keep(self, rank: int, block: _Tb, sources: list[tuple[int, tuple[str, int]]], tag: tuple,
             order: tuple) -> None:
        """Copy (chunk, place) pairs into fresh contiguous scratch (``ScratchPlaces.keep``), one
        ``cpy`` per run."""
        for run, (source, target, count) in enumerate(self.places.keep(rank, sources, tag)):
            self.local_copy(rank, block, source, target, order + (run,), [], count)

    def copy_inputs(self) -> None:
        local = self.tb
        for rank, chunk in self.copies_in:
            self.copy_step[(rank, chunk)] = self.local_copy(
                rank, local(rank, ("local", -1, 0)), ("i", self.inputs[(rank, chunk)]), self.location[(rank, chunk)],
                (-1, chunk), [])
        by_rank: dict[int, list[int]] = {}
        for rank, chunk in sorted(self.places.kept.input_copies):  # kept before anything can overwrite them
            by_rank.setdefault(rank, []).append(chunk)
        for rank, chunks in by_rank.items():
            sources = sorted(((c, ("i", self.inputs[(rank, c)])) for c in chunks), key=lambda p: p[1])
            self.keep(rank, local(rank, ("local", -1, 0)), sources, ("input", rank), (-1, -1))

    def add_dependency_waits(self, t, send_waits: list[_Step], recv_waits: list[_Step]) -> None:
        """Each dependency of ``t`` becomes a wait of its send (on the source rank) or its receive."""
        for d in t.deps:
            dep = self.algorithm.transfers[d]
            if t.src in (dep.src, dep.dst):
                send_waits += self.recv_at[d] if dep.dst == t.src else self.send_at[d]
            elif t.dst in (dep.src, dep.dst):
                recv_waits += self.recv_at[d] if dep.dst == t.dst else self.send_at[d]
            else:
                raise MscclError(f"transfer {t.id}: its dependency on transfer {d} ({dep.src} -> {dep.dst}) "
                                 f"involves neither rank {t.src} nor rank {t.dst}; MSCCL steps can only wait "
                                 "on steps of their own rank")

    def lower(self, t) -> None:
        chan = t.id // self.base_count  # the instance
        src_places = [self.places.read_place(t, c) for c in t.chunks]
        dst_places = [self.location[(t.dst, c)] for c in t.chunks]
        send_waits = [self.copy_step[(t.src, c)] for c in t.chunks if (t.src, c) in self.copy_step]
        recv_waits = [self.copy_step[(t.dst, c)] for c in t.chunks if (t.dst, c) in self.copy_step]
        self.add_dependency_waits(t, send_waits, recv_waits)
        send_tb = self.tb(t.src, ("send", t.dst, chan))
        recv_tb = self.tb(t.dst, ("recv", t.src, chan))
        self.send_at[t.id], self.recv_at[t.id] = [], []
        for run, (first, count) in enumerate(contiguous_runs(src_places, dst_places)):  # one message per contiguous run
            self.lower_run(t, run, (first, count), (src_places, dst_places), (send_tb, recv_tb),
                           (send_waits, recv_waits))
        for c in t.chunks:
            self.writes_into.setdefault((t.dst, c), []).extend(self.recv_at[t.id])
        if t.id in self.places.kept.after:  # what a later send reads as "after t"
            sources = sorted(((c, self.location[(t.dst, c)]) for c in self.places.kept.after[t.id]), key=lambda p: p[1])
            self.keep(t.dst, recv_tb, sources, ("after", t.id), (t.id, len(t.chunks)))

    def lower_run(self, t, run: int, span: tuple[int, int], places, blocks, waits) -> None:
        first, count = span
        (sbuf, soff), (dbuf, doff) = places[0][first], places[1][first]
        send_tb, recv_tb = blocks
        send_waits, recv_waits = waits
        hazards, keys = self.hazards, self.keys
        reads = [key for place in places[0][first:first + count] for key in keys(t.src, place)]
        writes = [key for place in places[1][first:first + count] for key in keys(t.dst, place)]
        # peer fields as msccl-tools fills them: a send names the receiver's slot, a receive the sender's
        send = _place(send_tb, _Step("s", sbuf, soff, dbuf, doff, count, wbid=t.id, order=(t.id, run)),
                      send_waits + hazards.before_read(reads))
        self.send_at[t.id].append(send)
        hazards.read(reads, send)
        if t.op == "reduce" and (t.id in self.places.kept.landing_apart
                                 or hazards.concurrent_reduction(writes, recv_tb, recv_waits)):
            # another receive threadblock may still be adding into these slots (or a later send reads
            # what arrived): land the partial sum in fresh scratch and add it locally once that one is
            # done (no read-modify-write race, and the network transfer keeps the plan's timing)
            landing = self.places.take(t.dst, count)
            send.dstbuf, send.dstoff = "s", landing
            landed = _place(recv_tb, _Step("r", sbuf, soff, "s", landing, count, wbid=t.id, order=(t.id, run)),
                            recv_waits)
            hazards.write([key for i in range(count) for key in keys(t.dst, ("s", landing + i))], landed)
            for i, c in enumerate(t.chunks[first:first + count]):
                self.places.at[("carried", t.id, c)] = ("s", landing + i)
            receive = _Step("re", "s", landing, dbuf, doff, count, order=(t.id, run, 1))
            self.recv_at[t.id].append(_place(recv_tb, receive, hazards.before_write(writes)))
        else:
            if t.op == "reduce":  # recv-reduce-copy: dst = src + received, both local
                receive = _Step("rrc", dbuf, doff, dbuf, doff, count, wbid=t.id, order=(t.id, run))
            else:
                receive = _Step("r", sbuf, soff, dbuf, doff, count, wbid=t.id, order=(t.id, run))
            self.recv_at[t.id].append(_place(recv_tb, receive, recv_waits + hazards.before_write(writes)))
        hazards.write(writes, receive)

    def copy_outputs(self) -> None:
        copy_step = self.copy_step
        for rank, chunk in self.copies_out:  # a reduction's result into its output slot, after every write
            waits = self.writes_into.get((rank, chunk), []) + (
                [copy_step[(rank, chunk)]] if (rank, chunk) in copy_step else [])
            self.local_copy(rank, self.tb(rank, ("local", -1, 0)), self.location[(rank, chunk)],
                            ("o", self.outputs[(rank, chunk)]), (len(self.algorithm.transfers), chunk), waits)


def _check_options(proto: str, instances: int) -> None:
    if proto not in ("Simple", "LL", "LL128"):
        raise MscclError(f"--proto must be Simple, LL or LL128, got {proto!r}")
    if instances < 1:
        raise MscclError("--instances must be at least 1")


def _one_iteration(algorithm: Algorithm) -> Algorithm:
    """A periodic schedule is one iteration of the runtime's loop; others are returned as they are."""
    if algorithm.period is None:
        return algorithm
    from workbench.model.periodic import PeriodError, loop_body

    try:
        return loop_body(algorithm)
    except PeriodError as exc:
        raise MscclError(str(exc)) from None


def _check_gpu_ends(algorithm: Algorithm) -> None:
    """A GPU at both ends of every transfer; one ending or starting at a switch is refused in one line
    (a switch that reduces: MSCCL XML has no in-switch reduction or multicast at all)."""
    topology = algorithm.topology
    for t in algorithm.transfers:
        for end in (t.src, t.dst):
            if topology.is_switch(end) and topology.reduces(end):
                raise MscclError(f"transfer {t.id} ({t.src} -> {t.dst}, {t.op}): node {end} is a switch; MSCCL "
                                 "addresses GPUs only and has no in-switch reduction or multicast (NVLS, SHARP); "
                                 "export NVLS schedules with --format mscclpp")
            if topology.is_switch(end):
                raise MscclError(f"transfer {t.id}: node {end} is a switch; MSCCL addresses GPUs only "
                                 "(synthesize on the unwound view, or route through the switch)")


def export_xml(algorithm: Algorithm, proto: str = "Simple", instances: int = 1, max_bytes: float | None = None,
               name: str | None = None, fuse: bool = True, min_bytes: float | None = None) -> str:
    """Lower an algorithm into MSCCL XML (see the module docstring). ``min_bytes``/``max_bytes``:
    the size range the executor picks it for, both ends inclusive (default 0 and 0: every size)."""
    _check_options(proto, instances)
    from workbench.util import size_guard

    algorithm = _one_iteration(algorithm)
    c = algorithm.collective  # every transfer and chunk again per instance: sized before refine() builds them
    size_guard.check_declared(f"--instances {instances}", [("", size_guard.instances_bytes(
        c.kind, c.num_ranks, c.chunks_per_rank, len(algorithm.transfers), instances))])
    _check_gpu_ends(algorithm)
    base_count = len(algorithm.transfers)
    algorithm = refine(algorithm, instances)
    collective = algorithm.collective
    n = collective.num_ranks
    lowering = _Lowering(algorithm, base_count)
    lowering.copy_inputs()
    for t in algorithm.transfers:
        lowering.lower(t)
    lowering.copy_outputs()
    blocks = [list(lowering.tbs[rank].values()) for rank in range(n)]
    if fuse:
        blocks = [_fuse(rank_blocks) for rank_blocks in blocks]
    numbered = [_expand(rank_blocks) for rank_blocks in blocks]
    _check_limits(numbered, n)
    channels = max((b.chan for rank_blocks in numbered for b in rank_blocks), default=0) + 1
    i_chunks, o_chunks = lowering.i_chunks, lowering.o_chunks
    nchunks = max(i_chunks, o_chunks)  # n*k, or k for broadcast and reduce
    root = ET.Element("algo", {
        "name": (name or f"{algorithm.meta.get('formulation', 'workbench')}_{collective.kind}_{n}")[:63],
        "proto": proto, "nchannels": str(channels), "nchunksperloop": str(nchunks), "ngpus": str(n),
        "coll": COLL_NAMES.get(collective.kind, "custom"), "inplace": "1", "outofplace": "1",
        "minBytes": str(int(min_bytes)) if min_bytes else "0", "maxBytes": str(int(max_bytes)) if max_bytes else "0", "redop": "sum"})
    for rank in range(n):
        gpu = ET.SubElement(root, "gpu", {"id": str(rank), "i_chunks": str(i_chunks), "o_chunks": str(o_chunks),
                                          "s_chunks": str(lowering.places.top[rank])})
        _add_threadblocks(gpu, numbered[rank])
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


def _add_threadblocks(gpu: ET.Element, blocks: list[_Tb]) -> None:
    """One ``tb`` element per threadblock of a rank, each step waiting on its first wait by position."""
    position = {step: (block_id, index) for block_id, block in enumerate(blocks)
                for index, step in enumerate(block.steps)}
    waited = {step.waits[0] for block in blocks for step in block.steps if step.waits}
    for block_id, block in enumerate(blocks):
        node = ET.SubElement(gpu, "tb", {"id": str(block_id), "send": str(block.send), "recv": str(block.recv),
                                         "chan": str(block.chan)})
        for index, step in enumerate(block.steps):
            depid, deps = position[step.waits[0]] if step.waits else (-1, -1)
            attrs = {"s": str(index), "type": step.type, "srcbuf": step.srcbuf, "srcoff": str(step.srcoff),
                     "dstbuf": step.dstbuf, "dstoff": str(step.dstoff), "cnt": str(step.cnt),
                     "depid": str(depid), "deps": str(deps), "hasdep": "1" if step in waited else "0"}
            if step.wbid >= 0:
                attrs["wbid"] = str(step.wbid)
            if step.wbid_send >= 0:
                attrs["wbid_send"] = str(step.wbid_send)
            ET.SubElement(node, "step", attrs)


def _fuse(blocks: list[_Tb]) -> list[_Tb]:
    """Merge a receive threadblock with the send threadblock that forwards its data (same channel), then
    turn each receive immediately followed by the send that only waits on it into one rcs/rrcs step."""
    receivers = [b for b in blocks if b.recv >= 0]
    senders = [b for b in blocks if b.send >= 0]
    taken: set[int] = set()
    merged: dict[int, _Tb] = {}
    for r in receivers:
        best, best_count = None, 0
        for s in senders:
            if id(s) in taken or s.chan != r.chan or s.send == r.recv:
                continue
            count = sum(1 for step in s.steps if step.waits and step.waits[-1].block is r)
            if count > best_count:
                best, best_count = s, count
        if best is None:
            continue
        taken.add(id(best))
        block = _Tb(send=best.send, recv=r.recv, chan=r.chan,
                    steps=sorted(r.steps + best.steps, key=lambda st: (st.order, st.type != "r" and st.type != "rrc")))
        for step in block.steps:
            step.block = block
        merged[id(r)] = block
        merged[id(best)] = None
    result = []
    for b in blocks:
        if id(b) in merged:
            if merged[id(b)] is not None:
                result.append(_fuse_steps(merged[id(b)]))
        else:
            result.append(b)
    return result


def _fuse_steps(block: _Tb) -> _Tb:
    steps: list[_Step] = []
    for step in block.steps:
        previous = steps[-1] if steps else None
        if (previous is not None and step.type == "s" and previous.type in ("r", "rrc") and previous in step.waits
                and set(step.waits) <= set(previous.waits) | {previous}  # nothing to wait for beyond the receive
                and (step.srcbuf, step.srcoff, step.cnt) == (previous.dstbuf, previous.dstoff, previous.cnt)):
            previous.type = "rcs" if previous.type == "r" else "rrcs"  # src stays the sender's slot (rcs) or local (rrcs)
            previous.wbid_send = step.wbid
            step.type = "fused"  # later steps that waited on the send now wait on the fused step
            step.waits = [previous]
            continue
        steps.append(step)
    block.steps = steps
    return block


def _expand(blocks: list[_Tb]) -> list[_Tb]:
    """Final step lists: waits redirected past fused sends, redundant same-threadblock waits dropped,
    and every step with several waits preceded by nops (one dependency per step)."""
    def resolve(step: _Step) -> _Step:
        while step.type == "fused":
            step = step.waits[0]
        return step

    for block in blocks:
        expanded: list[_Step] = []
        for step in block.steps:
            waits = list(dict.fromkeys(resolve(w) for w in step.waits))
            waits = [w for w in waits if w.block is not block]  # program order covers these
            for w in waits[:-1]:
                expanded.append(_Step("nop", "i", -1, "o", -1, 0, waits=[w], block=block))
            step.waits = waits[-1:]
            expanded.append(step)
        block.steps = expanded
    return blocks


def _check_limits(blocks: list[list[_Tb]], n: int) -> None:
    for rank in range(n):
        if len(blocks[rank]) > LIMITS["MSCCL_MAX_NUM_THREAD_BLOCKS"]:
            raise MscclError(f"rank {rank} needs {len(blocks[rank])} threadblocks; the runtime allows "
                             f"MSCCL_MAX_NUM_THREAD_BLOCKS = {LIMITS['MSCCL_MAX_NUM_THREAD_BLOCKS']}")
        per_channel: dict[tuple[int, str], int] = {}
        for block_id, block in enumerate(blocks[rank]):
            if len(block.steps) > LIMITS["MSCCL_MAX_NUM_STEPS"]:
                raise MscclError(f"rank {rank} threadblock {block_id} needs {len(block.steps)} steps; the runtime "
                                 f"allows MSCCL_MAX_NUM_STEPS = {LIMITS['MSCCL_MAX_NUM_STEPS']} per threadblock")
            for step in block.steps:
                if step.cnt >= LIMITS["MSCCL_MAX_COUNT"]:
                    raise MscclError(f"rank {rank} threadblock {block_id}: cnt {step.cnt} is not below "
                                     f"MSCCL_MAX_COUNT = {LIMITS['MSCCL_MAX_COUNT']}")
            for kind, peer in (("send", block.send), ("recv", block.recv)):
                if peer >= 0:
                    per_channel[(block.chan, kind)] = per_channel.get((block.chan, kind), 0) + 1
        for (chan, kind), count in per_channel.items():
            if count > LIMITS["MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL"]:
                raise MscclError(f"rank {rank} has {count} {kind} peers on channel {chan}; the runtime allows "
                                 f"MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL = "
                                 f"{LIMITS['MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL']}")


