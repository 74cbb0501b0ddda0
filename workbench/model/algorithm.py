"""The algorithm IR and its file format, ``workbench.algorithm/1`` (``/2`` when the embedded
topology has a per-message link overhead, ``/3`` for a periodic schedule: ``workbench.model.periodic``;
docs/algorithm-format.md).

A ``Transfer`` moves one chunk (or several contiguous chunks, paying alpha once) from ``src``
to ``dst`` as a ``copy`` or a ``reduce``, after the transfers named in ``deps`` have arrived.
An ``Algorithm`` lists transfers in planned order on the physical topology it is timed on.
The file format is a contract with outside tools; see docs/algorithm-format.md.
"""

from __future__ import annotations

import gc
import math
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import starmap
from pathlib import Path
from typing import Any, Iterable

from workbench.util import fastjson
from workbench.util.files import write_output
from workbench.model.collective import Collective, CollectiveError, collective_from_dict, make_collective
from workbench.model.periodic import Period, PeriodError, expanded, piece_collective, whole_collective
from workbench.topology import Topology, TopologyError, topology_from_dict

__all__ = ["FORMAT", "FORMAT_2", "FORMAT_3", "FORMATS", "Transfer", "Algorithm", "AlgorithmFormatError", "load_algorithm"]

FORMAT = "workbench.algorithm/1"
# /1 plus an optional ``overhead`` on the embedded topology's links; written only when one is
# non-zero, so a /1 reader meets /2 exactly when it would otherwise time the algorithm wrongly
FORMAT_2 = "workbench.algorithm/2"
# /2 plus a ``period`` (one period of transfers, its repeat count and chunk stride) and a per-transfer
# ``lag``: written only for a periodic algorithm, so every other file reads as before
FORMAT_3 = "workbench.algorithm/3"
FORMATS = (FORMAT, FORMAT_2, FORMAT_3)
_INF = math.inf


class AlgorithmFormatError(ValueError):
    """A file that is not a well-formed ``workbench.algorithm/1``, ``/2`` or ``/3`` document (schema, types)."""


@dataclass(slots=True)
class Transfer:
    id: int
    chunks: tuple[int, ...]
    src: int
    dst: int
    op: str = "copy"
    deps: tuple[int, ...] = ()
    t_start: float | None = None
    t_end: float | None = None
    lag: int = 0  # periodic schedules only: piece k's copy is listed in period k + lag (workbench.model.periodic)

    @property
    def chunk(self) -> int:
        """The chunk of a single-chunk transfer (the first chunk of a message)."""
        return self.chunks[0]

    def to_dict(self) -> dict[str, Any]:
        """The transfer's JSON entry: ``chunk`` for a single chunk, else ``chunks``; ``lag`` only when non-zero."""
        entry: dict[str, Any] = {"id": self.id}
        if len(self.chunks) == 1:
            entry["chunk"] = self.chunks[0]
        else:
            entry["chunks"] = list(self.chunks)
        entry.update(src=self.src, dst=self.dst, op=self.op, deps=list(self.deps),
                     t_start=self.t_start, t_end=self.t_end)
        if self.lag:
            entry["lag"] = self.lag
        return entry


@dataclass
class Algorithm:
    topology: Topology
    collective: Collective
    chunk_bytes: float
    transfers: list[Transfer]
    meta: dict[str, Any] = field(default_factory=dict)
    # a periodic schedule: ``transfers`` is one period, repeated as this says (workbench.model.periodic)
    period: Period | None = None

    @property
    def size_bytes(self) -> float:
        """The collective's nccl-tests size (bytes) at this chunk size."""
        return self.collective.size_bytes(self.chunk_bytes)

    def __len__(self) -> int:
        return len(self.transfers)

    @property
    def total_transfers(self) -> int:
        """Transfers in the whole schedule: the period's times its repeat count when periodic."""
        return len(self.transfers) * (self.period.repeat if self.period is not None else 1)

    def expanded(self) -> "Algorithm":
        """A periodic algorithm written out transfer by transfer (itself when not periodic)."""
        return expanded(self)

    def _plain(self, operation: str) -> None:
        if self.period is not None:
            raise ValueError(f"{operation} applies to a plain algorithm; expand the periodic one first "
                             f"(Algorithm.expanded) or build it per period")

    # ------------------------------------------------------------ building helpers
    @classmethod
    def from_steps(
        cls,
        topology: Topology,
        collective: Collective,
        chunk_bytes: float,
        steps: Iterable[tuple],
        meta: dict[str, Any] | None = None,
    ) -> "Algorithm":
        """From ``(chunks, src, dst, op, deps[, t_start, t_end])`` tuples; ids are assigned by position."""
        transfers = []
        for i, step in enumerate(steps):
            chunks, src, dst, op, deps = step[:5]
            chunks = (chunks,) if isinstance(chunks, int) else tuple(chunks)
            t_start, t_end = (step[5], step[6]) if len(step) >= 7 else (None, None)
            transfers.append(Transfer(i, chunks, src, dst, op, tuple(deps), t_start, t_end))
        return cls(topology, collective, chunk_bytes, transfers, dict(meta or {}))

    # ------------------------------------------------------------ transforms
    def reverse(self, reversed_topology: Topology | None = None) -> "Algorithm":
        """An all-gather / broadcast on the reversed graph turned into reduce-scatter / reduce.

        Each transfer ``u -> v`` becomes ``v -> u``, listed in reverse order; a transfer that
        waited for ``t`` becomes one that ``t`` waits for. Writes into an NPU become ``reduce``;
        writes into a switch stay ``copy`` (a switch only forwards), so a switch that sent the
        same chunk on several links (a multicast) cannot be reversed.
        """
        self._plain("reverse()")
        target_kind = {"allgather": "reducescatter", "broadcast": "reduce"}.get(self.collective.kind)
        if target_kind is None:
            raise ValueError(f"reverse() applies to allgather or broadcast, not {self.collective.kind}")
        topology = reversed_topology or self.topology.reversed()
        sent: dict[tuple[int, int], int] = {}
        for t in self.transfers:
            if self.topology.is_switch(t.src):
                for c in t.chunks:
                    if (t.src, c) in sent:
                        raise ValueError(
                            f"transfer {t.id}: switch {t.src} multicasts chunk {c} (also in transfer "
                            f"{sent[(t.src, c)]}); a switch cannot reduce, so this cannot be reversed"
                        )
                    sent[(t.src, c)] = t.id
        count = len(self.transfers)
        dependants: list[list[int]] = [[] for _ in range(count)]
        for t in self.transfers:
            for d in t.deps:
                dependants[d].append(t.id)
        horizon = max((t.t_end for t in self.transfers if t.t_end is not None), default=None)
        transfers = []
        for new_id in range(count):
            old = self.transfers[count - 1 - new_id]
            op = "copy" if topology.is_switch(old.src) else "reduce"
            deps = tuple(sorted(count - 1 - s for s in dependants[old.id]))
            t_start = horizon - old.t_end if (horizon is not None and old.t_end is not None) else None
            t_end = horizon - old.t_start if (horizon is not None and old.t_start is not None) else None
            transfers.append(Transfer(new_id, old.chunks, old.dst, old.src, op, deps, t_start, t_end))
        c = self.collective
        collective = make_collective(target_kind, c.num_ranks, c.chunks_per_rank, c.root)
        meta = dict(self.meta)
        meta["reversed_from"] = c.kind
        return Algorithm(topology, collective, self.chunk_bytes, transfers, meta)

    def concat(self, second: "Algorithm", collective: Collective | None = None) -> "Algorithm":
        """Run ``second`` after ``self`` on the same topology (reduce-scatter then all-gather = all-reduce).

        Every phase-2 transfer waits for the phase-1 transfers that touch the buffers it reads or
        writes, so no phase-2 send starts before its data is final and no phase-2 write overtakes
        a phase-1 access.
        """
        self._plain("concat()")
        second._plain("concat()")
        if second.topology != self.topology:
            raise ValueError("concat: the two phases are on different topologies")
        if not math.isclose(second.chunk_bytes, self.chunk_bytes, rel_tol=1e-12):
            raise ValueError("concat: the two phases use different chunk sizes")
        if collective is None:
            a, b = self.collective, second.collective
            if (a.kind, b.kind) == ("reducescatter", "allgather") and (a.num_ranks, a.chunks_per_rank) == (
                b.num_ranks, b.chunks_per_rank):
                collective = make_collective("allreduce", a.num_ranks, a.chunks_per_rank)
            else:
                raise ValueError(f"concat: give the combined collective for {a.kind} then {b.kind}")
        touched: dict[tuple[int, int], list[int]] = defaultdict(list)
        for t in self.transfers:
            for c in t.chunks:
                touched[(t.dst, c)].append(t.id)
                touched[(t.src, c)].append(t.id)
        offset = len(self.transfers)
        transfers = list(self.transfers)
        for t in second.transfers:
            deps = {d + offset for d in t.deps}
            for c in t.chunks:
                deps.update(touched.get((t.src, c), ()))
                deps.update(touched.get((t.dst, c), ()))
            transfers.append(Transfer(t.id + offset, t.chunks, t.src, t.dst, t.op, tuple(sorted(deps)),
                                      t.t_start, t.t_end))
        phase_one_end = max((t.t_end for t in self.transfers if t.t_end is not None), default=None)
        if phase_one_end is not None:
            for t in transfers[offset:]:
                t.t_start = None if t.t_start is None else t.t_start + phase_one_end
                t.t_end = None if t.t_end is None else t.t_end + phase_one_end
        meta = {"phases": [self.meta, second.meta]}
        for key in ("formulation", "params", "seed"):
            if key in self.meta:
                meta[key] = self.meta[key]
        return Algorithm(self.topology, collective, self.chunk_bytes, transfers, meta)

    # ------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        """The file's document: ``/3`` when periodic, else ``/2`` when some link has an overhead,
        else ``/1`` as always."""
        if self.period is None:
            version = FORMAT_2 if self.topology.has_overhead() else FORMAT
            head = {"format": version, "topology": self.topology.to_dict(),
                    "collective": self.collective.to_dict(self.size_bytes), "chunk_bytes": self.chunk_bytes}
        else:  # a period writes the collective of one piece (workbench.model.periodic)
            piece = piece_collective(self.collective, self.period)
            head = {"format": FORMAT_3, "topology": self.topology.to_dict(),
                    "collective": piece.to_dict(piece.size_bytes(self.chunk_bytes)), "chunk_bytes": self.chunk_bytes,
                    "period": self.period.to_dict()}
        return {**head, "transfers": [t.to_dict() for t in self.transfers], "meta": self.meta}

    def save(self, path: str | Path) -> None:
        """Write atomically, so a reader never sees half a file (a character device such as
        /dev/null is written through; ``workbench.util.files.OutputError`` names a path that cannot
        take the file)."""
        with no_cyclic_gc():
            document = self.to_dict()
            # meta is small: an infinity there (a solver's bound) is written as json always wrote it
            text = fastjson.dumps(document, non_finite=fastjson.has_non_finite(document["meta"]))
        write_output(path, text)

    @classmethod
    def from_dict(cls, data: Any, source: str = "algorithm") -> "Algorithm":
        """Parse a decoded algorithm document; ``AlgorithmFormatError`` names what is wrong in ``source``."""
        return _parse(data, source)


def load_algorithm(path: str | Path) -> Algorithm:
    """Read a ``workbench.algorithm/1``, ``/2`` or ``/3`` JSON file; ``AlgorithmFormatError`` names what is wrong."""
    with no_cyclic_gc():
        return _load(Path(path))


@contextmanager
def no_cyclic_gc():
    """No cyclic collection while a document is built or read: a million transfers are millions of
    new objects, which each collection would rescan (most of a large load's time)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _load(path: Path) -> Algorithm:
    from workbench.util.safe_load import read_bytes

    # a FIFO would block the read, a device never end it, a 5 GB file fill the memory: refused unread
    text = read_bytes(path, "algorithm file", AlgorithmFormatError)
    typed = _typed_decode(text)
    if typed is not None:
        document, fields = typed
        return _parse(document, str(path), list(starmap(Transfer, fields)))
    try:
        data = fastjson.loads(text)
    except fastjson.JSONDecodeError as exc:
        text.decode("utf-8")  # a binary file: UnicodeDecodeError, which callers report as "not a text file"
        raise AlgorithmFormatError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except UnicodeDecodeError:
        raise  # a binary file: callers report it as "not a text file"
    except RecursionError:  # arrays or objects nested deeper than the parser's recursion allows
        raise AlgorithmFormatError(f"{path}: nested too deeply to be an algorithm file") from None
    except ValueError:  # the parser's one other refusal: an integer with more digits than Python converts
        raise AlgorithmFormatError(f"{path}: an integer has more digits than can be read") from None
    return _parse(data, str(path))


def _typed_decode(text: bytes) -> tuple[dict, list[tuple]] | None:
    """The fast reader for large well-formed files (``workbench.model.typed_load``), when msgspec is
    installed and the file is big enough for it to matter; None sends the text the usual way."""
    if len(text) < TYPED_FROM_BYTES:
        return None
    try:
        from workbench.model.typed_load import decode
    except ImportError:
        return None
    return decode(text)


TYPED_FROM_BYTES = 1 << 20  # below a megabyte the usual reader is as fast, without importing msgspec


def _parse(data: Any, source: str, transfers: list[Transfer] | None = None) -> Algorithm:
    if not isinstance(data, dict):
        raise AlgorithmFormatError(f"{source}: expected a JSON object")
    if data.get("format") not in FORMATS:
        raise AlgorithmFormatError(f"{source}: format must be {FORMAT!r}, {FORMAT_2!r} or {FORMAT_3!r}, "
                                   f"got {data.get('format')!r}")
    for key in ("topology", "collective", "chunk_bytes", "transfers"):
        if key not in data and not (key == "transfers" and transfers is not None):
            raise AlgorithmFormatError(f"{source}: missing field {key!r}")
    try:
        topology = topology_from_dict(data["topology"], f"{source}: topology")
    except TopologyError as exc:
        raise AlgorithmFormatError(str(exc)) from None
    if data["format"] == FORMAT and topology.has_overhead():  # a /1 reader would time it without them
        raise AlgorithmFormatError(f"{source}: link overheads need format {FORMAT_2!r}, the file says {FORMAT!r}")
    try:
        collective = collective_from_dict(data["collective"], f"{source}: collective")
    except CollectiveError as exc:
        raise AlgorithmFormatError(str(exc)) from None
    chunk_bytes = data["chunk_bytes"]
    if not isinstance(chunk_bytes, (int, float)) or isinstance(chunk_bytes, bool) or chunk_bytes <= 0:
        raise AlgorithmFormatError(f"{source}: chunk_bytes must be a positive number, got {chunk_bytes!r}")
    size = data["collective"].get("size_bytes")
    if size is not None and not math.isclose(collective.size_bytes(chunk_bytes), size, rel_tol=1e-9):
        raise AlgorithmFormatError(
            f"{source}: collective.size_bytes={size} disagrees with chunk_bytes={chunk_bytes} "
            f"(expected {collective.size_bytes(chunk_bytes):g} for this {collective.kind})"
        )
    if transfers is None:
        raw = data["transfers"]
        if not isinstance(raw, list):
            raise AlgorithmFormatError(f"{source}: transfers must be a list")
        transfers = _parse_transfers(raw, source)
    meta = data.get("meta") or {}
    if not isinstance(meta, dict):
        raise AlgorithmFormatError(f"{source}: meta must be an object")
    period = None
    if data["format"] == FORMAT_3:
        if "period" not in data:
            raise AlgorithmFormatError(f"{source}: missing field 'period' (format {FORMAT_3!r} is a periodic schedule)")
        try:
            period = Period.from_dict(data["period"], source)
        except PeriodError as exc:
            raise AlgorithmFormatError(str(exc)) from None
        if period.chunk_stride != collective.num_chunks:
            raise AlgorithmFormatError(f"{source}: period.chunk_stride is {period.chunk_stride}, but the collective "
                                       f"(one piece) has {collective.num_chunks} chunks")
        from workbench.util import size_guard

        try:  # a small file may declare a huge expansion: sized before the whole collective is built
            size_guard.check_declared(source, [(f"period.repeat={period.repeat}", size_guard.periodic_bytes(
                period.repeat, collective.num_chunks, len(transfers)))])
        except size_guard.SizeError as exc:
            raise AlgorithmFormatError(str(exc)) from None
        collective = whole_collective(collective, period.repeat)
    else:
        if "period" in data:
            raise AlgorithmFormatError(f"{source}: a period needs format {FORMAT_3!r}, the file says {data['format']!r}")
        lagging = next((t for t in transfers if t.lag), None)
        if lagging is not None:
            raise AlgorithmFormatError(f"{source}: transfer {lagging.id} has a lag, which needs format {FORMAT_3!r}")
    return Algorithm(topology, collective, float(chunk_bytes), transfers, meta, period)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_transfers(raw: list, source: str) -> list[Transfer]:
    """Every transfer; the common shape (single chunk or chunk list, ints, known op, claimed times
    with 0 <= t_start <= t_end < inf) is read on a fast path, anything else goes through
    ``_parse_transfer`` for its checks and messages."""
    out = []
    append = out.append
    for index, entry in enumerate(raw):
        try:
            ident, src, dst = entry["id"], entry["src"], entry["dst"]
            chunk = entry.get("chunk")
            deps = entry.get("deps", ())
            op = entry.get("op", "copy")
            t_start, t_end = entry.get("t_start"), entry.get("t_end")
            if (type(ident) is int and type(src) is int and type(dst) is int and type(chunk) is int
                    and "chunks" not in entry and "lag" not in entry and (op == "copy" or op == "reduce")
                    and type(deps) is list
                    and all(type(d) is int for d in deps)
                    and (t_start is None or (type(t_start) is float and 0.0 <= t_start < _INF))
                    and (t_end is None or (type(t_end) is float
                                           and (0.0 if t_start is None else t_start) <= t_end < _INF))):
                append(Transfer(ident, (chunk,), src, dst, op, tuple(deps), t_start, t_end))
                continue
        except (TypeError, KeyError, AttributeError):
            pass
        append(_parse_transfer(entry, index, source))
    return out


def _parse_transfer(entry: Any, index: int, source: str) -> Transfer:
    where = f"{source}: transfers[{index}]"
    if not isinstance(entry, dict):
        raise AlgorithmFormatError(f"{where}: expected an object")
    for key in ("id", "src", "dst"):
        if not _is_int(entry.get(key)):
            raise AlgorithmFormatError(f"{where}.{key}: expected an integer, got {entry.get(key)!r}")
    if "chunk" in entry and "chunks" in entry:
        raise AlgorithmFormatError(f"{where}: give either 'chunk' or 'chunks', not both")
    if "chunk" in entry:
        if not _is_int(entry["chunk"]):
            raise AlgorithmFormatError(f"{where}.chunk: expected an integer")
        chunks: tuple[int, ...] = (entry["chunk"],)
    elif "chunks" in entry:
        value = entry["chunks"]
        if not (isinstance(value, list) and value and all(_is_int(c) for c in value)):
            raise AlgorithmFormatError(f"{where}.chunks: expected a non-empty list of integers")
        chunks = tuple(value)
    else:
        raise AlgorithmFormatError(f"{where}: missing field 'chunk' (or 'chunks')")
    op = entry.get("op", "copy")
    if op not in ("copy", "reduce"):
        raise AlgorithmFormatError(f"{where}.op: expected 'copy' or 'reduce', got {op!r}")
    deps = entry.get("deps", [])
    if not (isinstance(deps, list) and all(_is_int(d) for d in deps)):
        raise AlgorithmFormatError(f"{where}.deps: expected a list of transfer ids")
    times = []
    for key in ("t_start", "t_end"):
        value = entry.get(key)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            raise AlgorithmFormatError(f"{where}.{key}: expected a number or null")
        try:
            times.append(None if value is None else float(value))
        except OverflowError:  # an integer past the float range: not a finite time
            times.append(_INF)
        # NaN fails both comparisons: a claimed time is finite and not negative
        if times[-1] is not None and not 0.0 <= times[-1] < _INF:
            raise AlgorithmFormatError(f"{where}.{key}: transfer {entry['id']} claims {key}={value!r}; a claimed "
                                       "time must be finite and at least 0")
    if times[0] is not None and times[1] is not None and times[1] < times[0]:
        raise AlgorithmFormatError(f"{where}: transfer {entry['id']} claims t_end={times[1]!r} before "
                                   f"t_start={times[0]!r}")
    lag = entry.get("lag", 0)
    if not _is_int(lag) or lag < 0:
        raise AlgorithmFormatError(f"{where}.lag: expected an integer >= 0, got {lag!r}")
    return Transfer(entry["id"], chunks, entry["src"], entry["dst"], op, tuple(deps), times[0], times[1], lag)
