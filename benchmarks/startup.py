"""Fixed costs a user waits for: whole commands, wall seconds from exec to exit (median of N).

Each command runs as a fresh process, the way a user or a script runs it, so interpreter start-up,
imports, the cell process (``synth``), verification, simulation and the bounds are all counted.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine, write

ROOT = Path(__file__).resolve().parent.parent
WORKBENCH = [sys.executable, "-m", "workbench"]

CASES = [
    ("`workbench --help`", ["--help"]),
    ("`workbench formulations`", ["formulations"]),
    ("`workbench verify` of a 112-transfer file", ["verify", str(ROOT / "examples" / "ring8_allreduce.json")]),
    ("`workbench synth ring` on ring:8 (All-Gather, 1 MB)",
     ["synth", "ring", "--topology", "ring:8", "--collective", "allgather", "--size", "1MB", "-o", "{out}"]),
    ("`workbench synth sccl` (1,2,2) on DGX-1 (All-Gather)",
     ["synth", "sccl", "--topology", "dgx1", "--collective", "allgather", "--size", "1MB", "--set", "steps=2",
      "--set", "rounds=2", "-o", "{out}"]),
]


def _wall(argv: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(WORKBENCH + argv, capture_output=True, text=True, cwd=ROOT)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    lines = ["# Start-up: whole commands, wall seconds", "",
             f"Median of {args.repeats} runs per command, each a fresh process (exec to exit). Machine: {machine()}.",
             "", "| command | median (s) | min (s) | max (s) |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as folder:
        for name, words in CASES:
            argv = [w.format(out=str(Path(folder) / "out.json")) for w in words]
            _wall(argv)  # warm the file cache and byte-compiled modules
            samples = [_wall(argv) for _ in range(args.repeats)]
            lines.append(f"| {name} | {statistics.median(samples):.2f} | {min(samples):.2f} | {max(samples):.2f} |")
            print(lines[-1], flush=True)
    lines += ["", "Regenerate with `python -m benchmarks.startup` (part of `make bench`)."]
    write("startup.md", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
