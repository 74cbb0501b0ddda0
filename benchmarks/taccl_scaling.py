"""TACCL on open solvers: model size and per-stage build/solve seconds as the NPU count grows.

All-Gather (1 chunk per NPU, 1 MB per chunk) under a fixed per-stage limit, for three families:
3D-RFS 2x4xN with the rfs-dims sketch (symmetry in every dimension), the same without symmetry
(the default sketch), and K NDv2 chassis (NIC model) with an ndv2-sk-1-like sketch whose
symmetry rotates the chassis. Where the routing MILP stops at the limit, the scaling limit of the
MILP on HiGHS is visible: status ``timeout`` and its gap.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.common import RESULTS, machine, write
from workbench.plugin import call
from formulations.taccl import Taccl
from workbench.model.collective import make_collective
from workbench.plugin.registry import Problem
from workbench.checking.simulate import simulate
from workbench.topology import build

RFS_BW = [200 * 2**30, 100 * 2**30, 50 * 2**30]


def cases(quick: bool) -> list[tuple[str, str, dict, object]]:
    rfs = [2, 4] if quick else [2, 4, 8, 16]
    plain = [2] if quick else [2, 4, 8]
    chassis = [2] if quick else [2, 4, 8]
    result = []
    for n in rfs:
        result.append(("3D-RFS, rfs-dims sketch", f"rfs:2x4x{n}", {"bandwidth": RFS_BW, "alpha": 0.5e-6}, "rfs-dims"))
    for n in plain:
        result.append(("3D-RFS, default sketch (no symmetry)", f"rfs:2x4x{n}", {"bandwidth": RFS_BW, "alpha": 0.5e-6},
                       None))
    for k in chassis:
        sketch = {"name": f"ndv2-sk-1 x{k}", "internode": {"conn": {0: [1]}}, "symmetry": [[8, "n"]]}
        result.append(("NDv2 x K (NIC), ndv2-sk-1 + chassis rotation", f"ndv2-taccl-nic:{k}", {}, sketch))
    return result


def measure(spec: str, options: dict, sketch, stage_limit: float) -> dict:
    topology = build(spec, **options)
    n = topology.num_npus
    problem = Problem(topology, make_collective("allgather", n, 1), 1e6 * n)
    started = time.perf_counter()
    result = call.synthesize(Taccl(), problem, time_limit=4 * stage_limit + 60, seed=0, sketch=sketch,
                                stage_time_limit=stage_limit)
    wall = time.perf_counter() - started
    stages = {s["stage"]: s for s in result.stats["stages"]}
    sim = simulate(result.algorithms[0]).collective_time
    return {"npus": n, "wall": wall, "status": result.status, "stages": stages, "simulated": sim,
            "claimed": result.claimed_times[0]}


def plot(results: dict[str, list[dict]], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    for (family, points), marker in zip(results.items(), "osd^"):
        xs = [p["npus"] for p in points]
        routing = [p["stages"]["routing"]["build_seconds"] + p["stages"]["routing"]["solve_seconds"] for p in points]
        binaries = [p["stages"]["routing"]["binaries"] for p in points]
        left.plot(xs, routing, marker=marker, label=family)
        for x, y, p in zip(xs, routing, points):
            if p["stages"]["routing"]["status"] == "timeout":
                left.annotate("limit", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        right.plot(xs, binaries, marker=marker, label=family)
    for ax, ylabel in ((left, "routing MILP build + solve (s)"), (right, "routing MILP binaries")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("NPUs")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    left.legend(fontsize=8)
    fig.suptitle("TACCL All-Gather on HiGHS: the routing MILP as the NPU count grows")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def results_from_table(path) -> dict[str, list[dict]]:
    """Re-read the committed table (for --plot-only)."""
    results: dict[str, list[dict]] = {}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 16 or not cells[1].isdigit():
            continue
        routing = {"binaries": int(cells[2].replace(",", "")), "build_seconds": float(cells[4]),
                   "solve_seconds": float(cells[5]), "status": cells[6].split()[0]}
        results.setdefault(cells[0], []).append({"npus": int(cells[1]), "stages": {"routing": routing}})
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the two smallest sizes per family")
    parser.add_argument("--stage-limit", type=float, default=60.0, help="seconds per MILP stage (default 60)")
    parser.add_argument("--plot-only", action="store_true", help="redraw the plot from results/bench/taccl_scaling.md")
    args = parser.parse_args(argv)
    if args.plot_only:
        plot(results_from_table(RESULTS / "taccl_scaling.md"), RESULTS / "taccl_scaling.png")
        return
    results: dict[str, list[dict]] = {}
    for family, spec, options, sketch in cases(args.quick):
        print(f"  taccl {family}: {spec} ...", flush=True)
        results.setdefault(family, []).append(measure(spec, options, sketch, args.stage_limit))
    lines = ["# TACCL scaling on open solvers", "", f"Machine: {machine()}", "",
             f"All-Gather, 1 chunk of 1 MB per NPU, per-stage limit {args.stage_limit:g} s, HiGHS, 1 thread. "
             "Model size after symmetry substitution and the shortest-path filter; seconds are build + solve.", "",
             "| family | NPUs | routing binaries | routing rows | routing build s | routing solve s | routing status (gap) "
             "| ordering s | contiguity binaries | contiguity rows | contiguity build s | contiguity solve s "
             "| contiguity status | total s | claimed | simulated |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for family, points in results.items():
        for p in points:
            r, o, c = p["stages"]["routing"], p["stages"]["ordering"], p["stages"]["contiguity"]
            gap = f" ({r['gap']:.1%})" if r.get("gap") else ""
            lines.append(f"| {family} | {p['npus']} | {r['binaries']:,} | {r['constraints']:,} | {r['build_seconds']:.2f} "
                         f"| {r['solve_seconds']:.2f} | {r['status']}{gap} | {o['solve_seconds']:.3f} "
                         f"| {c['binaries']:,} | {c['constraints']:,} | {c['build_seconds']:.2f} | {c['solve_seconds']:.2f} "
                         f"| {c['status']} | {p['wall']:.1f} | {p['claimed'] * 1e3:.3f} ms | {p['simulated'] * 1e3:.3f} ms |")
    lines += ["", "![TACCL scaling](taccl_scaling.png)", "",
              "Regenerate with `python -m benchmarks.taccl_scaling` (part of `make bench`).", ""]
    write("taccl_scaling.md", "\n".join(lines))
    plot(results, RESULTS / "taccl_scaling.png")


if __name__ == "__main__":
    main()
