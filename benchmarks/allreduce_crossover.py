"""All-Reduce crossover: up to which size one pass (every input to every rank) beats two.

Runs ``experiments/allreduce_crossover.yaml`` through ``workbench run`` (1 KB-4 MB in factors of 2
on the quality fabrics and the honesty sweep's drawn ones, every fast All-Reduce formulation) and
writes ``report.md`` and ``crossover.png`` in the run folder:

* per fabric, the fastest one-pass schedule (``oneshot``, ``oneshot-hier``, ``rd``: whole vectors,
  earlier-value reads) and the fastest two-pass one (Reduce-Scatter then All-Gather, or a tree) at
  each size, and the crossover: the largest size where one pass still wins and the smallest from
  which two passes win at every larger size measured;
* a figure of the ratio one-pass / two-pass time against size, one line per fabric: the crossover
  is where a line crosses 1.

Reductions are free in the simulator's model, so the crossover is the network's alone; with a
reduction rate (one pass adds N - 1 whole vectors at each rank, two passes about 2 (N - 1) / N) it
would move to smaller sizes. ``python -m benchmarks.allreduce_crossover [--out DIR] [--report-only]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.common import experiment_arguments, experiment_rows
from workbench.util.units import format_size, format_time

CONFIG = Path("experiments/allreduce_crossover.yaml")
ONE_PASS = ("oneshot", "oneshot-hier", "rd")


def best_by_pass(rows: list[dict[str, Any]]) -> dict[str, dict[float, dict[str, tuple[float, str]]]]:
    """fabric -> size -> {"one" | "two": (fastest time, its formulation), "bound": (bound, "")}."""
    table: dict[str, dict[float, dict[str, tuple[float, str]]]] = {}
    for row in rows:
        if row.get("kind", "schedule") != "schedule" or row.get("collective_time") is None:
            continue
        cell = table.setdefault(row["topology"], {}).setdefault(float(row["size_bytes"]), {})
        side = "one" if row.get("formulation_name") in ONE_PASS else "two"
        if side not in cell or row["collective_time"] < cell[side][0]:
            cell[side] = (row["collective_time"], row["formulation_name"])
        if row.get("bound"):
            cell["bound"] = (row["bound"], "")
    return table


def crossover(cells: dict[float, dict[str, tuple[float, str]]]) -> tuple[float | None, float | None]:
    """(largest size where one pass wins, smallest size from which two passes win at every size)."""
    sizes = sorted(s for s in cells if "one" in cells[s] and "two" in cells[s])
    one_wins = [s for s in sizes if cells[s]["one"][0] < cells[s]["two"][0]]
    last_one = max(one_wins, default=None)
    from_two = next((s for s in sizes if all(cells[t]["two"][0] <= cells[t]["one"][0] for t in sizes if t >= s)),
                    None)
    return last_one, from_two


def report(table: dict[str, dict[float, dict[str, tuple[float, str]]]]) -> str:
    lines = ["# All-Reduce: one pass against two", "",
             "Per fabric, the fastest one-pass schedule (`oneshot`, `oneshot-hier`, `rd`) and the fastest "
             "two-pass one, 1 KB-4 MB (free reductions: the simulator charges no time for adding). "
             "The crossover is between the largest size where one pass wins and the smallest from which "
             "two passes win at every larger size. With a reduction rate (one pass adds N - 1 whole vectors "
             "at every rank, two passes about 2(N-1)/N of one) it would move to smaller sizes; the model has "
             "no such rate yet, so that column is not computed.", "",
             "| fabric | one pass wins up to | two passes win from | at the crossover (one / two / bound) |",
             "|---|---|---|---|"]
    for fabric, cells in table.items():
        last_one, from_two = crossover(cells)
        at = from_two if from_two is not None else last_one
        detail = "-"
        if at is not None and "one" in cells[at] and "two" in cells[at]:
            one, two = cells[at]["one"], cells[at]["two"]
            bound = cells[at].get("bound", (None, ""))[0]
            detail = (f"{format_size(at)}: {format_time(one[0])} {one[1]} / {format_time(two[0])} {two[1]}"
                      + (f" / {format_time(bound)}" if bound else ""))
        lines.append(f"| {fabric} | {format_size(last_one) if last_one else 'never'} | "
                     f"{format_size(from_two) if from_two else 'not by 4 MB'} | {detail} |")
    lines += ["", "![one-pass over two-pass time by size](crossover.png)", ""]
    return "\n".join(lines)


def figure(table: dict[str, dict[float, dict[str, tuple[float, str]]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    colours = plt.get_cmap("tab20").colors
    for i, (fabric, cells) in enumerate(table.items()):
        sizes = sorted(s for s in cells if "one" in cells[s] and "two" in cells[s])
        ax.plot(sizes, [cells[s]["one"][0] / cells[s]["two"][0] for s in sizes], marker="os^"[i % 3],
                markersize=3, color=colours[(2 * i) % 20 + (2 * i) // 20 % 2], label=fabric)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("All-Reduce size (bytes)")
    ax.set_ylabel("fastest one-pass / fastest two-pass time")
    ax.set_title("All-Reduce: below 1, one pass wins (free reductions)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = experiment_arguments(__doc__.splitlines()[0], CONFIG, Path("results/allreduce_crossover"), argv)
    rows = experiment_rows(args.config, args.out, args.jobs, args.report_only)
    if rows is None:
        return 2
    table = best_by_pass(rows)
    figure(table, args.out / "crossover.png")
    (args.out / "report.md").write_text(report(table))
    print((args.out / "report.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
