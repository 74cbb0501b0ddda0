"""Writing files: atomic writes (a temporary file in the same folder, fsync, then a rename; the
user's umask applies), and the one writer of user-named outputs with its checks."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["write_atomic", "OutputError", "check_output_file", "check_output_folder", "write_output", "open_regular",
           "NotRegularFile"]


def _umask() -> int:
    """The process umask, read without changing it where Linux allows (os.umask would briefly set it
    for every thread)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, text: str | bytes) -> Path:
    """Write ``text`` (or bytes) so that a reader sees the old file or the whole new one, never half
    of it. A symbolic link at ``path`` is replaced by the new file, never written through. A write
    that fails (no space, no permission, a read-only file system) is an ``OutputError`` naming the
    path, and leaves the old file (or none)."""
    path = Path(path)
    try:
        _write_replacing(path, text)
    except OSError as exc:
        if isinstance(exc, OutputError):
            raise
        raise OutputError(_describe(path, exc)) from None
    return path


class NotRegularFile(OSError):
    """``open_regular`` found a FIFO, a device, a socket or a folder where a regular file belongs."""


def open_regular(path: str | Path, flags: int, mode: int = 0o644) -> int:
    """A blocking descriptor on the regular file ``path`` (``flags`` as for ``os.open``), opened
    without following a final symbolic link and without waiting on a FIFO, then checked on the
    descriptor. A link is ``OSError`` with ``errno.ELOOP``; a FIFO, device, socket or folder is
    ``NotRegularFile``; anything else is ``os.open``'s own error (``FileNotFoundError``, ...)."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegularFile(errno.EINVAL, "not a regular file", str(path))
    os.set_blocking(fd, True)
    return fd


def _write_replacing(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes the file owner-only; a result file is not secret
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ============================================================================ user-named outputs
# Every command that writes a file or folder the user named (``-o``, ``--out``) checks it with
# ``check_output_file`` / ``check_output_folder`` before any work and writes it with ``write_output``:
# a rename over a device node or a FIFO would replace it (as root, ``-o /dev/null`` would replace
# /dev/null), so character devices are written through and other non-regular files are refused.

class OutputError(OSError):
    """An output path that cannot take what a command writes: one line naming the path, exit code 2.
    An ``OSError``, so that callers that keep going when a file cannot be written still do."""


def _kind(path: Path) -> str | None:
    """What is at ``path`` (symlinks followed): None when nothing is, else 'file', 'folder',
    'character device', 'FIFO', 'socket', 'block device' or 'special file'."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG):
            return None  # a parent that is not a folder: _check_creatable names it
        raise OutputError(f"{path}: cannot look at it ({exc.strerror})") from None
    for test, name in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "folder"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"


def _describe(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return f"{path}: no space left on device (nothing written)"
    if exc.errno == errno.EDQUOT:
        return f"{path}: disk quota exceeded (nothing written)"
    return f"{path}: cannot write ({exc.strerror or exc})"


def _check_creatable(folder: Path, named: Path) -> None:
    """``folder`` exists or can be created, and a file can be created in it. Probed by creating and
    removing a hidden temporary file in the nearest existing folder: permission bits do not tell
    (root passes every access check; /proc refuses new files whatever the bits say)."""
    existing = folder
    while _kind(existing) is None and existing != existing.parent:
        existing = existing.parent
    kind = _kind(existing)
    if kind != "folder":
        raise OutputError(f"{named}: {existing} is a {kind or 'missing folder'}, not a folder")
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".workbench-probe-", suffix=".tmp")
    except OSError as exc:
        where = "in" if existing == folder else "under"
        raise OutputError(f"{named}: cannot create a file {where} {existing} ({exc.strerror or exc})") from None
    os.close(fd)
    Path(probe).unlink(missing_ok=True)


def check_output_file(path: str | Path, extensions: tuple[str, ...] = (), what: str = "output file") -> Path:
    """Refuse, before any work, a path that cannot take the file a command will write: a folder,
    FIFO, socket or block device there, a name without one of ``extensions`` (lower-case, with the
    dot; any case is accepted), or a folder where no file can be created. A character device
    (``/dev/null``, a terminal) passes: ``write_output`` writes through it. Raises ``OutputError``."""
    path = Path(path)
    kind = _kind(path)
    if kind == "character device":
        return path
    if kind == "folder":
        raise OutputError(f"{path}: is a folder, not a file")
    if kind not in (None, "file"):
        raise OutputError(f"{path}: is a {kind}, not a regular file (refused: writing would replace it)")
    if extensions and path.suffix.lower() not in extensions:
        listed = extensions[0] if len(extensions) == 1 else f"{', '.join(extensions[:-1])} or {extensions[-1]}"
        raise OutputError(f"{path}: {what}s end in {listed}")
    _check_creatable(path.parent, path)
    return path


def check_output_folder(path: str | Path) -> Path:
    """Refuse, before any work, a folder output (a run folder) that is not a folder or cannot be
    created or written into. Raises ``OutputError``."""
    path = Path(path)
    kind = _kind(path)
    if kind is None:
        _check_creatable(path.parent, path)
    elif kind != "folder":
        raise OutputError(f"{path}: is a {kind}, not a folder")
    else:
        _check_creatable(path, path)
    return path


def write_output(path: str | Path, text: str | bytes) -> Path:
    """Write a user-named output: a regular file (or a new one) atomically (``write_atomic``), a
    character device by writing through it (never renamed over); anything else is refused. Every
    failure (no space, no permission, read-only file system) is an ``OutputError`` naming the path,
    and a failed regular file leaves the old file (or none), never half of the new one."""
    path = Path(path)
    kind = _kind(path)
    if kind == "character device":
        _write_through(path, text.encode() if isinstance(text, str) else text)
        return path
    if kind == "folder":
        raise OutputError(f"{path}: is a folder, not a file")
    if kind not in (None, "file"):
        raise OutputError(f"{path}: is a {kind}, not a regular file (refused: writing would replace it)")
    return write_atomic(path, text)


def _write_through(path: Path, data: bytes) -> None:
    """Write into a character device as it is. Opened without blocking (a FIFO swapped in since the
    check would hang the open) and checked again on the open descriptor, then written blocking."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise OutputError(_describe(path, exc)) from None
    try:
        if not stat.S_ISCHR(os.fstat(fd).st_mode):
            raise OutputError(f"{path}: is no longer a character device (refused)")
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            if written <= 0:
                raise OutputError(f"{path}: the device took no data")
            view = view[written:]
    except OSError as exc:
        raise OutputError(_describe(path, exc)) from None
    finally:
        os.close(fd)
