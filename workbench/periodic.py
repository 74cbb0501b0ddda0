"""Periodic schedules (``workbench.algorithm/3``): one period of transfers, repeated over the buffer.

A pipelined schedule does the same thing to every piece of the buffer: it sends piece ``k`` along
the same trees (or rings, or steps) as piece 0, a little later. Written out transfer by transfer it
grows with the number of pieces (tens of millions of transfers for a forest at 1,024 GPUs); runtimes
instead loop one period over the buffer (MSCCL's ``nchunksperloop``). An algorithm with a
``Period`` lists only the transfers of piece 0 (the *template*) and says how they repeat:

* ``repeat`` R: the pieces ``k = 0 .. R-1``;
* ``chunk_stride`` S: piece ``k`` moves chunk ``c + k S`` where the template moves ``c``;
* a transfer's ``lag`` (default 0): its copy for piece ``k`` is listed in period ``k + lag``, so a
  hop deep in a tree can run beside the first hops of later pieces (software pipelining).

The expansion (``expansion_order``) lists instance ``(k, i)`` (piece ``k`` of template transfer
``i``) in the order of ``(k + lag_i, i)``; its dependencies are ``(k, j)`` for each ``j`` in
``i``'s ``deps``. That order is the plan the simulator serves link by link, exactly as it would
serve the expanded file, which ``expanded`` writes out for small cases and tests.

The repetition rule (``check_repetition``) is what lets the verifier check one piece for all: the
pieces' chunk sets are disjoint and inside the collective, each template chunk has the same
holders before and after as its copies in every other piece, and every chunk no piece moves already
satisfies its postcondition. The file format is in docs/algorithm-format.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterator

__all__ = ["Period", "PeriodError", "expansion_order", "check_template_order", "check_repetition", "expanded",
           "one_piece", "repeated", "loop_body", "MAX_EXPANDED_TRANSFERS"]

# an expansion that would be written out (``expanded``) is refused beyond this many transfers
MAX_EXPANDED_TRANSFERS = 20_000_000


class PeriodError(ValueError):
    """A period that breaks the repetition rule; names the field, transfer or chunk."""


@dataclass(frozen=True)
class Period:
    repeat: int  # R: the number of pieces
    chunk_stride: int  # S: piece k moves chunk c + k S for the template's chunk c

    def to_dict(self) -> dict[str, int]:
        return {"repeat": self.repeat, "chunk_stride": self.chunk_stride}

    @classmethod
    def from_dict(cls, data: Any, source: str) -> "Period":
        if not isinstance(data, dict):
            raise PeriodError(f"{source}: period must be an object with 'repeat' and 'chunk_stride'")
        unknown = sorted(set(data) - {"repeat", "chunk_stride"})
        if unknown:
            raise PeriodError(f"{source}: period has unknown field {unknown[0]!r} (use repeat, chunk_stride)")
        values = []
        for key, least in (("repeat", 1), ("chunk_stride", 0)):
            value = data.get(key)
            if not (isinstance(value, int) and not isinstance(value, bool)) or value < least:
                raise PeriodError(f"{source}: period.{key} must be an integer >= {least}, got {value!r}")
            values.append(value)
        if values[0] > 1 and values[1] == 0:
            raise PeriodError(f"{source}: period.chunk_stride must be positive when repeat > 1 "
                              f"(every piece would move the same chunks)")
        return cls(*values)


def expansion_order(lags: list[int], repeat: int) -> Iterator[tuple[int, int]]:
    """``(piece k, template index i)`` in the expansion's order: by ``(k + lag_i, i)``."""
    if not lags:
        return
    last = max(lags)
    if last == 0:  # no lag: period after period, the template in order
        for k in range(repeat):
            for i in range(len(lags)):
                yield k, i
        return
    for period in range(repeat + last):
        for i, lag in enumerate(lags):
            k = period - lag
            if 0 <= k < repeat:
                yield k, i


def check_template_order(transfers: list) -> None:
    """Ids are positions and every dependency comes earlier in the expansion:
    ``(lag_j, j) < (lag_i, i)``, what "deps point back" means for a template; else ``PeriodError``."""
    lags = [t.lag for t in transfers]
    for position, t in enumerate(transfers):
        if t.id != position:
            raise PeriodError(f"transfer at position {position} has id {t.id}; ids must equal positions")
        for d in t.deps:
            if not (0 <= d < len(transfers)) or d == t.id or (lags[d], d) > (t.lag, t.id):
                raise PeriodError(f"transfer {t.id}: dependency {d} does not come earlier in the expansion "
                                  f"(a template dependency needs a smaller lag, or the same lag and a smaller id)")


def check_repetition(algorithm) -> None:
    """The repetition rule of the module docstring; ``PeriodError`` names the first break.

    Also checks that every dependency comes earlier in the expansion (``(lag_j, j) < (lag_i, i)``),
    which is what "deps point back" means for a template."""
    period: Period = algorithm.period
    collective = algorithm.collective
    transfers = algorithm.transfers
    check_template_order(transfers)
    template = sorted({c for t in transfers for c in t.chunks})
    num_chunks = collective.num_chunks
    stride, repeat = period.chunk_stride, period.repeat
    if template and (template[0] < 0 or template[-1] + (repeat - 1) * stride >= num_chunks):
        worst = template[0] if template[0] < 0 else template[-1]
        raise PeriodError(f"period: chunk {worst} of the template lands on chunk {worst + (repeat - 1) * stride} in "
                          f"piece {repeat - 1}, outside the collective's chunks 0..{num_chunks - 1}")
    covered: dict[int, int] = {}
    full, _ = collective.masks()
    pre, post = collective.pre, collective.post
    for k in range(repeat):
        shift = k * stride
        for c in template:
            image = c + shift
            if image in covered:
                raise PeriodError(f"period: pieces {covered[image]} and {k} both move chunk {image} "
                                  f"(chunk_stride {stride} is too small for the template's chunks)")
            covered[image] = k
            if k and (pre[image] != pre[c] or post[image] != post[c] or full[image] != full[c]):
                raise PeriodError(f"period: chunk {image} of piece {k} has other holders before or after the "
                                  f"collective than chunk {c} of the template, so one piece does not stand for all")
    for c in range(num_chunks):
        if c not in covered and not set(post[c]) <= set(pre[c]):
            raise PeriodError(f"period: no piece moves chunk {c}, but ranks "
                              f"{sorted(set(post[c]) - set(pre[c]))[:8]} must end with it")
        if c not in covered and collective.combining and post[c] and (set(pre[c]) != set(post[c]) or len(pre[c]) > 1):
            raise PeriodError(f"period: no piece moves chunk {c}, but its postcondition needs a reduction")


def one_piece(algorithm):
    """Piece 0 alone as a plain (``/1``) algorithm of the same collective: the template in
    expansion order (by ``(lag, id)``), renumbered, with no lag. Returns it and ``order``, where
    ``order[p]`` is the template index of its transfer ``p``."""
    transfers = algorithm.transfers
    order = sorted(range(len(transfers)), key=lambda i: (transfers[i].lag, i))
    position = {i: p for p, i in enumerate(order)}
    piece = [replace(transfers[i], id=p, deps=tuple(sorted(position[d] for d in transfers[i].deps)), lag=0,
                     t_start=None, t_end=None)
             for p, i in enumerate(order)]
    return replace(algorithm, transfers=piece, meta=dict(algorithm.meta), period=None), order


def expanded(algorithm):
    """The periodic algorithm written out as a plain algorithm (ids in expansion order); for tests,
    small cases and tools that need every transfer. Refused beyond ``MAX_EXPANDED_TRANSFERS``."""
    period = algorithm.period
    if period is None:
        return algorithm
    check_template_order(algorithm.transfers)
    total = period.repeat * len(algorithm.transfers)
    if total > MAX_EXPANDED_TRANSFERS:
        raise PeriodError(f"the expansion has {total:,} transfers, more than {MAX_EXPANDED_TRANSFERS:,}; "
                          f"work on the period instead")
    transfers = algorithm.transfers
    position: dict[tuple[int, int], int] = {}
    out = []
    for k, i in expansion_order([t.lag for t in transfers], period.repeat):
        t = transfers[i]
        shift = k * period.chunk_stride
        new_id = len(out)
        position[(k, i)] = new_id
        out.append(replace(t, id=new_id, chunks=tuple(c + shift for c in t.chunks),
                           deps=tuple(sorted(position[(k, d)] for d in t.deps)), lag=0, t_start=None, t_end=None))
    meta = dict(algorithm.meta)
    meta["expanded_from"] = period.to_dict()
    return replace(algorithm, transfers=out, meta=meta, period=None)


def repeated(algorithm, repeat: int, lags: list[int] | None = None, chunk_bytes: float | None = None):
    """``algorithm`` (plain, a standard collective) run on ``repeat`` pieces of a buffer: the periodic
    algorithm of the same collective with ``repeat`` times the chunks per rank, whose template is
    ``algorithm``'s transfers (with ``lags`` when given) and whose stride is its number of chunks.
    The standard numbering puts piece ``k`` of a collective's chunks at ``k * num_chunks + c``
    (``workbench.collective``), so piece ``k`` is exactly the copy the stride makes. ``chunk_bytes``
    defaults to the algorithm's (the buffer grows ``repeat`` times)."""
    from workbench.collective import make_collective

    if algorithm.period is not None:
        raise PeriodError("repeated() takes a plain algorithm; this one is already periodic")
    c = algorithm.collective
    if c.kind == "custom":
        raise PeriodError("repeated() needs a standard collective (a custom one has no piece numbering)")
    if not (isinstance(repeat, int) and repeat >= 1):
        raise PeriodError(f"repeat must be an integer >= 1, got {repeat!r}")
    transfers = algorithm.transfers
    if lags is not None:
        if len(lags) != len(transfers) or any(not isinstance(x, int) or x < 0 for x in lags):
            raise PeriodError("lags: one integer >= 0 per transfer")
        transfers = [replace(t, lag=lag) for t, lag in zip(transfers, lags)]
    collective = make_collective(c.kind, c.num_ranks, c.chunks_per_rank * repeat, c.root)
    return replace(algorithm, collective=collective, transfers=list(transfers), meta=dict(algorithm.meta),
                   chunk_bytes=algorithm.chunk_bytes if chunk_bytes is None else chunk_bytes,
                   period=Period(repeat, c.num_chunks))


def loop_body(algorithm):
    """The plain algorithm one runtime loop iteration runs (MSCCL's ``nchunksperloop``): piece 0 of
    a periodic algorithm on the collective of one piece. Needs the layout ``repeated`` makes: the
    template moves exactly chunks ``0 .. stride-1`` of a standard collective whose chunks are
    ``repeat * stride``; else ``PeriodError`` (expand the schedule instead)."""
    from workbench.collective import make_collective

    period = algorithm.period
    if period is None:
        return algorithm
    c = algorithm.collective
    stride, repeat = period.chunk_stride, period.repeat
    template = {ch for t in algorithm.transfers for ch in t.chunks}
    per_piece, left = divmod(c.chunks_per_rank, repeat)
    if c.kind == "custom" or left or stride * repeat != c.num_chunks or not template <= set(range(stride)):
        raise PeriodError(f"the period cannot be written as one loop iteration: its template must move chunks "
                          f"0..{stride - 1} of a standard collective of {repeat} x {stride} chunks "
                          f"(workbench.periodic.repeated builds that layout); expand it instead")
    piece, _ = one_piece(algorithm)
    piece.collective = make_collective(c.kind, c.num_ranks, per_piece, c.root)
    piece.meta["loop"] = period.to_dict()
    return piece
