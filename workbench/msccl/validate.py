"""What an MSCCL XML declares, checked before it runs.

``guard_sizes``: the size guard (``workbench.util.size_guard.check_declared``) reads ``ngpus``,
``nchunksperloop``, ``nchannels``, every ``<gpu>``'s ``i_chunks``/``o_chunks``/``s_chunks``, the
number of steps and their ``cnt``, before the collective is built or a slot is touched: a 4 KB file
that declares two billion GPUs is refused in one line (``SizeError``, exit 2) instead of growing
until the kernel kills it.

``check_indices``: every index the file names must exist. ``send``/``recv`` name a rank or -1,
``chan`` is below ``nchannels`` (when the file gives it), ``depid``/``deps`` name a step of a
threadblock of the same rank, a step that receives (sends) has a receive (send) peer, every slot a
step reads or writes on its own rank lies inside its declared buffer (through the in-place alias,
``XmlAlgo.slot``), and ``i_chunks``/``o_chunks`` are the sizes the collective places its chunks in
(``layout.buffer_sizes``; msccl-tools sizes a buffer by the slots it uses, so a file for in-place
calls may declare the aliased buffer as 0, as RCCL's and ASTRA-sim's files do, and a rooted
collective the buffer only its root uses). ``MscclError`` names the element (exit 1 in ``interpret``), before the
race analysis expands a step's ``cnt`` into slots.
"""

from __future__ import annotations

from workbench.util import size_guard
from workbench.util.size_guard import shown
from workbench.msccl.common import COLL_NAMES, RECEIVING, SENDING, MscclError
from workbench.msccl.layout import buffer_sizes
from workbench.msccl.xml_model import XmlAlgo

__all__ = ["guard_sizes", "check_indices", "LOCAL_SRC", "LOCAL_DST", "ROOT_ONLY"]

# the step types that read their src slots (write or read their dst slots) on their own rank; the
# other peer fields name the sender's or the receiver's slot, which the run compares instead
LOCAL_SRC = frozenset(("s", "rrc", "rrs", "rrcs", "cpy", "re"))
LOCAL_DST = frozenset(("r", "rcs", "rrc", "rrcs", "cpy", "re"))
# the buffer only the root of a rooted collective uses: msccl-tools sizes buffers by use, so the
# other ranks declare it 0
ROOT_ONLY = {"broadcast": "i", "scatter": "i", "gather": "o", "reduce": "o"}
_BUFFERS = ("i", "o", "s")


def _kind(algo: XmlAlgo) -> str:
    return {"reduce_scatter": "reducescatter"}.get(algo.coll, algo.coll)


def guard_sizes(algo: XmlAlgo, source: str) -> None:
    """``SizeError`` when what the file declares could not be interpreted within the memory budget."""
    n = max(size_guard.as_float(algo.ngpus), 1.0)
    kind = _kind(algo)
    chunks = size_guard.as_float(algo.nchunksperloop)
    per_rank = chunks if kind in ("broadcast", "reduce") else chunks / n
    parts = [(f"<algo> ngpus={shown(algo.ngpus)} nchunksperloop={shown(algo.nchunksperloop)}",
              size_guard.BYTES_PER_SLOT * size_guard.collective_pairs(kind, algo.ngpus, max(per_rank, 1)))]
    if algo.nchannels is not None:  # per-channel connection state of every GPU
        parts.append((f"<algo> nchannels={shown(algo.nchannels)}",
                      size_guard.BYTES_PER_ELEMENT * n * size_guard.as_float(algo.nchannels)))
    if algo.buffers:
        slots = {rank: sum(size_guard.as_float(v) for v in declared.values())
                 for rank, declared in algo.buffers.items()}
        largest = max(slots, key=slots.__getitem__)
        sizes = " ".join(f"{b}_chunks={shown(algo.buffers[largest][b])}" for b in _BUFFERS)
        parts.append((f"<gpu id={shown(largest)}> {sizes}", size_guard.BYTES_PER_SLOT * sum(slots.values())))
    steps = [step for rank in algo.tbs for tb in algo.tbs[rank].values() for step in tb.steps]
    if steps:
        parts.append((f"{len(steps):,} steps", size_guard.BYTES_PER_STEP * float(len(steps))))
        widest = max(steps, key=lambda step: step.cnt)
        touched = size_guard.as_float(sum(max(step.cnt, 0) for step in steps))
        parts.append((f"rank {widest.rank} tb {widest.tb} step {widest.index} cnt={shown(widest.cnt)}",
                      size_guard.BYTES_PER_ACCESS * touched))
    size_guard.check_declared(source, parts)


def check_indices(algo: XmlAlgo, source: str) -> None:
    """``MscclError`` naming the first index the file gives that does not exist (module docstring)."""
    n = algo.ngpus
    _check_buffer_sizes(algo, source)
    for rank in sorted(algo.tbs):
        for tb in algo.tbs[rank].values():
            where = f"{source}: rank {rank} tb {tb.id}"
            if tb.id < 0:
                raise MscclError(f"{where}: a threadblock id must be 0 or more")
            for role, peer in (("send", tb.send), ("recv", tb.recv)):
                if not -1 <= peer < n:
                    raise MscclError(f"{where}: {role}={shown(peer)} is not a rank (0..{n - 1}, or -1 for none)")
            if tb.chan < 0 or (algo.nchannels is not None and tb.chan >= algo.nchannels):
                bound = ("0 or more" if algo.nchannels is None
                         else f"the file declares nchannels={shown(algo.nchannels)}")
                raise MscclError(f"{where}: chan={shown(tb.chan)} is not a channel ({bound})")
            for step in tb.steps:
                _check_step(algo, step, tb, f"{where} step {step.index} ({step.type})")


def _check_buffer_sizes(algo: XmlAlgo, source: str) -> None:
    """Declared buffers of the collective's sizes; a kind or ``nchunksperloop`` the workbench cannot
    check is left to ``run.collective_of``, which names it."""
    n, kind = algo.ngpus, _kind(algo)
    if kind not in COLL_NAMES or n < 1:
        return
    per_rank = algo.nchunksperloop if kind in ("broadcast", "reduce") else algo.nchunksperloop // n
    if per_rank < 1:
        return
    expected = dict(zip(("i", "o"), buffer_sizes(kind, n, per_rank)))
    in_place = algo.attrs.get("inplace") == "1"
    for rank in sorted(algo.buffers):
        declared = algo.buffers[rank]
        for buf in _BUFFERS:
            if declared[buf] < 0:
                raise MscclError(f"{source}: gpu {rank}: {buf}_chunks={shown(declared[buf])} must be 0 or more")
        for buf, size in expected.items():
            unused = in_place or ROOT_ONLY.get(kind) == buf  # may be declared 0 (the file gives no root)
            if declared[buf] != size and not (unused and declared[buf] == 0):
                raise MscclError(f"{source}: gpu {rank}: {buf}_chunks={shown(declared[buf])}, but the {kind} of "
                                 f"nchunksperloop={shown(algo.nchunksperloop)} over {n} GPUs places its chunks "
                                 f"in {size}"
                                 + (" (or 0 where the buffer is unused)" if unused else ""))


def _check_step(algo: XmlAlgo, step, tb, at: str) -> None:
    rank = step.rank
    if step.cnt < 0:
        raise MscclError(f"{at}: cnt={shown(step.cnt)} must be 0 or more")
    if step.depid != -1:
        target = algo.tbs[rank].get(step.depid) if step.depid >= 0 else None
        if target is None:
            raise MscclError(f"{at}: depid={shown(step.depid)} names no threadblock of rank {rank} (or -1 for none)")
        if not 0 <= step.deps < len(target.steps):
            raise MscclError(f"{at}: deps={shown(step.deps)} names no step of tb {step.depid} "
                             f"(it has {len(target.steps)})")
    if step.type in RECEIVING and tb.recv < 0:
        raise MscclError(f"{at}: receives, but the threadblock has no receive peer (recv={tb.recv})")
    if step.type in SENDING and tb.send < 0:
        raise MscclError(f"{at}: sends, but the threadblock has no send peer (send={tb.send})")
    accessed = ([("src", step.srcbuf, step.srcoff)] if step.type in LOCAL_SRC else []) + \
               ([("dst", step.dstbuf, step.dstoff)] if step.type in LOCAL_DST else [])
    for role, buf, off in accessed:
        if buf not in _BUFFERS:
            raise MscclError(f"{at}: {role}buf={buf[:20]!r} is not a buffer (i, o or s)")
        alias, index = algo.slot(rank, buf, off) if off >= 0 else (buf, off)
        if index < 0 or index + max(step.cnt, 1) > algo.limit(rank, alias):
            last = f"..{buf}[{shown(off + step.cnt - 1)}]" if step.cnt > 1 else ""
            raise MscclError(f"{at}: {buf}[{shown(off)}]{last} is outside the buffer "
                             f"({buf}_chunks={shown(algo.buffers[rank][buf])})")
