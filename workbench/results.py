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

__all__ = ["ResultStore"]


class ResultStore:
    """``rows.jsonl``: one JSON object per finished cell, appended with fsync."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / "rows.jsonl"
        self._lock = threading.Lock()
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
        for number, line in enumerate(self.path.read_text(errors="replace").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                row = None
            if isinstance(row, dict) and isinstance(row.get("cell_id"), str):
                rows.append(row)
            else:
                self.skipped.append(number)
        return rows

    def append(self, row: dict[str, Any]) -> None:
        line = (json.dumps(row, default=_json_default, allow_nan=True) + "\n").encode()
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
