"""Reading a well-formed ``workbench.algorithm/1`` file fast: msgspec decodes the JSON straight into
typed transfer records, in C, without building a dict per transfer.

Only the common, valid shape is taken here: ints for ids, nodes, chunks and dependencies, an op
of ``copy`` or ``reduce``, numbers or null for the times, and exactly one of ``chunk`` or a
non-empty ``chunks``. Anything else (a wrong type, a missing field, NaN, text that is not strict
UTF-8, an integer beyond 64 bits anywhere, nesting deeper than Python's recursion allows, a file
msgspec cannot read) returns None, and ``workbench.algorithm`` reads the file its usual way, which
then decides: the typed reader never takes a document the usual one would refuse or read
differently. Without msgspec installed the usual way is the only one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from workbench.fastjson import scalars

__all__ = ["decode"]


# 64-bit integers only: orjson reads larger ones as floats (which the usual reader then refuses)
_Int = Annotated[int, msgspec.Meta(ge=-2**63, le=2**63 - 1)]
_EXACT = (-2**63, 2**64 - 1)  # the integers orjson reads as integers, in the untyped fields


class _TransferRecord(msgspec.Struct, gc=False):
    id: _Int
    src: _Int
    dst: _Int
    chunk: _Int | msgspec.UnsetType = msgspec.UNSET  # an explicit null is refused (the usual reader names it)
    chunks: list[_Int] | msgspec.UnsetType = msgspec.UNSET
    op: Literal["copy", "reduce"] = "copy"
    deps: list[_Int] = []
    t_start: float | None = None
    t_end: float | None = None


class _Document(msgspec.Struct):
    format: Any
    topology: Any
    collective: Any
    chunk_bytes: Any
    transfers: list[_TransferRecord]
    meta: Any = None


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
    untyped = [document.format, document.topology, document.collective, document.chunk_bytes, document.meta]
    if not _integers_exact(untyped):
        return None
    records = document.transfers
    unset = msgspec.UNSET
    if any((r.chunk is unset) is (r.chunks is unset) or (r.chunks is not unset and not r.chunks) for r in records):
        return None  # both, neither, or an empty list: the usual reader names it
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
