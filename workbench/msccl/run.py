"""The MSCCL interpreter: runs an XML over contribution sets as the runtimes would."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.collective import Collective, make_collective
from workbench.msccl.common import COLL_NAMES, RECEIVING, REDUCING, SENDING, MscclError
from workbench.msccl.layout import buffer_layout
from workbench.msccl.parse import XmlAlgo, parse_xml

__all__ = ["run_xml", "collective_of", "initial_buffers", "interpret", "RunResult"]


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


def run_xml(algo: XmlAlgo, initial: dict[tuple[int, str, int], tuple[int, int]], source: str) -> RunResult:
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
                    if step.type in RECEIVING:
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
                        transfers[transfer]["op"] = "reduce" if step.type in REDUCING else "copy"
                        step_transfer[(rank, tb.id, step.index)] = transfer
                        write(rank, step.dstbuf, step.dstoff, message.values, step.type in REDUCING, where, transfer)
                    if step.type in SENDING:
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


def collective_of(algo: XmlAlgo, root: int | None = None) -> Collective:
    kind = {"reduce_scatter": "reducescatter"}.get(algo.coll, algo.coll)
    n = algo.ngpus
    if kind not in COLL_NAMES:
        raise MscclError(f"collective {algo.coll!r} is not one the workbench can check")
    per = algo.nchunksperloop if kind in ("broadcast", "reduce") else algo.nchunksperloop // n
    if per < 1:
        raise MscclError(f"nchunksperloop={algo.nchunksperloop} is too small for {n} ranks")
    return make_collective(kind, n, per, root)


def initial_buffers(collective: Collective) -> dict:
    inputs, _, _, _ = buffer_layout(collective)
    full, _ = collective.masks()
    initial = {}
    for (rank, chunk), off in inputs.items():
        bits = (1 << rank) if collective.combining else full[chunk]
        initial[(rank, "i", off)] = (chunk, bits)
    return initial


def interpret(text: str, source: str = "xml", root: int | None = None) -> dict[str, Any]:
    """Run the XML as the runtime would and check the postconditions; MscclError on failure."""
    algo = parse_xml(text, source)
    collective = collective_of(algo, root)
    result = run_xml(algo, initial_buffers(collective), source)
    _, outputs, _, _ = buffer_layout(collective)
    full, _ = collective.masks()
    for (rank, chunk), off in sorted(outputs.items()):
        value = result.buffers.get((rank, "o", off))
        if value is None or value[1] != full[chunk]:
            have = "nothing" if value is None else f"contributions {bin(value[1])}"
            raise MscclError(f"{source}: rank {rank}: output o[{off}] (chunk {chunk}) must hold the full data "
                             f"at the end, holds {have}")
    return {"ranks": algo.ngpus, "transfers": len(result.transfers), "collective": collective.kind}


