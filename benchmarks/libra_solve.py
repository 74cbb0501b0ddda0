"""LIBRA solve times: one PerfOpt / PerfPerCost solve on 4D-4K, and the oracle + sweep experiments.

Targets: a single PerfOpt solve on the 4D-4K network with a full workload well under a second; the
full oracle + sweep experiments (73 design cells) in under a minute.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine, write
from workbench.plugin import call
from formulations.libra import Libra
from workbench.plugin.registry import DesignProblem

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "libra"


def problem(workloads, objective):
    entries = [{"workload": str(DATA / "workload" / f"{w}.txt"),
                "communicator": str(DATA / "communicator" / (f"{w}_4d.yml" if w != "Turing_NLG" else "Turing_NLG_4D.yml"))}
               for w in workloads]
    return DesignProblem(dimensions={"file": str(DATA / "network" / "4d_network.yml")}, workloads=entries,
                         cost_model={"file": str(DATA / "cost_model" / "4d_cost_model.yml")},
                         constraints={"total_bandwidth": 1000}, objective=objective)


def timed(p, repeats):
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = call.synthesize(Libra(), p, time_limit=60, seed=0)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), result


def main(argv=None) -> None:
    rows = []
    for label, workloads, objective, repeats in [
        ("PerfOpt, GPT-3", ["GPT_3"], "perf", 20),
        ("PerfOpt, GPT-3 + MSFT-1T + Turing-NLG (one design for all three)", ["GPT_3", "MSFT_1T", "Turing_NLG"], "perf", 20),
        ("PerfPerCost, GPT-3 (parametric cost sweep)", ["GPT_3"], "perf-per-cost", 5),
    ]:
        print(f"  {label} ...", flush=True)
        median, result = timed(problem(workloads, objective), repeats)
        rows.append((label, median, result.status, result.stats.get("rounds")))
    experiments = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("libra_oracles", "libra_sweep"):
            print(f"  workbench run experiments/{name}.yaml ...", flush=True)
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "workbench", "run", f"experiments/{name}.yaml", "--out",
                            f"{tmp}/{name}", "--jobs", "2", "--no-figures"], cwd=ROOT, check=True,
                           capture_output=True)
            experiments.append((name, time.perf_counter() - started))
    lines = ["# LIBRA solve times", "", __doc__.strip(), "", f"Machine: {machine()}.", "",
             "| solve (4D-4K, 1000 GB/s per NPU) | median (s) | status | Kelley rounds |", "|---|---|---|---|"]
    lines += [f"| {label} | {median:.4f} | {status} | {rounds} |" for label, median, status, rounds in rows]
    lines += ["", "| experiment (`workbench run ... --jobs 2`, child processes included) | wall (s) |", "|---|---|"]
    lines += [f"| {name} | {seconds:.1f} |" for name, seconds in experiments]
    total = sum(seconds for _, seconds in experiments)
    lines += ["", f"Oracle + sweep together: {total:.1f} s (target < 60 s: {'met' if total < 60 else 'NOT met'}).",
              "", "Regenerate with `make bench`.", ""]
    write("libra.md", "\n".join(lines))


if __name__ == "__main__":
    main()
