"""Progress of a run: a bar that moves while cells run, and an ETA bounded by their time limits.

Finished cells are counted whole; a running cell counts the share of its time limit it has used
(capped below one), so a run of a few long cells still moves. Cells report their stages (started,
an incumbent found, evaluating), which show on the status line. A heartbeat re-draws the line on
a terminal every second and, in a log, writes a line whenever nothing was written for a minute,
so a run is never silent for minutes.

ETA: each pending cell is expected to take the mean wall time of the cells finished so far
(never more than its own time limit; its limit when none has finished), a running cell that
minus what it has used; the sum is divided by the parallel jobs. "at most" is the same with every
cell at its full limit: a bound, not a guess, since the monitor kills a cell at its limit.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

__all__ = ["Progress", "duration"]

_HEARTBEAT_TTY = 1.0
_HEARTBEAT_LOG = 60.0


def duration(seconds: float) -> str:
    """Seconds as short text: '42s', '3m05s', '2h07m' (rounded; negative as 0)."""
    seconds = int(round(max(seconds, 0.0)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"


class Progress:
    """Counts, a bar on a terminal (plain lines in a log), stage events and a bounded ETA."""

    def __init__(self, total: int, stream=None, jobs: int = 1, limits: dict[Any, float] | None = None,
                 heartbeat: float | None = None, quiet_seconds: float = 10.0) -> None:
        self.total = total
        self.quiet_seconds = quiet_seconds  # in a log, incumbents of cells younger than this are not written
        self.done = 0
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.jobs = max(1, jobs)
        self.limits = dict(limits or {})  # key -> time limit (s) of every cell still to run
        self.started = time.monotonic()
        self.running: dict[Any, dict[str, Any]] = {}
        self.walls: list[float] = []
        self._lock = threading.Lock()
        self._last_write = time.monotonic()
        self._closed = threading.Event()
        period = heartbeat if heartbeat is not None else (_HEARTBEAT_TTY if self.tty else _HEARTBEAT_LOG)
        self._period = period
        if total > 0 and period > 0:
            threading.Thread(target=self._beat, daemon=True, name="progress").start()

    # ------------------------------------------------------------------ events
    def start(self, key: Any, description: str) -> None:
        """Cell ``key`` started; ``description`` names it in the lines written."""
        with self._lock:
            self.running[key] = {"description": description, "since": time.monotonic(), "incumbents": 0,
                                 "stage": "starting"}

    def event(self, key: Any, kind: str) -> None:
        """A running cell's stage: ready (synthesising), incumbent, synthesized (evaluating)."""
        with self._lock:
            state = self.running.get(key)
            if state is None:
                return
            if kind == "incumbent":
                state["incumbents"] += 1
                state["stage"] = f"{state['incumbents']} incumbent(s)"
                if self.tty or time.monotonic() - state["since"] >= self.quiet_seconds:
                    self._write_line(f"{state['description']}: incumbent {state['incumbents']} after "
                                     f"{duration(time.monotonic() - state['since'])}")
            elif kind == "ready":
                state["stage"] = "synthesising"
            elif kind == "synthesized":
                state["stage"] = "verifying and simulating"

    def update(self, description: str, row: dict[str, Any], key: Any = None) -> None:
        """A cell finished with ``row``."""
        with self._lock:
            self.done += 1
            state = self.running.pop(key, None)
            self.limits.pop(key, None)
            if isinstance(row.get("wall_seconds"), (int, float)):
                self.walls.append(float(row["wall_seconds"]))
            elif state is not None:
                self.walls.append(time.monotonic() - state["since"])
            status = row.get("status", "?")
            time_text = ""
            if row.get("collective_time") is not None:
                from workbench.util.units import format_time

                time_text = f" {format_time(row['collective_time'])}"
            synth = row.get("synthesis_seconds")
            synth_text = f" (synthesis {synth:.3g} s)" if isinstance(synth, (int, float)) else ""
            if self.tty:
                self._draw(f"{description[:50]}: {status}{time_text}")
                if self.done == self.total:
                    self.stream.write("\n")
            else:
                expected, most = self.eta()
                self.stream.write(f"[{self.done}/{self.total}] {description}: {status}{time_text}{synth_text}"
                                  f"  (ETA {duration(expected)}, at most {duration(most)})\n")
            self._flush()

    def note(self, text: str) -> None:
        """Write ``text`` on a line of its own (below the bar on a terminal)."""
        with self._lock:
            self.stream.write(("\n" if self.tty else "") + text + "\n")
            self._flush()

    def close(self) -> None:
        """Stop the heartbeat."""
        self._closed.set()

    # ------------------------------------------------------------------ estimates
    def fraction(self) -> float:
        """Cells done, running ones by the share of their limit used (capped at 0.95 each)."""
        now = time.monotonic()
        partial = 0.0
        for key, state in self.running.items():
            limit = self.limits.get(key)
            if limit:
                partial += min(0.95, (now - state["since"]) / limit)
        return (self.done + partial) / max(self.total, 1)

    def eta(self) -> tuple[float, float]:
        """(expected seconds left, at most seconds left); see the module docstring."""
        now = time.monotonic()
        mean = sum(self.walls) / len(self.walls) if self.walls else None
        expected = most = 0.0
        for key, limit in self.limits.items():
            used = now - self.running[key]["since"] if key in self.running else 0.0
            guess = limit if mean is None else min(mean, limit)
            expected += max(guess - used, 0.0 if key not in self.running else 1.0)
            most += max(limit - used, 0.0)
        return expected / self.jobs, most / self.jobs

    # ------------------------------------------------------------------ drawing
    def _status(self) -> str:
        if not self.running:
            return ""
        now = time.monotonic()
        key, state = max(self.running.items(), key=lambda item: now - item[1]["since"])
        limit = self.limits.get(key)
        used = duration(now - state["since"]) + (f" of {duration(limit)}" if limit else "")
        more = f" (+{len(self.running) - 1} running)" if len(self.running) > 1 else ""
        return f"{state['description'][:40]}: {state['stage']}, {used}{more}"

    def _draw(self, text: str) -> None:
        width = 28
        filled = int(width * self.fraction())
        bar = "#" * filled + "-" * (width - filled)
        expected, most = self.eta()
        self.stream.write(f"\r[{bar}] {self.done}/{self.total} cells  ETA {duration(expected)} "
                          f"(at most {duration(most)})  {text}\x1b[K")

    def _write_line(self, text: str) -> None:
        if self.tty:
            self._draw(text)
        else:
            self.stream.write(text + "\n")
        self._flush()

    def _flush(self) -> None:
        self._last_write = time.monotonic()
        try:
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def _beat(self) -> None:
        while not self._closed.wait(min(self._period, 1.0)):
            with self._lock:
                if self.done >= self.total:
                    return
                if time.monotonic() - self._last_write < self._period:
                    continue
                expected, most = self.eta()
                status = self._status()
                if self.tty:
                    self._draw(status)
                    self._flush()
                else:
                    try:
                        self.stream.write(f"[{self.done}/{self.total}, {self.fraction():.0%}] still running: "
                                          f"{status or 'waiting for cells'}  (ETA {duration(expected)}, "
                                          f"at most {duration(most)})\n")
                    except ValueError:  # the stream was closed under us: nobody is listening any more
                        return
                    self._flush()
