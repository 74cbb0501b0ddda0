"""The experiment runner: isolated cells with hard limits, resumable rows, local or Dask execution.

Each cell runs in its own child process (``python -m workbench.run.cell``, doing ``run.evaluate``) watched
by a monitor (``run.monitor.execute``: hard limits, the lifeline, the last incumbent of a killed
cell). Every synthesized algorithm is verified and simulated.

Rows are appended to ``rows.jsonl`` one line per cell with fsync; a re-run skips finished cells,
so an interrupted run (Ctrl-C, a killed parent) loses nothing that had finished.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable

from workbench.run.progress import Progress
from workbench.run.monitor import environment_info, execute
from workbench.run.evaluate import (build_problem, build_topology, evaluate_algorithms, resolve_design_topology,
                                     solver_time_limit)
from workbench.config.experiment import Cell, DesignCell, Experiment
from workbench.reports.results import ResultStore
from workbench.run.request import CellRequest
from workbench.run.row import Row, design_head, schedule_head
from workbench.reports import row_keys as R

__all__ = ["ResultStore", "execute", "run_experiment", "evaluate_algorithms", "solver_time_limit",
           "environment_info", "RunSummary", "build_topology", "build_problem"]



# ============================================================================ running an experiment
class RunSummary:
    """What a run did: its folder, how many cells in all, ran, skipped, and whether it was interrupted."""
    def __init__(self, folder: Path, total: int, ran: int, skipped: int, interrupted: bool) -> None:
        self.folder, self.total, self.ran, self.skipped, self.interrupted = folder, total, ran, skipped, interrupted


def _schedule_row(cell: Cell, fields: dict[str, Any]) -> dict[str, Any]:
    """A schedule cell's row: its identity, then its fields, then the environment."""
    return Row(schedule_head(cell), fields, environment_info()).to_dict()


def _design_row(cell: DesignCell, fields: dict[str, Any]) -> dict[str, Any]:
    """A design cell's row: its identity, then its fields, then the environment."""
    return Row(design_head(cell), fields, environment_info()).to_dict()


def _cache_note(row: dict[str, Any]) -> str | None:
    """The row's ``bounds.notes.cache`` (a cached bound of the run's ``bounds/`` found above the cell's
    simulated time, discarded and solved again: ``workbench.run.bounds_cache``), or None. The cell's
    stderr, which printed it, is not shown by a run; the progress output notes it instead."""
    bounds = row.get(R.BOUNDS)
    notes = bounds.get("notes") if isinstance(bounds, dict) else None
    note = notes.get("cache") if isinstance(notes, dict) else None
    return note if isinstance(note, str) and note else None


def run_experiment(
    experiment: Experiment,
    folder: str | Path,
    jobs: int = 1,
    scheduler: str | None = None,
    retry_errors: bool = False,
    progress_stream=None,
    resume_command: str | None = None,
) -> RunSummary:
    """Run every unfinished cell of ``experiment`` into ``folder`` (rows.jsonl), designs first."""
    store = ResultStore(folder)
    existing = store.rows()
    finished = {r[R.CELL_ID] for r in existing if not (retry_errors and r.get(R.STATUS) == "error")}
    designs = experiment.design_cells()
    cells = experiment.cells()
    todo_designs = [d for d in designs if d.cell_id not in finished]
    todo_cells = [c for c in cells if c.cell_id not in finished]
    total = len(todo_designs) + len(todo_cells)
    skipped = len(designs) + len(cells) - total
    limits = {c.cell_id: float(c.time_limit) for c in [*todo_designs, *todo_cells]}
    progress = Progress(total, progress_stream, jobs=jobs if not scheduler else max(jobs, 1), limits=limits)
    if skipped:
        progress.note(f"{skipped} finished cell(s) found in {store.path}; running the other {total}")
    stop = threading.Event()
    executor = _Executor(jobs, scheduler, stop, progress)
    ran = 0
    # the cells load an import-path formulation's module from beside the config, as the parse did
    modules = str(Path(experiment.base_dir or ".").resolve())
    here = str(Path(folder).resolve())  # its bounds/ keeps each problem's bounds for the problem's other cells
    try:
        for design, fields in executor.map(
                [(d, CellRequest("design", d, formulation_dir=modules)) for d in todo_designs]):
            row = _design_row(design, fields)
            store.append(row)
            progress.update(f"design {design.name}", row, design.cell_id)
            ran += 1
        design_rows = {r[R.DESIGN]: r for r in store.rows() if r.get(R.KIND) == "design"}
        requests = []
        for cell in todo_cells:
            runnable = cell
            if cell.topology.design is not None:
                try:
                    runnable = replace(cell, topology=resolve_design_topology(cell.topology, design_rows))
                except RuntimeError as exc:
                    row = _schedule_row(cell, {R.STATUS: "error", R.MESSAGE: str(exc)})
                    store.append(row)
                    progress.update(cell.describe(), row, cell.cell_id)
                    ran += 1
                    continue
            path = None
            if cell.evaluation.save_algorithms:
                path = str(Path(folder).resolve() / "algorithms" / f"{cell.cell_id.replace(':', '-')}.json")
            requests.append((cell, CellRequest("schedule", runnable, algorithm_path=path, formulation_dir=modules,
                                               run_folder=here)))
        for cell, fields in executor.map(requests):
            row = _schedule_row(cell, fields)
            store.append(row)
            progress.update(cell.describe(), row, cell.cell_id)
            discarded = _cache_note(row)
            if discarded:
                progress.note(f"{cell.cell_id}: {discarded}")
            ran += 1
    except KeyboardInterrupt:
        stop.set()
        progress.close()
        executor.shutdown()
        again = f"`{resume_command}`" if resume_command else "the same command again"
        progress.note(f"interrupted: {ran} cell(s) finished this run and are saved in {store.path}; "
                      f"run {again} to finish the other {total - ran}")
        return RunSummary(Path(folder), total + skipped, ran, skipped, True)
    finally:  # whatever ends the run, its heartbeat thread and executor end with it
        progress.close()
        executor.shutdown()
    return RunSummary(Path(folder), total + skipped, ran, skipped, False)


# seconds to reach a Dask scheduler before the run stops with a clear error
SCHEDULER_CONNECT_SECONDS = 20.0


class _Executor:
    """Runs requests on local threads (each watching a child process) or on a Dask cluster."""

    def __init__(self, jobs: int, scheduler: str | None, stop: threading.Event, progress: Progress | None = None) -> None:
        self.stop = stop
        self.progress = progress
        self.client = None
        self.pool = None
        if scheduler:
            try:
                from distributed import Client
            except ImportError:
                raise RuntimeError("--scheduler needs dask distributed: pip install 'collective-workbench[cluster]'")
            try:
                self.client = Client(scheduler, timeout=f"{SCHEDULER_CONNECT_SECONDS}s")
            except (OSError, TimeoutError) as exc:
                raise RuntimeError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
        else:
            self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs))

    def map(self, items: list[tuple[Any, CellRequest]]) -> Iterable[tuple[Any, dict[str, Any]]]:
        """Yield (key, fields) as cells finish (completion order)."""
        if not items:
            return
        if self.client is not None:
            from distributed import as_completed

            futures = {}
            for key, request in items:
                future = self.client.submit(execute, request, pure=False, key=f"cell-{id(request)}-{time.time_ns()}")
                futures[future] = key
            try:
                for future in as_completed(list(futures)):
                    fields = future.result()
                    if fields is not None:
                        yield futures[future], fields
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
            return
        futures = {self.pool.submit(self._run_local, key, request): key for key, request in items}
        try:
            for future in concurrent.futures.as_completed(futures):
                fields = future.result()
                if fields is not None:
                    yield futures[future], fields
        except BaseException:
            self.stop.set()
            for future in futures:
                future.cancel()
            raise

    def _run_local(self, key: Any, request: CellRequest) -> dict[str, Any] | None:
        """One cell on this machine, its stages reported to the progress line."""
        progress = self.progress
        if progress is None:
            return execute(request, self.stop)
        cell_id = getattr(key, "cell_id", key)
        progress.start(cell_id, key.describe() if hasattr(key, "describe") else f"design {getattr(key, 'name', cell_id)}")
        return execute(request, self.stop, on_event=lambda kind: progress.event(cell_id, kind))

    def shutdown(self) -> None:
        """Stop the local threads or close the Dask client."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        if self.client is not None:
            self.client.close()
