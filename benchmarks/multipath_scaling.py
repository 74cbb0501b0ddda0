"""Multipath All-to-All against GPUs, on the fabrics users run: rail-optimized and leaf-spine.

Each case writes the fabric to a topology file and times what a user waits for, the whole
``workbench synth multipath --collective alltoall --size S`` command in a fresh process (start-up,
loading, the flow LP, the pieces chosen by simulation, the bounds it prints), beside the
formulation's own seconds and its LP's. The fabrics are ``benchmarks.honesty``'s generators at
growing sizes (seed 2026): ``rails:Bx8`` (boxes of 8 NPUs on a box switch, rail switch i joining
NPU i of every box) and ``leafspine:Lx8x4`` (8 NPUs per leaf, 4 spines). The efficiency is the
simulated time against the flow LP's throughput time (``meta.flow_optimum``, no alpha), so it is
an upper estimate of how far the schedule is from the bandwidth optimum.
``python -m benchmarks.multipath_scaling [--size 16MB] [--time-limit 300]``; results in
``results/bench/multipath_scaling.md``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine, write
from benchmarks.honesty import leaf_spine, rails
from workbench.topology import Topology
from workbench.util.units import format_time, parse_size

CASES = [("rails", b) for b in (2, 4, 8, 16)] + [("leafspine", l) for l in (2, 4, 8, 16)]


def fabric(family: str, count: int) -> Topology:
    rng = random.Random(2026)
    return rails(rng, count, 8) if family == "rails" else leaf_spine(rng, count, 8, 4)


def run_case(topology: Topology, size: str, time_limit: str, folder: Path) -> dict:
    """One fresh ``workbench synth`` process: its wall seconds and what the schedule file says."""
    spec = folder / f"{topology.name.replace(':', '_')}.json"
    spec.write_text(json.dumps(topology.to_dict()))
    out = folder / "out.json"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "workbench", "synth", "multipath", "--topology", str(spec),
                           "--collective", "alltoall", "--size", size, "--time-limit", time_limit, "-o", str(out)],
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0 or not out.exists():
        return {"wall": wall, "error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    data = json.loads(out.read_text())
    meta = data["meta"]
    out.unlink()
    return {"wall": wall, "synthesis": meta.get("synthesis_seconds"), "lp": meta.get("lp_seconds"),
            "transfers": len(data["transfers"]), "time": meta["claimed_time"], "flow": meta["flow_optimum"],
            "chunks": min(meta["time_by_choice"]["chunks"], key=meta["time_by_choice"]["chunks"].get)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="16MB")
    parser.add_argument("--time-limit", default="300")
    args = parser.parse_args(argv)
    parse_size(args.size)
    lines = ["# Multipath All-to-All against GPUs", "", f"Machine: {machine()}. All-to-All of {args.size}, "
             f"time limit {args.time_limit} s; `python -m benchmarks.multipath_scaling` (module docstring).", "",
             "| fabric | GPUs | `workbench synth` wall | synthesis | LP | transfers | pieces per pair "
             "| simulated | flow optimum | efficiency |", "|---|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for family, count in CASES:
            topology = fabric(family, count)
            row = run_case(topology, args.size, args.time_limit, Path(tmp))
            if "error" in row:
                lines.append(f"| {topology.name} | {topology.num_npus} | {row['wall']:.1f} s | error: "
                             f"{' '.join(row['error'])} | | | | | | |")
            else:
                lines.append(f"| {topology.name} | {topology.num_npus} | {row['wall']:.1f} s | {row['synthesis']:.1f} s "
                             f"| {row['lp']:.1f} s | {row['transfers']:,} | {row['chunks']} | {format_time(row['time'])} "
                             f"| {format_time(row['flow'])} | {row['flow'] / row['time']:.1%} |")
            print(lines[-1], flush=True)
    lines += ["", "The wall includes the bounds `workbench synth` prints (the alpha-beta LP up to 64 NPUs: most of "
              "leafspine:2x8x4's 22.6 s in the committed run)."]
    write("multipath_scaling.md", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
