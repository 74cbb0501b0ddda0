"""One deadline per synthesis: every solver call and every search loop of a formulation stays inside it.

A formulation receives ``time_limit`` (seconds) and makes ``Deadline(time_limit)`` once. Stages
take what they need from it instead of doing clock arithmetic of their own:

* ``remaining()``: seconds left (``inf`` without a limit, never negative);
* ``expired``: the time is up (search loops poll it; ``check()`` raises ``DeadlineExpired``);
* ``share(f)``: a deadline of its own for one phase, ``f`` of what is left (TE-CCL's binary search
  over horizons, the Reduce-Scatter half of an All-Reduce);
* ``limit(cap=..., floor=...)``: the seconds to hand one solver call (HiGHS, z3, CP-SAT), at most
  what is left and ``cap``, at least ``floor`` (a solver asked for 0 s would not even return its
  incumbent; the cell's own hard limit, a little above the formulation's, still bounds it);
* ``at``: the absolute time on the deadline's clock (``inf`` without a limit), for compiled loops
  that compare ``time.perf_counter()`` themselves.

The clock is ``time.perf_counter`` unless one is passed (``clock=``) or a test replaces the
module's ``CLOCK``: then time passes as the test says, without waiting for it.
"""

from __future__ import annotations

import math
import time
from typing import Callable

__all__ = ["Deadline", "DeadlineExpired"]

Clock = Callable[[], float]
CLOCK: Clock = time.perf_counter  # what a Deadline made without ``clock=`` reads (tests replace it)


class DeadlineExpired(Exception):
    """The deadline passed inside a search that cannot return a partial answer."""


class Deadline:
    """A point in time on ``clock``, ``seconds`` from now; ``None`` or ``inf`` means no limit (and
    ``0`` a deadline that has already come)."""

    __slots__ = ("at", "clock", "started")

    def __init__(self, seconds: float | None, *, clock: Clock | None = None) -> None:
        self.clock = clock if clock is not None else CLOCK
        self.started = self.clock()
        self.at = math.inf if seconds is None else self.started + float(seconds)

    @classmethod
    def until(cls, at: float, *, clock: Clock | None = None) -> "Deadline":
        """A deadline at the absolute time ``at`` of ``clock`` (``inf``: none)."""
        deadline = cls(None, clock=clock)
        deadline.at = float(at)
        return deadline

    @property
    def unlimited(self) -> bool:
        """True when there is no limit."""
        return math.isinf(self.at)

    def remaining(self) -> float:
        """Seconds left, 0 once the deadline has passed."""
        return max(0.0, self.at - self.clock())

    def elapsed(self) -> float:
        """Seconds since the deadline was made."""
        return self.clock() - self.started

    @property
    def expired(self) -> bool:
        """True once the clock is past the deadline."""
        return self.clock() > self.at

    def check(self) -> None:
        """Raise ``DeadlineExpired`` when the deadline has passed."""
        if self.expired:
            raise DeadlineExpired(f"the time limit passed after {self.elapsed():.3g} s")

    def share(self, fraction: float) -> "Deadline":
        """A deadline ``fraction`` (0..1] of the way from now to this one."""
        if not 0 < fraction <= 1:
            raise ValueError(f"a share of a deadline is in (0, 1], got {fraction}")
        return Deadline.until(self.clock() + fraction * self.remaining(), clock=self.clock)

    def limit(self, *, cap: float | None = None, floor: float = 0.0) -> float:
        """Seconds for one solver call: what is left, at most ``cap``, at least ``floor``."""
        seconds = self.remaining()
        if cap is not None:
            seconds = min(seconds, cap)
        return max(seconds, floor)

    def __repr__(self) -> str:
        return "Deadline(unlimited)" if self.unlimited else f"Deadline({self.remaining():.3f} s left)"
