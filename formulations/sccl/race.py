"""The ``race`` backend: CP-SAT and z3 (its own tactic selection) solve the same SCCL instance in two
processes; the first definitive answer (sat or unsat) wins and the other process is killed.

Neither engine dominates: CP-SAT is several times faster on most of Table 4's instances, z3's
default tactics win some small or unsatisfiable ones, and a losing engine can run for minutes
(``backend`` names one engine to skip the race; ``z3`` is the paper's QF_LIA setting). Each
process is forked from this one (no re-import, the model is built in the child) and is killed
with it: it asks the kernel for SIGKILL when its parent dies, and the parent kills both in a
``finally``. Without OR-Tools the race is z3 alone, in-process. A tiny instance (``TINY_TERMS``
send-and-step terms or fewer, Table 4's sub-second rows) is first given to z3 alone, in this
process, for up to ``HEAD_START`` seconds: it answers those in a fraction of a second, faster than
two processes can start, and the race begins only if it has not answered.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from workbench.model.collective import Collective
from workbench.kit.deadline import Deadline
from workbench.topology import Topology

from .instance import InstanceResult, bandwidth_groups, reject_by_bounds, solve_instance
from .options import cpsat_available  # here too: the race asks it, tests replace it here

__all__ = ["race_instance", "ENGINES", "cpsat_available"]

ENGINES = ("cpsat", "z3-auto")
_GRACE = 2.0  # seconds past the solver limit before an engine that has not answered is killed
TINY_TERMS = 2_500  # chunks x links x steps at or below which z3 gets a head start in this process
HEAD_START = 1.0  # seconds


def _die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent's finally still kills us
        pass


def _engine(conn, backend: str, args: tuple, kwargs: dict[str, Any]) -> None:
    _die_with_parent()
    try:
        result = solve_instance(*args, backend=backend, **kwargs)
    except Exception as exc:  # reported to the parent, which keeps waiting for the other engine
        result = InstanceResult("error", 0.0, None, f"{backend}: {type(exc).__name__}: {exc}")
    try:
        conn.send(result)
    finally:
        conn.close()
        os._exit(0)  # skip the parent's atexit handlers and buffers inherited through fork


def _terms(collective: Collective, steps: int, groups: list) -> int:
    """The size of an instance's bandwidth constraints: chunks x links x steps."""
    links = {pair for pairs, b in groups if b > 0 for pair in pairs}
    return collective.num_chunks * len(links) * steps


def _with_note(result: InstanceResult, note: str) -> InstanceResult:
    """``result`` with ``note`` appended to its note ("; " between the two)."""
    result.note = (result.note + "; " if result.note else "") + note
    return result


def _receive(conn, backend: str) -> InstanceResult:
    """The answer engine ``backend`` sent on ``conn``, or an error if it died before sending one."""
    try:
        return conn.recv()
    except (EOFError, OSError):
        return InstanceResult("error", 0.0, None, f"{backend}: the engine process died")


def race_instance(topology: Topology, collective: Collective, chunk_bytes: float, steps: int, rounds: int,
                  seconds: float, groups: list | None = None, seed: int = 0, bounds=None) -> InstanceResult:
    """``solve_instance`` on every engine at once (same arguments, no ``backend``); an instance the
    bounds rule out is answered here, before any process starts."""
    groups = groups if groups is not None else bandwidth_groups(topology)
    rejected, a_l, b_l = reject_by_bounds(topology, collective, steps, rounds, groups, bounds)
    if rejected is not None:
        return rejected
    args = (topology, collective, chunk_bytes, steps, rounds)
    kwargs = {"groups": groups, "seed": seed, "bounds": (a_l, b_l)}
    engines = ENGINES if cpsat_available() else ("z3-auto",)
    if len(engines) > 1 and _terms(collective, steps, groups) <= TINY_TERMS:
        head = solve_instance(*args, seconds=min(seconds, HEAD_START), backend="z3-auto", **kwargs)
        if head.answer in ("sat", "unsat") or seconds <= HEAD_START:
            if head.algorithm is not None:
                head.algorithm.meta["engine"] = "z3-auto"
            return _with_note(head, "race: z3-auto alone (a tiny instance)")
        seconds -= head.seconds
    if len(engines) == 1:
        result = solve_instance(*args, seconds=seconds, backend=engines[0], **kwargs)
        return _with_note(result, "race: z3-auto alone (no OR-Tools)")
    import multiprocessing  # here, not at the top: the answers above start no process
    from multiprocessing.connection import wait

    deadline = Deadline(seconds + _GRACE)  # the engines' own limit is seconds; the grace lets them report
    context = multiprocessing.get_context("fork")
    running: dict[Any, tuple[str, Any]] = {}
    answers: list[tuple[str, InstanceResult]] = []
    try:
        for backend in engines:
            receive, send = context.Pipe(duplex=False)
            process = context.Process(target=_engine, args=(send, backend, args, dict(kwargs, seconds=seconds)),
                                      daemon=True)
            process.start()
            send.close()
            running[receive] = (backend, process)
        while running:
            ready = wait(list(running), timeout=deadline.remaining())
            if not ready:
                break
            for conn in ready:
                backend, process = running[conn]  # stays listed (and killed by the finally) until read
                result = _receive(conn, backend)
                del running[conn]
                conn.close()
                process.join(timeout=1.0)
                answers.append((backend, result))
                if result.answer in ("sat", "unsat", "bound"):
                    result.seconds = deadline.elapsed()
                    if result.algorithm is not None:
                        result.algorithm.meta["engine"] = backend
                    return _with_note(result, f"race won by {backend}")
    finally:
        for conn, (_, process) in running.items():
            if process.is_alive():
                process.kill()
            process.join(timeout=5.0)
            conn.close()
    # no engine was definitive: unknown (time) unless every engine failed outright
    elapsed = deadline.elapsed()
    notes = "; ".join(f"{b}: {r.answer}{' (' + r.note + ')' if r.note else ''}" for b, r in answers)
    if answers and all(r.answer == "error" for _, r in answers):
        return InstanceResult("error", elapsed, None, f"race: {notes}")
    return InstanceResult("unknown", elapsed, None, f"race: no engine answered within the limit ({notes or 'none'})")
