"""Pieces the input-hardening tests share: a guard that fails a test instead of letting it hang,
and the tiny experiments their run folders come from (one cell, and two)."""

from __future__ import annotations

import signal
from contextlib import contextmanager

TINY_CELL = """
name: tiny
time_limit: 30s
seeds: [0]
grid:
  topologies: ["ring:4"]
  collectives: [allgather]
  sizes: [1MB]
  formulations: [{name: ring}]
"""
TINY_RUN = ("name: tiny\ngrid:\n  topologies: [ring:4]\n  collectives: [allgather]\n  sizes: [1MB, 2MB]\n"
            "  formulations: [ring]\n")


@contextmanager
def deadline(seconds: float):
    """Fail instead of hanging: SIGALRM interrupts a blocked open() (PEP 475 retries only when the
    handler returns; this one raises)."""
    def expired(signum, frame):
        raise TimeoutError(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
