"""The files of a run folder, checked by type before any of them is opened.

A run folder holds state the workbench reads and rewrites (``.lock``, ``config.yaml``, ``run.json``,
``rows.jsonl``, the rows set aside by ``rebound``, the bounds cache ``bounds/``, the saved
``algorithms/``) and report files it replaces (``table.md``, ``table.csv``, ``figures/``). Each must be what the workbench wrote there:

* a state file is a regular file, never a symbolic link: a FIFO would block its reader for good, a
  link to ``/dev/zero`` fill the memory, and a link to a file elsewhere would have that file cut and
  appended to (``rows.jsonl`` on resume) or replaced;
* a folder (``algorithms/``, ``bounds/``, ``figures/`` and the figure folders in it) is a real folder, never a link,
  so nothing is created outside the run folder the user named;
* a report file may be anything that is not a folder: it is written by renaming a new file over it
  (``workbench.util.files.write_atomic``), which replaces a symbolic link and never writes through it.

``check_run_folder`` refuses the first offender with one line naming it (exit 2 at the command
line), before the lock is taken or any file is read; ``workbench run``, ``report`` and ``rebound``
call it first.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable

__all__ = ["STATE_FILES", "FOLDERS", "REPORT_FILES", "check_run_folder", "kind_of"]

STATE_FILES = (".lock", "config.yaml", "run.json", "rows.jsonl", "rows.unparsed.jsonl")
FOLDERS = ("algorithms", "bounds", "figures", "figures/by_size", "figures/by_npus")
REPORT_FILES = ("table.md", "table.csv")

def kind_of(path: Path) -> str | None:
    """What ``path`` itself is (a link is not followed), in words; None when nothing is there."""
    from workbench.util.safe_load import describe_mode

    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    return "a symbolic link" if stat.S_ISLNK(mode) else describe_mode(mode)


def check_run_folder(folder: str | Path, error: Callable[[str], Exception]) -> None:
    """Raise ``error`` naming the first file or folder of the run folder that is not of its kind
    (see the module docstring); a missing one is fine (a new run writes it)."""
    folder = Path(folder)
    for name in STATE_FILES:
        kind = kind_of(folder / name)
        if kind not in (None, "a regular file"):
            raise error(f"{folder / name}: is {kind}, not a regular file (a run folder's own files are "
                        f"regular files; move it away)")
    for name in FOLDERS:
        kind = kind_of(folder / name)
        if kind not in (None, "a folder"):
            raise error(f"{folder / name}: is {kind}, not a folder (nothing is written outside the run "
                        f"folder; move it away)")
    for name in REPORT_FILES:
        if kind_of(folder / name) == "a folder":
            raise error(f"{folder / name}: is a folder, not a file")
