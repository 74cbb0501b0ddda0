"""The monitor side of a cell: its child process, hard limits, the lifeline, and what a killed cell leaves.

The formulation gets a time limit a little below the cell's; the monitor kills the child at the
cell's limit plus a short grace and records ``timeout`` with the best incumbent the child
forwarded (verified and simulated here). A crash (exception, signal, out of memory) becomes an
``error`` row with the message.
"""

from __future__ import annotations

import os
import platform
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from workbench.run.request import CellRequest
from workbench.run.wire import LIFELINE_ENV
from workbench.util.safe_path import safe_sys_path
from workbench.reports import row_keys as R

__all__ = ["execute", "prestart", "environment_info", "GRACE_SECONDS", "LIFELINE_ENV", "STARTUP_LIMIT"]

GRACE_SECONDS = 2.0
STARTUP_LIMIT = 180.0


# ============================================================================ monitor side
_ENVIRONMENT: dict[str, Any] | None = None


def environment_info() -> dict[str, Any]:
    """Package and solver versions, git commit and host (cached)."""
    global _ENVIRONMENT
    if _ENVIRONMENT is None:
        import importlib.metadata

        versions = {"python": platform.python_version()}
        for package in ("collective-workbench", "numpy", "scipy", "networkx", "highspy", "pulp", "z3-solver",
                        "ortools", "distributed"):
            try:
                versions[package] = importlib.metadata.version(package)
            except importlib.metadata.PackageNotFoundError:
                pass
        commit = None
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    timeout=10, cwd=Path(__file__).resolve().parent).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            pass
        _ENVIRONMENT = {R.VERSIONS: versions, R.GIT_COMMIT: commit, R.HOST: socket.gethostname()}
    return _ENVIRONMENT


def _child_env() -> dict[str, str]:
    """The environment of a started cell: ``PYTHONPATH`` is this process's ``sys.path`` without the
    current folder (``safe_sys_path``); ``PYTHONSAFEPATH`` keeps any Python the cell starts from
    putting its own current folder or script folder first as well."""
    env = dict(os.environ)
    paths = [p for p in safe_sys_path(sys.path) if os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONSAFEPATH"] = "1"
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class _Child:
    """A running cell process and the thread that reads its messages.

    ``fork=True`` (``workbench synth``, a single-threaded parent) forks this process instead of
    starting a fresh interpreter: the cell starts with the stack already imported.
    """

    def __init__(self, fork: bool = False) -> None:
        self.stderr = tempfile.TemporaryFile()
        # the lifeline: the child holds the read end and takes its process group down when it reads EOF,
        # which happens however this process ends (SIGKILL, the OOM killer, a batch scheduler), since
        # the kernel closes our write end then; a signal to the child on our death would not do (it
        # fires when the creating thread exits, and cells are started from worker threads)
        lifeline, self.lifeline = os.pipe()
        try:
            if fork and threading.active_count() == 1 and hasattr(os, "fork"):
                self.process: Any = _ForkedCell(self.stderr, lifeline, self.lifeline)
            else:
                env = _child_env()
                env[LIFELINE_ENV] = str(lifeline)
                # -P: the interpreter does not put the current folder first on sys.path (``-m`` would)
                self.process = subprocess.Popen([sys.executable, "-P", "-m", "workbench.run.cell"],
                                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                                env=env, start_new_session=True, pass_fds=(lifeline,))
        finally:
            os.close(lifeline)
        self.messages: queue.Queue = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def send(self, request: CellRequest) -> None:
        """The cell's request (a started child imports the stack while it waits for it)."""
        import pickle

        try:
            self.process.stdin.write(pickle.dumps(request))
            self.process.stdin.close()
        except BrokenPipeError:
            pass

    def _read(self) -> None:
        from workbench.run.wire import read_message

        try:
            while True:
                message = read_message(self.process.stdout)
                if message is None:
                    break
                self.messages.put(message)
        except Exception as exc:  # a corrupt stream is reported as an error row
            self.messages.put(("error", f"unreadable message from the cell process: {exc}"))
        self.messages.put(("eof", None))

    def kill(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.process.kill()
        self.process.wait()

    def stderr_tail(self, lines: int = 3) -> str:
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:])

    def close(self) -> None:
        self.kill()
        self.stderr.close()
        if self.lifeline >= 0:
            os.close(self.lifeline)
            self.lifeline = -1


class _ForkedCell:
    """The few ``subprocess.Popen`` members ``_Child`` uses, for a cell forked from this process.

    The fork runs ``workbench.run.cell.main`` in a session of its own with the request pipe as stdin,
    the message pipe as stdout and ``stderr`` as stderr, exactly as a started interpreter would,
    and leaves with ``os._exit`` (none of this process's exit handlers run twice).
    """

    def __init__(self, stderr: Any, lifeline: int, lifeline_writer: int) -> None:
        request_in, request_out = os.pipe()
        messages_in, messages_out = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # or the fork would write our buffered output again
            stream.flush()
        pid = os.fork()
        if pid == 0:  # the cell
            code = 1
            try:
                os.setsid()
                os.dup2(request_in, 0)
                os.dup2(messages_out, 1)
                os.dup2(stderr.fileno(), 2)
                for fd in (request_in, request_out, messages_in, messages_out, lifeline_writer):
                    os.close(fd)
                os.environ[LIFELINE_ENV] = str(lifeline)
                os.environ.setdefault("OMP_NUM_THREADS", "1")  # numpy loads later (workbench.util.lazy)
                sys.path[:] = safe_sys_path(sys.path)  # what the cell imports from now on, not from here
                os.environ["PYTHONSAFEPATH"] = "1"
                sys.stdin = open(0, "r", closefd=False)
                sys.stdout = open(1, "w", closefd=False)
                sys.stderr = open(2, "w", closefd=False)
                from workbench.run import cell

                code = cell.main()
            except BaseException:
                pass
            finally:
                os._exit(code)
        os.close(request_in)
        os.close(messages_out)
        self.pid = pid
        self.returncode: int | None = None
        self.stdin = os.fdopen(request_out, "wb")
        self.stdout = os.fdopen(messages_in, "rb")

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)


def prestart() -> _Child:
    """A cell process started ahead of its request, so that its start-up overlaps the caller's
    checks (``workbench synth``); hand it to ``execute`` or ``close()`` it. It is forked from this
    process when that is safe (no other thread), which spares it importing the stack again."""
    return _Child(fork=True)


def execute(request: CellRequest, stop: threading.Event | None = None,
            on_event: Callable[[str], None] | None = None, child: _Child | None = None) -> dict[str, Any] | None:
    """Run one cell in a child process under its hard limit; return its row fields.

    Returns None when ``stop`` is set (the run was interrupted): an interrupted cell leaves no row.
    Runs anywhere: in the runner's threads or inside a Dask worker. ``on_event`` hears the cell's
    stages ("ready", "incumbent", "synthesized") for a progress line.
    """
    limit = request.time_limit
    evaluation_limit = float(request.evaluation.evaluation_time_limit)
    started = time.time()
    # an absolute deadline (synth: process start + limit) bounds start-up and synthesis together
    absolute = None if request.deadline is None else time.monotonic() + request.deadline - time.time()
    child = child or _Child()
    child.send(request)
    incumbent = None
    phase = "startup"
    deadline = time.monotonic() + STARTUP_LIMIT
    if absolute is not None and request.kind != "evaluate":
        phase, deadline = "synthesis", min(deadline, absolute + GRACE_SECONDS)
    synthesis_started = time.monotonic()
    fields: dict[str, Any] = {}
    try:
        while True:
            if stop is not None and stop.is_set():
                return None
            try:
                kind, payload = child.messages.get(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
                if on_event is not None and kind in ("ready", "incumbent", "synthesized"):
                    on_event(kind)
            except queue.Empty:
                if time.monotonic() < deadline:
                    continue
                child.kill()
                fields = _overrun(phase, limit, evaluation_limit, incumbent, request, stop)
                break
            if kind == "ready" and request.kind == "evaluate":
                phase, deadline = "evaluation", time.monotonic() + evaluation_limit
            elif kind == "ready":
                phase, deadline = "synthesis", time.monotonic() + limit + GRACE_SECONDS
                if absolute is not None:
                    deadline = min(deadline, absolute + GRACE_SECONDS)
                synthesis_started = time.monotonic()
            elif kind == "incumbent":
                incumbent = payload
            elif kind == "synthesized":
                phase, deadline = "evaluation", time.monotonic() + evaluation_limit
            elif kind == "result":
                fields = payload
                break
            elif kind == "error":
                fields = _error_fields(payload, phase, synthesis_started)
                break
            elif kind == "eof":
                fields = _exit_fields(child)
                break
    finally:
        child.close()
    fields.setdefault(R.MESSAGE, "")
    fields[R.WALL_SECONDS] = time.time() - started
    fields[R.FINISHED_AT] = time.strftime("%Y-%m-%dT%H:%M:%S")
    return fields


def _error_fields(payload, phase: str, synthesis_started: float) -> dict[str, Any]:
    """The row fields of a cell that reported an error; the synthesis seconds when it failed there."""
    message = payload["message"] if isinstance(payload, dict) else str(payload)
    fields = {R.STATUS: "error", R.MESSAGE: message}
    if phase == "synthesis":
        fields[R.SYNTHESIS_SECONDS] = time.monotonic() - synthesis_started
    return fields


def _exit_fields(child: _Child) -> dict[str, Any]:
    """The row fields of a cell process that ended without a result: the signal or exit code and
    the tail of its standard error."""
    code = child.process.wait()
    if code < 0:
        why = f"cell process killed by {_signal_name(code)}"
        if code == -signal.SIGKILL:
            why += " (out of memory?)"
    else:
        why = f"cell process exited with code {code} without a result"
    tail = child.stderr_tail()
    return {R.STATUS: "error", R.MESSAGE: why + (f": {tail}" if tail else "")}


def _overrun(phase: str, limit: float, evaluation_limit: float, incumbent, request: CellRequest,
             stop: threading.Event | None) -> dict[str, Any]:
    if phase == "startup":
        return {R.STATUS: "error", R.MESSAGE: f"the cell process did not start within {STARTUP_LIMIT:.0f} s"}
    if phase == "evaluation":
        return {R.STATUS: "error", R.MESSAGE: f"verifying and simulating exceeded {evaluation_limit:g} s"}
    fields: dict[str, Any] = {R.STATUS: "timeout", R.SYNTHESIS_SECONDS: limit,
                              R.MESSAGE: f"killed at the cell's time limit ({limit:g} s)"}
    if incumbent is None or request.kind != "schedule":
        fields[R.MESSAGE] += "; no incumbent was reported"
        return fields
    # the incumbent is verified and simulated in a child of its own, under the evaluation limit
    evaluated = execute(request.to_evaluate(incumbent), stop) or {}
    if evaluated.get(R.STATUS) == "error":
        fields[R.MESSAGE] += f"; the incumbent was not evaluated: {evaluated.get('message', '')}"
        return fields
    evaluated.pop(R.WALL_SECONDS, None)
    evaluated.pop(R.FINISHED_AT, None)
    evaluated.pop(R.MESSAGE, None)
    fields.update(evaluated)
    fields[R.MESSAGE] += "; best incumbent attached"
    return fields
