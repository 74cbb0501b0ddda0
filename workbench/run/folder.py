"""Run folders: the snapshot and rows of a run, its report files, and a run beside a reference.

``workbench report RUN_FOLDER`` (also written at the end of ``workbench run``) renders
``table.md`` and ``table.csv`` from ``rows.jsonl`` and the experiment snapshot ``config.yaml``,
plus the figures of ``workbench.reports.plots``. Reading a folder (``load_run``) writes nothing into it,
so a folder a live run appends to can be read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.config.experiment import Experiment, parse_experiment
from workbench.reports.report import ReportError, TableCell, build_table, format_value, render_csv, render_markdown
from workbench.reports.row_check import row_problem
from workbench.reports import row_keys as R

__all__ = ["load_run", "render_report", "write_report", "compare_runs", "lines_named"]


def load_run(folder: str | Path, warn: bool = True) -> tuple[Experiment, list[dict[str, Any]]]:
    """The experiment snapshot and rows of a run folder; ``warn``: say on stderr which lines of the
    rows file are not rows (``rebound`` says where it moves them instead)."""
    folder = Path(folder)
    config = folder / "config.yaml"
    rows_path = folder / "rows.jsonl"
    if not folder.is_dir():
        raise ReportError(f"{folder}: no such run folder")
    from workbench.run.folder_files import check_run_folder
    from workbench.util.safe_load import boolean, load_file

    check_run_folder(folder, ReportError)  # a FIFO, a device or a link among its files: refused unopened
    if not config.exists():
        raise ReportError(f"{folder}: no config.yaml (not a run folder written by `workbench run`)")

    run_info = {}
    if (folder / "run.json").exists():
        run_info = load_file(folder / "run.json", "run.json", ReportError, syntax="json")
        if not isinstance(run_info, dict):
            raise ReportError(f"{folder / 'run.json'}: expected an object")
    quick = boolean(run_info.get("quick", False), f"{folder / 'run.json'}: quick", ReportError)
    config_dir = run_info.get("config_dir", str(folder))
    if not isinstance(config_dir, str):
        raise ReportError(f"{folder / 'run.json'}: config_dir: expected a folder name, got {config_dir!r}")
    experiment = parse_experiment(load_file(config, "config snapshot", ReportError, syntax="yaml"), str(config),
                                  quick=quick, base_dir=Path(config_dir), check_files=False)
    from workbench.reports.results import ResultStore

    rows = []
    if rows_path.exists():
        store = ResultStore(folder, read_only=True)  # reading a run folder writes nothing into it
        rows = store.rows()
        if store.skipped and warn:
            import sys

            print(f"warning: {rows_path}: {len(store.skipped)} line(s) that are not result rows "
                  f"({lines_named(store.skipped)}) left out of the tables; the file keeps them", file=sys.stderr)
    rows = _current_rows(experiment, rows)
    metrics = experiment.table.get("metrics") or ()
    for row in rows:  # a hand-edited value the tables would compute with: one line naming it, not a traceback
        problem = row_problem(row, metrics)
        if problem:
            raise ReportError(f"{rows_path}: row of cell {row.get('cell_id')}: {problem}")
    return experiment, rows


def lines_named(numbers: list[int]) -> str:
    """``line 3``, ``lines 3, 7, 9, 12, 15 ...``: line numbers for a one-line message."""
    shown = ", ".join(map(str, numbers[:5])) + (" ..." if len(numbers) > 5 else "")
    return f"line{'s' if len(numbers) > 1 else ''} {shown}"


def _current_rows(experiment: Experiment, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the snapshot's cells only: a cell whose parameters changed keeps its old row in
    rows.jsonl under the same label, which must not be merged into the new cell's median."""
    try:
        ids = experiment.cell_ids()
    except Exception:  # a snapshot that cannot expand its grid: show everything rather than nothing
        return rows
    current = [r for r in rows if r.get(R.CELL_ID) in ids]
    return current if current or not rows else rows


def render_report(folder: str | Path) -> str:
    """table.md's text for a run folder, written nowhere (``workbench report`` on a folder a live
    run holds: that run writes the files itself when it ends)."""
    experiment, rows = load_run(folder)
    return render_markdown(build_table(rows, experiment), experiment)


def write_report(folder: str | Path, figures: bool = True) -> Path:
    """Write table.md, table.csv and figures into the run folder; returns table.md's path."""
    from workbench.util.files import write_atomic

    folder = Path(folder)
    experiment, rows = load_run(folder)
    table = build_table(rows, experiment)
    markdown = render_markdown(table, experiment)
    write_atomic(folder / "table.md", markdown)
    write_atomic(folder / "table.csv", render_csv(table))
    if figures and rows:
        from workbench.reports import plots

        plots.write_figures(folder, experiment, rows, table)
    return folder / "table.md"


def compare_runs(new_rows: list[dict[str, Any]], reference_rows: list[dict[str, Any]],
                 experiment: Experiment) -> str:
    """A markdown table: this run beside the committed reference and the paper, per cell."""
    new = build_table(new_rows, experiment)
    reference = build_table(reference_rows, experiment)
    lines = [f"New run vs committed reference vs paper ({new.value_name.replace('_', ' ')}"
             + (f", normalised to {new.normalised_by}" if new.normalised_by else "") + ")", "",
             "| " + " | ".join([experiment.table["rows"]] + new.columns) + " |",
             "|" + "---|" * (len(new.columns) + 1)]
    timed_out = False
    for row in new.rows:
        cells = []
        for column in new.columns:
            a = new.cells.get((row, column), TableCell())
            b = reference.cells.get((row, column), TableCell())
            ours = new.text.get((row, column)) or format_value(a.ours, new, column)
            ref = reference.text.get((row, column)) or format_value(b.ours, new, column)
            ours += _limit_mark(a)
            ref += _limit_mark(b)
            timed_out |= bool(_limit_mark(a) or _limit_mark(b))
            cells.append(f"{ours} / {ref} / {format_value(a.paper, new, column)}")
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    lines += ["", "Each cell: new / reference / paper."]
    if timed_out:
        lines[-1] += (" \"(timeout)\": a time limit ended that search and the value is its best answer, so it can "
                      "differ between runs (machine speed, load) without anything having changed.")
    return "\n".join(lines) + "\n"


def _limit_mark(cell: TableCell) -> str:
    return " (timeout)" if cell.ours is not None and "timeout" in cell.status.split(",") else ""
