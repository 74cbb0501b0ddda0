"""Figures for a run folder (matplotlib, no display needed).

* ``synthesis_vs_time.png``: synthesis time vs collective time, log-log, one marker per formulation
* ``scaling.png``: synthesis time vs NPUs, one line per formulation
* ``link_heatmap.png``: per-link utilisation of one cell (the largest topology of the first column)
* ``pareto.png``: collective time of each algorithm of formulations that return several
* ``efficiency.png``: bound / simulated time per topology and formulation (1: the schedule meets
  the bound, which proves both optimal)
* ``by_size/<topology>.png`` (runs over three sizes or more): collective time against message size,
  one panel per collective, one line per formulation, the best bound dashed: where the lines cross
  is where the best method changes
* ``by_npus/<collective>_<size>.png`` (runs over fabrics of two sizes or more): efficiency
  against NPUs, one line per formulation, dashed on oversubscribed fabrics
"""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from workbench.reports import row_keys as R  # noqa: E402

__all__ = ["write_figures", "finish_axes"]

MARKERS = "os^Dv<>pP*hX"


def finish_axes(fig, ax, path: Path, xlabel: str, ylabel: str, title: str, log_x: int | None = 10,
                log_y: bool = True, legend_size: int = 8) -> None:
    """Log scales, labels, grid and legend, then save and close."""
    if log_x:
        ax.set_xscale("log", base=log_x)
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def save_figure(fig, path: Path, dpi: int) -> None:
    """Save ``fig`` as a PNG at ``path`` and close it: rendered in memory, then written atomically,
    so a symlink at ``path`` is replaced, never written through (matplotlib would follow it)."""
    import io

    from workbench.util.files import write_atomic

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    write_atomic(path, buffer.getvalue())


def _ok(row: dict[str, Any]) -> bool:
    return row.get(R.STATUS) in ("optimal", "feasible", "timeout") and row.get(R.COLLECTIVE_TIME) is not None


def synthesis_vs_time(rows: list[dict[str, Any]], path: Path) -> bool:
    """Synthesis time against the simulated collective time, one series per formulation."""
    points: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        if _ok(row) and row.get(R.SYNTHESIS_SECONDS):
            points.setdefault(row[R.FORMULATION], []).append((row[R.SYNTHESIS_SECONDS], row[R.COLLECTIVE_TIME]))
    if not points:
        return False
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for i, (label, pts) in enumerate(sorted(points.items())):
        xs, ys = zip(*pts)
        ax.scatter(np.maximum(xs, 1e-6), np.array(ys) * 1e3, marker=MARKERS[i % len(MARKERS)], label=label, alpha=0.8)
    finish_axes(fig, ax, path, "synthesis time (s)", "collective time (ms, simulated)",
                "Synthesis time vs collective time")
    return True


def scaling(rows: list[dict[str, Any]], path: Path) -> bool:
    """Synthesis time against the NPU count, one line per formulation."""
    series: dict[str, dict[int, list[float]]] = {}
    for row in rows:
        if row.get(R.SYNTHESIS_SECONDS) is not None and row.get(R.NPUS):
            series.setdefault(row[R.FORMULATION], {}).setdefault(row[R.NPUS], []).append(row[R.SYNTHESIS_SECONDS])
    if not series or all(len(v) < 2 for v in series.values()):
        return False
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for i, (label, by_npus) in enumerate(sorted(series.items())):
        xs = sorted(by_npus)
        ys = [max(statistics.median(by_npus[x]), 1e-6) for x in xs]
        ax.plot(xs, ys, marker=MARKERS[i % len(MARKERS)], label=label)
    finish_axes(fig, ax, path, "NPUs", "synthesis time (s, median)", "Synthesis time vs NPUs", log_x=2)
    return True


def link_heatmap(row: dict[str, Any], path: Path) -> bool:
    """The utilisation of every link of one row's schedule, as a source-by-destination map."""
    links = row.get(R.LINK_UTILISATION)
    if not links:
        return False
    size = 1 + max(max(s, d) for s, d, _ in links)
    grid = np.full((size, size), np.nan)
    for src, dst, value in links:
        grid[src, dst] = value
    fig, ax = plt.subplots(figsize=(6, 5))
    image = ax.imshow(grid, cmap="magma", vmin=0, vmax=max(1e-9, np.nanmax(grid)), interpolation="nearest")
    fig.colorbar(image, ax=ax, label="busy fraction of the collective time")
    ax.set_xlabel("destination node")
    ax.set_ylabel("source node")
    ax.set_title(f"Link utilisation: {row['formulation']} on {row['topology']}", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    return True


def pareto(rows: list[dict[str, Any]], path: Path) -> bool:
    """The collective time of each point of every Pareto front a row holds."""
    fronts = [r for r in rows if len(r.get(R.ALGORITHMS) or []) > 1]
    if not fronts:
        return False
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for i, row in enumerate(fronts[:12]):
        entries = row[R.ALGORITHMS]
        xs = [e.get(R.STEPS) if e.get(R.STEPS) is not None else j for j, e in enumerate(entries)]
        ys = [e[R.COLLECTIVE_TIME] * 1e3 for e in entries]
        ax.plot(xs, ys, marker=MARKERS[i % len(MARKERS)], label=f"{row['formulation']} {row['topology']}")
    finish_axes(fig, ax, path, "frontier point (steps where known)", "collective time (ms, simulated)",
                "Pareto fronts", log_x=None, log_y=False, legend_size=7)
    return True


def steps_vs_bandwidth(rows: list[dict[str, Any]], path: Path, chunk_facts: dict[str, str]) -> bool:
    """Latency cost S vs bandwidth cost R/C of every algorithm found, per collective; the
    non-dominated points (a Pareto frontier) joined by a line. ``chunk_facts``: by formulation
    label, the row fact that counts an algorithm's chunks C (``facts_in_role``)."""
    points: dict[str, set[tuple[int, float]]] = {}
    for row in rows:
        chunks = chunk_facts.get(row.get(R.FORMULATION))
        if not _ok(row) or chunks is None:
            continue
        entries = row.get(R.ALGORITHMS) or [row.get(R.ALGORITHM_META) or {}]
        for entry in entries:
            if entry.get(R.STEPS) and entry.get(R.ROUNDS) and entry.get(chunks):
                points.setdefault(row[R.COLLECTIVE], set()).add((entry[R.STEPS], entry[R.ROUNDS] / entry[chunks]))
    if not points:
        return False
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for i, (collective, pts) in enumerate(sorted(points.items())):
        pts = sorted(pts)
        front = [p for p in pts if not any(q != p and q[0] <= p[0] and q[1] <= p[1] for q in pts)]
        marker = MARKERS[i % len(MARKERS)]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, alpha=0.35)
        ax.plot([p[0] for p in front], [p[1] for p in front], marker=marker, label=f"{collective} (frontier)")
    finish_axes(fig, ax, path, "steps S (latency cost)", "rounds per chunk R/C (bandwidth cost)",
                "Latency-bandwidth trade-off of the algorithms found", log_x=None, log_y=False)
    return True


def efficiency(rows: list[dict[str, Any]], path: Path) -> bool:
    """One marker per (topology, formulation): how close each schedule comes to the bound."""
    points: dict[str, dict[str, list[float]]] = {}
    topologies: list[str] = []
    for row in rows:
        if _ok(row) and row.get(R.EFFICIENCY) is not None:
            label = str(row.get(R.TOPOLOGY))
            if label not in topologies:
                topologies.append(label)
            points.setdefault(row[R.FORMULATION], {}).setdefault(label, []).append(row[R.EFFICIENCY])
    if len(topologies) < 2:
        return False
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(topologies) + 2), 4.8))
    width = 0.8 / max(1, len(points))
    for i, (label, per_topology) in enumerate(points.items()):
        xs = [topologies.index(t) - 0.4 + (i + 0.5) * width for t in per_topology]
        ys = [statistics.median(v) for v in per_topology.values()]
        ax.scatter(xs, ys, marker=MARKERS[i % len(MARKERS)], label=label, s=28)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xticks(range(len(topologies)))
    ax.set_xticklabels(topologies, rotation=45, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("bound / simulated time")
    ax.set_title("How far from the best possible (1 = optimal)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    return True


def time_by_size(rows: list[dict[str, Any]], folder: Path) -> list[Path]:
    """Per topology, collective time against size: a line per formulation and the bound (dashed)."""
    sizes = {r.get(R.SIZE_BYTES) for r in rows if _ok(r)}
    if len(sizes) < 3:
        return []
    by_topology: dict[str, dict[str, dict[str, dict[float, float]]]] = {}  # topology -> collective -> line
    for row in rows:
        if not _ok(row):
            continue
        lines = by_topology.setdefault(str(row[R.TOPOLOGY]), {}).setdefault(str(row[R.COLLECTIVE]), {})
        size = float(row[R.SIZE_BYTES])
        for label, value in ((row[R.FORMULATION], row[R.COLLECTIVE_TIME]), ("bound", row.get(R.BOUND))):
            if value:  # the fastest of a formulation's seeds and parameters at that size
                line = lines.setdefault(label, {})
                line[size] = min(line.get(size, math.inf), value)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for topology, panels in by_topology.items():
        fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.2), squeeze=False)
        everyone = sorted({name for lines in panels.values() for name in lines if name != "bound"})
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for ax, (collective, lines) in zip(axes[0], sorted(panels.items())):
            for name in sorted(name for name in lines if name != "bound"):
                i = everyone.index(name)  # one colour and marker per formulation across the panels
                xs = sorted(lines[name])
                ax.plot(xs, [lines[name][x] * 1e6 for x in xs], marker=MARKERS[i % len(MARKERS)], ms=4, lw=1,
                        color=colours[i % len(colours)], label=name)
            if "bound" in lines:
                xs = sorted(lines["bound"])
                ax.plot(xs, [lines["bound"][x] * 1e6 for x in xs], "k--", lw=1.5, label="bound")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel("collective time (us, simulated)")
            ax.set_title(f"{topology} {collective}", fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6, ncol=2)
        fig.tight_layout()
        path = folder / f"{_file_name(topology)}.png"
        save_figure(fig, path, dpi=110)
        written.append(path)
    return written


def efficiency_by_npus(rows: list[dict[str, Any]], folder: Path) -> list[Path]:
    """Per (collective, size), efficiency against NPUs: a line per formulation, solid on
    non-blocking fabrics and dashed on oversubscribed ones (``over=`` in the topology's spec)."""
    panels: dict[tuple[str, float], dict[str, dict[int, float]]] = {}
    for row in rows:
        if not _ok(row) or row.get(R.EFFICIENCY) is None or not row.get(R.NPUS):
            continue
        over = re.search(r"over\s*=\s*([\d.]+)", str(row.get(R.TOPOLOGY_SOURCE, "")), re.IGNORECASE)
        label = row[R.FORMULATION] + (" (oversubscribed)" if over and float(over.group(1)) > 1 else "")
        line = panels.setdefault((str(row[R.COLLECTIVE]), float(row[R.SIZE_BYTES])), {}).setdefault(label, {})
        line[int(row[R.NPUS])] = max(line.get(int(row[R.NPUS]), 0.0), row[R.EFFICIENCY])
    panels = {key: lines for key, lines in panels.items() if any(len(line) >= 2 for line in lines.values())}
    if not panels:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    everyone = sorted({name.split(" (")[0] for lines in panels.values() for name in lines})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    written = []
    for (collective, size), lines in sorted(panels.items()):
        fig, ax = plt.subplots(figsize=(6, 4.5))
        for name in sorted(lines):
            i = everyone.index(name.split(" (")[0])  # one colour per formulation, dashed when oversubscribed
            xs = sorted(lines[name])
            ax.plot(xs, [lines[name][x] for x in xs], marker=MARKERS[i % len(MARKERS)], ms=4, lw=1,
                    color=colours[i % len(colours)], ls="--" if "(" in name else "-", label=name)
        ax.set_ylim(0, 1.05)
        path = folder / f"{_file_name(collective)}_{_file_name(f'{size:.0f}B')}.png"
        finish_axes(fig, ax, path, "NPUs", "bound / simulated time",
                    f"{collective} {size / 2**20:g} MiB: efficiency against NPUs", log_x=2, log_y=False)
        written.append(path)
    return written


def _file_name(label: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)


def write_figures(folder: Path, experiment, rows: list[dict[str, Any]], table=None) -> list[Path]:
    """Write the run's figures into ``folder/figures``; the files written."""
    figures = Path(folder) / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    written = []
    schedule = [r for r in rows if r.get(R.KIND, "schedule") == "schedule"]
    if synthesis_vs_time(schedule, figures / "synthesis_vs_time.png"):
        written.append(figures / "synthesis_vs_time.png")
    if scaling(schedule, figures / "scaling.png"):
        written.append(figures / "scaling.png")
    chosen = _heatmap_row(schedule, experiment)
    if chosen is not None and link_heatmap(chosen, figures / "link_heatmap.png"):
        written.append(figures / "link_heatmap.png")
    if pareto(schedule, figures / "pareto.png"):
        written.append(figures / "pareto.png")
    if efficiency(schedule, figures / "efficiency.png"):
        written.append(figures / "efficiency.png")
    if steps_vs_bandwidth(schedule, figures / "steps_vs_bandwidth.png", facts_in_role(experiment, R.CHUNKS_ROLE)):
        written.append(figures / "steps_vs_bandwidth.png")
    written += time_by_size(schedule, figures / "by_size")
    written += efficiency_by_npus(schedule, figures / "by_npus")
    return written


def facts_in_role(experiment, role: str) -> dict[str, str]:
    """By formulation label, the row fact each of the experiment's formulations gives ``role`` in
    its ``row_facts`` (a formulation that cannot be loaded declares none)."""
    from workbench.plugin.registry import FormulationError, resolve_formulation, row_facts

    found = {}
    for spec in experiment.formulations:
        try:
            declared = row_facts(resolve_formulation(spec.name, experiment.base_dir))
        except FormulationError:
            continue
        found.update({spec.label: key for key, given in declared.items() if given == role})
    return found


def _heatmap_row(rows: list[dict[str, Any]], experiment) -> dict[str, Any] | None:
    wanted = experiment.table.get("normalise_by") or (experiment.formulations[0].label if experiment.formulations else None)
    candidates = [r for r in rows if _ok(r) and r.get(R.LINK_UTILISATION) and r[R.FORMULATION] == wanted]
    if not candidates:
        candidates = [r for r in rows if _ok(r) and r.get(R.LINK_UTILISATION)]
    if not candidates:
        return None
    return max(candidates, key=lambda r: (r.get(R.NPUS) or 0, r.get(R.SIZE_BYTES) or 0))
