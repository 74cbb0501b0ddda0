"""Shared helpers for benchmarks: medians, machine facts, atomic markdown output."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

from workbench.util.files import write_atomic
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


def reference_loop() -> float:
    """Seconds for 10^7 integer additions in a CPython loop (best of 3): how fast this machine is
    right now, so that runs on a busy or throttled host can be compared."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        total = 0
        for i in range(10_000_000):
            total += i
        best = min(best, time.perf_counter() - started)
    return best


def machine() -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip() or "uncommitted"
    return (f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
            f"{platform.machine()}, commit {commit}, {time.strftime('%Y-%m-%d')}")


def write(name: str, text: str) -> Path:
    path = write_atomic(RESULTS / name, text)
    print(f"wrote {path}")
    return path


def experiment_arguments(description: str, config: Path, out: Path, argv: list[str] | None):
    """The arguments every experiment benchmark takes: ``--config``, ``--out``, ``--jobs`` and
    ``--report-only`` (write the report from the rows already there)."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", type=Path, default=config)
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--report-only", action="store_true", help="write report.md from the rows already there")
    return parser.parse_args(argv)


def experiment_rows(config: Path, out: Path, jobs: int, report_only: bool) -> list[dict] | None:
    """Run (or, with ``report_only``, only read) an experiment's folder through ``workbench run`` and
    return its rows; None, with a line on stderr, when the folder has none."""
    import json
    import sys

    if not report_only:
        subprocess.run([sys.executable, "-m", "workbench", "run", str(config), "--out", str(out),
                        "--jobs", str(jobs)], check=False)
    rows_file = out / "rows.jsonl"
    if not rows_file.is_file():
        print(f"{rows_file}: no rows (run without --report-only first)", file=sys.stderr)
        return None
    return [json.loads(line) for line in rows_file.read_text().splitlines() if line.strip()]



def experiment_main(description: str, config: Path, out: Path, report: Callable[[list[dict]], str],
                    argv: list[str] | None) -> int:
    """An experiment benchmark's ``main``: run (or, with ``--report-only``, read) the experiment, write
    ``report(rows)`` to ``report.md`` in the run folder and print it; 2 when the run cannot start."""
    args = experiment_arguments(description, config, out, argv)
    rows = experiment_rows(args.config, args.out, args.jobs, args.report_only)
    if rows is None:
        return 2
    (args.out / "report.md").write_text(report(rows))
    print((args.out / "report.md").read_text())
    return 0
