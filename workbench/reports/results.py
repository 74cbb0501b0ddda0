"""A run's results: ``rows.jsonl``, one JSON object per finished cell, appended with fsync.

The runner writes it; reports, ``rebound`` and the CLI read it through ``ResultStore`` without
importing the runner.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from pathlib import Path
from typing import Any
from workbench.reports import row_keys as R
from workbench.util import fastjson
from workbench.util.files import NotRegularFile, OutputError, open_regular

__all__ = ["ResultStore", "RowsFileError", "UNPARSED", "MAX_TAIL"]


class ResultStore:
    """``rows.jsonl``: one JSON object per finished cell, appended with fsync.

    The file is opened without following a symbolic link and only when it is a regular file (a
    FIFO would block the run, a link have its target cut and appended to), and it is sized by the
    size guard before it is read. Lines that are not result rows are kept: ``skipped`` has their
    numbers and ``unparsed`` their bytes, as written, for whoever rewrites the file to set aside."""

    def __init__(self, folder: str | Path, read_only: bool = False) -> None:
        """``read_only``: a reader that changes nothing in the folder (a report, ``rebound``'s read,
        a folder a live run may be appending to); it skips a last line without its newline, which
        is a row being written or a crash's remnant that the next writer drops."""
        self.folder = Path(folder)
        self.path = self.folder / "rows.jsonl"
        self.read_only = read_only
        self.skipped: list[int] = []
        self.unparsed: list[bytes] = []
        self._lock = threading.Lock()
        if not read_only:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._repair_tail()

    def _open(self, flags: int) -> int | None:
        """A descriptor on rows.jsonl, opened without following a link or blocking on a FIFO and
        checked to be a regular file; None when there is no file (and ``flags`` do not create one)."""
        try:
            return open_regular(self.path, flags)
        except FileNotFoundError:
            return None
        except NotRegularFile:
            raise RowsFileError(f"{self.path}: is not a regular file (a FIFO, device or folder; move it away)") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise RowsFileError(f"{self.path}: is a symbolic link, not a regular file (a run folder's own "
                                    f"files are regular files; move it away)") from None
            raise RowsFileError(_describe(self.path, exc)) from None

    def _repair_tail(self) -> None:
        """Set aside a partial last line left by a crash mid-write (into ``rows.unparsed.jsonl``, as
        written), so appends start on a fresh line. The tail is read backwards a block at a time (the
        file is not read whole), and a tail longer than any row (``MAX_TAIL``: a file grown by hand,
        a hole) is refused rather than cut."""
        fd = self._open(os.O_RDWR)
        if fd is None:
            return
        try:
            end = os.fstat(fd).st_size
            if end == 0 or os.pread(fd, 1, end - 1) == b"\n":
                return
            cut = _last_line_start(fd, end)
            if cut is None:
                raise RowsFileError(f"{self.path}: ends in more than {MAX_TAIL >> 20} MiB without a newline, which no "
                                    f"row is (not cut; move the file away or mend its end)")
            self.set_aside([os.pread(fd, end - cut, cut)])
            os.ftruncate(fd, cut)
        finally:
            os.close(fd)

    def set_aside(self, lines: list[bytes]) -> Path:
        """Append ``lines`` (lines of rows.jsonl that are not rows) to ``rows.unparsed.jsonl`` beside the
        rows, as they were written, synced before rows.jsonl is cut or rewritten without them."""
        path = self.folder / UNPARSED
        try:
            fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        except NotRegularFile:
            raise RowsFileError(f"{path}: is not a regular file; rows.jsonl was left as it was") from None
        except OSError as exc:
            kind = "is a symbolic link" if exc.errno == errno.ELOOP else f"cannot be written ({exc.strerror})"
            raise RowsFileError(f"{path}: {kind}; rows.jsonl was left as it was") from None
        try:
            _write_all(fd, b"".join(line + b"\n" for line in lines))
        except OSError as exc:
            raise RowsFileError(f"{path}: cannot write ({exc.strerror}); rows.jsonl was left as it was") from None
        finally:
            os.close(fd)
        return path

    def _read(self) -> bytes:
        """The file's bytes, sized by the size guard before they are read (b"" when there is none)."""
        from workbench.util import size_guard
        from workbench.util.safe_load import read_bytes

        fd = self._open(os.O_RDONLY)
        if fd is None:
            return b""
        os.close(fd)  # checked without following a link; read by the one guarded reader
        return read_bytes(self.path, "rows file", RowsFileError, size_guard.BYTES_PER_PARSED_BYTE)

    def rows(self) -> list[dict[str, Any]]:
        """Every readable row; lines that are not a row object (hand edits, a foreign file) are
        skipped, their numbers kept in ``skipped`` and their bytes in ``unparsed`` (the report names
        them, resume re-runs those cells, ``rebound`` sets them aside)."""
        self.skipped, self.unparsed = [], []
        data = self._read()
        if self.read_only and not data.endswith(b"\n"):
            data = data[:data.rfind(b"\n") + 1]  # a row still being appended, or a crash's partial line
        rows = []
        for number, line in enumerate(data.split(b"\n")[:-1] if data else [], start=1):
            if not line.strip():
                continue
            row = _row(line)
            if row is None:
                self.skipped.append(number)
                self.unparsed.append(line)
            else:
                rows.append(row)
        return rows

    def append(self, row: dict[str, Any]) -> None:
        """Append one row to rows.jsonl (flushed and synced, so a finished cell survives a crash).
        A full disk or a refused write is a ``RowsFileError`` naming the file."""
        if self.read_only:
            raise RuntimeError(f"{self.path}: opened read-only")
        line = (fastjson.text(row, default=_json_default) + "\n").encode()  # a NaN or an infinity is null
        with self._lock:
            fd = self._open(os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            start = os.fstat(fd).st_size
            try:
                _write_all(fd, line)
            except OSError as exc:
                _cut_back(fd, start)
                raise RowsFileError(_describe(self.path, exc)) from None
            finally:
                os.close(fd)


class RowsFileError(OutputError):
    """rows.jsonl cannot be read or written as a run's rows: one line naming it (exit 2)."""


_TAIL_BLOCK = 1 << 16  # bytes read at a time when looking for the last newline
MAX_TAIL = 64 << 20  # a partial last line longer than this is no row cut short by a crash
UNPARSED = "rows.unparsed.jsonl"  # lines of rows.jsonl that are not rows, set aside byte for byte


def _last_line_start(fd: int, end: int) -> int | None:
    """Where the last line of the file starts (after its last newline; 0 when it has none), looked
    for backwards within ``MAX_TAIL`` bytes of ``end``; None when it starts further back."""
    cut = end
    while cut > 0 and end - cut < MAX_TAIL:
        start = max(0, cut - _TAIL_BLOCK, end - MAX_TAIL)
        newline = os.pread(fd, cut - start, start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        cut = start
    return 0 if cut == 0 else None


def _row(line: bytes) -> dict[str, Any] | None:
    """The result row on one line, or None for a line that is not one (not UTF-8, not JSON, an
    overlong integer, nesting beyond the parser, not an object with a cell id)."""
    try:
        row = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return row if isinstance(row, dict) and isinstance(row.get(R.CELL_ID), str) else None


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` and sync it (a full disk may take part of it before refusing the rest)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def _cut_back(fd: int, length: int) -> None:
    """Take a partly written row back off the end of the file (best effort: resume drops it too)."""
    try:
        os.ftruncate(fd, length)
    except OSError:
        pass


def _describe(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return f"{path}: no space left on device (the row was not written; free space and resume the run)"
    return f"{path}: cannot write ({exc.strerror or exc})"


def _json_default(value: Any) -> Any:
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray):
            return value.tolist()
    except ImportError:
        pass
    return str(value)
