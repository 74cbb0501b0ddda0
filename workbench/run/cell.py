"""The child process that runs one cell: ``python -P -m workbench.run.cell`` (used by the runner).

Protocol: the parent writes one pickled request (``workbench.run.request.CellRequest``) to stdin. The child answers on its original
stdout with length-prefixed pickled messages:

* ``("ready", None)``: imports done and the problem built; the synthesis clock starts now
* ``("incumbent", Algorithm)``: each improved answer the formulation reports
* ``("synthesized", summary)``: the formulation returned; evaluation (verify, simulate) follows
* ``("result", fields)``: the row fields of a finished cell
* ``("error", message)``: an exception; the child exits with code 1

Anything the formulation prints goes to stderr, so it cannot corrupt the message stream. The
child dies with its parent: it watches a pipe whose other end only the parent holds
(``WORKBENCH_LIFELINE_FD``) and kills its process group when that pipe closes.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import traceback

from workbench.run.wire import LIFELINE_ENV, read_message, send

__all__ = ["send", "read_message", "main"]


def _limit_memory(limit: float | None) -> None:
    if not limit:
        return
    import resource

    from workbench.util.size_guard import BUDGET_ENV

    resource.setrlimit(resource.RLIMIT_AS, (int(limit), int(limit)))
    os.environ[BUDGET_ENV] = repr(float(limit))  # the size guard refuses what the limit would kill


def _watch_parent() -> None:
    """Die with the parent: EOF on the lifeline pipe means the runner is gone (however it ended), and
    this cell's whole process group (solver subprocesses included) is killed at once."""
    fd = os.environ.get(LIFELINE_ENV)
    if not fd:
        return

    def watch() -> None:
        try:
            while os.read(int(fd), 1):
                pass
        except OSError:
            pass
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="lifeline").start()


def _preload() -> None:
    """What every schedule cell needs (building the problem, verifying, simulating, bounds, and
    numpy under them), imported while the request is still on its way."""
    import importlib

    for name in ("workbench.bounds", "workbench.topology.builders", "workbench.plugin.registry", "workbench.checking.simulate",
                 "workbench.checking.verify", "workbench.config.experiment", "workbench.run.request"):
        importlib.import_module(name)
    importlib.import_module("numpy").ndarray  # numpy is imported on first use (workbench.util.lazy): now


def main() -> int:
    """Run the one request read from stdin, answering on the original stdout (see the module
    docstring); 0, or 1 after sending an error."""
    _watch_parent()
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # prints from formulations go to stderr
    sys.stdout = sys.stderr
    try:
        _preload()  # before the request: a pre-started cell imports while its parent checks
        from workbench.run import evaluate

        request = pickle.load(sys.stdin.buffer)  # a workbench.run.request.CellRequest
        _limit_memory(request.evaluation.memory_limit)
        run = {"design": evaluate.child_run_design, "evaluate": evaluate.child_evaluate,
               "schedule": evaluate.child_run_schedule}[request.kind]
        fields = run(request, lambda kind, payload: send(channel, kind, payload))
        send(channel, "result", fields)
        return 0
    except MemoryError:
        send(channel, "error", "MemoryError: out of memory (evaluation.memory_limit or the machine's)")
        return 1
    except BaseException as exc:  # report everything, including SystemExit from a formulation
        tail = traceback.format_exc().strip().splitlines()[-3:]
        message = f"{type(exc).__name__}: {exc}".strip()
        try:
            send(channel, "error", {"message": message, "traceback": tail})
        except OSError:
            pass
        return 1


if __name__ == "__main__":
    sys.exit(main())
