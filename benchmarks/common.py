"""Shared helpers for benchmarks: medians, machine facts, atomic markdown output."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

from workbench.files import write_atomic
from typing import Callable

RESULTS = Path(__file__).resolve().parent.parent / "results" / "bench"


def timed(func: Callable[[], object], repeats: int) -> tuple[float, list[float], object]:
    """Median wall seconds over ``repeats`` runs, all samples, and the last result."""
    samples = []
    result = None
    for _ in range(repeats):
        started = time.perf_counter()
        result = func()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), samples, result


def machine() -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip() or "uncommitted"
    return (f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
            f"{platform.machine()}, commit {commit}, {time.strftime('%Y-%m-%d')}")


def write(name: str, text: str) -> Path:
    path = write_atomic(RESULTS / name, text)
    print(f"wrote {path}")
    return path
