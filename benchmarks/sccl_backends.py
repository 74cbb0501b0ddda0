"""SCCL Table 4 rows on DGX-1, whole ``workbench synth sccl`` commands beside msccl-tools' ``msccl solve instance``.

Each row is one (C, S, R) instance in the msccl-tools numbering of DGX-1 (``dgx1-msccl``), wall
seconds from exec to exit (start-up, the cell process, the solve, verification and simulation),
median of ``--repeats`` fresh processes, for the default backend (``race``: CP-SAT and z3-auto in two
processes; a tiny instance goes to z3-auto in the cell first, for up to a second) and for the
single engines. msccl-tools' figures are its own command's wall time
measured on this machine class (z3, its default); msccl-tools counts All-to-All chunks per pair,
so its (8, S, R) All-to-All is our one chunk per rank pair (C = 8 per node).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine, write

ROOT = Path(__file__).resolve().parent.parent
WORKBENCH = [sys.executable, "-m", "workbench"]

# (collective, C in SCCL's per-node count, S, R, our chunks per rank, msccl-tools wall seconds)
ROWS = [
    ("allgather", 1, 2, 2, 1, 0.25),
    ("allgather", 2, 3, 3, 2, 0.40),
    ("allgather", 4, 5, 5, 4, 1.78),
    ("allgather", 5, 6, 6, 5, 3.69),
    ("allgather", 6, 7, 7, 6, 11.8),
    ("allgather", 6, 3, 7, 6, 10.6),
    ("broadcast", 6, 3, 3, 6, 0.25),
    ("broadcast", 12, 4, 4, 12, 0.78),
    ("gather", 6, 7, 7, 6, 3.58),
    ("alltoall", 8, 3, 3, 1, 4.11),
    ("alltoall", 8, 2, 3, 1, 2.43),
]
BACKENDS = ("race", "cpsat", "z3-auto", "z3")


def _run(kind: str, chunks: int, steps: int, rounds: int, backend: str, limit: float, out: Path) -> tuple[float, str]:
    argv = WORKBENCH + ["synth", "sccl", "--topology", "dgx1-msccl", "--collective", kind, "--chunks", str(chunks),
                        "--size", "8MB", "--set", f"steps={steps}", "--set", f"rounds={rounds}",
                        "--set", f"backend={backend}", "--time-limit", f"{limit:g}s", "-o", str(out)]
    if kind in ("broadcast", "gather"):
        argv += ["--root", "0"]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    elapsed = time.perf_counter() - started
    if done.returncode == 0 and out.exists():
        meta = json.loads(out.read_text())["meta"]
        return elapsed, f"won by {meta.get('engine', '?')}"
    status = "timeout" if done.returncode == 4 else ("unsat" if done.returncode == 3 else f"exit {done.returncode}")
    return elapsed, status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=float, default=180.0, help="seconds per command")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    args = parser.parse_args(argv)
    backends = args.backends.split(",")
    header = " | ".join(f"{b} (s)" for b in backends)
    lines = ["# SCCL Table 4 rows: our default backend beside msccl-tools", "", __doc__.strip(), "",
             f"Machine: {machine()}. Median of {args.repeats} runs ({args.limit:g} s limit per command; the single "
             f"engines one run each).", "",
             f"| collective (C,S,R) | msccl-tools (s) | {header} | race / msccl-tools | race's winner |",
             "|---|---|" + "---|" * len(backends) + "---|---|"]
    slower = []
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out.json"
        for kind, c, steps, rounds, chunks, reference in ROWS:
            cells, winner, race_median = [], "", None
            for backend in backends:
                repeats = args.repeats if backend == "race" else 1
                samples, notes = [], []
                for _ in range(repeats):
                    out.unlink(missing_ok=True)
                    seconds, note = _run(kind, chunks, steps, rounds, backend, args.limit, out)
                    samples.append(seconds)
                    notes.append(note)
                median = statistics.median(samples)
                failed = [n for n in notes if n in ("timeout",) or n.startswith("exit")]
                cells.append(f"{median:.2f}" + (f" ({failed[0]})" if failed else ""))
                if backend == "race":
                    race_median = median
                    winner = ", ".join(sorted(set(n for n in notes if n.startswith("won by"))))
            ratio = race_median / reference if race_median is not None else float("nan")
            if race_median is not None and reference > 1.0 and race_median > reference:
                slower.append(f"{kind} ({c},{steps},{rounds})")
            lines.append(f"| {kind} ({c},{steps},{rounds}) | {reference:.2f} | {' | '.join(cells)} | {ratio:.2f} | "
                         f"{winner} |")
            print(lines[-1], flush=True)
    lines += ["", "Rows where msccl-tools needs more than 1 s and the default is slower: "
              + (", ".join(slower) if slower else "none") + ".",
              "", "Regenerate with `python -m benchmarks.sccl_backends` (`make bench-sccl`).", ""]
    write("sccl_backends.md", "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
