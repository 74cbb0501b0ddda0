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

The pieces tile the collective: piece k is chunks ``k S .. k S + S - 1``, the template moves
chunks of piece 0, and the collective is ``repeat`` copies of the collective of one piece
(``piece_collective``, ``whole_collective``; the standard numbering of ``workbench.model.collective`` is
piece by piece, so a standard collective with R times the chunks per rank is R pieces of itself).
That is what lets the verifier check one piece for all (``check_repetition``), what a ``/3``
file writes as its collective (one piece), and what a runtime loop iteration runs (``loop_body``).
The file format is in docs/algorithm-format.md.

Reversal and concatenation (``Algorithm.reverse``, ``Algorithm.concat``) work on the period, so a
pipelined All-Gather gives a pipelined Reduce-Scatter and All-Reduce of the same size, and each
equals its expansion in this precise sense:

* **reverse.** The template is listed back to front (template transfer ``i`` of ``m`` becomes
  ``m-1-i``), turned around as a plain reversal does, and lag ``l`` becomes ``L - l`` (``L`` the
  largest lag, ``reversed_lags``). The reversed expansion lists piece ``R-1`` first, so with piece
  ``k`` renamed piece ``R-1-k``: ``p.reverse().expanded()`` is ``mirrored(p.expanded().reverse(),
  p.period)`` transfer for transfer (id, chunks, src, dst, op, deps), since instance ``(k, i)`` is
  listed by ``(k + lag_i, i)`` and its reverse by ``(R-1-k + L - lag_i, m-1-i)``, the same order
  read backwards. Every piece has the same holders before and after (the repetition rule), and
  neither the simulator nor the verifier looks at which piece a transfer belongs to beyond that,
  so both give the two lists the same times (arrays permuted) and verdicts.
* **concat.** Two periodic phases with one period (Reduce-Scatter, then All-Gather) share it: the
  template is the first's followed by the second's, the second's transfers wait for the first's
  that touch their buffers in the same piece (the plain rule; pieces move disjoint chunks), and
  the second's lags grow by the least shift that lists each of them a period after what it waits
  for (``second_phase_shift``). The expansion has exactly the transfers and dependency graph of
  ``p1.expanded().concat(p2.expanded())``, listed otherwise: piece ``k``'s All-Gather right after
  piece ``k``'s Reduce-Scatter instead of after every piece's, so the two pipelines overlap (the
  plain concatenation of the expansions may be slower, never invalid where this is valid).

Phases whose pieces differ (a forest of ``k`` trees per root against one of ``2k``) are brought to
one period by ``coarsened``, which takes several pieces as one without changing the expansion.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterator

__all__ = ["Period", "PeriodError", "expansion_order", "check_template_order", "check_repetition", "expanded",
           "one_piece", "repeated", "loop_body", "piece_collective", "whole_collective", "reversed_lags",
           "second_phase_shift", "mirrored", "coarsened", "MAX_EXPANDED_TRANSFERS", "MAX_PIECES"]

# an expansion that would be written out (``expanded``) is refused beyond this many transfers
MAX_EXPANDED_TRANSFERS = 20_000_000
# pieces in one schedule: the verifier replays each piece in turn (tens of microseconds apiece at
# least), so more would run for hours; a 1 GiB buffer in this many pieces has 1 KB pieces
MAX_PIECES = 1_000_000


class PeriodError(ValueError):
    """A period that breaks the repetition rule; names the field, transfer or chunk."""


@dataclass(frozen=True)
class Period:
    repeat: int  # R: the number of pieces
    chunk_stride: int  # S: piece k moves chunk c + k S for the template's chunk c

    def to_dict(self) -> dict[str, int]:
        """The ``period`` object of an algorithm file."""
        return {"repeat": self.repeat, "chunk_stride": self.chunk_stride}

    @classmethod
    def from_dict(cls, data: Any, source: str) -> "Period":
        """Parse and check a ``period`` object; ``PeriodError`` names the bad field in ``source``."""
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
        if values[0] > MAX_PIECES:
            raise PeriodError(f"{source}: period.repeat={values[0]} is more than {MAX_PIECES:,} pieces")
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

    The pieces tile the collective (``repeat * chunk_stride`` chunks, the template inside the first
    ``chunk_stride``), and chunk ``c + k S`` has chunk ``c``'s holders before and after in every
    piece; with that, one piece stands for all. Also ``check_template_order``."""
    period: Period = algorithm.period
    collective = algorithm.collective
    check_template_order(algorithm.transfers)
    stride, repeat = period.chunk_stride, period.repeat
    piece_collective(collective, period)  # the tiling
    for t in algorithm.transfers:
        for c in t.chunks:
            if not 0 <= c < stride:
                raise PeriodError(f"transfer {t.id}: chunk {c} is not a chunk of piece 0 (0..{stride - 1}); "
                                  f"the template moves piece 0, the period moves the others")
    if collective.kind != "custom":
        return  # a standard collective is numbered piece by piece: every piece has the same holders
    pre, post = collective.pre, collective.post  # (a chunk's contribution set follows from its pre)
    for k in range(1, repeat):
        shift = k * stride
        if pre[shift:shift + stride] != pre[:stride] or post[shift:shift + stride] != post[:stride]:
            c = next(c for c in range(stride) if pre[shift + c] != pre[c] or post[shift + c] != post[c])
            raise PeriodError(f"period: chunk {c + shift} of piece {k} has other holders before or after the "
                              f"collective than chunk {c} of piece 0, so one piece does not stand for all")


def piece_collective(collective, period: Period):
    """The collective of one piece (its first ``chunk_stride`` chunks), what a ``/3`` file writes;
    ``PeriodError`` unless ``repeat`` such pieces tile ``collective``."""
    from workbench.model.collective import Collective, make_collective

    stride, repeat = period.chunk_stride, period.repeat
    if stride * repeat != collective.num_chunks:
        raise PeriodError(f"period: {repeat} pieces of {stride} chunks do not tile the collective's "
                          f"{collective.num_chunks} chunks")
    if collective.kind == "custom":
        return Collective("custom", collective.num_ranks, 1, collective.pre[:stride], collective.post[:stride],
                          collective.combining, collective.root)
    if collective.chunks_per_rank % repeat:
        raise PeriodError(f"period: {collective.chunks_per_rank} chunks per rank do not split into {repeat} pieces")
    return make_collective(collective.kind, collective.num_ranks, collective.chunks_per_rank // repeat,
                           collective.root)


def whole_collective(piece, repeat: int):
    """``repeat`` pieces of the collective ``piece``, numbered piece by piece (inverse of ``piece_collective``)."""
    from workbench.model.collective import Collective, make_collective

    if piece.kind == "custom":
        return Collective("custom", piece.num_ranks, 1, piece.pre * repeat, piece.post * repeat, piece.combining,
                          piece.root)
    return make_collective(piece.kind, piece.num_ranks, piece.chunks_per_rank * repeat, piece.root)


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
    """``algorithm`` (plain) run on ``repeat`` pieces of a buffer: the periodic
    algorithm of the same collective with ``repeat`` times the chunks per rank, whose template is
    ``algorithm``'s transfers (with ``lags`` when given) and whose stride is its number of chunks.
    The standard numbering puts piece ``k`` of a collective's chunks at ``k * num_chunks + c``
    (``workbench.model.collective``), so piece ``k`` is exactly the copy the stride makes. ``chunk_bytes``
    defaults to the algorithm's (the buffer grows ``repeat`` times)."""
    if algorithm.period is not None:
        raise PeriodError("repeated() takes a plain algorithm; this one is already periodic")
    c = algorithm.collective
    if not (isinstance(repeat, int) and repeat >= 1):
        raise PeriodError(f"repeat must be an integer >= 1, got {repeat!r}")
    transfers = algorithm.transfers
    if lags is not None:
        if len(lags) != len(transfers) or any(not isinstance(x, int) or x < 0 for x in lags):
            raise PeriodError("lags: one integer >= 0 per transfer")
        transfers = [replace(t, lag=lag) for t, lag in zip(transfers, lags)]
    collective = whole_collective(c, repeat)
    return replace(algorithm, collective=collective, transfers=list(transfers), meta=dict(algorithm.meta),
                   chunk_bytes=algorithm.chunk_bytes if chunk_bytes is None else chunk_bytes,
                   period=Period(repeat, c.num_chunks))


def loop_body(algorithm):
    """The plain algorithm one runtime loop iteration runs (MSCCL's ``nchunksperloop``): piece 0 of
    a periodic algorithm on the collective of one piece."""
    period = algorithm.period
    if period is None:
        return algorithm
    piece, _ = one_piece(algorithm)
    piece.collective = piece_collective(algorithm.collective, period)
    piece.meta["loop"] = period.to_dict()
    return piece


def reversed_lags(lags: list[int]) -> list[int]:
    """The lags of a reversed template (``Algorithm.reverse``), listed back to front: ``L - lag``
    with ``L`` the largest, so the piece that ran last runs first (module docstring)."""
    last = max(lags, default=0)
    return [last - lag for lag in reversed(lags)]


def second_phase_shift(transfers: list, offset: int) -> int:
    """How much ``Algorithm.concat`` adds to the second phase's lags (its template from ``offset``):
    the least shift that keeps every lag >= 0 and lists each transfer a period after the first-phase
    transfers it waits for, ``lag_d + 1 <= lag_i + shift``. The same period would be enough for a
    valid expansion (the first phase's ids are smaller), but then the waiting transfer comes up on
    its link while what it waits for is still in flight, and in order the link idles behind it:
    measured on ForestColl's All-Reduces (rails:2x4, dgx1, torus:4x4, rails:4x8), the same period was
    0.3-1.2% slower than concatenating the expansions and one period 0.02-1.4% faster. Dependencies
    inside the second phase keep their order under any common shift."""
    second = transfers[offset:]
    shift = -min((t.lag for t in second), default=0)
    for t in second:
        for d in t.deps:
            if d < offset:
                shift = max(shift, transfers[d].lag + 1 - t.lag)
    return shift


def mirrored(algorithm, period: Period):
    """A plain algorithm with piece ``k``'s chunks renamed piece ``R-1-k``'s (chunk ``c + k S``
    becomes ``c + (R-1-k) S``): how the reverse of an expansion reads as the expansion of a
    reversed period (module docstring). Every piece has the same holders, so the collective is
    unchanged."""
    stride, last = period.chunk_stride, period.repeat - 1

    def rename(c: int) -> int:
        k, offset = divmod(c, stride)
        return offset + (last - k) * stride

    transfers = [replace(t, chunks=tuple(rename(c) for c in t.chunks)) for t in algorithm.transfers]
    return replace(algorithm, transfers=transfers, meta=dict(algorithm.meta))


def coarsened(algorithm, factor: int):
    """The periodic ``algorithm`` with every ``factor`` consecutive pieces taken as one: repeat
    ``R / factor``, stride ``factor * S``, a template of ``factor * m`` transfers. Entry ``(r, i)``
    is piece ``r``'s copy of template transfer ``i`` with lag ``(r + lag_i) // factor``; the entries
    are listed by ``((r + lag_i) % factor, i)``. Instance ``(k', (r, i))`` is then listed by
    ``(factor k' + r + lag_i, i)``, the original's order for piece ``factor k' + r``: the expansion is
    the original's, transfer for transfer. Two phases of unlike pieces share a period this way
    (``Algorithm.concat`` needs one)."""
    period = algorithm.period
    if period is None or not isinstance(factor, int) or factor < 1 or period.repeat % factor:
        raise PeriodError(f"coarsened: a factor of {factor!r} does not divide a periodic algorithm's pieces")
    transfers = algorithm.transfers
    entries = sorted(((r + t.lag) % factor, i, r) for r in range(factor) for i, t in enumerate(transfers))
    position = {(r, i): p for p, (_, i, r) in enumerate(entries)}
    template = []
    for p, (_, i, r) in enumerate(entries):
        t = transfers[i]
        template.append(replace(t, id=p, chunks=tuple(c + r * period.chunk_stride for c in t.chunks),
                                deps=tuple(sorted(position[(r, d)] for d in t.deps)), lag=(r + t.lag) // factor,
                                t_start=None, t_end=None))
    return replace(algorithm, transfers=template, meta=dict(algorithm.meta),
                   period=Period(period.repeat // factor, period.chunk_stride * factor))
