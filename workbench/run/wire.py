"""Length-prefixed pickled messages between the runner and a cell process (``(kind, payload)``)."""

from __future__ import annotations

import pickle
import struct
from typing import Any, BinaryIO

LIFELINE_ENV = "WORKBENCH_LIFELINE_FD"  # the cell's end of the pipe that closes when its parent dies

__all__ = ["send", "read_message", "LIFELINE_ENV"]


def send(stream: BinaryIO, kind: str, payload: Any) -> None:
    """Write one ``(kind, payload)`` message (8-byte little-endian length, then the pickle) and flush."""
    data = pickle.dumps((kind, payload), protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)))
    stream.write(data)
    stream.flush()


def read_message(stream: BinaryIO) -> tuple[str, Any] | None:
    """The next ``(kind, payload)`` message, or None at the end of the stream or on a cut-short one."""
    header = stream.read(8)
    if len(header) < 8:
        return None
    (length,) = struct.unpack("<Q", header)
    data = stream.read(length)
    if len(data) < length:
        return None
    return pickle.loads(data)
