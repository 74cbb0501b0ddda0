"""A run's results: ``rows.jsonl``, one JSON object per finished cell, appended with fsync.

The runner writes it; reports, ``rebound`` and the CLI read it through ``ResultStore`` without
importing the runner.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any
from workbench.reports import row_keys as R

__all__ = ["ResultStore"]


class ResultStore:
    """``rows.jsonl``: one JSON object per finished cell, appended with fsync."""

    def __init__(self, folder: str | Path, read_only: bool = False) -> None:
        """``read_only``: a reader that changes nothing in the folder (a report, ``rebound``'s read,
        a folder a live run may be appending to); it skips a last line without its newline, which
        is a row being written or a crash's remnant that the next writer drops."""
        self.folder = Path(folder)
        self.path = self.folder / "rows.jsonl"
        self.read_only = read_only
        self._lock = threading.Lock()
        if not read_only:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._repair_tail()

    def _repair_tail(self) -> None:
        """Drop a partial last line left by a crash mid-write, so appends start on a fresh line."""
        if not self.path.exists():
            return
        with open(self.path, "rb+") as handle:
            data = handle.read()
            if data and not data.endswith(b"\n"):
                handle.truncate(data.rfind(b"\n") + 1)

    def rows(self) -> list[dict[str, Any]]:
        """Every readable row; lines that are not a row object (hand edits, a foreign file) are
        skipped and their numbers kept in ``skipped`` (the report names them, resume re-runs those cells)."""
        self.skipped: list[int] = []
        if not self.path.exists():
            return []
        rows = []
        text = self.path.read_text(errors="replace")
        if self.read_only and not text.endswith("\n"):
            text = text[:text.rfind("\n") + 1]  # a row still being appended, or a crash's partial line
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):  # not JSON, an overlong integer, nesting beyond the parser
                row = None
            if isinstance(row, dict) and isinstance(row.get(R.CELL_ID), str):
                rows.append(row)
            else:
                self.skipped.append(number)
        return rows

    def append(self, row: dict[str, Any]) -> None:
        """Append one row to rows.jsonl (flushed and synced, so a finished cell survives a crash)."""
        if self.read_only:
            raise RuntimeError(f"{self.path}: opened read-only")
        line = (json.dumps(json.loads(json.dumps(row, default=_json_default), parse_constant=lambda _: None),
                           allow_nan=False) + "\n").encode()  # standard JSON: a NaN or an infinity is null
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)


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
