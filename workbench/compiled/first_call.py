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
ahead and compiles on its own. A holder that dies releases the lock with its file descriptor.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from typing import Any, Callable

__all__ = ["locked_first_call", "WAIT_LIMIT"]

WAIT_LIMIT = 180.0  # seconds a process waits for another's compile before compiling on its own
_POLL = 0.05


def _lock_path(name: str, source: str) -> str:
    """A lock file per kernel and per copy of its source (two checkouts have two caches)."""
    digest = hashlib.sha1(f"{os.path.abspath(source)}\0{name}".encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"workbench-compile-{digest}.lock")


def _call_holding_lock(path: str, call: Callable[[], Any]) -> Any:
    try:
        import fcntl
        handle = open(path, "a")
    except (ImportError, OSError):
        return call()  # no advisory locks here (or no writable temp folder): compile on our own
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
    path = _lock_path(name, source)
    done = False

    def call(*args: Any) -> Any:
        nonlocal done
        if done:
            return kernel(*args)
        result = _call_holding_lock(path, lambda: kernel(*args))
        done = True
        return result

    call.__name__ = getattr(kernel, "__name__", name)
    call.__doc__ = getattr(kernel, "__doc__", None)
    call.kernel = kernel  # type: ignore[attr-defined]  # the dispatcher itself, for inspection
    return call
