"""One writer per run folder: a lock file naming the host and PID that holds it.

Two ``workbench run`` processes on one folder would run every cell twice and double the rows. The
first takes ``<folder>/.lock`` (created exclusively); a second is refused with the holder's host,
PID and start time. A lock left by a process that died without cleaning up (SIGKILL, a crash) is
taken over when its PID is no longer alive on this host; a lock from another host is never guessed
stale (remove it by hand once that run is gone).

Who takes it: ``workbench run`` for the whole run (its cells append rows meanwhile, and it writes
the report at its end while still holding it), ``workbench rebound`` (it rewrites rows.jsonl) and
``workbench report`` while it writes the report files. A folder whose lock a live process holds
(``live_holder``) is still read by ``workbench report``: reading shares the folder with its writer
(rows are appended whole, a line at a time, and a reader skips a last line still being written and
repairs nothing), and the report is then printed, not written into the folder.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

__all__ = ["RunLock", "RunLockError", "live_holder", "describe_holder"]

_RECORD_BYTES = 4096  # a lock record is under 200 bytes: a longer .lock is not one


class RunLockError(RuntimeError):
    """The folder is locked by a live run; the message names it (``holder``: its lock record)."""

    def __init__(self, message: str, holder: dict | None = None) -> None:
        super().__init__(message)
        self.holder = holder


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_live(holder: dict | None) -> bool:
    """Whether a lock record names a live holder: one on another host always counts (never guessed
    stale), one on this host while its PID is alive; an unreadable record does not."""
    if holder is None:
        return False
    if holder.get("host") != socket.gethostname():
        return True
    try:
        pid = int(holder.get("pid", 0))
    except (TypeError, ValueError):
        return False
    return pid > 0 and _alive(pid)  # os.kill(0 or -1, 0) would ask about process groups


def describe_holder(holder: dict) -> str:
    """``PID 123 on host, since 2024-01-01 12:00:00``: who holds a lock, for a one-line message."""
    return f"PID {holder.get('pid')} on {holder.get('host')}, since {holder.get('started')}"


def live_holder(folder: str | Path) -> dict | None:
    """The lock record of ``folder`` when a live process holds it (see ``RunLock.acquire``), else None."""
    holder = RunLock(folder)._holder()
    return holder if _is_live(holder) else None


class RunLock:
    """``with RunLock(folder):`` holds the folder for this process (see the module docstring)."""

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / ".lock"
        self.held = False

    def acquire(self) -> None:
        """Create ``.lock`` naming this host, PID and start time, taking over a stale one; ``RunLockError``
        when a live process holds it."""
        me = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        for _ in range(3):
            try:
                # O_EXCL with O_CREAT never follows a link: a link (even a dangling one) is "existing"
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            except FileExistsError:
                self._refuse_foreign()
                holder = self._holder()
                if not _is_live(holder):
                    try:  # stale (its process is gone) or unreadable: take it over
                        self.path.unlink()
                    except FileNotFoundError:
                        pass
                    continue
                raise RunLockError(f"{self.path.parent}: another run writes here ({describe_holder(holder)}); "
                                   f"wait for it or stop it", holder)
            with os.fdopen(fd, "w") as handle:
                json.dump(me, handle)
            self.held = True
            return
        raise RunLockError(f"{self.path}: could not take the lock (it keeps changing hands)")

    def _refuse_foreign(self) -> None:
        """``RunLockError`` when ``.lock`` is not a regular file (a FIFO, a device, a link): it is not
        a lock this workbench wrote, and reading it could block or never end."""
        from workbench.run.folder_files import kind_of

        kind = kind_of(self.path)
        if kind not in (None, "a regular file"):
            raise RunLockError(f"{self.path}: is {kind}, not a lock file (a run folder's own files are regular "
                               f"files; move it away)")

    def _holder(self) -> dict | None:
        """The lock record, or None when there is none or it cannot be read as one (a link, a FIFO, a
        device or a file longer than a record is never read)."""
        from workbench.util.files import open_regular

        try:
            fd = open_regular(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            text = os.read(fd, _RECORD_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        try:
            holder = json.loads(text) if len(text) <= _RECORD_BYTES else None
        except (ValueError, RecursionError):
            return None
        return holder if isinstance(holder, dict) else None

    def release(self) -> None:
        """Give the lock up if this process took it (the file is removed only while it names this PID)."""
        if self.held:
            holder = self._holder()
            if holder is not None and holder.get("pid") == os.getpid():
                self.path.unlink(missing_ok=True)
            self.held = False

    def __enter__(self) -> "RunLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
