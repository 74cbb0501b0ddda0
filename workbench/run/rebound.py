"""Refresh the bounds of a finished run's rows without synthesising anything again.

Bounds improve (an exact optimum where there was a loose cut); the schedules, their simulated
times and everything else in a row do not depend on them. ``workbench rebound RUN_FOLDER``
recomputes, for every schedule row of the run's config, the problem's bounds
(``workbench.bounds.problem_bounds``: they depend on the topology, collective and size only, so
every bound of the row is recomputed, including those older rows took from a schedule's chunk
size; each problem is solved once and the run's bounds cache, ``bounds/``, is rewritten with it).
``bound``, ``bound_exact``, ``rs_ag_throughput``, ``efficiency`` and ``bounds`` are rewritten,
the status is decided again by ``workbench.bounds.yardstick`` (the formulation's kept as
``solver_status``), the rows file is replaced atomically and the report re-rendered, under the
folder's lock (a live run's folder is refused, naming the run). Lines of rows.jsonl that are not
rows (a hand edit, stray bytes) are never dropped: they are appended, byte for byte, to
``rows.unparsed.jsonl`` beside the rows before the rows file is rewritten, and the message names
them and that file. A row whose topology comes from a design cell gets its topology from that design's row in the same run, as the run gave it to the cell; only
when that design has no bandwidths is the row left as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.bounds import Bounds
from workbench.bounds.yardstick import settle_status
from workbench.reports import row_keys as R
from workbench.util import fastjson

__all__ = ["rebound_run"]


def _refreshed(row: dict[str, Any], cell, design_rows: dict[str, dict[str, Any]], folder: Path,
               solved: dict[str, Bounds]) -> dict[str, Any] | None:
    """The row with its problem's bounds solved anew (once per problem: ``solved`` keeps them by
    cache key, and the run's bounds cache is rewritten with them)."""
    from dataclasses import replace

    from workbench.run.bounds_cache import cache_key, cached_problem_bounds
    from workbench.run.evaluate import BOUND_OPTIONS, build_problem, resolve_design_topology

    if not isinstance(row.get(R.BOUNDS), dict):  # a row without an evaluation (an error) has none
        return None
    if cell.topology.design:  # a design's bandwidths, as the run gave them to the cell
        try:
            cell = replace(cell, topology=resolve_design_topology(cell.topology, design_rows))
        except RuntimeError:
            return None
    problem = build_problem(cell)
    options = {**BOUND_OPTIONS, "lp": True}
    key = cache_key(problem.topology, problem.collective, problem.size_bytes, options)
    if key not in solved:
        solved[key] = cached_problem_bounds(problem.topology, problem.collective, problem.size_bytes, folder,
                                            refresh=True, **options)
    bounds = replace(solved[key], notes=dict(solved[key].notes))
    bounds.schedule_time = row.get(R.COLLECTIVE_TIME)  # the row's schedule meeting the bound proves it
    update = {R.BOUND: bounds.best, R.BOUND_EXACT: bounds.exact, R.RS_AG_THROUGHPUT: bounds.rs_ag_throughput,
              R.BOUNDS: {**bounds.to_dict(), "refreshed": True}}
    if row.get(R.COLLECTIVE_TIME):
        update[R.EFFICIENCY] = bounds.efficiency(row[R.COLLECTIVE_TIME])
    fresh = {**row, **update}
    settle_status(fresh)
    return fresh


def rebound_run(folder: str | Path, progress: bool = True) -> tuple[int, int]:
    """(rows refreshed, rows left as they were); rewrites rows.jsonl and the report.

    Holds the folder's lock (``workbench.run.lock``) throughout: a folder a live run or rebound
    holds is refused with ``RunLockError`` naming the holder, before anything is read or written.
    """
    from workbench.reports.report import ReportError
    from workbench.run.lock import RunLock

    folder = Path(folder)
    if not folder.is_dir():
        raise ReportError(f"{folder}: no such run folder")
    with RunLock(folder):
        return _rebound_locked(folder, progress)


def _rebound_locked(folder: Path, progress: bool) -> tuple[int, int]:
    import sys

    from workbench.util.files import write_atomic
    from workbench.run.folder import lines_named, load_run, write_report
    from workbench.reports.results import ResultStore

    experiment, _ = load_run(folder, warn=False)  # the lines that are not rows are named below
    cells = {c.cell_id: c for c in experiment.cells()}
    store = ResultStore(folder, read_only=True)
    rows = store.rows()  # read under the lock; rewritten whole below
    design_rows = {r[R.DESIGN]: r for r in rows if r.get(R.KIND) == "design"}
    refreshed = kept = 0
    out = []
    solved: dict[str, Bounds] = {}
    for index, row in enumerate(rows):
        cell = cells.get(row.get(R.CELL_ID))
        schedule = cell is not None and row.get(R.KIND, "schedule") == "schedule"
        new = _refreshed(row, cell, design_rows, folder, solved) if schedule else None
        if new is None:
            kept += 1
            out.append(row)
        else:
            refreshed += 1
            out.append(new)
        if progress:
            print(f"\r  {index + 1}/{len(rows)} rows", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    if store.unparsed:  # kept, byte for byte, before the rows file is rewritten without them
        aside = store.set_aside(store.unparsed)
        print(f"{store.path}: {len(store.unparsed)} line(s) that are not result rows ({lines_named(store.skipped)}) "
              f"moved, byte for byte, to {aside}", file=sys.stderr)
    # standard JSON, as ResultStore.append writes a row: a NaN or an infinity (an old row's) is null
    write_atomic(folder / "rows.jsonl", "".join(fastjson.text(r) + "\n" for r in out))
    write_report(folder)
    return refreshed, kept
