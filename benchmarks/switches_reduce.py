"""Switches that reduce: what NVLS and SHARP buy in the simulator's model, each fabric beside itself
without reduction, and beside NCCL's published NVLS bus bandwidth.

Runs ``experiments/switches_reduce.yaml`` through ``workbench run`` and writes ``report.md`` in the
run folder:

* per fabric pair (with reduction, without) and collective, one column per size: the fastest
  schedule's bus bandwidth with its formulation and its efficiency (best bound over its time), and
  the ratio of the two bus bandwidths;
* NVLS on one 8 x H100 box calibrated as NCCL measures it (GPU-switch links at NCCL's 370.8 GB/s,
  the switch's sum rate at 0.85 of it) beside the 480 GB/s NCCL users measure (NCCL issue 1455,
  nccl-tests issue 212) and the 365-370 GB/s of rings there.

``python -m benchmarks.switches_reduce [--out DIR] [--report-only]``; ``make switches-reduce``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.common import experiment_main
from benchmarks.quality_sizes import best_cells
from workbench.util.units import format_size

CONFIG = Path("experiments/switches_reduce.yaml")
PAIRS = (("hgx:1", "hgx:1 nvls=off"), ("hgx:1 NCCL-calibrated", "hgx:1 nvls=off NCCL-calibrated"),
         ("hgx:16,sharp", "hgx:16"), ("hgx:16", "hgx:16 nvls=off"), ("nvl72", "nvl72 nvls=off"))
NCCL_NVLS_BUSBW = 480e9  # 8 x H100, NVLS All-Reduce, large messages (NCCL issue 1455, nccl-tests issue 212)
NCCL_RING_BUSBW = (365e9, 370e9)  # the same box with rings


def _cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    return f"{row['busbw']:,.0f} GB/s {row['formulation']} ({row['bound'] / row['collective_time']:.0%})"


def pair_table(best: dict, sizes: list[float]) -> list[str]:
    """The pairs of fabrics, with and without reduction, size by size."""
    lines = ["| fabric (with / without) | collective | " + " | ".join(format_size(s) for s in sizes) + " |",
             "|---|---|" + "---|" * len(sizes)]
    for with_, without in PAIRS:
        for collective in ("allreduce", "reducescatter", "allgather"):
            cells = []
            for size in sizes:
                a, b = best.get((with_, collective, size)), best.get((without, collective, size))
                ratio = f" **{a['busbw'] / b['busbw']:.2f}x**" if a and b else ""
                cells.append(f"{_cell(a)} / {_cell(b)}{ratio}")
            lines.append(f"| {with_} / {without} | {collective} | " + " | ".join(cells) + " |")
    return lines


def nccl_lines(best: dict, size: float) -> list[str]:
    """Calibrated NVLS beside NCCL's measurement (rows carry bus bandwidth in GB/s)."""
    nvls = best.get(("hgx:1 NCCL-calibrated", "allreduce", size))
    rings = best.get(("hgx:1 nvls=off NCCL-calibrated", "allreduce", size))
    if nvls is None:
        return []
    lines = ["", f"## Beside NCCL's measurement (All-Reduce, {format_size(size)}, one 8 x H100 box)", "",
             "| | bus bandwidth | ratio to NCCL's NVLS |", "|---|---|---|",
             f"| NCCL NVLS, measured | {NCCL_NVLS_BUSBW / 1e9:.0f} GB/s | 1.00 |",
             f"| model: {nvls['formulation']} on `hgx:1,rate=315.18GB/s`, links 370.8 GB/s | {nvls['busbw']:.1f} GB/s"
             f" | {nvls['busbw'] * 1e9 / NCCL_NVLS_BUSBW:.3f} |",
             f"| NCCL rings, measured | {NCCL_RING_BUSBW[0] / 1e9:.0f}-{NCCL_RING_BUSBW[1] / 1e9:.0f} GB/s | "
             f"{NCCL_RING_BUSBW[0] / NCCL_NVLS_BUSBW:.2f}-{NCCL_RING_BUSBW[1] / NCCL_NVLS_BUSBW:.2f} |"]
    if rings is not None:
        lines.append(f"| model: best without reduction ({rings['formulation']}), links 370.8 GB/s | "
                     f"{rings['busbw']:.1f} GB/s | {rings['busbw'] * 1e9 / NCCL_NVLS_BUSBW:.3f} |")
    return lines


def report(rows: list[dict[str, Any]]) -> str:
    best = best_cells(rows)
    sizes = sorted({k[2] for k in best})
    lines = ["# Switches that reduce", "",
             "Each cell: the fastest simulated schedule's bus bandwidth (default model), the formulation that wrote it "
             "and its efficiency (best bound / its time), on the fabric with reduction / without; **bold**: the ratio "
             "of the two bus bandwidths.", ""]
    lines += pair_table(best, sizes)
    lines += nccl_lines(best, max(sizes))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return experiment_main(__doc__.splitlines()[0], CONFIG, Path("results/switches_reduce"), report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
