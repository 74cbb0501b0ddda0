"""Speed of the exact bounds: All-Gather optimum by max-flow (Newton's method) and the All-to-All flow LP.

All-Gather: ``workbench.bounds.optimum.allgather_cut_ratio`` on 2D tori, 2D meshes and 3D-RFS from 64 to
4,096 NPUs (one max-flow per NPU per Newton step, or a single one on tori, whose translations make
every NPU alike; the start, the best single-NPU cut, is already optimal on these fabrics, so one
step suffices). Targets (issue "Exact yardsticks"): 1,024 NPUs
under 10 s, 4,096 under 5 minutes. All-to-All: the max-concurrent-flow LP on HiGHS (interior
point with crossover) on 2D tori up to 256 NPUs, beyond which the sweep-cut bound is used.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.common import machine, write
from workbench.model.collective import make_collective
from workbench.bounds.flow_lp import flow_lp_bound, flow_lp_size
from workbench.bounds.optimum import allgather_cut_ratio
from workbench.topology import build

GiB = 2**30
AG_CASES = ["torus:8x8", "torus:16x16", "torus:32x32", "torus:64x64", "mesh:8x8", "mesh:32x32", "mesh:64x64",
            "rfs:2x4x8", "rfs:2x4x32", "rfs:2x4x128", "rfs:2x4x512", "ndv2:16", "dgx2:16", "nvs-ib:64"]
A2A_CASES = ["torus:4x4", "torus:8x8", "torus:12x12", "torus:16x16"]
TARGETS = {1024: 10.0, 4096: 300.0}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench bounds_speed")
    parser.add_argument("--max-npus", type=int, default=4096)
    args = parser.parse_args(argv)
    lines = ["# Exact bounds: time to compute", "", __doc__.strip(), "", f"Machine: {machine()}.", "",
             "## All-Gather optimum (max-flow)", "",
             "| topology | NPUs | links | T* at 1 GiB (ms) | Newton steps | max-flows | seconds | target |",
             "|---|---|---|---|---|---|---|---|"]
    for spec in AG_CASES:
        topo = build(spec)
        if topo.num_npus > args.max_npus:
            continue
        print(f"  {spec} ...", flush=True)
        started = time.perf_counter()
        cut = allgather_cut_ratio(topo)
        seconds = time.perf_counter() - started
        target = TARGETS.get(topo.num_npus)
        met = "" if target is None else f"<= {target:g} s: {'yes' if seconds <= target else 'NO'}"
        lines.append(f"| {spec} | {topo.num_npus} | {len(topo.links)} | "
                     f"{GiB / topo.num_npus * cut.seconds_per_byte * 1e3:.4f} | {cut.iterations + 1} | {cut.flows} | "
                     f"{seconds:.2f} | {met} |")
        print(f"    {seconds:.2f} s", flush=True)
    lines += ["", "## All-to-All flow LP (HiGHS)", "", "| topology | NPUs | columns | bound at 1 GiB (ms) | seconds |",
              "|---|---|---|---|---|"]
    for spec in A2A_CASES:
        topo = build(spec)
        coll = make_collective("alltoall", topo.num_npus)
        print(f"  LP {spec} ...", flush=True)
        started = time.perf_counter()
        value = flow_lp_bound(topo, coll, coll.chunk_bytes(GiB), time_limit=600)
        seconds = time.perf_counter() - started
        shown = f"{value * 1e3:.4f}" if value is not None else "not solved"
        lines.append(f"| {spec} | {topo.num_npus} | {flow_lp_size(topo, coll):,} | {shown} | {seconds:.1f} |")
        print(f"    {seconds:.1f} s", flush=True)
    lines += ["", "Regenerate with `python -m benchmarks.bounds_speed` (part of `make bench`, a few minutes).", ""]
    write("bounds_speed.md", "\n".join(lines))


if __name__ == "__main__":
    main()
