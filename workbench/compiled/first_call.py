"""One process compiles a numba kernel; the others wait and load its cached machine code.

A kernel declared with ``cache=True`` is compiled on its first call in a process and written
beside its source; later processes load it in a fraction of a second. On a fresh install two
processes that call the same kernel for the first time together (the two workers of
``workbench run --jobs 2``, or of ``make test``) would each compile it, and TACOS's matching
kernel costs about 30 s of CPU to compile. ``locked_first_call`` wraps a kernel so that its first
call in each process holds an advisory lock on a file named after the kernel's source: the
second process blocks (without spending CPU) until the first has written the cache, then loads it.

The lock is a convenience, never a point of failure: where file locks are not available, or the
lock cannot be had within ``WAIT_LIMIT`` seconds (a holder stopped but not dead), the call goes
ahead and compiles on its own. A holder that dies releases the lock with its file descriptor. The
lock files live in a folder private to the user (``<temp>/workbench-<uid>``, mode 0700, checked to
be this user's before use), so another user can neither create nor hold them; when that folder is
not this user's own, no lock is taken at all.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import time
from typing import Any, Callable

__all__ = ["locked_first_call", "WAIT_LIMIT"]

WAIT_LIMIT = 180.0  # seconds a process waits for another's compile before compiling on its own
_POLL = 0.05


def _lock_folder() -> str | None:
    """A folder only this user can create or hold files in: ``<temp>/workbench-<uid>``, made with
    mode 0700, and used only while it is a real folder (not a link) owned by this user that no one
    else can enter. None otherwise (another user made it first, or the temp folder refuses): then
    no lock is taken, so nobody else's file can block a compile."""
    folder = os.path.join(tempfile.gettempdir(), f"workbench-{os.getuid()}")
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        info = os.lstat(folder)
    except OSError:
        return None
    private = stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077
    return folder if private else None


def _lock_path(name: str, source: str) -> str | None:
    """A lock file per kernel and per copy of its source (two checkouts have two caches), in this
    user's private lock folder; None when there is no such folder."""
    folder = _lock_folder()
    if folder is None:
        return None
    digest = hashlib.sha1(f"{os.path.abspath(source)}\0{name}".encode()).hexdigest()[:16]
    return os.path.join(folder, f"compile-{digest}.lock")


def _open_lock(path: str | None) -> Any:
    """The lock file opened for locking (a regular file, never through a link and never blocking
    on a FIFO), or None when it cannot be had."""
    if path is None:
        return None
    from workbench.util.files import open_regular

    try:
        return os.fdopen(open_regular(path, os.O_RDWR | os.O_CREAT, 0o600), "r+")
    except OSError:
        return None


def _call_holding_lock(path: str | None, call: Callable[[], Any]) -> Any:
    try:
        import fcntl
    except ImportError:
        return call()  # no advisory locks here: compile on our own
    handle = _open_lock(path)
    if handle is None:
        return call()  # no private lock folder, or not a lock file there: compile on our own
    with handle:
        waited_until = time.monotonic() + WAIT_LIMIT
        locked = False
        while not locked:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
            except BlockingIOError:
                if time.monotonic() > waited_until:
                    break  # the holder is stuck: do not wait for ever
                time.sleep(_POLL)
            except OSError:
                break  # the file system refuses locks
        try:
            return call()
        finally:
            if locked:
                fcntl.flock(handle, fcntl.LOCK_UN)


def locked_first_call(kernel: Callable[..., Any], name: str, source: str) -> Callable[..., Any]:
    """``kernel`` whose first call in this process holds the compile lock for (``name``, ``source``);
    later calls go straight through."""
    done = False

    def call(*args: Any) -> Any:
        nonlocal done
        if done:
            return kernel(*args)
        result = _call_holding_lock(_lock_path(name, source), lambda: kernel(*args))
        done = True
        return result

    call.__name__ = getattr(kernel, "__name__", name)
    call.__doc__ = getattr(kernel, "__doc__", None)
    call.kernel = kernel  # type: ignore[attr-defined]  # the dispatcher itself, for inspection
    return call
