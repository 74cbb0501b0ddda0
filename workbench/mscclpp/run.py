"""An interpreter of MSCCL++ execution plans: races first, then a run over contribution sets.

Operations (the subset our export writes, and what a hand-written plan for these collectives
needs): ``copy`` (local src -> dst), ``re`` (dst = src[0] + src[1] + ...), ``put`` (local src into a
peer's buffer named by ``buffer_id``), ``get`` (a peer's buffer into a local one), ``signal`` /
``wait`` (the k-th wait on the channel from a peer returns after that peer's k-th signal on its
channel to us), ``rlxsignal`` / ``rlxwait`` (the relaxed forms: they count on the same semaphore,
so a relaxed wait pairs with the k-th signal of either kind, but mscclpp promises nothing about the
memory operations before them, so a pair with a relaxed end orders execution only, not data),
``flush`` and ``nop``.

NVLS (``switch`` channels: a gpu's channel entry with ``buffer_type`` and ``rank_groups``, one
switch channel per rank group, referenced by a threadblock's ``channel_ids`` and by an operation's
buffer reference ``{"switch_channel_id", "index", "size"}``): ``glres`` load-reduces
``src_buff[0]`` (the sum of that range over every gpu of the channel's group, ``reduce_op`` "sum")
and stores the sum to ``dst_buff[0]`` on every gpu of its channel's group, the issuer included
(multimem ld_reduce + st); ``gstore`` stores a local ``src_buff[0]`` to ``dst_buff[0]`` on every
gpu of the group (multimem st). Each is one operation reading and writing those gpus' slots.

Each threadblock runs its operations in order; threadblocks run concurrently. The happens-before
order (program order, signal -> wait) is checked for two unordered accesses to one slot, one a write
(``workbench.checking.happens_before``), naming both operations; then the plan is executed and every
postcondition of the collective checked.
"""

from __future__ import annotations

import copy
import itertools
import random
from typing import Any

from workbench.model.collective import Collective, make_collective
from workbench.checking.happens_before import first_race
from workbench.msccl.common import MscclError, MscclFormatError, raise_race
from workbench.msccl.layout import in_place_slot
from workbench.msccl.run import check_outputs, initial_buffers

__all__ = ["interpret_plan", "parse_plan"]

_SUPPORTED = ("copy", "re", "put", "get", "signal", "wait", "rlxsignal", "rlxwait", "flush", "nop", "glres",
              "gstore")
_SIGNALS = ("signal", "rlxsignal")
_WAITS = ("wait", "rlxwait")


class _Op:
    """One operation with its buffer references resolved to (rank, buffer, index, size)."""

    def __init__(self, rank: int, tb: int, index: int, name: str) -> None:
        self.rank, self.tb, self.index, self.name = rank, tb, index, name
        self.reads: list[tuple[int, str, int, int]] = []
        self.writes: list[tuple[int, str, int, int]] = []
        self.channel: tuple[str, int] | None = None  # (channel type, peer) of a signal or wait
        self.relaxed = name in ("rlxsignal", "rlxwait")  # orders execution, not memory

    def where(self) -> str:
        return f"gpu {self.rank} tb {self.tb} op {self.index} ({self.name})"


class _Wiring:
    """What an operation's channel and buffer references resolve against: the gpu's peers per
    channel type and its remote buffers, the threadblock's channels and remote-buffer references."""

    def __init__(self, peers: dict[str, list[int]], remote: list, channels: dict[str, list[int]],
                 refs: dict[str, list[int]], switches: list[tuple[str, list[int]]]) -> None:
        self.peers, self.remote, self.channels, self.refs = peers, remote, channels, refs
        self.switches = switches  # the gpu's switch channels: (buffer type, ranks of the group)


class _PlanReader:
    """Reads the fields of a plan, each checked for presence and type and named when wrong."""

    def __init__(self, source: str) -> None:
        from workbench.util.safe_load import shorten

        self.source = source
        self.shorten = shorten

    def need(self, obj: Any, key: str, where: str, kind: type = int, default: Any = None) -> Any:
        """``obj[key]`` of type ``kind``; ``default`` (when given) for a missing key."""
        source, shorten = self.source, self.shorten
        if not isinstance(obj, dict):
            raise MscclFormatError(f"{source}: {where}: expected an object, got {shorten(obj)}")
        if key not in obj and default is not None:
            return default
        if key not in obj:
            raise MscclFormatError(f"{source}: {where}: missing field {key!r}")
        value = obj[key]
        if kind is int and (not isinstance(value, int) or isinstance(value, bool)):
            raise MscclFormatError(f"{source}: {where}: field {key!r} must be an integer, got {shorten(value)}")
        if kind in (list, str) and not isinstance(value, kind):
            raise MscclFormatError(f"{source}: {where}: field {key!r} must be a {kind.__name__}, got "
                                   f"{shorten(value)}")
        return value

    def check_header(self, plan: dict[str, Any]) -> None:
        """``inplace`` a boolean; every gpu's chunk counts integers and its id its position."""
        if not isinstance(plan.get("inplace", False), bool):  # by type: the string "no" is not true
            raise MscclFormatError(f"{self.source}: field 'inplace' must be true or false, got "
                                   f"{self.shorten(plan['inplace'])}")
        for rank, gpu in enumerate(plan["gpus"]):
            for key in ("input_chunks", "output_chunks", "scratch_chunks"):
                self.need(gpu, key, f"gpus[{rank}]", int, 0)
            if self.need(gpu, "id", f"gpus[{rank}]") != rank:
                raise MscclError(f"{self.source}: gpus[{rank}]: id {gpu['id']} (gpus must be listed in rank order)")

    def read_gpu(self, rank: int, gpu: dict) -> list[list[_Op]]:
        need, where = self.need, f"gpu {rank}"
        peers: dict[str, list[int]] = {"memory": [], "port": []}
        switches: list[tuple[str, list[int]]] = []
        for c, channel in enumerate(need(gpu, "channels", where, list)):
            kind = need(channel, "channel_type", f"{where} channels", str)
            if kind == "switch":
                switches.extend(self.read_switch(channel, f"{where} channels[{c}]"))
                continue
            peers.setdefault(kind, []).extend(need(channel, "connected_to", f"{where} channels", list))
        remote = need(gpu, "remote_buffers", where, list)
        for r, entry in enumerate(remote):
            need(entry, "rank", f"{where} remote_buffers[{r}]")
            need(entry, "type", f"{where} remote_buffers[{r}]", str)
        return [self.read_block(rank, b, block, peers, remote, switches)
                for b, block in enumerate(need(gpu, "threadblocks", where, list))]

    def read_switch(self, channel: dict, where: str) -> list[tuple[str, list[int]]]:
        """A gpu's ``switch`` channel entry: one switch channel per rank group, each (buffer type, ranks)."""
        buffer_type = self.need(channel, "buffer_type", where, str)
        out = []
        for g, group in enumerate(self.need(channel, "rank_groups", where, list)):
            ranks = self.need(group, "ranks", f"{where} rank_groups[{g}]", list)
            self.need(group, "size", f"{where} rank_groups[{g}]")
            out.append((buffer_type, ranks))
        return out

    def read_block(self, rank: int, b: int, block: dict, peers: dict[str, list[int]], remote: list,
                   switches: list[tuple[str, list[int]]]) -> list[_Op]:
        need, tb_where = self.need, f"gpu {rank} tb {b}"
        raw_ops = need(block, "ops", tb_where, list)
        channels: dict[str, list[int]] = {}
        for c, channel in enumerate(need(block, "channels", tb_where, list, [])):
            channels.setdefault(need(channel, "channel_type", f"{tb_where} channels[{c}]", str), []).extend(
                need(channel, "channel_ids", f"{tb_where} channels[{c}]", list))
        refs: dict[str, list[int]] = {}
        for c, ref in enumerate(need(block, "remote_buffer_refs", tb_where, list, [])):
            refs.setdefault(need(ref, "access_channel_type", f"{tb_where} remote_buffer_refs[{c}]", str),
                            []).extend(need(ref, "remote_buffer_ids", f"{tb_where} remote_buffer_refs[{c}]", list))
        wiring = _Wiring(peers, remote, channels, refs, switches)
        return [self.read_op(rank, b, i, raw, wiring, tb_where) for i, raw in enumerate(raw_ops)]

    def read_op(self, rank: int, b: int, i: int, raw: Any, wiring: _Wiring, tb_where: str) -> _Op:
        need, source = self.need, self.source
        name = need(raw, "name", f"{tb_where} op {i}", str)
        op = _Op(rank, b, i, name)
        op_where = op.where()
        if name not in _SUPPORTED:
            raise MscclError(f"{source}: {op_where}: operation {name!r} is not one the interpreter runs "
                             f"(supported: {', '.join(_SUPPORTED)})")
        kind = need(raw, "channel_type", op_where, str, "none")
        if name in ("glres", "gstore"):
            return self.read_switch_op(op, raw, rank, kind, wiring)
        sources = [self.resolve(r, "src_buff", rank, kind, wiring, op_where)
                   for r in need(raw, "src_buff", op_where, list, [])]
        targets = [self.resolve(r, "dst_buff", rank, kind, wiring, op_where)
                   for r in need(raw, "dst_buff", op_where, list, [])]
        if name in _SIGNALS + _WAITS:
            ids = need(raw, "channel_ids", op_where, list, [])
            if len(ids) != 1:
                raise MscclError(f"{source}: {op_where}: needs exactly one channel id, got {ids!r}")
            op.channel = (kind, self.peer_of(ids[0], kind, wiring, op_where))
        elif name in ("copy", "put", "get"):
            if len(sources) != 1 or len(targets) != 1 or sources[0][3] != targets[0][3]:
                raise MscclError(f"{source}: {op_where}: needs one src_buff and one dst_buff of one size")
            op.reads, op.writes = sources, targets
        elif name == "re":
            if not sources or len(targets) != 1 or any(s[3] != targets[0][3] for s in sources):
                raise MscclError(f"{source}: {op_where}: needs src_buffs and one dst_buff of one size")
            op.reads, op.writes = sources, targets
        return op

    def read_switch_op(self, op: _Op, raw: dict, rank: int, kind: str, wiring: _Wiring) -> _Op:
        """``glres`` (a switch src and dst) or ``gstore`` (a local src, a switch dst), each reference to
        a switch channel resolved to the same range on every gpu of its group."""
        need, source, op_where = self.need, self.source, op.where()
        if kind != "switch":
            raise MscclError(f"{source}: {op_where}: needs channel_type 'switch', got {kind!r}")
        if raw.get("reduce_op", "sum") != "sum":
            raise MscclError(f"{source}: {op_where}: reduce_op {raw.get('reduce_op')!r} is not one the interpreter "
                             "runs (sum)")
        src = need(raw, "src_buff", op_where, list)
        dst = need(raw, "dst_buff", op_where, list)
        if len(src) != 1 or len(dst) != 1:
            raise MscclError(f"{source}: {op_where}: needs one src_buff and one dst_buff")
        if op.name == "glres":
            op.reads = self.resolve_switch(src[0], "src_buff", wiring, op_where)
        else:
            op.reads = [self.resolve(src[0], "src_buff", rank, "none", wiring, op_where)]
        op.writes = self.resolve_switch(dst[0], "dst_buff", wiring, op_where)
        if op.reads[0][3] != op.writes[0][3]:
            raise MscclError(f"{source}: {op_where}: needs a src_buff and a dst_buff of one size")
        return op

    def resolve_switch(self, ref: Any, role: str, wiring: _Wiring, op_where: str) -> list[tuple[int, str, int, int]]:
        """A ``switch_channel_id`` reference: that range on every gpu of the channel's group."""
        size = self.need(ref, "size", f"{op_where} {role}")
        index = self.need(ref, "index", f"{op_where} {role}")
        position = self.need(ref, "switch_channel_id", f"{op_where} {role}")
        try:
            buffer_type, ranks = wiring.switches[wiring.channels["switch"][position]]
        except (KeyError, IndexError, TypeError):
            raise MscclError(f"{self.source}: {op_where} {role}: switch_channel_id {position!r} is not a switch "
                             "channel declared by the threadblock and the gpu") from None
        return [(r, buffer_type, index, size) for r in ranks]

    def peer_of(self, position: int, kind: str, wiring: _Wiring, op_where: str) -> int:
        try:
            return wiring.peers[kind][wiring.channels[kind][position]]
        except (KeyError, IndexError, TypeError):
            raise MscclError(f"{self.source}: {op_where}: channel {position} of type {kind!r} is not "
                             "declared by the threadblock and the gpu") from None

    def resolve(self, ref: dict, role: str, rank: int, kind: str, wiring: _Wiring,
                op_where: str) -> tuple[int, str, int, int]:
        size = self.need(ref, "size", f"{op_where} {role}")
        index = self.need(ref, "index", f"{op_where} {role}")
        if "buffer_id" in ref:
            try:
                entry = wiring.remote[wiring.refs[kind][ref["buffer_id"]]]
            except (KeyError, IndexError, TypeError):
                raise MscclError(f"{self.source}: {op_where} {role}: buffer_id {ref['buffer_id']!r} names "
                                 f"no remote buffer reachable over {kind!r}") from None
            return entry["rank"], entry["type"], index, size
        return rank, self.need(ref, "type", f"{op_where} {role}", str), index, size


def parse_plan(text: str, source: str = "plan") -> tuple[dict[str, Any], list[list[list[_Op]]]]:
    """The plan and its operations per gpu, per threadblock. A plan that is not one (invalid JSON,
    duplicate keys, a missing field or one of the wrong type) is a ``MscclFormatError`` naming the
    field; one the interpreter cannot run is a ``MscclError``."""
    from workbench.util.safe_load import parse_json

    plan = parse_json(text, source, MscclFormatError)  # duplicate keys, depth, overlong integers: named
    if not isinstance(plan, dict) or not isinstance(plan.get("gpus"), list):
        raise MscclFormatError(f"{source}: an execution plan is an object with a 'gpus' list")
    reader = _PlanReader(source)
    reader.check_header(plan)
    program = [reader.read_gpu(rank, gpu) for rank, gpu in enumerate(plan["gpus"])]
    return plan, program


def _collective(plan: dict[str, Any], source: str, root: int | None) -> Collective:
    kind = plan.get("collective")
    n = len(plan["gpus"])
    if kind not in ("allgather", "reducescatter", "allreduce", "alltoall", "broadcast", "reduce", "gather",
                    "scatter"):
        raise MscclError(f"{source}: collective {kind!r} is not one the workbench can check")
    first = plan["gpus"][0]
    size = max(first.get("input_chunks", 0), first.get("output_chunks", 0))
    per = size if kind in ("broadcast", "reduce") else size // max(n, 1)
    if per < 1:
        raise MscclError(f"{source}: input/output chunks too small for {n} ranks")
    return make_collective(kind, n, per, root)


def _races(program: list[list[list[_Op]]]) -> str | None:
    ops = [op for blocks in program for block in blocks for op in block]
    index = {id(op): e for e, op in enumerate(ops)}
    preds: list[list[int]] = [[] for _ in ops]
    signals: dict[tuple[str, int, int], list[int]] = {}
    waits: dict[tuple[str, int, int], list[int]] = {}
    for op in ops:
        if op.name in _SIGNALS:
            signals.setdefault((op.channel[0], op.rank, op.channel[1]), []).append(index[id(op)])
        elif op.name in _WAITS:
            waits.setdefault((op.channel[0], op.channel[1], op.rank), []).append(index[id(op)])
    for key, sent in signals.items():  # one semaphore: the k-th wait of either kind, the k-th signal
        for s, w in zip(sent, waits.get(key, [])):
            if not (ops[s].relaxed or ops[w].relaxed):  # a relaxed end promises nothing about memory
                preds[w].append(s)
    accesses = []
    for op in ops:
        touched: dict[tuple[int, str, int], bool] = {}
        for rank, buf, start, size in op.reads:
            for k in range(size):
                touched.setdefault((rank, buf, start + k), False)
        for rank, buf, start, size in op.writes:
            for k in range(size):
                touched[(rank, buf, start + k)] = True
        accesses.append(touched)
    lengths = [len(block) for blocks in program for block in blocks]
    return first_race(lengths, preds, accesses, lambda e: ops[e].where(),
                      lambda slot: f"gpu {slot[0]} {slot[1]}[{slot[2]}]")


class _Execution:
    """One run of a plan over contribution sets: the slot values, the buffer sizes, the signals sent
    and consumed per channel, and how far each threadblock has got."""

    def __init__(self, plan: dict, program: list[list[list[_Op]]], collective: Collective, source: str,
                 in_place: bool = False) -> None:
        self.source = source
        kind, k = collective.kind, collective.chunks_per_rank
        self.values: dict[tuple[int, str, int], tuple[int, int]] = {
            (rank, *(in_place_slot(kind, k, rank, buf, off) if in_place else (buf, off))): value
            for (rank, buf, off), value in initial_buffers(collective).items()}
        self.limits = {}
        for rank, gpu in enumerate(plan["gpus"]):
            self.limits[(rank, "i")] = gpu.get("input_chunks", 0)
            self.limits[(rank, "o")] = gpu.get("output_chunks", 0)
            self.limits[(rank, "s")] = gpu.get("scratch_chunks", 0)
            if in_place:  # one buffer: the larger of the two
                self.limits[(rank, "i")] = self.limits[(rank, "o")] = max(self.limits[(rank, "i")],
                                                                          self.limits[(rank, "o")])
        self.signalled: dict[tuple[str, int, int], int] = {}
        self.consumed: dict[tuple[str, int, int], int] = {}
        self.blocks = [(rank, b, block) for rank, gpu_blocks in enumerate(program)
                       for b, block in enumerate(gpu_blocks)]
        self.done = [0] * len(self.blocks)

    def read(self, op: _Op, ref: tuple[int, str, int, int]) -> list:
        rank, buf, start, size = ref
        out = []
        for k in range(size):
            if not 0 <= start + k < self.limits.get((rank, buf), 0):
                raise MscclError(f"{self.source}: {op.where()}: gpu {rank} {buf}[{start + k}] is outside the buffer")
            if (rank, buf, start + k) not in self.values:
                raise MscclError(f"{self.source}: {op.where()}: reads gpu {rank} {buf}[{start + k}], which holds "
                                 "no data")
            out.append(self.values[(rank, buf, start + k)])
        return out

    def write(self, op: _Op, ref: tuple[int, str, int, int], data: list) -> None:
        rank, buf, start, size = ref
        for k in range(size):
            if not 0 <= start + k < self.limits.get((rank, buf), 0):
                raise MscclError(f"{self.source}: {op.where()}: gpu {rank} {buf}[{start + k}] is outside the buffer")
            self.values[(rank, buf, start + k)] = data[k]

    def run(self, rng: random.Random | None) -> dict[tuple[int, str, int], tuple[int, int]]:
        blocks, done = self.blocks, self.done
        remaining = sum(len(block) for _, _, block in blocks)
        while remaining:
            progressed = False
            order = list(range(len(blocks)))
            if rng is not None:
                rng.shuffle(order)
            for b in order:
                rank, _, block = blocks[b]
                budget = rng.randint(1, 3) if rng is not None else -1
                while done[b] < len(block) and budget != 0:
                    budget -= 1
                    if not self.try_op(rank, block[done[b]]):
                        break
                    done[b] += 1
                    remaining -= 1
                    progressed = True
            if not progressed:
                raise self.deadlock()
        self.check_signals_consumed()
        return self.values

    def try_op(self, rank: int, op: _Op) -> bool:
        """Run ``op``; False (nothing changed) for a wait whose signal has not come yet."""
        if op.name in _WAITS:
            key = (op.channel[0], op.channel[1], rank)
            if self.signalled.get(key, 0) <= self.consumed.get(key, 0):
                return False
            self.consumed[key] = self.consumed.get(key, 0) + 1
        elif op.name in _SIGNALS:
            key = (op.channel[0], rank, op.channel[1])
            self.signalled[key] = self.signalled.get(key, 0) + 1
        elif op.name in ("copy", "put", "get", "gstore"):  # gstore: the one source to every gpu of the group
            data = self.read(op, op.reads[0])
            for ref in op.writes:
                self.write(op, ref, data)
        elif op.name in ("re", "glres"):
            self.reduce(op)
        return True

    def reduce(self, op: _Op) -> None:
        """``re``: the sum of the sources into the one destination; ``glres``: the sum of the range
        over the group into that range on every gpu of the destination's group."""
        total = self.read(op, op.reads[0])
        for ref in op.reads[1:]:
            more = self.read(op, ref)
            for k, ((chunk, bits), (other, extra)) in enumerate(zip(total, more)):
                if chunk != other:
                    raise MscclError(f"{self.source}: {op.where()}: adds chunk {other} to chunk {chunk}")
                if bits & extra:
                    raise MscclError(f"{self.source}: {op.where()}: the reduction double counts contributions")
                total[k] = (chunk, bits | extra)
        for ref in op.writes:
            self.write(op, ref, total)

    def deadlock(self) -> MscclError:
        stuck = [block[self.done[b]] for b, (_, _, block) in enumerate(self.blocks) if self.done[b] < len(block)]
        return MscclError(f"{self.source}: deadlock: " + "; ".join(
            f"{op.where()} waits for a signal from gpu {op.channel[1]}" for op in stuck[:3]))

    def check_signals_consumed(self) -> None:
        consumed = self.consumed
        extra = {k: v - consumed.get(k, 0) for k, v in self.signalled.items() if v > consumed.get(k, 0)}
        if extra:
            (kind, src, dst), count = next(iter(extra.items()))
            raise MscclError(f"{self.source}: gpu {src} signals gpu {dst} on its {kind} channel {count} more time(s) "
                             f"than gpu {dst} waits")


def _run(plan: dict, program: list[list[list[_Op]]], collective: Collective, source: str,
         rng: random.Random | None, in_place: bool = False) -> dict[tuple[int, str, int], tuple[int, int]]:
    return _Execution(plan, program, collective, source, in_place).run(rng)


def _in_place(program: list[list[list[_Op]]], collective: Collective) -> list[list[list[_Op]]]:
    """The program with every buffer reference as an in-place call sees it (``layout.in_place_slot``:
    NCCL's one buffer for input and output); each mapping shifts a whole range, so sizes stay."""
    kind, k = collective.kind, collective.chunks_per_rank

    def moved(ref: tuple[int, str, int, int]) -> tuple[int, str, int, int]:
        rank, buf, start, size = ref
        return (rank, *in_place_slot(kind, k, rank, buf, start), size)

    def op_in_place(op: _Op) -> _Op:
        new = copy.copy(op)
        new.reads, new.writes = [moved(r) for r in op.reads], [moved(w) for w in op.writes]
        return new

    return [[[op_in_place(op) for op in block] for block in blocks] for blocks in program]


def interpret_plan(text: str, source: str = "plan", root: int | None = None, schedules: int = 0,
                   seed: int = 0, aliasings: list[bool] | None = None) -> dict[str, Any]:
    """What the plan declares (``validate.check_plan``: the size guard, every index, the buffer
    sizes), then for each aliasing (``aliasings``: False out of place, True in place; default the
    plan's ``inplace``): races, one run in a fixed order, the postconditions, then ``schedules``
    random interleavings. The report's ``transfers`` counts the operations that move data between
    gpus: ``put``, ``glres`` and ``gstore``."""
    from workbench.util import size_guard
    from workbench.mscclpp.validate import check_plan

    size_guard.check(source, size_guard.BYTES_PER_TEXT * len(text))  # the parse and the run grow with the text
    plan, program = parse_plan(text, source)
    aliasings = [bool(plan.get("inplace"))] if aliasings is None else aliasings
    check_plan(plan, program, source, schedules * len(aliasings))
    collective = _collective(plan, source, root)
    for in_place in aliasings:
        where = f"{source} (in place)" if in_place and len(aliasings) > 1 else source
        _check_aliasing(plan, _in_place(program, collective) if in_place else program, collective, where,
                        (schedules, seed), in_place)
    puts = sum(1 for blocks in program for block in blocks for op in block if op.name in ("put", "glres", "gstore"))
    return {"ranks": len(plan["gpus"]), "transfers": puts, "collective": collective.kind, "schedules": schedules,
            "in_place": bool(plan.get("inplace")),
            "aliasings": ["in place" if a else "out of place" for a in aliasings]}


def _check_aliasing(plan: dict, program: list[list[list[_Op]]], collective: Collective, source: str,
                    schedules: tuple[int, int], in_place: bool) -> None:
    """Races, the fixed-order run, the postconditions and the random runs, for one aliasing."""
    count, seed = schedules
    k = collective.chunks_per_rank
    raise_race(lambda: _races(program), source)
    # one generator made and dropped per run: many schedules take no more memory than one
    runs = itertools.chain([None], (random.Random(seed + i) for i in range(count)))
    for i, rng in enumerate(runs):
        label = "" if rng is None else f"random schedule {i} (seed {seed + i - 1}): "
        try:
            values = _run(plan, program, collective, source, rng, in_place)
        except MscclError as exc:
            raise MscclError(f"{label}{exc}") from None
        check_outputs(collective, lambda rank, off: values.get(
            (rank, *(in_place_slot(collective.kind, k, rank, "o", off) if in_place else ("o", off)))),
            source, label, who="gpu")
