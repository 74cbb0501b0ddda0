"""The algorithm file's document, ``workbench.algorithm/1`` to ``/6``: written from an algorithm, read back with every field checked.

``/1`` is the original format; ``/2`` is ``/1`` plus an ``overhead`` on the embedded topology's
links; ``/3`` is ``/2`` plus a ``period`` and per-transfer ``lag`` (``workbench.model.periodic``);
``/4`` is ``/3`` plus a per-transfer ``read`` (an earlier value of the source: its input, or what
it held after a named earlier transfer); ``/5`` is ``/4`` plus a per-transfer ``via`` (the switches
it crosses, in order); ``/6`` is ``/5`` plus switch abilities on the embedded topology's nodes
(a switch that reduces or does not multicast: ``workbench.topology.abilities``). A writer uses the lowest version that holds the fields
the algorithm uses (``lowest_format``). The format is a
contract with outside tools: docs/algorithm-format.md. ``algorithm_document`` builds the
document, ``read_document`` checks a decoded one into the fields of an ``Algorithm``
(``AlgorithmFields``); the transfers are read on a fast path where they have the common shape.
Files themselves are ``workbench.model.algorithm_io``.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from workbench.model.collective import Collective, CollectiveError, collective_from_dict
from workbench.model.periodic import Period, PeriodError, piece_collective, whole_collective
from workbench.model.transfer import READ_INPUT, Transfer, read_carried
from workbench.topology import Topology, TopologyError, topology_from_dict

__all__ = ["FORMAT", "FORMAT_2", "FORMAT_3", "FORMAT_4", "FORMAT_5", "FORMAT_6", "FORMATS", "AlgorithmFormatError", "AlgorithmFields",
           "algorithm_document", "lowest_format", "read_document"]

FORMAT = "workbench.algorithm/1"
# /1 plus an optional ``overhead`` on the embedded topology's links; written only when one is
# non-zero, so a /1 reader meets /2 exactly when it would otherwise time the algorithm wrongly
FORMAT_2 = "workbench.algorithm/2"
# /2 plus a ``period`` (one period of transfers, its repeat count and chunk stride) and a per-transfer
# ``lag``: written only for a periodic algorithm; every other algorithm is a /1 or /2 document
FORMAT_3 = "workbench.algorithm/3"
# /3 plus a per-transfer ``read``: written only where some transfer reads an earlier value
FORMAT_4 = "workbench.algorithm/4"
# /4 plus a per-transfer ``via`` (its route through switches): written only where some transfer names one
FORMAT_5 = "workbench.algorithm/5"
# /5 plus switch abilities on the embedded topology's nodes (``reduce``, ``multicast``, ...:
# workbench.topology.abilities): written only where a switch declares one
FORMAT_6 = "workbench.algorithm/6"
FORMATS = (FORMAT, FORMAT_2, FORMAT_3, FORMAT_4, FORMAT_5, FORMAT_6)
_READS = (FORMAT_4, FORMAT_5, FORMAT_6)  # the versions that may hold ``read``
_ROUTES = (FORMAT_5, FORMAT_6)  # the versions that may hold ``via``
_INF = math.inf


class AlgorithmFormatError(ValueError):
    """A file that is not a well-formed ``workbench.algorithm/1`` to ``/6`` document (schema, types)."""


class AlgorithmFields(NamedTuple):
    """A document's algorithm, in the order ``Algorithm`` takes it."""

    topology: Topology
    collective: Collective
    chunk_bytes: float
    transfers: list[Transfer]
    meta: dict[str, Any]
    period: Period | None


def lowest_format(algorithm: Any) -> str:
    """The lowest version that holds every field ``algorithm`` uses: ``/6`` where a switch of its
    topology declares what it does, ``/5`` where a transfer names its route, ``/4`` where one reads an earlier value, ``/3`` where it is periodic, ``/2`` where a
    link has an overhead, else ``/1``."""
    if algorithm.topology.abilities:
        return FORMAT_6
    if any(t.via is not None for t in algorithm.transfers):
        return FORMAT_5
    if any(t.read is not None for t in algorithm.transfers):
        return FORMAT_4
    if algorithm.period is not None:
        return FORMAT_3
    return FORMAT_2 if algorithm.topology.has_overhead() else FORMAT


def algorithm_document(algorithm: Any) -> dict[str, Any]:
    """The file's document of ``algorithm`` (an ``Algorithm``) in its ``lowest_format``."""
    topology, chunk_bytes = algorithm.topology, algorithm.chunk_bytes
    version = lowest_format(algorithm)
    if algorithm.period is None:
        head = {"format": version, "topology": topology.to_dict(),
                "collective": algorithm.collective.to_dict(algorithm.size_bytes), "chunk_bytes": chunk_bytes}
    else:  # a period writes the collective of one piece (workbench.model.periodic)
        piece = piece_collective(algorithm.collective, algorithm.period)
        head = {"format": version, "topology": topology.to_dict(),
                "collective": piece.to_dict(piece.size_bytes(chunk_bytes)), "chunk_bytes": chunk_bytes,
                "period": algorithm.period.to_dict()}
    return {**head, "transfers": [t.to_dict() for t in algorithm.transfers], "meta": algorithm.meta}


def read_document(data: Any, source: str, transfers: list[Transfer] | None = None) -> AlgorithmFields:
    """Check a decoded document into an algorithm's fields; ``AlgorithmFormatError`` names what is
    wrong in ``source``. ``transfers``: the transfers already read (the typed reader), the
    document then needing no ``transfers`` of its own."""
    _check_head(data, source, transfers)
    topology = _topology(data, source)
    try:
        collective = collective_from_dict(data["collective"], f"{source}: collective")
    except CollectiveError as exc:
        raise AlgorithmFormatError(str(exc)) from None
    chunk_bytes = _chunk_bytes(data, collective, source)
    if transfers is None:
        raw = data["transfers"]
        if not isinstance(raw, list):
            raise AlgorithmFormatError(f"{source}: transfers must be a list")
        transfers = _parse_transfers(raw, source)
    meta = data.get("meta") or {}
    if not isinstance(meta, dict):
        raise AlgorithmFormatError(f"{source}: meta must be an object")
    period = None
    if data["format"] not in _READS:
        _no_reads(data, transfers, source)
    if data["format"] not in _ROUTES:
        _no_routes(data, transfers, source)
    if data["format"] == FORMAT_3 or (data["format"] in _READS and "period" in data):
        reading = next((t for t in transfers if t.read is not None), None)
        if reading is not None:
            raise AlgorithmFormatError(f"{source}: transfer {reading.id} reads an earlier value, which a periodic "
                                       f"schedule cannot do")
        period = _period(data, collective, transfers, source)
        collective = whole_collective(collective, period.repeat)
    else:
        _no_period(data, transfers, source)
    return AlgorithmFields(topology, collective, float(chunk_bytes), transfers, meta, period)


def _check_head(data: Any, source: str, transfers: list[Transfer] | None) -> None:
    """A JSON object of a known format with every field it needs."""
    if not isinstance(data, dict):
        raise AlgorithmFormatError(f"{source}: expected a JSON object")
    if data.get("format") not in FORMATS:
        raise AlgorithmFormatError(f"{source}: format must be one of {', '.join(map(repr, FORMATS))}, "
                                   f"got {data.get('format')!r}")
    for key in ("topology", "collective", "chunk_bytes", "transfers"):
        if key not in data and not (key == "transfers" and transfers is not None):
            raise AlgorithmFormatError(f"{source}: missing field {key!r}")


def _topology(data: dict, source: str) -> Topology:
    """The embedded topology; link overheads only where the format says ``/2`` or later."""
    try:
        topology = topology_from_dict(data["topology"], f"{source}: topology")
    except TopologyError as exc:
        raise AlgorithmFormatError(str(exc)) from None
    if data["format"] == FORMAT and topology.has_overhead():  # a /1 reader would time it without them
        raise AlgorithmFormatError(f"{source}: link overheads need format {FORMAT_2!r}, the file says {FORMAT!r}")
    if topology.abilities and data["format"] != FORMAT_6:  # an older reader would refuse or mistime it
        raise AlgorithmFormatError(f"{source}: switch abilities (reduce, multicast) need format {FORMAT_6!r}, "
                                   f"the file says {data['format']!r}")
    return topology


def _chunk_bytes(data: dict, collective: Collective, source: str) -> int | float:
    """A positive ``chunk_bytes`` that agrees with the collective's ``size_bytes`` where one is given."""
    chunk_bytes = data["chunk_bytes"]
    if not isinstance(chunk_bytes, (int, float)) or isinstance(chunk_bytes, bool) or chunk_bytes <= 0:
        raise AlgorithmFormatError(f"{source}: chunk_bytes must be a positive number, got {chunk_bytes!r}")
    size = data["collective"].get("size_bytes")
    if size is not None and not math.isclose(collective.size_bytes(chunk_bytes), size, rel_tol=1e-9):
        raise AlgorithmFormatError(
            f"{source}: collective.size_bytes={size} disagrees with chunk_bytes={chunk_bytes} "
            f"(expected {collective.size_bytes(chunk_bytes):g} for this {collective.kind})"
        )
    return chunk_bytes


def _period(data: dict, piece: Collective, transfers: list[Transfer], source: str) -> Period:
    """The ``/3`` period: its stride the piece's chunks, its expansion sized before it is built."""
    if "period" not in data:
        raise AlgorithmFormatError(f"{source}: missing field 'period' (format {FORMAT_3!r} is a periodic schedule)")
    try:
        period = Period.from_dict(data["period"], source)
    except PeriodError as exc:
        raise AlgorithmFormatError(str(exc)) from None
    if period.chunk_stride != piece.num_chunks:
        raise AlgorithmFormatError(f"{source}: period.chunk_stride is {period.chunk_stride}, but the collective "
                                   f"(one piece) has {piece.num_chunks} chunks")
    from workbench.util import size_guard

    try:  # a small file may declare a huge expansion: sized before the whole collective is built
        size_guard.check_declared(source, [(f"period.repeat={period.repeat}", size_guard.periodic_bytes(
            period.repeat, piece.num_chunks, len(transfers)))])
    except size_guard.SizeError as exc:
        raise AlgorithmFormatError(str(exc)) from None
    return period


def _no_reads(data: dict, transfers: list[Transfer], source: str) -> None:
    """No ``read`` outside ``/4``."""
    reading = next((t for t in transfers if t.read is not None), None)
    if reading is not None:
        raise AlgorithmFormatError(f"{source}: transfer {reading.id} reads an earlier value, which needs format "
                                   f"{FORMAT_4!r}, the file says {data['format']!r}")


def _no_routes(data: dict, transfers: list[Transfer], source: str) -> None:
    """No ``via`` outside ``/5``."""
    routed = next((t for t in transfers if t.via is not None), None)
    if routed is not None:
        raise AlgorithmFormatError(f"{source}: transfer {routed.id} names its route ('via'), which needs format "
                                   f"{FORMAT_5!r}, the file says {data['format']!r}")


def _no_period(data: dict, transfers: list[Transfer], source: str) -> None:
    """Neither a period nor a lag outside ``/3``."""
    if "period" in data:
        raise AlgorithmFormatError(f"{source}: a period needs format {FORMAT_3!r}, the file says {data['format']!r}")
    lagging = next((t for t in transfers if t.lag), None)
    if lagging is not None:
        raise AlgorithmFormatError(f"{source}: transfer {lagging.id} has a lag, which needs format {FORMAT_3!r}")


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
                    and "chunks" not in entry and "lag" not in entry and "read" not in entry and "via" not in entry
                    and (op == "copy" or op == "reduce")
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
    chunks = _parse_chunks(entry, where)
    op = entry.get("op", "copy")
    if op not in ("copy", "reduce"):
        raise AlgorithmFormatError(f"{where}.op: expected 'copy' or 'reduce', got {op!r}")
    deps = entry.get("deps", [])
    if not (isinstance(deps, list) and all(_is_int(d) for d in deps)):
        raise AlgorithmFormatError(f"{where}.deps: expected a list of transfer ids")
    times = _parse_times(entry, where)
    lag = entry.get("lag", 0)
    if not _is_int(lag) or lag < 0:
        raise AlgorithmFormatError(f"{where}.lag: expected an integer >= 0, got {lag!r}")
    return Transfer(entry["id"], chunks, entry["src"], entry["dst"], op, tuple(deps), times[0], times[1], lag,
                    _parse_read(entry, where), _parse_via(entry, where))


def _parse_via(entry: dict, where: str) -> tuple[int, ...] | None:
    """``via``: absent (the topology's route) or a non-empty list of node ids (the switches crossed)."""
    if "via" not in entry:
        return None
    value = entry["via"]
    if not (isinstance(value, list) and value and all(_is_int(v) and v >= 0 for v in value)):
        raise AlgorithmFormatError(f"{where}.via: expected a non-empty list of switch ids, got {value!r}"[:300])
    return tuple(value)


def _parse_read(entry: dict, where: str) -> int | None:
    """``read``: absent (the source's current value), ``"input"``, an earlier transfer's id (the
    value after it) or ``{"carried": id}`` (what that transfer brought)."""
    if "read" not in entry:
        return None
    value = entry["read"]
    if value == "input":
        return READ_INPUT
    if isinstance(value, dict) and set(value) == {"carried"} and _is_int(value["carried"]) and value["carried"] >= 0:
        return read_carried(value["carried"])
    if not _is_int(value) or value < 0:
        raise AlgorithmFormatError(f"{where}.read: expected 'input', the id of an earlier transfer or "
                                   f"{{\"carried\": id}}, got {value!r}")
    return value


def _parse_chunks(entry: dict, where: str) -> tuple[int, ...]:
    """A transfer's ``chunk`` or non-empty ``chunks`` list (one of them, not both)."""
    if "chunk" in entry and "chunks" in entry:
        raise AlgorithmFormatError(f"{where}: give either 'chunk' or 'chunks', not both")
    if "chunk" in entry:
        if not _is_int(entry["chunk"]):
            raise AlgorithmFormatError(f"{where}.chunk: expected an integer")
        return (entry["chunk"],)
    if "chunks" in entry:
        value = entry["chunks"]
        if not (isinstance(value, list) and value and all(_is_int(c) for c in value)):
            raise AlgorithmFormatError(f"{where}.chunks: expected a non-empty list of integers")
        return tuple(value)
    raise AlgorithmFormatError(f"{where}: missing field 'chunk' (or 'chunks')")


def _parse_times(entry: dict, where: str) -> list[float | None]:
    """A transfer's claimed ``t_start`` and ``t_end``: finite, not negative, the end not before the start."""
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
    return times

