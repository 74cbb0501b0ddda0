"""What a user waits for with SyCCL: a whole fresh `workbench synth` (start-up, decomposition,
sub-models, candidates, verification, simulation and the bounds), wall seconds from exec to exit,
beside the schedule's efficiency against the best bound and TACOS's schedule where it is the
yardstick (All-Gather at 1 MB on 128 GPUs).

`python -m benchmarks.syccl_wall` writes results/bench/syccl_wall.md (about 8 minutes on 2 cores;
run it on a quiet machine: the wall times are the point).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine, write

ROOT = Path(__file__).resolve().parent.parent

CASES = [  # (formulation, topology, collective, size, the claim it stands for)
    ("syccl", "rails:16x8", "allgather", "1GiB", ">= 95% of T*, within 10 minutes"),
    ("syccl", "rails:16x8", "allgather", "1MB", "no slower than TACOS, within 10 minutes"),
    ("tacos", "rails:16x8", "allgather", "1MB", "the yardstick of the line above"),
    ("syccl", "rails:4x8", "alltoall", "1GiB", ">= 90% of the max-concurrent-flow bound"),
]


def _run(formulation: str, topology: str, collective: str, size: str) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "algorithm.json"
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "workbench", "synth", formulation, "--topology", topology,
                               "--collective", collective, "--size", size, "--time-limit", "600s", "-o", str(out)],
                              capture_output=True, text=True, cwd=ROOT)
        wall = time.perf_counter() - started
        meta = json.loads(out.read_text())["meta"] if out.exists() else {}
    text = done.stdout
    return {"wall": wall, "code": done.returncode, "status": _field(text, "status"),
            "time": _field(text, "collective time"), "efficiency": _field(text, "efficiency"),
            "claimed": meta.get("claimed_time")}


def _field(text: str, name: str) -> str:
    for line in text.splitlines():
        if line.startswith(name):
            return line[len(name):].strip()
    return ""


def main(argv: list[str] | None = None) -> int:
    rows = []
    for formulation, topology, collective, size, claim in CASES:
        result = _run(formulation, topology, collective, size)
        print(f"{formulation} {topology} {collective} {size}: {result['wall']:.1f} s, {result['efficiency']}",
              flush=True)
        rows.append(f"| `{formulation}` | {topology} | {collective} | {size} | {result['wall']:.1f} | "
                    f"{result['time'].split(' (')[0]} | {result['efficiency'].split(' of')[0]} | {claim} |")
    text = "\n".join([
        "# SyCCL: what a user waits for",
        "",
        f"Machine: {machine()}. One fresh `workbench synth ... --time-limit 600s` per row, default parameters;",
        "wall seconds from exec to exit (start-up, synthesis, verification, simulation and bounds included).",
        "",
        "| formulation | topology | collective | size | wall (s) | simulated time | of the best bound | stands for |",
        "|---|---|---|---|---|---|---|---|",
        *rows, ""])
    write("syccl_wall.md", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
