"""Fixed costs a user waits for: whole commands, wall seconds from exec to exit (median of N).

Each command runs as a fresh process, the way a user or a script runs it, so interpreter start-up,
imports, the cell process (``synth``), verification, simulation and the bounds are all counted.

Two conditions: Python's default, where the first run writes the project's byte-compiled modules
(``__pycache__``) and later runs read them; and without them, as on a machine that sets
``PYTHONDONTWRITEBYTECODE`` (this one does), where every run compiles the project's modules again.
"""

from __future__ import annotations

import argparse
import os
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


def _wall(argv: list[str], env: dict[str, str], cwd: Path = ROOT) -> float:
    started = time.perf_counter()
    done = subprocess.run(WORKBENCH + argv, capture_output=True, text=True, cwd=cwd, env=env)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return elapsed


def _forget_bytecode() -> None:
    """Remove the project's byte-compiled modules (numba's cached machine code beside them stays)."""
    for package in ("workbench", "formulations"):
        for path in (ROOT / package).rglob("__pycache__/*.pyc"):
            path.unlink()


COMPARED = [("`workbench --help`", ["--help"]), ("`workbench formulations`", ["formulations"]),
            ("`workbench synth ring` on ring:8 (All-Gather, 1 MB)",
             ["synth", "ring", "--topology", "ring:8", "--collective", "allgather", "--size", "1MB", "-o", "{out}"])]


def _commit(tree: Path) -> str:
    """The short commit of a checkout, or its path when it is not one."""
    done = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or str(tree)


def compare(other: Path, repeats: int) -> list[str]:
    """Medians of this checkout and ``other`` (an older one) run alternately, each condition in turn,
    so that the machine's drift falls on both alike; the lines of a markdown table."""
    lines = ["| command | condition | other checkout (s) | this one (s) | ratio |", "|---|---|---|---|---|"]
    trees = {"other": other.resolve(), "this": ROOT}
    with tempfile.TemporaryDirectory() as folder:
        for condition in ("byte-compiled", "compiling"):
            env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
            if condition == "compiling":
                env["PYTHONDONTWRITEBYTECODE"] = "1"
            for name, words in COMPARED:
                argv = [w.format(out=str(Path(folder) / "out.json")) for w in words]
                samples: dict[str, list[float]] = {"other": [], "this": []}
                for i in range(repeats + 1):
                    for tree in (("other", "this") if i % 2 == 0 else ("this", "other")):
                        wall = _wall(argv, dict(env, PYTHONPATH=str(trees[tree])), cwd=trees[tree])
                        if i:  # the first round warms the file cache (and writes byte-code)
                            samples[tree].append(wall)
                old, new = statistics.median(samples["other"]), statistics.median(samples["this"])
                lines.append(f"| {name} | {condition} | {old:.3f} | {new:.3f} | {new / old:.2f} |")
                print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--against", type=Path, help="another checkout (e.g. the previous release) to compare with, "
                        "alternating runs; the table goes to startup_compared.md")
    args = parser.parse_args(argv)
    if args.against is not None:
        lines = ["# Start-up against another checkout: whole commands, wall seconds", "",
                 f"Median of {args.repeats} runs of each checkout, alternating; the other checkout is "
                 f"{_commit(args.against)}. Machine: {machine()}.", "",
                 *compare(args.against, args.repeats), "",
                 f"Regenerate with `python -m benchmarks.startup --against <checkout>`."]
        write("startup_compared.md", "\n".join(lines) + "\n")
        return 0
    lines = ["# Start-up: whole commands, wall seconds", "",
             f"Median of {args.repeats} runs per command, each a fresh process (exec to exit). Machine: {machine()}.",
             "", " ".join(__doc__.strip().split("\n\n")[1:]).replace("\n", " "), "",
             "| command | median (s) | min (s) | max (s) | without byte-compiled modules: median (min) |",
             "|---|---|---|---|---|"]
    compiling = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    default = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as folder:
        for name, words in CASES:
            argv = [w.format(out=str(Path(folder) / "out.json")) for w in words]
            _forget_bytecode()
            _wall(argv, compiling)  # warm the file cache
            cold = [_wall(argv, compiling) for _ in range(args.repeats)]
            _wall(argv, default)  # writes the byte-compiled modules
            samples = [_wall(argv, default) for _ in range(args.repeats)]
            lines.append(f"| {name} | {statistics.median(samples):.2f} | {min(samples):.2f} | {max(samples):.2f} "
                         f"| {statistics.median(cold):.2f} ({min(cold):.2f}) |")
            print(lines[-1], flush=True)
    lines += ["", "Regenerate with `python -m benchmarks.startup` (part of `make bench`)."]
    write("startup.md", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
