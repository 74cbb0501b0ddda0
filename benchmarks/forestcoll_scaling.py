"""ForestColl tree-construction time vs NPUs (8 to 1,024), All-Gather, default parameters.

"trees" is ``build_forest``: the exact (k, U), edge splitting of every switch, arborescence
packing, map-back to physical paths and the link-budget checks; it excludes emitting the
pipelined schedule (which grows with the pipeline depth, not with the fabric), and the one-time
imports (a warm-up case runs first). Each case has a
time budget (``--budget``, default 600 s); a case that runs out is reported as such and the
family's larger sizes are skipped. Switchless fabrics (tori) need no splitting; the NVSwitch
+ NIC + IB fabric (``nvs-ib:K``) does, for every switch.

Packing: tori use the default ``packing: auto``, which is the symmetric packing (root 0's trees
grown and shifted to every root, one max-flow per tested batch of arcs); the "general packing"
family runs the same 2D tori with ``packing: levels`` (one max-flow per tested arc, as on every
fabric without translation symmetry: NDv2 and nvs-ib below). Rail-optimized clusters (``rails:``)
are split a switch orbit at a time and packed symmetrically (``symmetric_splitting``). ``--only
FAMILY`` reruns one family and replaces its section of the committed table.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.common import RESULTS, machine, write
from formulations.forestcoll import build_forest
from formulations.forestcoll.optimum import Timeout
from workbench.kit.deadline import Deadline
from workbench.topology import build

_TORI_2D = ["torus:2x4", "torus:4x4", "torus:8x4", "torus:8x8", "torus:16x8", "torus:16x16", "torus:32x16",
            "torus:32x32"]
FAMILIES = {
    "2D torus": _TORI_2D,
    "3D torus": ["torus:2x2x2", "torus:4x2x2", "torus:4x4x2", "torus:4x4x4", "torus:8x4x4", "torus:8x8x4",
                 "torus:8x8x8", "torus:16x8x8"],
    "2D torus, general packing (packing: levels)": _TORI_2D,
    "NVSwitch + NIC + IB (nvs-ib:K)": [f"nvs-ib:{k}" for k in (1, 2, 4, 8, 16, 32, 64, 128)],
    "NDv2 (ndv2:K)": [f"ndv2:{k}" for k in (1, 2, 4, 8, 16, 32, 64, 128)],
    "rail-optimized (rails:Bx8)": [f"rails:{b}x8" for b in (2, 4, 8, 16, 32, 64, 128)],
}


def measure(spec: str, budget: float, packing: str) -> dict:
    topology = build(spec)
    deadline = Deadline(budget)
    try:
        forest = build_forest(topology, "allgather", deadline=deadline, packing=packing)
    except Timeout:
        return {"spec": spec, "npus": topology.num_npus, "seconds": None, "budget": budget}
    seconds = deadline.elapsed()
    return {"spec": spec, "npus": topology.num_npus, "seconds": seconds, "k": forest.units.k,
            "groups": len(forest.groups), "height": forest.height, "flows": forest.flows,
            "switches": topology.num_switches, "packing": forest.packing}


def plot(results: dict[str, list[dict]], path) -> None:
    import matplotlib.pyplot as plt

    from workbench.reports.plots import finish_axes

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for marker, (family, rows) in zip("osd^v", results.items()):
        done = [r for r in rows if r["seconds"] is not None]
        if done:
            ax.plot([r["npus"] for r in done], [r["seconds"] for r in done], marker=marker, label=family)
    finish_axes(fig, ax, path, "NPUs", "tree construction (s)", "ForestColl All-Gather tree construction time",
                log_x=2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench forestcoll_scaling")
    parser.add_argument("--max-npus", type=int, default=1024)
    parser.add_argument("--budget", type=float, default=600.0, help="seconds per case")
    parser.add_argument("--only", choices=list(FAMILIES), help="rerun one family and replace its section of the "
                        "committed table (the plot is left as it is)")
    args = parser.parse_args(argv)
    measure("ring:4", args.budget, "levels")  # warm-up: imports (scipy) and first-call costs stay out of the table
    measure("torus:2x2", args.budget, "auto")
    results: dict[str, list[dict]] = {}
    for family, specs in FAMILIES.items():
        if args.only and family != args.only:
            continue
        results[family] = []
        for spec in specs:
            if build(spec).num_npus > args.max_npus:
                continue
            if results[family] and results[family][-1]["seconds"] is None:
                break  # the previous size ran out of budget
            print(f"  {family} {spec} ...", flush=True)
            row = measure(spec, args.budget, "levels" if "general packing" in family else "auto")
            results[family].append(row)
            print(f"    {row['seconds']}", flush=True)
    lines = ["# ForestColl tree construction vs NPUs", "", __doc__.strip(), "",
             f"Machine: {machine()}. Budget per case: {args.budget:g} s.", ""]
    sections: dict[str, list[str]] = {}
    for family, rows in results.items():
        start = len(lines)
        done = [(r["npus"], r["seconds"]) for r in rows if r["seconds"] and r["npus"] >= 16]
        slope = (float(np.polyfit(np.log([n for n, _ in done]), np.log([t for _, t in done]), 1)[0])
                 if len(done) >= 2 else None)
        lines += [f"## {family}" + (f" (fitted growth exponent {slope:.2f})" if slope else ""), "",
                  "| topology | NPUs | switches | packing | trees (s) | k | tree groups | height | max-flows |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if r["seconds"] is None:
                lines.append(f"| {r['spec']} | {r['npus']} | | | over {r['budget']:.0f} s budget | | | | |")
            else:
                lines.append(f"| {r['spec']} | {r['npus']} | {r['switches']} | {r['packing']} | {r['seconds']:.2f} | "
                             f"{r['k']} | "
                             f"{r['groups']} | {r['height']} | {r['flows']:,} |")
        lines.append("")
        sections[family] = lines[start:]
    if args.only:
        _replace_section(args.only, sections[args.only], f"{machine()}, budget {args.budget:g} s")
        return
    lines += ["![scaling](forestcoll_scaling.png)", "",
              "Regenerate with `python -m benchmarks.forestcoll_scaling` (part of `make quality`).", ""]
    RESULTS.mkdir(parents=True, exist_ok=True)
    plot(results, RESULTS / "forestcoll_scaling.png")
    write("forestcoll_scaling.md", "\n".join(lines))


def _replace_section(family: str, section: list[str], run: str) -> None:
    """Put one family's rerun section into the committed table, in place of its old one (or last)."""
    text = (RESULTS / "forestcoll_scaling.md").read_text()
    write("forestcoll_scaling.md", _with_section(text, family, section, run))


def _with_section(text: str, family: str, section: list[str], run: str) -> str:
    body, marker, ending = text.partition("![scaling]")
    head, *parts = body.split("\n## ")
    fresh = "\n".join(section[:1] + ["", f"Rerun alone on {run}."] + section[1:])[3:]  # without its "## "
    kept = [part.rstrip("\n") + "\n" for part in parts if not part.startswith(family)]
    return "\n## ".join([head.rstrip("\n") + "\n", *kept, fresh.rstrip("\n") + "\n"]) + "\n" + marker + ending


if __name__ == "__main__":
    main()
