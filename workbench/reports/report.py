"""Tables from result rows: our value beside the paper's, the ratio, and geometric means.

``workbench.run.folder`` reads a run folder and writes ``table.md``, ``table.csv`` and the figures
of ``workbench.reports.plots`` with these tables.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from workbench.reports import row_keys as R
from workbench.config.checks import DESIGN_METRICS
from workbench.config.experiment import Experiment
from workbench.util.units import format_size, format_time

__all__ = ["Table", "TableCell", "build_table", "render_markdown", "render_csv", "format_value", "ReportError"]

OK_STATUSES = ("optimal", "feasible", "timeout")
EXTRA_LABELS = {"ideal": "Ideal", "bound": "Bound", "ideal_efficiency": "Efficiency vs Ideal",
                "efficiency": "Efficiency vs bound", "ideal_dims": "Ideal (per-dim BW)",
                "ideal_dims_efficiency": "Efficiency vs Ideal (per-dim BW)", "claimed": "Claimed / simulated",
                "rs_ag_throughput": "RS*+AG* throughput"}
# where a schedule meets every row's bound, which proves it the optimum, the bound columns say so
EXACT_LABELS = {"Bound": "Optimum", "Efficiency vs bound": "Efficiency vs optimum"}
_UNNORMALISED = ("ideal_efficiency", "efficiency", "ideal_dims_efficiency", "claimed")


class ReportError(ValueError):
    """A run folder that cannot be reported on (missing rows or config)."""


@dataclass
class TableCell:
    ours: float | None = None
    paper: float | None = None
    synthesis: float | None = None  # seconds (median)
    paper_synthesis_ms: float | None = None
    status: str = ""
    runs: int = 0

    @property
    def ratio(self) -> float | None:
        """Our value over the paper's; None without both or when the paper's is 0."""
        if self.ours is None or self.paper in (None, 0):
            return None
        return self.ours / self.paper


@dataclass
class Table:
    title: str
    value_name: str
    normalised_by: str | None
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], TableCell] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    time_valued: bool = True
    text: dict[tuple[str, str], str] = field(default_factory=dict)

    def cell(self, row: str, column: str) -> TableCell:
        """The cell at (row, column), created empty when absent."""
        return self.cells.setdefault((row, column), TableCell())

    def rename_column(self, old: str, new: str) -> None:
        """Rename column ``old`` to ``new``, cells and texts with it; nothing when there is no ``old``."""
        if old not in self.columns:
            return
        self.columns[self.columns.index(old)] = new
        for (row, column) in [key for key in self.cells if key[1] == old]:
            self.cells[(row, new)] = self.cells.pop((row, column))
        for (row, column) in [key for key in self.text if key[1] == old]:
            self.text[(row, new)] = self.text.pop((row, column))

    def geomean(self, column: str, which: str) -> float | None:
        """Geometric mean of a column's positive values, ours (``which`` 'ours') or the paper's; None if none."""
        values = []
        for row in self.rows:
            cell = self.cells.get((row, column))
            value = None if cell is None else (cell.ours if which == "ours" else cell.paper)
            if value is not None and value > 0:
                values.append(value)
        if not values:
            return None
        return math.exp(sum(math.log(v) for v in values) / len(values))


def _row_label(row: dict[str, Any], key: str, varying: list[str]) -> str:
    def value_of(name: str) -> str:
        if name == "size":
            return format_size(row[R.SIZE_BYTES])
        if name == "collective":
            root = row.get(R.ROOT)
            return row[R.COLLECTIVE] + (f"(root {root})" if root is not None else "")
        return str(row.get(name))

    parts = [value_of(key)] + [value_of(name) for name in varying if name != key]
    return " / ".join(parts)


def _varying(experiment: Experiment) -> list[str]:
    varying = []
    if len(experiment.topologies) > 1:
        varying.append("topology")
    if len(experiment.collectives) > 1:
        varying.append("collective")
    if len(experiment.sizes) > 1:
        varying.append("size")
    if len(experiment.chunks) > 1:
        varying.append("chunks")
    return varying


def _optimality(row: dict[str, Any]) -> str:
    meta = row.get(R.ALGORITHM_META) or {}
    marks = [name for name, key in (("latency", "latency_optimal"), ("bandwidth", "bandwidth_optimal")) if meta.get(key)]
    return "both" if len(marks) == 2 else (marks[0] if marks else "")


def _metric(row: dict[str, Any], metric: str) -> Any:
    """A row field, or ``stats.<key>``: a formulation's own statistic (e.g. TACCL's per-stage seconds)."""
    if metric.startswith("stats."):
        return (row.get(R.STATS) or {}).get(metric[6:])
    return row.get(metric)


_PLAIN_METRICS = ("algbw", "busbw", "efficiency")


def _formulation_rows_table(rows: list[dict[str, Any]], experiment: Experiment) -> Table:
    """One row per formulation entry (label up to " @ "), one column per (group after " @ ", metric)."""
    metrics = experiment.table["metrics"]
    row_labels: list[str] = []
    groups: list[str] = []
    for f in experiment.formulations:
        name, _, group = f.label.partition(" @ ")
        if name not in row_labels:
            row_labels.append(name)
        if group not in groups:
            groups.append(group)
    columns = [f"{g} {m}".strip() for g in groups for m in metrics]
    table = Table(experiment.description or experiment.name, "per-instance metrics", None, row_labels, columns,
                  time_valued=True)
    by_label: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get(R.KIND, "schedule") == "schedule":
            by_label.setdefault(r[R.FORMULATION], []).append(r)
    for f in experiment.formulations:
        name, _, group = f.label.partition(" @ ")
        group_rows = by_label.get(f.label, [])
        for metric in metrics:
            column = f"{group} {metric}".strip()
            cell = table.cell(name, column)
            cell.runs = len(group_rows)
            if not group_rows:
                cell.status = "not run"
                continue
            if metric == "status":
                from workbench.reports.report_bounds import status_text

                table.text[(name, column)] = ",".join(sorted({status_text(g) for g in group_rows}))
            elif metric == "label":
                table.text[(name, column)] = (group_rows[0].get("algorithm_meta") or {}).get("label", "-")
            elif metric == "optimality":
                table.text[(name, column)] = _optimality(group_rows[0]) or "-"
            else:
                values = [v for v in (_metric(g, metric) for g in group_rows) if isinstance(v, (int, float))]
                cell.ours = statistics.median(values) if values else None
                if not values and (metric.startswith("stats.") or metric == "claimed_time"):
                    table.text[(name, column)] = "-"  # not reported by this formulation
                # a bound belongs to the problem, not to how the search ended
                cell.status = "derived" if metric == "bound" else ",".join(
                    sorted({g.get(R.STATUS, "?") for g in group_rows}))
    for entry in experiment.paper.get("values", []):
        cell = table.cell(entry["row"], entry["column"])
        if entry.get("value") is not None:
            cell.paper = float(entry["value"])
    return table


def _design_table(rows: list[dict[str, Any]], experiment: Experiment) -> Table:
    """One row per design cell; names "label @ group" get mean and max rows per group."""
    metrics = experiment.table["metrics"]
    names = [d.name for d in experiment.designs]
    table = Table(experiment.description or experiment.name, "design metrics", None, list(names), list(metrics),
                  time_valued=False)
    by_name = {r[R.DESIGN]: r for r in rows if r.get(R.KIND) == "design"}
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(name.partition(" @ ")[2], []).append(name)
        row = by_name.get(name)
        for metric in metrics:
            _fill_design_cell(table, name, metric, row)
    for group, members in groups.items():
        if group and len(members) >= 2:
            _add_group_summaries(table, group, members, metrics)
    for entry in experiment.paper.get("values", []):
        cell = table.cell(entry["row"], entry["column"])
        if entry.get("value") is not None:
            cell.paper = float(entry["value"])
        if entry["row"] not in table.rows:
            table.rows.append(entry["row"])
    return table


def _fill_design_cell(table: Table, name: str, metric: str, row: dict[str, Any] | None) -> None:
    """One design's cell: text for the common metrics, a number for seconds and its own statistics."""
    cell = table.cell(name, metric)
    if row is None:
        table.text[(name, metric)] = "not run"
        return
    cell.runs = 1
    stats = row.get(R.STATS) or {}
    if metric == "status":
        table.text[(name, metric)] = row.get(R.STATUS, "?")
    elif metric == "bandwidth":
        table.text[(name, metric)] = ", ".join(f"{b / 1e9:.2f}" for b in row.get(R.BANDWIDTHS) or [])
    elif metric == "time":
        table.text[(name, metric)] = format_time(row[R.DESIGN_TIME]) if row.get(R.DESIGN_TIME) else "-"
    elif metric == "cost":
        table.text[(name, metric)] = f"${row['cost']:,.0f}" if row.get(R.COST) is not None else "-"
    elif metric == "synthesis_seconds":
        cell.ours = row.get(R.SYNTHESIS_SECONDS)
    else:
        cell.ours = stats.get(metric)


def _add_group_summaries(table: Table, group: str, members: list[str], metrics: list[str]) -> None:
    """The "mean @ group" and "max @ group" rows over a group's designs."""
    for label, reduce in (("mean", statistics.mean), ("max", max)):
        row_label = f"{label} @ {group}"
        table.rows.append(row_label)
        for metric in metrics:
            table.cell(row_label, metric).runs = 1
        for metric in metrics:  # the formulation's own statistics (the common metrics are text or seconds)
            if metric not in DESIGN_METRICS:
                values = [table.cells[(m, metric)].ours for m in members
                          if (m, metric) in table.cells and table.cells[(m, metric)].ours is not None]
                if values:
                    table.cell(row_label, metric).ours = reduce(values)


def build_table(rows: list[dict[str, Any]], experiment: Experiment) -> Table:
    """The table of an experiment's rows as its ``table:`` section asks (rows, columns, value, normalisation)."""
    spec = experiment.table
    if spec["rows"] == "design":
        return _design_table(rows, experiment)
    if spec["rows"] == "formulation":
        return _formulation_rows_table(rows, experiment)
    key = spec["rows"]
    value_name = spec["value"]
    varying = [v for v in _varying(experiment) if v != key]
    schedule_rows = [r for r in rows if r.get(R.KIND, "schedule") == "schedule"]
    order = _expected_rows(experiment, key, varying)
    seen = {_row_label(r, key, varying) for r in schedule_rows}
    row_labels = [label for label in order if label in seen or _paper_has_row(experiment, label)]
    row_labels += sorted(seen - set(row_labels))
    columns = [f.label for f in experiment.formulations]
    extras = [EXTRA_LABELS[e] for e in spec.get("extra_columns", [])]
    normaliser = spec.get("normalise_by")
    shown = columns + extras
    if spec.get("column_order"):  # may name paper-only columns (a method not built yet)
        shown = list(spec["column_order"]) + [c for c in shown if c not in spec["column_order"]]
    table = Table(experiment.description or experiment.name, value_name, normaliser, row_labels, shown,
                  time_valued=value_name in ("collective_time", "synthesis_seconds", "claimed_time"))
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in schedule_rows:
        grouped.setdefault((_row_label(r, key, varying), r[R.FORMULATION]), []).append(r)
    for (row_label, column), group in grouped.items():
        _fill_run_cell(table.cell(row_label, column), group, value_name)
    for extra_key, label in zip(spec.get("extra_columns", []), extras):
        source = normaliser or (columns[0] if columns else None)
        for row_label in row_labels:
            _fill_extra_cell(table, row_label, label, extra_key, grouped.get((row_label, source), []))
    if normaliser is not None:
        _normalise(table, row_labels, normaliser)
    from workbench.reports.report_bounds import label_bound_columns, model_notes

    label_bound_columns(table, spec, grouped, normaliser or (columns[0] if columns else None),
                        column=EXTRA_LABELS[R.BOUND], renames=EXACT_LABELS,
                        fmt=lambda value, column: _fmt(value, table, column))
    model_notes(table, grouped)
    for entry in experiment.paper.get("values", []):
        cell = table.cell(entry["row"], entry["column"])
        if entry.get("value") is not None:
            cell.paper = float(entry["value"]) * _paper_scale(experiment)
        cell.paper_synthesis_ms = entry.get("synthesis_ms")
        if entry["row"] not in table.rows:
            table.rows.append(entry["row"])
    for column in table.columns:
        if column not in extras:
            _mark_if_not_run(table, column, columns)
    return table


def _fill_run_cell(cell: TableCell, group: list[dict[str, Any]], value_name: str) -> None:
    """A cell over its runs: the median of the value over the runs that succeeded, the median
    synthesis time, every status."""
    cell.runs = len(group)
    values = [g[value_name] for g in group if g.get(R.STATUS) in OK_STATUSES and g.get(value_name) is not None]
    synth = [g[R.SYNTHESIS_SECONDS] for g in group if g.get(R.SYNTHESIS_SECONDS) is not None]
    cell.ours = statistics.median(values) if values else None
    cell.synthesis = statistics.median(synth) if synth else None
    statuses = sorted({g.get(R.STATUS, "?") for g in group})
    cell.status = ",".join(statuses)


def _fill_extra_cell(table: Table, row_label: str, label: str, extra_key: str, group: list[dict[str, Any]]) -> None:
    """An extra column's cell, derived from the runs of the normalising (or first) column."""
    if extra_key == "claimed":
        values = [g[R.CLAIMED_TIME] / g[R.COLLECTIVE_TIME] for g in group
                  if g.get(R.CLAIMED_TIME) is not None and g.get(R.COLLECTIVE_TIME)]
    else:
        values = [g.get(extra_key) for g in group if g.get(extra_key) is not None]
    if extra_key in ("ideal", "bound", "ideal_dims", "rs_ag_throughput"):
        values = values[:1]
    if values:
        cell = table.cell(row_label, label)
        cell.ours = statistics.median(values)
        cell.status = "derived"
        cell.runs = len(values)


def _normalise(table: Table, row_labels: list[str], normaliser: str) -> None:
    """Every value divided by its row's value in the ``normaliser`` column (none when that is missing
    or zero), except the columns that are ratios already."""
    for row_label in row_labels:
        base = table.cells.get((row_label, normaliser))
        base_value = base.ours if base else None
        for column in table.columns:
            extra_key = next((k for k, v in EXTRA_LABELS.items() if v == column), None)
            if extra_key in _UNNORMALISED:
                continue
            cell = table.cells.get((row_label, column))
            if cell is None or cell.ours is None:
                continue
            cell.ours = cell.ours / base_value if base_value else None


def _mark_if_not_run(table: Table, column: str, columns: list[str]) -> None:
    """A note and a "not yet run" status for a column none of whose cells has a run."""
    if any((row, column) in table.cells and table.cells[(row, column)].runs for row in table.rows):
        return
    table.notes.append(f"{column}: not yet run" + ("" if column in columns else
                                                  " (paper values only: no formulation entry of this experiment has that label)"))
    for row in table.rows:
        cell = table.cell(row, column)
        if cell.ours is None and not cell.status:
            cell.status = "not yet run"


def _paper_scale(experiment: Experiment) -> float:
    if experiment.paper.get("normalised"):
        return 1.0
    unit = experiment.paper.get("unit") or "s"
    return {"s": 1.0, "ms": 1e-3, "us": 1e-6, "GB/s": 1.0}.get(unit, 1.0)


def _paper_has_row(experiment: Experiment, label: str) -> bool:
    return any(v["row"] == label for v in experiment.paper.get("values", []))


def _expected_rows(experiment: Experiment, key: str, varying: list[str]) -> list[str]:
    import itertools

    choices = {
        "topology": [{R.TOPOLOGY: t.label} for t in experiment.topologies],
        "collective": [{R.COLLECTIVE: c.kind, R.ROOT: c.root} for c in experiment.collectives],
        "size": [{"size_bytes": s} for s in experiment.sizes],
        "chunks": [{"chunks": c} for c in experiment.chunks],
        "seed": [{"seed": s} for s in experiment.seeds],
    }
    names = [key] + [v for v in varying if v != key]
    labels = []
    for combo in itertools.product(*(choices[n] for n in names)):
        merged: dict[str, Any] = {}
        for part in combo:
            merged.update(part)
        labels.append(_row_label(merged, key, varying))
    return list(dict.fromkeys(labels))


# ------------------------------------------------------------------------------- rendering
_RATIO_COLUMNS = (EXTRA_LABELS[R.IDEAL_EFFICIENCY], EXTRA_LABELS[R.EFFICIENCY],
                  EXTRA_LABELS[R.IDEAL_DIMS_EFFICIENCY], EXACT_LABELS[EXTRA_LABELS[R.EFFICIENCY]])


_TIME_COLUMNS = (EXTRA_LABELS[R.BOUND], EXACT_LABELS[EXTRA_LABELS[R.BOUND]], EXTRA_LABELS[R.RS_AG_THROUGHPUT],
                 EXTRA_LABELS[R.IDEAL], EXTRA_LABELS[R.IDEAL_DIMS])


def _fmt(value: float | None, table: Table, column: str | None = None) -> str:
    if value is None:
        return "-"
    if column in _RATIO_COLUMNS:
        return f"{value:.1%}"
    metric = (column or "").split(" ")[-1]
    plain = metric in _PLAIN_METRICS or (metric.startswith("stats.") and not metric.endswith("seconds"))
    if table.normalised_by is None and column in _TIME_COLUMNS:
        return format_time(value)  # a time beside values of another kind (efficiency, bandwidth)
    if table.value_name == "efficiency" and table.normalised_by is None:
        return f"{value:.1%}"
    if table.normalised_by is not None or not table.time_valued or plain:
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return format_time(value)


def _fmt_ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    ms = seconds * 1e3
    return f"{ms:.3g}" if ms < 1000 else f"{ms:,.0f}"


def render_markdown(table: Table, experiment: Experiment, show_synthesis: bool | None = None) -> str:
    """table.md's text: the title, the table with paper values beside ours, and its notes."""
    show_synthesis = experiment.table.get("show_synthesis", False) if show_synthesis is None else show_synthesis
    has_paper = any(c.paper is not None for c in table.cells.values())
    paper_columns = {column for (_, column), c in table.cells.items() if c.paper is not None}
    what = table.value_name.replace("_", " ")
    if table.normalised_by:
        what += f", normalised to {table.normalised_by}"
    lines = [f"# {experiment.name}", "", table.title, ""]
    legend = f"Value: {what}."
    if has_paper:
        legend += " Each cell: ours / paper (ours / paper ratio)."
    if any("timeout" in c.status.split(",") and c.ours is not None for c in table.cells.values()):
        legend += " \"(timeout)\": a time limit ended the search and the value is its best answer; unmarked cells completed."
    lines += [legend, ""]
    header = [experiment.table["rows"]] + table.columns
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for row in table.rows + ([] if experiment.table["rows"] == "design" else ["geomean"]):
        cells = [_cell_text(table, row, column, has_paper and column in paper_columns) for column in table.columns]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    if show_synthesis:
        lines += _synthesis_lines(table, experiment, has_paper)
    if table.notes:
        lines += [""] + [f"- {note}" for note in table.notes]
    return "\n".join(lines) + "\n"


def _cell_text(table: Table, row: str, column: str, with_paper: bool) -> str:
    """One cell of the value table: ours (or the cell's text or status), "(timeout)" when a limit
    ended the search, then the paper's value and the ratio when the column has paper values."""
    if row == "geomean":
        ours, paper = table.geomean(column, "ours"), table.geomean(column, "paper")
        cell = TableCell(ours=ours, paper=paper)
    else:
        cell = table.cells.get((row, column), TableCell())
    text = _fmt(cell.ours, table, column)
    if (row, column) in getattr(table, "text", {}):
        text = table.text[(row, column)]
    elif cell.ours is None and cell.status and cell.status not in ("derived",):
        text = cell.status
    elif cell.ours is None and row != "geomean":
        text = "not run" if cell.runs == 0 else "-"
    if row != "geomean" and cell.ours is not None and "timeout" in cell.status.split(","):
        text += " (timeout)"  # a search ended by its limit: the value is its incumbent's
    if with_paper and (cell.paper is not None or row != "geomean"):
        paper_text = _fmt(cell.paper, table, column)
        ratio = cell.ratio
        text += f" / {paper_text}" + (f" ({ratio:.2f}x)" if ratio is not None else "")
    return text


def _synthesis_lines(table: Table, experiment: Experiment, has_paper: bool) -> list[str]:
    """The synthesis-time table: milliseconds per cell, the paper's beside them where given."""
    lines = ["", "Synthesis time (ms, median over seeds)" + (": ours / paper" if has_paper else ""), ""]
    synth_columns = [c for c in table.columns if c not in EXTRA_LABELS.values()]
    lines.append("| " + " | ".join([experiment.table["rows"]] + synth_columns) + " |")
    lines.append("|" + "---|" * (len(synth_columns) + 1))
    for row in table.rows:
        cells = []
        for column in synth_columns:
            cell = table.cells.get((row, column), TableCell())
            text = _fmt_ms(cell.synthesis)
            if cell.synthesis is not None and "timeout" in cell.status.split(","):
                text += " (timeout)"
            if cell.paper_synthesis_ms is not None:
                text += f" / {cell.paper_synthesis_ms:g}"
            cells.append(text)
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return lines


def render_csv(table: Table) -> str:
    """table.csv's text: one line per table row, ours and the paper's value per column."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["row", "column", "ours", "paper", "ratio", "synthesis_seconds", "paper_synthesis_ms", "status",
                     "runs"])
    for row in table.rows:
        for column in table.columns:
            cell = table.cells.get((row, column))
            if cell is None:
                continue
            writer.writerow([row, column, cell.ours, cell.paper, cell.ratio, cell.synthesis, cell.paper_synthesis_ms,
                             cell.status, cell.runs])
    for column in table.columns:
        writer.writerow(["geomean", column, table.geomean(column, "ours"), table.geomean(column, "paper"), "", "", "",
                         "", ""])
    return buffer.getvalue()


def format_value(value: float | None, table: Table, column: str | None = None) -> str:
    """A table value as the tables print it."""
    return _fmt(value, table, column)
