"""``workbench run``: the run folder (resumable fresh runs), its lock, and the report afterwards."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.cli.common import UsageError
from workbench.util import fastjson
from workbench.util.units import format_time
from workbench.reports import row_keys as R

__all__ = ["cmd_run"]


def _resume_command(args: argparse.Namespace, folder: Path) -> str:
    """The command that finishes this run (a fresh run is resumed by the same command)."""
    import shlex

    words = ["workbench", "run", str(args.config)]
    if args.quick:
        words.append("--quick")
    if args.fresh:
        words.append("--fresh")
    if args.out:
        words += ["--out", str(args.out)]
    if args.results_dir != "results":
        words += ["--results-dir", str(args.results_dir)]
    if args.jobs != 1:
        words += ["--jobs", str(args.jobs)]
    return " ".join(shlex.quote(w) for w in words)


def _run_folder(args: argparse.Namespace, experiment) -> Path:
    import time as _time

    from workbench.util import size_guard
    from workbench.util.safe_load import read_input

    if args.out:
        return Path(args.out)
    suffix = "-quick" if args.quick else ""
    root = Path(args.results_dir)
    if args.fresh:
        config_text = read_input(args.config, "experiment file", UsageError, size_guard.BYTES_PER_YAML_BYTE)
        unfinished = None if args.new else _unfinished_fresh_run(root / "runs", f"{experiment.name}{suffix}",
                                                                  config_text, experiment)
        if unfinished is not None:
            print(f"resuming the unfinished fresh run in {unfinished} (--new starts another)", file=sys.stderr)
            return unfinished
        return root / "runs" / f"{experiment.name}{suffix}-{_time.strftime('%Y%m%d-%H%M%S')}"
    return root / f"{experiment.name}{suffix}"


def _unfinished_fresh_run(runs: Path, prefix: str, config_text: str, experiment) -> Path | None:
    """The newest ``runs/<prefix>-<time>/`` with this config snapshot and cells still to run."""
    import re

    from workbench.reports.results import ResultStore
    from workbench.run.folder_files import check_run_folder
    from workbench.util.files import OutputError

    wanted = experiment.cell_ids()
    pattern = re.compile(re.escape(prefix) + r"-\d{8}-\d{6}")
    candidates = sorted((p for p in runs.glob(f"{prefix}-*") if pattern.fullmatch(p.name)), reverse=True) \
        if runs.is_dir() else []
    for folder in candidates:
        snapshot = folder / "config.yaml"
        try:
            check_run_folder(folder, UsageError)
            if _snapshot_text(snapshot) != config_text:
                continue
            done = {r.get(R.CELL_ID) for r in ResultStore(folder, read_only=True).rows()}  # none yet: empty
        except (UsageError, OutputError):  # a folder that is not a run's (a link, a FIFO in it): not resumed
            continue
        if wanted - done:
            return folder
    return None


def _snapshot_text(snapshot: Path) -> str | None:
    """A run folder's config snapshot, read as a run-folder file (regular, sized); None when missing."""
    from workbench.util import size_guard
    from workbench.util.safe_load import read_input

    if not snapshot.exists():
        return None
    return read_input(snapshot, "config snapshot", UsageError, size_guard.BYTES_PER_YAML_BYTE)


def _check_results_dir(results_dir: str) -> None:
    """``--results-dir`` is read (reference runs) even when ``--out`` names the run folder: it
    must not be a file; the run folder's own check covers writing into it."""
    from workbench.util.files import OutputError

    path = Path(results_dir)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{path}: is not a folder (--results-dir)")


def cmd_run(args: argparse.Namespace) -> int:
    """``workbench run``: run an experiment config into its run folder and write the report."""
    from workbench.config.experiment import load_experiment
    from workbench.util.files import check_output_folder
    from workbench.run.folder_files import check_run_folder
    from workbench.run.lock import RunLock, RunLockError

    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    experiment = load_experiment(args.config, quick=args.quick)
    _check_results_dir(args.results_dir)
    folder = check_output_folder(_run_folder(args, experiment))  # before any cell runs
    check_run_folder(folder, UsageError)  # a FIFO, device or link among its files: refused unopened
    folder.mkdir(parents=True, exist_ok=True)
    lock = RunLock(folder)
    try:
        lock.acquire()
    except RunLockError as exc:
        raise UsageError(str(exc)) from None
    try:
        return _run_locked(args, experiment, folder)
    finally:
        lock.release()


def _run_locked(args: argparse.Namespace, experiment, folder) -> int:
    from pathlib import Path

    from workbench.util import size_guard
    from workbench.util.files import write_atomic
    from workbench.util.safe_load import read_input
    from workbench.run.folder import compare_runs, load_run, write_report
    from workbench.reports.results import ResultStore
    from workbench.run.runner import run_experiment

    config_text = read_input(args.config, "experiment file", UsageError, size_guard.BYTES_PER_YAML_BYTE)
    ResultStore(folder).rows()  # its rows sized and its tail mended before anything is written or run
    snapshot = folder / "config.yaml"
    if snapshot.exists() and _snapshot_text(snapshot) != config_text:
        print(f"note: {args.config} differs from the snapshot in {folder}; cells that changed run anew",
              file=sys.stderr)
    write_atomic(snapshot, config_text)
    config_dir = Path(args.config).parent
    write_atomic(folder / "run.json", fastjson.text({"config": str(args.config), "quick": args.quick,
                                                     "config_dir": str(config_dir)}))
    cells = len(experiment.cells()) + len(experiment.designs)
    print(f"{experiment.name}: {cells} cell(s) -> {folder}", file=sys.stderr)
    print(_expected_time(Path(args.results_dir) / experiment.name, experiment, args.jobs), file=sys.stderr)
    try:
        summary = run_experiment(experiment, folder, jobs=args.jobs, scheduler=args.scheduler,
                                 retry_errors=args.retry_errors, resume_command=_resume_command(args, folder))
    except RuntimeError as exc:
        raise UsageError(str(exc)) from None
    if summary.interrupted:
        return 130
    table = write_report(folder, figures=not args.no_figures)
    print(table.read_text())
    reference = Path(args.results_dir) / experiment.name
    if args.fresh and (reference / "rows.jsonl").exists() and reference.resolve() != folder.resolve():
        if (reference / "config.yaml").exists():
            _, reference_rows = load_run(reference)
        else:  # read only: the reference may be a live run's folder
            reference_rows = ResultStore(reference, read_only=True).rows()
        print(compare_runs(ResultStore(folder, read_only=True).rows(), reference_rows, experiment))
    print(f"results: {folder}/table.md, table.csv, rows.jsonl, figures/", file=sys.stderr)
    return 0


def _expected_time(reference: Path, experiment, jobs: int) -> str:
    """An estimate from the committed reference run's cell times."""
    from workbench.reports.results import ResultStore

    if not (reference / "rows.jsonl").exists():
        return "expected run time: unknown (no reference results to estimate from)"
    wanted = experiment.cell_ids()
    seconds = [r.get(R.WALL_SECONDS) or 0.0 for r in ResultStore(reference, read_only=True).rows()
               if r.get(R.CELL_ID) in wanted]
    if not seconds:
        return "expected run time: unknown (the reference run has none of these cells)"
    estimate = sum(seconds) / max(1, min(jobs, len(seconds))) + 5
    missing = len(wanted) - len(seconds)
    text = f"expected run time: about {format_time(estimate)} with --jobs {jobs} (from the reference run in {reference})"
    return text + (f"; {missing} cell(s) have no reference time" if missing > 0 else "")


def _cmd_report(args: argparse.Namespace) -> int:
    """Write the report files under the folder's lock; a folder a live run holds is only read: its
    table is printed and nothing is written into it (the run writes its report when it ends)."""
    from workbench.util.files import check_output_folder
    from workbench.run.folder_files import check_run_folder
    from workbench.run.folder import render_report, write_report
    from workbench.run.lock import RunLock, RunLockError, describe_holder

    if Path(args.folder).exists():  # a missing one is the report's own one-line error
        check_output_folder(args.folder)
        check_run_folder(args.folder, UsageError)  # a FIFO, device or link among its files: refused unopened
    lock = RunLock(args.folder)
    try:
        lock.acquire()
    except RunLockError as exc:
        print(render_report(args.folder))
        print(f"{args.folder}: a run holds this folder ({describe_holder(exc.holder or {})}); the table was "
              f"printed and nothing was written into the folder", file=sys.stderr)
        return 0
    except OSError:
        pass  # no such folder, or one that cannot take a lock file: the report's own error follows
    try:
        table = write_report(args.folder, figures=not args.no_figures)
    finally:
        lock.release()
    print(table.read_text())
    return 0


def _cmd_rebound(args: argparse.Namespace) -> int:
    from workbench.util.files import check_output_folder
    from workbench.run.folder_files import check_run_folder
    from workbench.run.lock import RunLockError
    from workbench.run.rebound import rebound_run
    from workbench.reports.report import ReportError

    if Path(args.folder).exists():  # a missing one is the report's own one-line error
        check_output_folder(args.folder)
        check_run_folder(args.folder, UsageError)  # a FIFO, device or link among its files: refused unopened
    try:
        refreshed, kept = rebound_run(args.folder)
    except (ReportError, RunLockError) as exc:  # a live run's folder: exit 2 naming its host and PID
        raise UsageError(str(exc)) from None
    print(f"{args.folder}: bounds refreshed in {refreshed} row(s), {kept} left as they were; report rewritten")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``run``, ``report`` and ``rebound`` to the ``workbench`` parser."""
    p = sub.add_parser("run", help="run an experiment config (resumable)")
    p.add_argument("config", help="experiment YAML, e.g. experiments/tacos_table5.yaml")
    p.add_argument("--jobs", type=int, default=1, help="cells in parallel on this machine (default 1)")
    p.add_argument("--scheduler", help="address of a Dask scheduler, e.g. tcp://127.0.0.1:8786")
    p.add_argument("--quick", action="store_true", help="the config's reduced grid (its 'quick' section)")
    p.add_argument("--fresh", action="store_true",
                   help="compute into a folder under results/runs/ and compare with the committed reference; "
                        "the same command resumes the newest unfinished one with this config")
    p.add_argument("--new", action="store_true", help="with --fresh: always start a new folder")
    p.add_argument("--out", help="run folder (default results/<name>/, resumed if it exists)")
    p.add_argument("--results-dir", default="results", help="where run folders live (default results/)")
    p.add_argument("--retry-errors", action="store_true", help="run cells whose row says 'error' again")
    p.add_argument("--no-figures", action="store_true")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("report", help="write table.md, table.csv and figures for a run folder")
    p.add_argument("folder")
    p.add_argument("--no-figures", action="store_true")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("rebound", help="recompute a finished run's bounds (no synthesis) and rewrite its report")
    p.add_argument("folder")
    p.set_defaults(func=_cmd_rebound)
