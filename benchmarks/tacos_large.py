"""TACOS from 64 to 40,000 NPUs: the matching alone (at the largest sizes the schedule would not fit
in memory).

All-Gather, 1 chunk per NPU, 1 GiB, alpha 0.5 us, 50 GiB/s (3D-RFS: 200/100/50 GiB/s), seed 0,
compiled engine, ``record=False`` (claimed time and counters only: a 40,000-NPU All-Gather has
1.6 billion deliveries). Each case runs in its own process under a time budget (``--budget``,
default one hour, the target), after a tiny run of both kernels so that loading numba and the
cached machine code (about 0.35 s) is not charged to it, and with the topology built before the
timing; below 4,096 NPUs the median of 5 runs.
A family's larger sizes are skipped once one size ran out of the budget. The TACOS paper
synthesized 40,000 NPUs in 2.52 h on 64 threads.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

from benchmarks.common import RESULTS, machine, reference_loop, write
from benchmarks.tacos_scaling import SIDE_BY_SIDE, power_law, slope, topology_of
from workbench.util.files import write_atomic

FAMILIES = {
    "2D mesh": ["mesh:8x8", "mesh:16x16", "mesh:32x32", "mesh:64x64", "mesh:91x90", "mesh:128x128", "mesh:200x200"],
    "3D torus": ["torus:4x4x4", "torus:8x8x4", "torus:16x8x8", "torus:16x16x16", "torus:20x20x20", "torus:26x25x25",
                 "torus:34x34x34"],
    "3D-RFS 2x4xN": ["rfs:2x4x8", "rfs:2x4x32", "rfs:2x4x128", "rfs:2x4x512", "rfs:2x4x1024", "rfs:2x4x2048",
                     "rfs:2x4x5000"],
}
LARGE = 4096  # from here on, one run per case; the fits are given below and above it too
SPANS = {"from 64 NPUs up": lambda n: True, f"64 to {LARGE:,}": lambda n: n <= LARGE,
         f"{LARGE:,} up": lambda n: n >= LARGE}  # the growth is fitted over each
CHILD = """
import json, resource, sys, time
from benchmarks.common import timed
from benchmarks.tacos_scaling import load_engines, topology_of, view_of
from formulations.tacos import greedy_all_gather
from formulations.tacos.matching import OutOfTime
from workbench.model.collective import make_collective
spec, budget, large = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
load_engines()
view = view_of(topology_of(spec))
n = view.num_npus
collective = make_collective("allgather", n, 1)
started = time.perf_counter()
try:
    seconds, samples, r = timed(lambda: greedy_all_gather(view, collective, 2**30 / n, 0, engine="compiled",
                                                          record=False, deadline=started + budget),
                                1 if n >= large else 5)
    row = {"seconds": seconds, "runs": len(samples), "claimed": r.claimed_time, "events": r.events,
           "deliveries": r.deliveries}
except OutOfTime as exc:
    row = {"seconds": None, "reached": exc.done / max(1, exc.total)}
row.update(spec=spec, npus=n, peak_gib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)
print(json.dumps(row))
"""


def run_case(spec: str, budget: float) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, spec, str(budget), str(LARGE)], capture_output=True,
                          text=True, timeout=budget + 600)
    if done.returncode != 0:
        raise RuntimeError(f"{spec}: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'failed'}")
    return json.loads(done.stdout.strip().splitlines()[-1])


STORE = "tacos_large.json"
FIGURE = "tacos_large.png"
PAPER_40K = 2.52 * 3600  # the TACOS paper's 40,000-NPU synthesis, on 64 threads


def load_store() -> dict:
    """Rows already measured, by family: a run of some families keeps the others' rows."""
    path = RESULTS / STORE
    return json.loads(path.read_text()) if path.exists() else {}


def render(store: dict) -> str:
    lines = ["# TACOS from 64 to 40,000 NPUs", "", __doc__.strip(), "",
             "| family | topology | NPUs | matching (s) | claimed time (ms) | events | deliveries | peak memory (GiB) |",
             "|---|---|---|---|---|---|---|---|"]
    slopes, runs = [], []
    for family in FAMILIES:
        if family not in store:
            continue
        entry = store[family]
        runs.append(f"- {family}: {entry['machine']}; reference loop (10^7 additions) {entry['loop']:.2f} s; "
                    f"budget {entry['budget']:,.0f} s per case" + (f"; {entry['remark']}" if entry.get("remark") else ""))
        done = []
        for row in entry["rows"]:
            if row["seconds"] is None:
                reached = f" ({row['reached']:.0%} of the deliveries made)" if row.get("reached") is not None else ""
                lines.append(f"| {family} | {row['spec']} | {row['npus']:,} | over {entry['budget']:,.0f}{reached} "
                             f"| | | | {row['peak_gib']:.1f} |")
                continue
            seconds = f"{row['seconds']:,.1f}" if row["seconds"] >= 10 else f"{row['seconds']:.3g}"
            lines.append(f"| {family} | {row['spec']} | {row['npus']:,} | {seconds} "
                         f"| {row['claimed'] * 1e3:.3f} | {row['events']:,} | {row['deliveries']:,} "
                         f"| {row['peak_gib']:.1f} |")
            done.append((row["npus"], row["seconds"]))
        fits = [slope([p for p in done if within(p[0])]) for within in SPANS.values()]
        if fits[0] is not None:
            slopes.append(f"| {family} | " + " | ".join("" if k is None else f"{k:.2f}" for k in fits) + " |")
    missing = [family for family in FAMILIES if family not in store]
    if slopes:
        lines += ["", "Fitted growth exponents (least squares on log time against log NPUs, over the rows measured):",
                  "", "| family | " + " | ".join(SPANS) + " |", "|---" * (len(SPANS) + 1) + "|", *slopes]
    lines += ["", f"![growth]({FIGURE})", "", "Runs:", *runs]
    if missing:
        lines += ["", "Not run yet: " + ", ".join(missing) + "."]
    lines += ["", "Regenerate with `make bench-tacos-large` (hours: up to the budget per case), or one family "
              "with `python -m benchmarks.tacos_large --families \"3D torus\"` (the other families' rows are kept "
              f"in `results/bench/{STORE}`).", ""]
    return "\n".join(lines)


def plot(store: dict, path) -> None:
    """Matching time against NPUs, log-log: each family's rows and its fitted power law from 64 NPUs
    up, the published C++ on 2D meshes up to 1,024 NPUs, the one-hour target and the paper's 40,000."""
    import matplotlib.pyplot as plt

    from workbench.reports.plots import finish_axes

    fig, ax = plt.subplots(figsize=(7, 4.8))
    for family in FAMILIES:
        points = [(row["npus"], row["seconds"]) for row in store.get(family, {}).get("rows", []) if row["seconds"]]
        if not points:
            continue
        fit = power_law(points)
        label = f"{family}, ours" + (f" (fitted N^{fit[0]:.2f})" if fit else "")
        line, = ax.plot(*zip(*points), marker="o", label=label)
        if fit is not None:
            k, scale = fit
            n = np.array([p[0] for p in points], dtype=float)
            ax.plot(n, scale * n ** k, linestyle=":", color=line.get_color(), linewidth=1)
    published = [(topology_of(spec).num_npus, seconds)
                 for spec, seconds in SIDE_BY_SIDE if seconds and spec.startswith("mesh:") and spec.count("x") == 1]
    ax.plot(*zip(*published), marker="^", linestyle="--", color="grey",
            label=f"2D mesh, C++ reference, published (N^{slope(published):.2f})")
    ax.axhline(3600, color="black", linewidth=0.8, linestyle="-.", label="one hour (the target)")
    ax.plot([40000], [PAPER_40K], marker="*", markersize=12, linestyle="", color="black",
            label="TACOS paper, 40,000 NPUs on 64 threads")
    finish_axes(fig, ax, path, "NPUs", "matching time (s)", "TACOS All-Gather, 64 to 40,000 NPUs (1 chunk per NPU)")


def report(store: dict) -> None:
    write("tacos_large.md", render(store))
    plot(store, RESULTS / FIGURE)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench tacos_large")
    parser.add_argument("--budget", type=float, default=3600.0, help="seconds per case (the target: one hour)")
    parser.add_argument("--families", nargs="*", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--remark", default="", help="a note on this run, shown beside its machine line")
    parser.add_argument("--fresh", action="store_true", help="measure every case again (default: keep the cases "
                        "of a family already measured with this budget, and go on from there)")
    parser.add_argument("--report", action="store_true", help="measure nothing: write the table and the figure "
                        f"again from results/bench/{STORE}")
    args = parser.parse_args(argv)
    if args.report:
        report(load_store())
        return
    loop = reference_loop()
    for family in args.families:
        kept = load_store().get(family)
        rows: list[dict] = []
        if kept and not args.fresh and kept["budget"] == args.budget:
            rows = [row for row in kept["rows"] if row["seconds"] is not None]
            if rows:
                print(f"  {family}: keeping {len(rows)} measured case(s) (--fresh measures them again)", flush=True)
        for spec in FAMILIES[family]:
            if any(row["spec"] == spec for row in rows):
                continue
            print(f"  {family} {spec} ...", flush=True)
            started = time.perf_counter()
            row = run_case(spec, args.budget)
            print(f"    {time.perf_counter() - started:.0f} s", flush=True)
            rows.append(row)
            # Stored after every case, re-read first: another family may be running beside this one.
            store = load_store()
            earlier = kept.get("remark", "") if kept and not args.fresh else ""
            remark = args.remark if earlier in ("", args.remark) else f"{earlier}; resumed: {args.remark}"
            store[family] = {"machine": machine(), "loop": loop, "budget": args.budget, "remark": remark, "rows": rows}
            write_atomic(RESULTS / STORE, json.dumps(store, indent=1) + "\n")
            report(store)
            if row["seconds"] is None:
                break


if __name__ == "__main__":
    main()
