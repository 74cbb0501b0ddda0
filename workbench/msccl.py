"""MSCCL XML: export, an interpreter that runs an XML file as the runtimes would, and import.

Format and runtime rules: ``../shared/spec/prior-art.md`` section 8 (the old ``<algo>/<gpu>/<tb>/<step>``
form that both the research runtime and the current executor parse).

Lowering (``export_xml``):

* buffers per collective: the input (``i``) and output (``o``) layouts of MSCCL (all-gather: own chunk
  j at i[j], chunk c at o[c]; reduce-scatter: c at i[c], own chunk j at o[j]; ...); a chunk a rank
  holds on the way but does not keep lives in scratch (``s``); a chunk that starts in the input
  and is written (kept, or reduced into) is first copied by a ``cpy`` step;
* one threadblock per send peer (``send=peer``), one per receive peer (``recv=peer``) and one for
  local copies, all on channel 0 (``--instances N`` splits every chunk in N and runs instance i on
  channel i); a transfer is a send step and a receive step (``r``, or ``rrc`` for a reduction);
  multi-chunk messages are ``cnt > 1``; a message whose chunks are not contiguous in both buffers is
  sent as one step per contiguous run;
* fusion (default): a receive threadblock and the send threadblock that forwards its data merge
  into one (``recv=u send=x``, steps in plan order), and a receive immediately followed by the send
  that waits only on it becomes one ``rcs`` (``rrcs`` after a reduction) step. A fused threadblock
  runs its steps one after the other, so its timing can differ from the plan; ``fuse=False`` keeps
  them apart and import then reproduces the plan exactly;
* dependencies: a step waits on the steps of its transfer's deps that live on its rank; more than
  one becomes a chain of ``nop`` steps (one dependency per step); ``hasdep`` marks waited-on steps;
* each send/receive step carries ``wbid`` (the transfer id), which the runtimes ignore and import
  uses to restore the plan order;
* the runtimes' limits (steps per threadblock, threadblocks per gpu and per channel, ``cnt``) are
  checked and named when an algorithm cannot be lowered as is.

``interpret`` executes an XML over contribution sets: every threadblock runs its steps in order, a
FIFO per (sender, receiver, channel) carries messages, a step waits for its dependency; it reports a
deadlock, a send/receive mismatch or a missing postcondition with rank, threadblock and step.
``import_xml`` runs the interpreter while tracking which chunk each buffer slot holds and turns every
matched send/receive into a transfer.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from workbench.algorithm import Algorithm, Transfer
from workbench.collective import Collective, make_collective
from workbench.topology import Topology

__all__ = ["MscclError", "export_xml", "interpret", "import_xml", "LIMITS", "refine"]

LIMITS = {
    "MSCCL_MAX_NUM_STEPS": 256,  # steps per threadblock
    "MSCCL_MAX_NUM_THREAD_BLOCKS": 64,  # threadblocks per gpu
    "MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL": 32,  # send peers (and receive peers) per channel
    "MSCCL_MAX_COUNT": 72,  # cnt < 72
}
_COLL_NAMES = {"allgather": "allgather", "reducescatter": "reducescatter", "allreduce": "allreduce",
               "broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall", "gather": "gather",
               "scatter": "scatter"}
_REDUCING = ("rrc", "rrs", "rrcs")
_RECEIVING = ("r", "rcs", "rrc", "rrs", "rrcs")
_SENDING = ("s", "rcs", "rrs", "rrcs")


class MscclError(ValueError):
    """An algorithm that cannot be lowered, or an XML that does not run; names rank, threadblock, step."""


# ----------------------------------------------------------------------------------------- layouts
def _layout(collective: Collective) -> tuple[dict, dict, int, int]:
    """(input offsets, output offsets, i_chunks, o_chunks): {(rank, chunk): offset}."""
    n, k = collective.num_ranks, collective.chunks_per_rank
    kind = collective.kind
    inputs: dict[tuple[int, int], int] = {}
    outputs: dict[tuple[int, int], int] = {}
    for c, (pre, post) in enumerate(zip(collective.pre, collective.post)):
        j, owner = divmod(c, n)
        for r in pre:
            if kind in ("allgather", "gather"):
                inputs[(r, c)] = j
            elif kind == "alltoall":
                inputs[(r, c)] = (c // (n * n)) * n + c % n  # piece j to d at j*n + d
            elif kind in ("broadcast", "reduce"):
                inputs[(r, c)] = c
            else:  # reducescatter, allreduce, scatter
                inputs[(r, c)] = c
        for r in post:
            if kind in ("reducescatter", "scatter"):
                outputs[(r, c)] = j
            elif kind == "alltoall":
                outputs[(r, c)] = (c // (n * n)) * n + (c // n) % n  # piece j from s at j*n + s
            else:  # allgather, allreduce, gather, broadcast, reduce
                outputs[(r, c)] = c
    i_chunks = {"allgather": k, "gather": k, "alltoall": n * k, "broadcast": k, "reduce": k}.get(kind, n * k)
    o_chunks = {"reducescatter": k, "scatter": k, "alltoall": n * k, "broadcast": k, "reduce": k}.get(kind, n * k)
    return inputs, outputs, i_chunks, o_chunks


def refine(algorithm: Algorithm, parts: int) -> Algorithm:
    """Every chunk split in ``parts`` (chunks per rank times parts); transfer t becomes parts transfers."""
    if parts == 1:
        return algorithm
    c = algorithm.collective
    if c.kind == "custom":
        raise MscclError("--instances > 1 needs a standard collective")
    n = c.num_ranks
    finer = make_collective(c.kind, n, c.chunks_per_rank * parts, c.root)

    def split(chunk: int, i: int) -> int:
        if c.kind in ("broadcast", "reduce"):
            return chunk * parts + i
        if c.kind == "alltoall":
            j, rest = divmod(chunk, n * n)
            return (j * parts + i) * n * n + rest
        j, r = divmod(chunk, n)
        return (j * parts + i) * n + r

    transfers = []
    for i in range(parts):
        for t in algorithm.transfers:
            tid = i * len(algorithm.transfers) + t.id
            deps = tuple(i * len(algorithm.transfers) + d for d in t.deps)
            transfers.append(Transfer(tid, tuple(split(ch, i) for ch in t.chunks), t.src, t.dst, t.op, deps))
    meta = dict(algorithm.meta, instances=parts)
    return Algorithm(algorithm.topology, finer, algorithm.chunk_bytes / parts, transfers, meta)


# ----------------------------------------------------------------------------------------- export
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


def _slots(algorithm: Algorithm):
    """Working location (buf, offset) of every (rank, chunk), the copies in, and the copies out.

    Scratch is indexed by chunk id, so chunks with consecutive ids stay contiguous. A reduction
    whose output layout is not indexed by chunk id (reduce-scatter's o[j]) works in scratch and
    copies its result out at the end.
    """
    collective = algorithm.collective
    inputs, outputs, i_chunks, o_chunks = _layout(collective)
    written = {(t.dst, c) for t in algorithm.transfers for c in t.chunks}
    touched = written | {(t.src, c) for t in algorithm.transfers for c in t.chunks}
    location: dict[tuple[int, int], tuple[str, int]] = {}
    copies_in: list[tuple[int, int]] = []
    copies_out: list[tuple[int, int]] = []
    uses_scratch = False
    identity = all(off == chunk for (_, chunk), off in outputs.items())
    for key in sorted(touched | set(outputs)):
        rank, chunk = key
        if key in outputs and (not collective.combining or identity):
            location[key] = ("o", outputs[key])
            if key in inputs:
                copies_in.append(key)
        elif key in inputs and key not in written and key not in outputs:
            location[key] = ("i", inputs[key])
        else:
            location[key] = ("s", chunk)
            uses_scratch = True
            if key in inputs:
                copies_in.append(key)
            if key in outputs:
                copies_out.append(key)
    s_chunks = collective.num_chunks if uses_scratch else 0
    return location, copies_in, copies_out, s_chunks, inputs, outputs, i_chunks, o_chunks


def _runs(src: list[tuple[str, int]], dst: list[tuple[str, int]]) -> list[tuple[int, int]]:
    """Split a message into runs contiguous at both ends: (first index, length)."""
    runs = []
    start = 0
    for i in range(1, len(src) + 1):
        if i == len(src) or src[i] != (src[i - 1][0], src[i - 1][1] + 1) or dst[i] != (dst[i - 1][0], dst[i - 1][1] + 1):
            runs.append((start, i - start))
            start = i
    return runs


def export_xml(algorithm: Algorithm, proto: str = "Simple", instances: int = 1, max_bytes: float | None = None,
               name: str | None = None, fuse: bool = True) -> str:
    """Lower an algorithm into MSCCL XML (see the module docstring)."""
    if proto not in ("Simple", "LL", "LL128"):
        raise MscclError(f"--proto must be Simple, LL or LL128, got {proto!r}")
    if instances < 1:
        raise MscclError("--instances must be at least 1")
    topology = algorithm.topology
    for t in algorithm.transfers:
        for end in (t.src, t.dst):
            if topology.is_switch(end):
                raise MscclError(f"transfer {t.id}: node {end} is a switch; MSCCL addresses GPUs only "
                                 "(synthesize on the unwound view, or route through the switch)")
    base_count = len(algorithm.transfers)
    algorithm = refine(algorithm, instances)
    collective = algorithm.collective
    n = collective.num_ranks
    location, copies_in, copies_out, s_chunks, inputs, outputs, i_chunks, o_chunks = _slots(algorithm)
    tbs: list[dict[Any, _Tb]] = [{} for _ in range(n)]

    def tb(rank: int, key) -> _Tb:
        if key not in tbs[rank]:
            kind, peer, chan = key
            tbs[rank][key] = _Tb(send=peer if kind == "send" else -1, recv=peer if kind == "recv" else -1, chan=chan)
        return tbs[rank][key]

    def place(block: _Tb, step: _Step, waits: list[_Step]) -> _Step:
        step.waits = list(dict.fromkeys(waits))
        step.block = block
        block.steps.append(step)
        return step

    copy_step: dict[tuple[int, int], _Step] = {}
    for rank, chunk in copies_in:
        buf, off = location[(rank, chunk)]
        copy_step[(rank, chunk)] = place(tb(rank, ("local", -1, 0)), _Step(
            "cpy", "i", inputs[(rank, chunk)], buf, off, order=(-1, chunk)), [])
    send_at: dict[int, list[_Step]] = {}
    recv_at: dict[int, list[_Step]] = {}
    writes_into: dict[tuple[int, int], list[_Step]] = {}
    for t in algorithm.transfers:
        chan = t.id // base_count  # the instance
        src_places = [location[(t.src, c)] for c in t.chunks]
        dst_places = [location[(t.dst, c)] for c in t.chunks]
        send_waits = [copy_step[(t.src, c)] for c in t.chunks if (t.src, c) in copy_step]
        recv_waits = [copy_step[(t.dst, c)] for c in t.chunks if (t.dst, c) in copy_step]
        for d in t.deps:
            dep = algorithm.transfers[d]
            if t.src in (dep.src, dep.dst):
                send_waits += recv_at[d] if dep.dst == t.src else send_at[d]
            elif t.dst in (dep.src, dep.dst):
                recv_waits += recv_at[d] if dep.dst == t.dst else send_at[d]
            else:
                raise MscclError(f"transfer {t.id}: its dependency on transfer {d} ({dep.src} -> {dep.dst}) "
                                 f"involves neither rank {t.src} nor rank {t.dst}; MSCCL steps can only wait "
                                 "on steps of their own rank")
        send_tb = tb(t.src, ("send", t.dst, chan))
        recv_tb = tb(t.dst, ("recv", t.src, chan))
        send_at[t.id], recv_at[t.id] = [], []
        for run, (first, count) in enumerate(_runs(src_places, dst_places)):  # one message per contiguous run
            (sbuf, soff), (dbuf, doff) = src_places[first], dst_places[first]
            send_at[t.id].append(place(send_tb, _Step("s", sbuf, soff, "o", -1, count, wbid=t.id,
                                                      order=(t.id, run)), send_waits))
            if t.op == "reduce":  # recv-reduce-copy: dst = dst + received
                receive = _Step("rrc", dbuf, doff, dbuf, doff, count, wbid=t.id, order=(t.id, run))
            else:
                receive = _Step("r", "i", -1, dbuf, doff, count, wbid=t.id, order=(t.id, run))
            recv_at[t.id].append(place(recv_tb, receive, recv_waits))
        for c in t.chunks:
            writes_into.setdefault((t.dst, c), []).extend(recv_at[t.id])
    for rank, chunk in copies_out:  # a reduction's result into its output slot, after every write
        buf, off = location[(rank, chunk)]
        waits = writes_into.get((rank, chunk), []) + ([copy_step[(rank, chunk)]] if (rank, chunk) in copy_step else [])
        place(tb(rank, ("local", -1, 0)), _Step("cpy", buf, off, "o", outputs[(rank, chunk)],
                                                order=(len(algorithm.transfers), chunk)), waits)
    blocks = [list(tbs[rank].values()) for rank in range(n)]
    if fuse:
        blocks = [_fuse(rank_blocks) for rank_blocks in blocks]
    numbered = [_expand(rank_blocks) for rank_blocks in blocks]
    _check_limits(numbered, n)
    channels = max((b.chan for rank_blocks in numbered for b in rank_blocks), default=0) + 1
    nchunks = max(i_chunks, o_chunks)  # n*k, or k for broadcast and reduce
    root = ET.Element("algo", {
        "name": (name or f"{algorithm.meta.get('formulation', 'workbench')}_{collective.kind}_{n}")[:63],
        "proto": proto, "nchannels": str(channels), "nchunksperloop": str(nchunks), "ngpus": str(n),
        "coll": _COLL_NAMES.get(collective.kind, "custom"), "inplace": "0", "outofplace": "1",
        "minBytes": "0", "maxBytes": str(int(max_bytes)) if max_bytes else "0", "redop": "sum"})
    for rank in range(n):
        gpu = ET.SubElement(root, "gpu", {"id": str(rank), "i_chunks": str(i_chunks), "o_chunks": str(o_chunks),
                                          "s_chunks": str(s_chunks)})
        position = {step: (block_id, index) for block_id, block in enumerate(numbered[rank])
                    for index, step in enumerate(block.steps)}
        waited = {step.waits[0] for block in numbered[rank] for step in block.steps if step.waits}
        for block_id, block in enumerate(numbered[rank]):
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
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


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
            previous.type = "rcs" if previous.type == "r" else "rrcs"
            previous.srcbuf, previous.srcoff = previous.dstbuf, previous.dstoff
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


# ----------------------------------------------------------------------------------------- interpreter
@dataclass
class XmlStep:
    rank: int
    tb: int
    index: int
    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    depid: int
    deps: int
    wbid: int | None
    wbid_send: int | None = None


@dataclass
class XmlTb:
    rank: int
    id: int
    send: int
    recv: int
    chan: int
    steps: list[XmlStep]


@dataclass
class XmlAlgo:
    attrs: dict[str, str]
    ngpus: int
    coll: str
    nchunksperloop: int
    buffers: dict[int, dict[str, int]]
    tbs: dict[int, dict[int, XmlTb]]


def parse_xml(text: str, source: str = "xml") -> XmlAlgo:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise MscclError(f"{source}: not well-formed XML ({exc})") from None
    if root.tag != "algo":
        raise MscclError(f"{source}: the root element must be <algo>, got <{root.tag}>")

    def number(element, key: str, where: str) -> int:
        value = element.get(key)
        try:
            return int(value)
        except (TypeError, ValueError):
            raise MscclError(f"{source}: {where}: attribute {key}={value!r} must be an integer") from None

    ngpus = number(root, "ngpus", "<algo>")
    algo = XmlAlgo(dict(root.attrib), ngpus, root.get("coll", ""), number(root, "nchunksperloop", "<algo>"), {}, {})
    for gpu in root.findall("gpu"):
        rank = number(gpu, "id", "<gpu>")
        algo.buffers[rank] = {b: number(gpu, f"{b}_chunks", f"gpu {rank}") for b in ("i", "o", "s")}
        algo.tbs[rank] = {}
        for tb in gpu.findall("tb"):
            tb_id = number(tb, "id", f"gpu {rank} <tb>")
            where = f"rank {rank} tb {tb_id}"
            steps = []
            for step in tb.findall("step"):
                index = number(step, "s", where)
                wbid = step.get("wbid")
                wbid_send = step.get("wbid_send")
                steps.append(XmlStep(rank, tb_id, index, step.get("type", ""), step.get("srcbuf", "i"),
                                     number(step, "srcoff", f"{where} step {index}"), step.get("dstbuf", "o"),
                                     number(step, "dstoff", f"{where} step {index}"),
                                     number(step, "cnt", f"{where} step {index}"),
                                     number(step, "depid", f"{where} step {index}"),
                                     number(step, "deps", f"{where} step {index}"),
                                     int(wbid) if wbid is not None else None,
                                     int(wbid_send) if wbid_send is not None else None))
            for position, step in enumerate(steps):
                if step.index != position:
                    raise MscclError(f"{source}: rank {rank} tb {tb_id}: step {position} is numbered {step.index} "
                                     "(a step is missing or out of order)")
            algo.tbs[rank][tb_id] = XmlTb(rank, tb_id, number(tb, "send", where), number(tb, "recv", where),
                                          number(tb, "chan", where), steps)
    if sorted(algo.buffers) != list(range(ngpus)):
        raise MscclError(f"{source}: expected <gpu> ids 0..{ngpus - 1}, got {sorted(algo.buffers)}")
    return algo


@dataclass
class _Message:
    values: list
    rank: int
    tb: int
    step: int
    wbid: int | None
    transfer: int = -1


class RunResult:
    def __init__(self, buffers, transfers) -> None:
        self.buffers = buffers
        self.transfers = transfers  # (src, dst, chunk ids, op, wbid, dep transfer ids) per matched send/recv


def _run(algo: XmlAlgo, initial: dict[tuple[int, str, int], tuple[int, int]], source: str) -> RunResult:
    """Execute; each slot holds (chunk id, contribution bitset)."""
    buffers: dict[tuple[int, str, int], tuple[int, int]] = dict(initial)
    writers: dict[tuple[int, str, int], list[int]] = {}
    done = {(r, tb.id): 0 for r in algo.tbs for tb in algo.tbs[r].values()}
    fifos: dict[tuple[int, int, int], list[_Message]] = {}
    transfers: list[dict[str, Any]] = []
    step_transfer: dict[tuple[int, int, int], int] = {}
    pending_deps: dict[tuple[int, int], list[int]] = {}

    def read(rank: int, buf: str, off: int, cnt: int, where: str) -> list:
        values = []
        for i in range(cnt):
            key = (rank, buf, off + i)
            limit = algo.buffers[rank].get(buf, 0)
            if not 0 <= off + i < limit:
                raise MscclError(f"{source}: {where}: {buf}[{off + i}] is outside the buffer ({buf}_chunks={limit})")
            if key not in buffers:
                raise MscclError(f"{source}: {where}: reads {buf}[{off + i}], which holds no data yet")
            values.append(buffers[key])
        return values

    def write(rank: int, buf: str, off: int, values: list, reduce: bool, where: str, transfer: int) -> None:
        for i, (chunk, bits) in enumerate(values):
            key = (rank, buf, off + i)
            limit = algo.buffers[rank].get(buf, 0)
            if not 0 <= off + i < limit:
                raise MscclError(f"{source}: {where}: {buf}[{off + i}] is outside the buffer ({buf}_chunks={limit})")
            if reduce and key in buffers:
                old_chunk, old_bits = buffers[key]
                if old_bits & bits:
                    raise MscclError(f"{source}: {where}: reduce into {buf}[{off + i}] double counts contributions")
                buffers[key] = (old_chunk, old_bits | bits)
                if transfer >= 0:
                    writers.setdefault(key, []).append(transfer)
            else:
                buffers[key] = (chunk, bits)
                writers[key] = [transfer] if transfer >= 0 else []

    remaining = sum(len(tb.steps) for r in algo.tbs for tb in algo.tbs[r].values())
    while remaining:
        progressed = False
        for rank in sorted(algo.tbs):
            for tb in algo.tbs[rank].values():
                while done[(rank, tb.id)] < len(tb.steps):
                    step = tb.steps[done[(rank, tb.id)]]
                    where = f"rank {rank} tb {tb.id} step {step.index} ({step.type})"
                    if step.depid >= 0:
                        if (rank, step.depid) not in done:
                            raise MscclError(f"{source}: {where}: depends on tb {step.depid}, which does not exist")
                        if done[(rank, step.depid)] <= step.deps:
                            break
                        dep_transfer = step_transfer.get((rank, step.depid, step.deps))
                        if dep_transfer is not None:
                            pending_deps.setdefault((rank, tb.id), []).append(dep_transfer)
                    message = None
                    if step.type in _RECEIVING:
                        queue = fifos.get((tb.recv, rank, tb.chan))
                        if not queue:
                            break
                        message = queue.pop(0)
                        if len(message.values) != step.cnt:
                            raise MscclError(f"{source}: {where}: receives cnt {step.cnt} but rank {message.rank} "
                                             f"tb {message.tb} step {message.step} sent {len(message.values)}")
                    inherited = pending_deps.pop((rank, tb.id), [])
                    if step.type == "nop":
                        pending_deps.setdefault((rank, tb.id), []).extend(inherited)
                    elif step.type == "cpy":
                        write(rank, step.dstbuf, step.dstoff, read(rank, step.srcbuf, step.srcoff, step.cnt, where),
                              False, where, -1)
                    elif step.type == "re":
                        write(rank, step.dstbuf, step.dstoff, read(rank, step.srcbuf, step.srcoff, step.cnt, where),
                              True, where, -1)
                    if message is not None:
                        transfer = message.transfer
                        transfers[transfer]["deps"].update(inherited)
                        transfers[transfer]["op"] = "reduce" if step.type in _REDUCING else "copy"
                        step_transfer[(rank, tb.id, step.index)] = transfer
                        write(rank, step.dstbuf, step.dstoff, message.values, step.type in _REDUCING, where, transfer)
                    if step.type in _SENDING:
                        if tb.send < 0:
                            raise MscclError(f"{source}: {where}: sends, but the threadblock has no send peer")
                        buf, off = (step.dstbuf, step.dstoff) if message is not None else (step.srcbuf, step.srcoff)
                        values = read(rank, buf, off, step.cnt, where)
                        deps = set(inherited)
                        for i in range(step.cnt):
                            deps.update(writers.get((rank, buf, off + i), []))
                        transfer = len(transfers)
                        wbid = step.wbid_send if step.wbid_send is not None else step.wbid
                        transfers.append({"src": rank, "dst": tb.send, "chunks": [v[0] for v in values],
                                          "wbid": wbid, "deps": deps, "op": "copy"})
                        step_transfer[(rank, tb.id, step.index)] = transfer
                        fifos.setdefault((rank, tb.send, tb.chan), []).append(
                            _Message(values, rank, tb.id, step.index, wbid, transfer))
                    done[(rank, tb.id)] += 1
                    remaining -= 1
                    progressed = True
        if not progressed:
            blocked = []
            for rank in sorted(algo.tbs):
                for tb in algo.tbs[rank].values():
                    if done[(rank, tb.id)] < len(tb.steps):
                        step = tb.steps[done[(rank, tb.id)]]
                        if step.depid >= 0 and done.get((rank, step.depid), 0) <= step.deps:
                            why = f"waits on tb {step.depid} step {step.deps}"
                        else:
                            why = f"waits for a message from rank {tb.recv} on channel {tb.chan}"
                        blocked.append(f"rank {rank} tb {tb.id} step {step.index} ({step.type}) {why}")
            raise MscclError(f"{source}: deadlock: no step can make progress; " + "; ".join(blocked[:3])
                             + (f"; and {len(blocked) - 3} more" if len(blocked) > 3 else ""))
    for (src, dst, chan), queue in fifos.items():
        if queue:
            m = queue[0]
            raise MscclError(f"{source}: send/receive mismatch: rank {m.rank} tb {m.tb} step {m.step} sends to rank "
                             f"{dst} on channel {chan}, but no receive takes it")
    return RunResult(buffers, transfers)


def _collective_of(algo: XmlAlgo, root: int | None = None) -> Collective:
    kind = {"reduce_scatter": "reducescatter"}.get(algo.coll, algo.coll)
    n = algo.ngpus
    if kind not in _COLL_NAMES:
        raise MscclError(f"collective {algo.coll!r} is not one the workbench can check")
    per = algo.nchunksperloop if kind in ("broadcast", "reduce") else algo.nchunksperloop // n
    if per < 1:
        raise MscclError(f"nchunksperloop={algo.nchunksperloop} is too small for {n} ranks")
    return make_collective(kind, n, per, root)


def _initial(collective: Collective) -> dict:
    inputs, _, _, _ = _layout(collective)
    full, _ = collective.masks()
    initial = {}
    for (rank, chunk), off in inputs.items():
        bits = (1 << rank) if collective.combining else full[chunk]
        initial[(rank, "i", off)] = (chunk, bits)
    return initial


def interpret(text: str, source: str = "xml", root: int | None = None) -> dict[str, Any]:
    """Run the XML as the runtime would and check the postconditions; MscclError on failure."""
    algo = parse_xml(text, source)
    collective = _collective_of(algo, root)
    result = _run(algo, _initial(collective), source)
    _, outputs, _, _ = _layout(collective)
    full, _ = collective.masks()
    for (rank, chunk), off in sorted(outputs.items()):
        value = result.buffers.get((rank, "o", off))
        if value is None or value[1] != full[chunk]:
            have = "nothing" if value is None else f"contributions {bin(value[1])}"
            raise MscclError(f"{source}: rank {rank}: output o[{off}] (chunk {chunk}) must hold the full data "
                             f"at the end, holds {have}")
    return {"ranks": algo.ngpus, "transfers": len(result.transfers), "collective": collective.kind}


def import_xml(text: str, topology: Topology, size_bytes: float, source: str = "xml",
               root: int | None = None) -> Algorithm:
    """An MSCCL XML as a workbench algorithm on ``topology`` (plan order from ``wbid`` when present)."""
    algo = parse_xml(text, source)
    collective = _collective_of(algo, root)
    if topology.num_npus < collective.num_ranks:
        raise MscclError(f"{source}: {collective.num_ranks} ranks but the topology has {topology.num_npus} NPUs")
    result = _run(algo, _initial(collective), source)
    records = result.transfers
    if all(r["wbid"] is not None for r in records):
        order = sorted(range(len(records)), key=lambda i: (records[i]["wbid"], i))
    else:
        order = list(range(len(records)))
    new_id = {old: new for new, old in enumerate(order)}
    transfers = []
    for new, old in enumerate(order):
        r = records[old]
        deps = tuple(sorted(new_id[d] for d in r["deps"] if new_id[d] < new))
        transfers.append(Transfer(new, tuple(r["chunks"]), r["src"], r["dst"], r["op"], deps))
    meta = {"formulation": "msccl-import", "source": source, "xml_name": algo.attrs.get("name")}
    return Algorithm(topology, collective, collective.chunk_bytes(size_bytes), transfers, meta)
