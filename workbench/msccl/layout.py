"""Where each chunk of a collective lives in MSCCL's input and output buffers, and ``refine`` (instances)."""

from __future__ import annotations

from workbench.model.algorithm import Algorithm, Transfer
from workbench.model.collective import Collective, make_collective
from workbench.model.transfer import read_target, with_read_target
from workbench.msccl.common import MscclError

__all__ = ["buffer_index", "buffer_layout", "buffer_sizes", "refine", "working_slots", "contiguous_runs",
           "in_place_slot"]


def buffer_index(collective: Collective, chunk: int) -> int:
    """The chunk's position in MSCCL's rank-major buffers (NCCL's layout, as msccl-tools lays it out).

    The IR numbers chunk ``j`` of rank ``r`` as ``j * N + r`` (All-to-All: piece ``j`` from ``s`` to
    ``d`` as ``j * N * N + s * N + d``); NCCL concatenates the ranks' blocks in rank order, so in a
    buffer of ``N * k`` chunks that chunk sits at ``r * k + j`` (All-to-All: ``(s * N + d) * k + j``,
    whose send and receive offsets follow below). Broadcast and reduce chunks are their own index.
    """
    n, k = collective.num_ranks, collective.chunks_per_rank
    if collective.kind in ("broadcast", "reduce"):
        return chunk
    if collective.kind == "alltoall":
        j, pair = divmod(chunk, n * n)
        return pair * k + j
    j, r = divmod(chunk, n)
    return r * k + j


def buffer_layout(collective: Collective) -> tuple[dict, dict, int, int]:
    """(input offsets, output offsets, i_chunks, o_chunks): {(rank, chunk): offset}, rank-major.

    All-Gather / gather: rank r's chunk j is i[j] on r and o[r*k + j] at every receiver; Reduce-Scatter:
    i[r*k + j] on every rank, o[j] on r; All-Reduce: i[r*k + j] and o[r*k + j]; scatter: the root's
    i[r*k + j], r's o[j]; All-to-All: piece j from s to d is i[d*k + j] on s and o[s*k + j] on d;
    broadcast / reduce: chunk j at i[j] and o[j].
    """
    n, k = collective.num_ranks, collective.chunks_per_rank
    kind = collective.kind
    inputs: dict[tuple[int, int], int] = {}
    outputs: dict[tuple[int, int], int] = {}
    for c, (pre, post) in enumerate(zip(collective.pre, collective.post)):
        if kind == "alltoall":
            j, pair = divmod(c, n * n)
            s, d = divmod(pair, n)
            inputs.update(((r, c), d * k + j) for r in pre)
            outputs.update(((r, c), s * k + j) for r in post)
            continue
        j = c if kind in ("broadcast", "reduce") else c // n
        full = buffer_index(collective, c)
        for r in pre:
            inputs[(r, c)] = j if kind in ("allgather", "gather") else full
        for r in post:
            outputs[(r, c)] = j if kind in ("reducescatter", "scatter") else full
    i_chunks, o_chunks = buffer_sizes(kind, n, k)
    return inputs, outputs, i_chunks, o_chunks


def in_place_slot(kind: str, chunks_per_rank: int, rank: int, buf: str, off: int) -> tuple[str, int]:
    """The slot ``buf[off]`` is when a call passes one buffer as input and output (NCCL's in-place
    calls): All-Reduce, All-to-All, broadcast and reduce use it whole (o[x] is i[x]); All-Gather's and
    gather's input is the rank's block of the output (i[j] is o[r*k + j]); Reduce-Scatter's and
    scatter's output is the rank's block of the input (o[j] is i[r*k + j]); scratch is its own."""
    k = max(chunks_per_rank, 1)
    if kind in ("allgather", "gather"):
        return ("o", rank * k + off) if buf == "i" else (buf, off)
    if kind in ("reducescatter", "reduce_scatter", "scatter"):
        return ("i", rank * k + off) if buf == "o" else (buf, off)
    return ("i", off) if buf == "o" else (buf, off)


def buffer_sizes(kind: str, ranks: int, chunks_per_rank: int) -> tuple[int, int]:
    """(i_chunks, o_chunks) of every rank for a standard collective, from its numbers alone (nothing
    built): k or n*k each, as ``buffer_layout`` places the chunks."""
    n, k = ranks, chunks_per_rank
    i_chunks = {"allgather": k, "gather": k, "alltoall": n * k, "broadcast": k, "reduce": k}.get(kind, n * k)
    o_chunks = {"reducescatter": k, "scatter": k, "alltoall": n * k, "broadcast": k, "reduce": k}.get(kind, n * k)
    return i_chunks, o_chunks


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
            target = read_target(t.read)
            read = t.read if target is None else with_read_target(t.read, i * len(algorithm.transfers) + target)
            transfers.append(Transfer(tid, tuple(split(ch, i) for ch in t.chunks), t.src, t.dst, t.op, deps,
                                      read=read))
    meta = dict(algorithm.meta, instances=parts)
    return Algorithm(algorithm.topology, finer, algorithm.chunk_bytes / parts, transfers, meta)


def working_slots(algorithm: Algorithm):
    """Working location (buf, offset) of every (rank, chunk), the copies in, and the copies out.

    Scratch is indexed like a full output (rank-major, ``layout.buffer_index``), so a rank's
    consecutive chunks stay contiguous. A reduction whose output layout is not that index
    (reduce-scatter's o[j]) works in scratch and copies its result out at the end.
    """
    collective = algorithm.collective
    inputs, outputs, i_chunks, o_chunks = buffer_layout(collective)
    written = {(t.dst, c) for t in algorithm.transfers for c in t.chunks}
    touched = written | {(t.src, c) for t in algorithm.transfers for c in t.chunks}
    location: dict[tuple[int, int], tuple[str, int]] = {}
    copies_in: list[tuple[int, int]] = []
    copies_out: list[tuple[int, int]] = []
    uses_scratch = False
    identity = all(off == buffer_index(collective, chunk) for (_, chunk), off in outputs.items())
    for key in sorted(touched | set(outputs)):
        rank, chunk = key
        if key in outputs and (not collective.combining or identity):
            location[key] = ("o", outputs[key])
            if key in inputs:
                copies_in.append(key)
        elif key in inputs and key not in written and key not in outputs:
            location[key] = ("i", inputs[key])
        else:
            location[key] = ("s", buffer_index(collective, chunk))
            uses_scratch = True
            if key in inputs:
                copies_in.append(key)
            if key in outputs:
                copies_out.append(key)
    s_chunks = collective.num_chunks if uses_scratch else 0
    return location, copies_in, copies_out, s_chunks, inputs, outputs, i_chunks, o_chunks


def contiguous_runs(src: list[tuple[str, int]], dst: list[tuple[str, int]]) -> list[tuple[int, int]]:
    """Split a message into runs contiguous at both ends: (first index, length)."""
    runs = []
    start = 0
    for i in range(1, len(src) + 1):
        if i == len(src) or src[i] != (src[i - 1][0], src[i - 1][1] + 1) or dst[i] != (dst[i - 1][0], dst[i - 1][1] + 1):
            runs.append((start, i - start))
            start = i
    return runs
