"""Reading a well-formed ``workbench.algorithm/1`` or ``/2`` file fast (a periodic ``/3`` file is
one period, small, and a ``/4`` file's earlier-value reads are checked one by one: both go the usual way): msgspec decodes the JSON
straight into typed transfer records, in C, without building a dict per transfer. The two formats
differ only in the embedded topology (``/2`` may give links an ``overhead``), which is left untyped
here: ``workbench.model.algorithm_format`` checks the format and reads the topology for both readers alike.

Only the common, valid shape is taken here: ints for ids, nodes, chunks and dependencies, an op
of ``copy`` or ``reduce``, numbers or null for the times (finite, at least 0, ``t_start`` no later
than ``t_end``), and exactly one of ``chunk`` or a non-empty ``chunks``. Anything else (a wrong
type, a missing field, NaN, a negative or reversed claimed time, text that is not strict
UTF-8, an integer beyond 64 bits anywhere, nesting deeper than Python's recursion allows, a file
msgspec cannot read) returns None, and ``workbench.model.algorithm_io`` reads the file its usual way, which
then decides: the typed reader never takes a document the usual one would refuse or read
differently. Without msgspec installed the usual way is the only one.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, Literal

import msgspec

from workbench.util.fastjson import scalars

__all__ = ["decode"]


# 64-bit integers only: orjson reads larger ones as floats (which the usual reader then refuses)
_Int = Annotated[int, msgspec.Meta(ge=-2**63, le=2**63 - 1)]
_EXACT = (-2**63, 2**64 - 1)  # the integers orjson reads as integers, in the untyped fields
# a claimed time: finite and at least 0, checked in C as it is decoded (the usual reader names a bad one)
_Time = Annotated[float, msgspec.Meta(ge=0.0, le=sys.float_info.max)]


class _TransferRecord(msgspec.Struct, gc=False):
    id: _Int
    src: _Int
    dst: _Int
    chunk: _Int | msgspec.UnsetType = msgspec.UNSET  # an explicit null is refused (the usual reader names it)
    chunks: list[_Int] | msgspec.UnsetType = msgspec.UNSET
    op: Literal["copy", "reduce"] = "copy"
    deps: list[_Int] = []
    t_start: _Time | None = None
    t_end: _Time | None = None
    lag: Any = 0  # read only to send a periodic template (or a stray lag) the usual way
    read: Any = msgspec.UNSET  # likewise: a transfer that reads an earlier value (/4) is read the usual way
    via: Any = msgspec.UNSET  # and one that names its route (/5)


class _Document(msgspec.Struct):
    format: Any
    topology: Any
    collective: Any
    chunk_bytes: Any
    transfers: list[_TransferRecord]
    meta: Any = None
    period: Any = msgspec.UNSET


_DECODER = msgspec.json.Decoder(_Document)


def decode(text: bytes) -> tuple[dict[str, Any], list[tuple]] | None:
    """The document (without its transfers) and, per transfer, the tuple of ``Transfer``'s fields
    (id, chunks, src, dst, op, deps, t_start, t_end); or None (see the module docstring)."""
    if not text.isascii():
        try:
            text.decode("utf-8")  # strict: msgspec skips unknown fields unread, the usual reader does not
        except UnicodeDecodeError:
            return None
    try:
        document = _DECODER.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError):
        return None
    if document.period is not msgspec.UNSET or any(r.lag != 0 or r.read is not msgspec.UNSET or r.via is not msgspec.UNSET
                                                   for r in document.transfers):
        return None  # a periodic schedule (/3) is one period, /4 reads and /5 routes: read the usual way with their checks
    untyped = [document.format, document.topology, document.collective, document.chunk_bytes, document.meta]
    if not _integers_exact(untyped):
        return None
    records = document.transfers
    unset = msgspec.UNSET
    if any((r.chunk is unset) is (r.chunks is unset) or (r.chunks is not unset and not r.chunks)
           or (r.t_end is not None and r.t_start is not None and r.t_end < r.t_start) for r in records):
        return None  # both, neither, an empty list, or a claimed end before its start: the usual reader names it
    transfers = [(r.id, (r.chunk,) if r.chunks is unset else tuple(r.chunks), r.src, r.dst, r.op, tuple(r.deps),
                  r.t_start, r.t_end) for r in records]
    fields = {"format": document.format, "topology": document.topology, "collective": document.collective,
              "chunk_bytes": document.chunk_bytes}
    if document.meta is not None:
        fields["meta"] = document.meta
    return fields, transfers


def _integers_exact(value: Any) -> bool:
    """No integer in ``value`` (nested lists and objects) that orjson would have read as a float."""
    low, high = _EXACT
    return all(low <= item <= high for item in scalars(value) if type(item) is int)
