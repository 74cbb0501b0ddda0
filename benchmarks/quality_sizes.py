"""Quality by size: the best schedule against the best bound, per fabric, collective and size.

Runs ``experiments/quality_sizes.yaml`` through ``workbench run`` (every fast formulation at its
defaults, 4 KB to 1 GiB, each fabric with and without a calibrated per-message overhead) and writes
``report.md`` in the run folder:

* per fabric and collective, one column per size: the best simulated schedule over the best bound
  (1.00x meets it; the interval [bound, fastest] is what is known of the optimum) and the winner;
  cells above 1.5x are marked;
* how often each formulation wins, by size;
* each formulation's median efficiency (bound / its time), by size.

The runner writes the figures (``figures/by_size/<fabric>.png``: time against size, one line per
formulation, the bound dashed). ``python -m benchmarks.quality_sizes [--out DIR] [--report-only]``;
``make quality-sizes``.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from benchmarks.common import experiment_main
from workbench.util.units import format_size, format_time

CONFIG = Path("experiments/quality_sizes.yaml")
FLAG = 1.5  # a best schedule above this many times the bound is listed


def best_cells(rows: list[dict[str, Any]]) -> dict[tuple[str, str, float], dict[str, Any]]:
    """(topology, collective, size) -> the fastest simulated row there, with the bound."""
    best: dict[tuple[str, str, float], dict[str, Any]] = {}
    for row in rows:
        if row.get("kind", "schedule") != "schedule" or row.get("collective_time") is None or not row.get("bound"):
            continue
        key = (row["topology"], row["collective"], float(row["size_bytes"]))
        if key not in best or row["collective_time"] < best[key]["collective_time"]:
            best[key] = row
    return best


def _order(values) -> list:
    seen: list = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def report(rows: list[dict[str, Any]]) -> str:
    best = best_cells(rows)
    topologies = _order(k[0] for k in best)
    collectives = _order(k[1] for k in best)
    sizes = sorted({k[2] for k in best})
    lines = ["# Quality by size", "",
             "Each cell: the fastest simulated schedule (default model) over the best bound, and the formulation "
             f"that wrote it. 1.00x meets the bound, which proves both optimal; **bold** cells are above {FLAG}x, "
             "where either the schedules or the bound are loose (the true optimum lies in [bound, fastest]).", "",
             "| fabric | collective | " + " | ".join(format_size(s) for s in sizes) + " |",
             "|---|---|" + "---|" * len(sizes)]
    flagged = []
    for topology in topologies:
        for collective in collectives:
            cells = []
            for size in sizes:
                row = best.get((topology, collective, size))
                if row is None:
                    cells.append("-")
                    continue
                ratio = row["collective_time"] / row["bound"]
                text = f"{ratio:.2f}x {row['formulation']}"
                if ratio > FLAG:
                    text = f"**{text}**"
                    flagged.append((topology, collective, size, ratio, row))
                cells.append(text)
            if any(c != "-" for c in cells):
                lines.append(f"| {topology} | {collective} | " + " | ".join(cells) + " |")
    total = len(best)
    lines += ["", f"{total - len(flagged)} of {total} cells within {FLAG}x of the bound.", ""]

    wins: dict[str, dict[float, int]] = {}
    efficiency: dict[str, dict[float, list[float]]] = {}
    for row in best.values():
        wins.setdefault(row["formulation"], {}).setdefault(float(row["size_bytes"]), 0)
        wins[row["formulation"]][float(row["size_bytes"])] += 1
    for row in rows:
        if row.get("kind", "schedule") == "schedule" and row.get("collective_time") and row.get("bound"):
            efficiency.setdefault(row["formulation"], {}).setdefault(float(row["size_bytes"]), []).append(
                row["bound"] / row["collective_time"])
    header = "| formulation | " + " | ".join(format_size(s) for s in sizes) + " |"
    rule = "|---|" + "---|" * len(sizes)
    lines += ["## Wins by size (cells where the formulation wrote the fastest schedule)", "", header, rule]
    for name in sorted(wins, key=lambda n: -sum(wins[n].values())):
        lines.append(f"| {name} | " + " | ".join(str(wins[name].get(s, 0)) for s in sizes) + " |")
    lines += ["", "## Median efficiency by size (bound / simulated time, over every fabric and collective it ran)",
              "", header, rule]
    for name in sorted(efficiency):
        cells = [f"{statistics.median(efficiency[name][s]):.0%}" if s in efficiency[name] else "-" for s in sizes]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if flagged:
        lines += ["", f"## Cells above {FLAG}x", "", "| fabric | collective | size | best | bound | ratio | winner |",
                  "|---|---|---|---|---|---|---|"]
        for topology, collective, size, ratio, row in flagged:
            lines.append(f"| {topology} | {collective} | {format_size(size)} | {format_time(row['collective_time'])} "
                         f"| {format_time(row['bound'])} | {ratio:.2f}x | {row['formulation']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return experiment_main(__doc__.splitlines()[0], CONFIG, Path("results/quality_sizes"), report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
