"""Where each chunk of a collective lives in MSCCL's input and output buffers, and ``refine`` (instances)."""

from __future__ import annotations

from workbench.algorithm import Algorithm, Transfer
from workbench.collective import Collective, make_collective
from workbench.msccl.common import MscclError

__all__ = ["buffer_layout", "refine"]


def buffer_layout(collective: Collective) -> tuple[dict, dict, int, int]:
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


