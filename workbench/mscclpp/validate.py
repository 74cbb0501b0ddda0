"""What an MSCCL++ execution plan declares, checked after it is parsed and before anything is built.

``check_plan`` first asks the size guard (``workbench.util.size_guard.check_declared``) about the GPUs,
their ``input_chunks``/``output_chunks``/``scratch_chunks``, the number of operations and the slots
they touch (``SizeError``, exit 2; ``--schedules`` x operations under the guard's cap), then checks
that every index the plan names exists (``MscclError`` naming it, exit 1 in ``interpret``):

* a gpu's ``connected_to`` peers and ``remote_buffers`` ranks are other GPUs of the plan, a remote
  buffer's ``type`` is ``i``, ``o`` or ``s``; threadblock ``id`` values are 0..T-1, each once;
* a ``switch`` channel's ``buffer_type`` is ``i``, ``o`` or ``s`` and each of its ``rank_groups``
  lists distinct GPUs of the plan, this one among them, with ``size`` their number; every GPU of a
  group declares the same group over the same buffer type, and any two GPUs declare the switch
  channels they share in one order (the executor connects each one collectively, in list order);
* a threadblock's ``channel_ids`` name channels of its gpu, its ``remote_buffer_ids`` entries of
  ``remote_buffers``, an operation's ``channel_ids`` a channel of its threadblock and its
  ``buffer_id`` a remote buffer reference of its threadblock (never counted from the end);
* a ``put`` writes into the peer of the channel it names, a ``get`` reads from it; a ``glres`` or
  ``gstore`` names its switch channels by ``switch_channel_id`` (a switch channel of its threadblock);
* every buffer reference lies inside its buffer (``index`` + ``size`` <= the declared size, ``size``
  at least 1), and ``input_chunks``/``output_chunks`` are the sizes the collective places its chunks
  in (``workbench.msccl.layout.buffer_sizes``; 0 for the buffer only the root of a rooted collective
  uses, as msccl-tools sizes buffers by use).
"""

from __future__ import annotations

from typing import Any

from workbench.util import size_guard
from workbench.util.size_guard import shown
from workbench.msccl.common import MscclError
from workbench.msccl.layout import buffer_sizes
from workbench.msccl.validate import ROOT_ONLY

__all__ = ["check_plan", "KINDS"]

KINDS = ("allgather", "reducescatter", "allreduce", "alltoall", "broadcast", "reduce", "gather", "scatter")
_FIELDS = (("i", "input_chunks"), ("o", "output_chunks"), ("s", "scratch_chunks"))
_CHANNELLED = ("put", "get", "signal", "wait", "rlxsignal", "rlxwait", "flush")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _per_rank(plan: dict[str, Any], sizes: list[dict[str, int]]) -> int:
    """Chunks per rank as the interpreter derives them (from the first gpu's larger buffer)."""
    n, first = len(sizes), sizes[0] if sizes else {"i": 0, "o": 0}
    size = max(first["i"], first["o"])
    return size if plan.get("collective") in ("broadcast", "reduce") else size // max(n, 1)


def check_plan(plan: dict[str, Any], program: list, source: str, schedules: int = 0) -> None:
    """The size guard, then every index and buffer size of a parsed plan (see the module docstring)."""
    gpus = plan["gpus"]
    if not gpus:
        raise MscclError(f"{source}: the plan lists no gpus")
    sizes = [_declared(gpu, rank, source) for rank, gpu in enumerate(gpus)]
    _guard(plan, program, sizes, source)
    size_guard.check_runs(source, schedules, sum(len(block) for blocks in program for block in blocks))
    _check_buffer_sizes(plan, sizes, source)
    for rank, gpu in enumerate(gpus):
        _check_gpu(gpu, rank, len(gpus), program[rank], sizes, source)
    _check_switch_groups(gpus, source)


def _declared(gpu: dict[str, Any], rank: int, source: str) -> dict[str, int]:
    declared = {}
    for buf, key in _FIELDS:
        value = gpu.get(key, 0)
        if not _is_int(value) or value < 0:
            raise MscclError(f"{source}: gpu {rank}: {key} must be an integer 0 or more, got {value!r}")
        declared[buf] = value
    return declared


def _guard(plan: dict[str, Any], program: list, sizes: list[dict[str, int]], source: str) -> None:
    n, kind = len(sizes), str(plan.get("collective"))
    parts = [(f"{n} gpus of input_chunks={shown(sizes[0]['i'])} output_chunks={shown(sizes[0]['o'])}" if sizes else "",
              size_guard.BYTES_PER_SLOT * size_guard.collective_pairs(kind, n, max(_per_rank(plan, sizes), 1)))]
    if sizes:
        totals = [sum(s.values()) for s in sizes]
        largest = max(range(n), key=totals.__getitem__)
        declared = " ".join(f"{key}={shown(sizes[largest][buf])}" for buf, key in _FIELDS)
        parts.append((f"gpu {largest} {declared}", size_guard.BYTES_PER_SLOT * size_guard.as_float(sum(totals))))
    ops = [op for blocks in program for block in blocks for op in block]
    if ops:
        parts.append((f"{len(ops):,} operations", size_guard.BYTES_PER_STEP * float(len(ops))))
        width = [sum(max(ref[3], 0) for ref in op.reads + op.writes) for op in ops]
        widest = max(range(len(ops)), key=width.__getitem__)
        parts.append((f"{ops[widest].where()} touching {width[widest]:,} slots",
                      size_guard.BYTES_PER_ACCESS * size_guard.as_float(sum(width))))
    size_guard.check_declared(source, parts)


def _check_buffer_sizes(plan: dict[str, Any], sizes: list[dict[str, int]], source: str) -> None:
    """Out of place, every gpu's input and output hold the collective's chunks; a kind or a size the
    interpreter cannot check is named by ``run._collective``."""
    kind, n = plan.get("collective"), len(sizes)
    per_rank = _per_rank(plan, sizes)
    if kind not in KINDS or per_rank < 1:
        return
    expected = dict(zip(("i", "o"), buffer_sizes(kind, n, per_rank)))
    for rank, declared in enumerate(sizes):
        for buf, key in _FIELDS[:2]:
            if declared[buf] != expected[buf] and not (ROOT_ONLY.get(kind) == buf and declared[buf] == 0):
                raise MscclError(f"{source}: gpu {rank}: {key}={declared[buf]}, but the {kind} over {n} GPUs with "
                                 f"{per_rank} chunk(s) per rank places its chunks in {expected[buf]}")


def _check_gpu(gpu: dict[str, Any], rank: int, n: int, blocks: list, sizes: list[dict[str, int]],
               source: str) -> None:
    where = f"{source}: gpu {rank}"
    peers, remote = _check_gpu_wiring(gpu, rank, n, where)
    ids = [block.get("id", b) for b, block in enumerate(gpu["threadblocks"])]
    if not all(_is_int(i) for i in ids) or sorted(ids) != list(range(len(ids))):
        raise MscclError(f"{where}: threadblock ids {ids[:20]} must be 0..{len(ids) - 1}, each once")
    for b, block in enumerate(gpu["threadblocks"]):
        channels, refs = _check_block_wiring(block, b, peers, remote, where)
        for raw, op in zip(block["ops"], blocks[b]):
            _check_op(raw, op, peers, channels, refs, remote, sizes, source)


def _check_gpu_wiring(gpu: dict[str, Any], rank: int, n: int, where: str) -> tuple[dict[str, list[int]], list]:
    """The gpu's peers per channel type and its remote buffers, each naming another gpu (and a buffer)."""
    peers: dict[str, list[int]] = {}
    for c, channel in enumerate(gpu["channels"]):
        if channel["channel_type"] == "switch":
            peers.setdefault("switch", []).extend(_check_switch_channel(channel, c, rank, n, where))
            continue
        for j, peer in enumerate(channel["connected_to"]):
            if not _is_int(peer) or not 0 <= peer < n or peer == rank:
                raise MscclError(f"{where}: channels[{c}].connected_to[{j}]={peer!r} is not another gpu "
                                 f"(0..{n - 1})")
        peers.setdefault(channel["channel_type"], []).extend(channel["connected_to"])
    remote = gpu["remote_buffers"]
    for r, entry in enumerate(remote):
        entry = entry if isinstance(entry, dict) else {}
        if not _is_int(entry.get("rank")) or not 0 <= entry["rank"] < n or entry["rank"] == rank:
            raise MscclError(f"{where}: remote_buffers[{r}].rank={entry.get('rank')!r} is not another gpu "
                             f"(0..{n - 1})")
        if entry.get("type") not in ("i", "o", "s"):
            raise MscclError(f"{where}: remote_buffers[{r}].type={entry.get('type')!r} is not a buffer (i, o or s)")
    return peers, remote


def _switch_groups(gpu: dict[str, Any]) -> list[tuple[str, tuple[int, ...]]]:
    """The gpu's switch channels in order, each (buffer type, ranks): one per rank group."""
    return [(channel["buffer_type"], tuple(group["ranks"])) for channel in gpu["channels"]
            if channel["channel_type"] == "switch" for group in channel["rank_groups"]]


def _check_switch_channel(channel: dict[str, Any], c: int, rank: int, n: int, where: str) -> list[int]:
    """A ``switch`` channel entry's buffer type and rank groups; one position per group."""
    if channel["buffer_type"] not in ("i", "o", "s"):
        raise MscclError(f"{where}: channels[{c}].buffer_type={channel['buffer_type']!r} is not a buffer (i, o or s)")
    for g, group in enumerate(channel["rank_groups"]):
        ranks, at = group["ranks"], f"{where}: channels[{c}].rank_groups[{g}]"
        if not all(_is_int(r) and 0 <= r < n for r in ranks) or len(set(ranks)) != len(ranks):
            raise MscclError(f"{at}.ranks={ranks[:20]!r} are not distinct gpus (0..{n - 1})")
        if rank not in ranks:
            raise MscclError(f"{at}.ranks={ranks[:20]!r} leave out the gpu itself")
        if group["size"] != len(ranks):
            raise MscclError(f"{at}.size={group['size']!r}, but it lists {len(ranks)} ranks")
    return list(range(len(channel["rank_groups"])))


def _check_switch_groups(gpus: list, source: str) -> None:
    """Every member of a switch channel's group declares it, and two gpus list the switch channels
    they share in one order (the executor connects each collectively, in list order)."""
    declared = [_switch_groups(gpu) for gpu in gpus]
    for rank, groups in enumerate(declared):
        for key in groups:
            buffer_type, ranks = key
            for other in ranks:
                shared = [g for g in groups if other in g[1]]
                theirs = [g for g in declared[other] if rank in g[1]]
                if shared != theirs:
                    raise MscclError(f"{source}: gpu {rank}: its switch channel over {buffer_type!r} with ranks "
                                     f"{list(ranks)[:20]} is not declared alike by gpu {other} (the switch channels "
                                     "two gpus share must be listed in one order by both)")


def _check_block_wiring(block: dict[str, Any], b: int, peers: dict[str, list[int]], remote: list,
                        where: str) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """A threadblock's channels per type and remote-buffer references, each naming one of the gpu's."""
    channels: dict[str, list[int]] = {}
    for c, channel in enumerate(block.get("channels", [])):
        kind = channel["channel_type"]
        for j, position in enumerate(channel["channel_ids"]):
            if not _is_int(position) or not 0 <= position < len(peers.get(kind, [])):
                raise MscclError(f"{where} tb {b}: channels[{c}].channel_ids[{j}]={position!r} names no {kind!r} "
                                 f"channel of the gpu (it has {len(peers.get(kind, []))})")
        channels.setdefault(kind, []).extend(channel["channel_ids"])
    refs: dict[str, list[int]] = {}
    for c, ref in enumerate(block.get("remote_buffer_refs", [])):
        for j, entry in enumerate(ref["remote_buffer_ids"]):
            if not _is_int(entry) or not 0 <= entry < len(remote):
                raise MscclError(f"{where} tb {b}: remote_buffer_refs[{c}].remote_buffer_ids[{j}]={entry!r} "
                                 f"names no remote buffer of the gpu (it has {len(remote)})")
        refs.setdefault(ref["access_channel_type"], []).extend(ref["remote_buffer_ids"])
    return channels, refs


def _check_op(raw: dict[str, Any], op: Any, peers: dict[str, list[int]], channels: dict[str, list[int]],
              refs: dict[str, list[int]], remote: list, sizes: list[dict[str, int]], source: str) -> None:
    at = f"{source}: {op.where()}"
    kind = raw.get("channel_type", "none")
    peer = None
    if op.name in _CHANNELLED and (op.name != "flush" or "channel_ids" in raw):
        ids = raw.get("channel_ids", [])
        if len(ids) != 1:
            raise MscclError(f"{at}: needs exactly one channel id, got {ids!r}")
        position = ids[0]
        if not _is_int(position) or not 0 <= position < len(channels.get(kind, [])):
            raise MscclError(f"{at}: channel {position!r} of type {kind!r} is not a channel of the threadblock "
                             f"(it has {len(channels.get(kind, []))})")
        peer = peers[kind][channels[kind][position]]
    for role in ("src_buff", "dst_buff"):
        for ref in raw.get(role, []):
            if "switch_channel_id" in ref:
                position = ref["switch_channel_id"]
                if kind != "switch" or not _is_int(position) or not 0 <= position < len(channels.get("switch", [])):
                    raise MscclError(f"{at} {role}: switch_channel_id {position!r} names no switch channel of the "
                                     f"threadblock (it has {len(channels.get('switch', []))})")
            if "buffer_id" in ref:
                buffer_id = ref["buffer_id"]
                if not _is_int(buffer_id) or not 0 <= buffer_id < len(refs.get(kind, [])):
                    raise MscclError(f"{at} {role}: buffer_id {buffer_id!r} names no remote buffer reachable over "
                                     f"{kind!r} (the threadblock has {len(refs.get(kind, []))})")
    if op.name in ("put", "get"):
        far, near = (op.writes[0], op.reads[0]) if op.name == "put" else (op.reads[0], op.writes[0])
        if far[0] != peer or near[0] != op.rank:
            role = "dst_buff" if op.name == "put" else "src_buff"
            raise MscclError(f"{at}: a {op.name} on the channel to gpu {peer} must name gpu {peer}'s buffer in its "
                             f"{role} (a buffer_id) and a local one in the other, got gpu {far[0]} and gpu {near[0]}")
    for rank, buf, index, size in op.reads + op.writes:
        if buf not in ("i", "o", "s"):
            raise MscclError(f"{at}: buffer type {buf!r} is not a buffer (i, o or s)")
        if size < 1 or index < 0 or index + size > sizes[rank][buf]:
            raise MscclError(f"{at}: gpu {rank} {buf}[{index}] of size {size} is outside the buffer "
                             f"({dict(_FIELDS)[buf]}={sizes[rank][buf]})")
