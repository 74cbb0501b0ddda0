"""The experiment runner: isolated cells with hard limits, resumable rows, local or Dask execution.

Each cell runs in its own child process (``python -m workbench.cell``) watched by a monitor.
The formulation gets a time limit a little below the cell's; the monitor kills the child at the
cell's limit plus a short grace and records ``timeout`` with the best incumbent the child
forwarded (verified and simulated here). A crash (exception, signal, out of memory) becomes an
``error`` row with the message. Every synthesized algorithm is verified and simulated.

Rows are appended to ``rows.jsonl`` one line per cell with fsync; a re-run skips finished cells,
so an interrupted run (Ctrl-C, a killed parent) loses nothing that had finished.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import platform
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from workbench.experiment import Cell, DesignCell, Experiment

__all__ = ["ResultStore", "execute", "run_experiment", "evaluate_algorithms", "solver_time_limit",
           "environment_info", "RunSummary", "build_topology", "build_problem"]

GRACE_SECONDS = 2.0
LIFELINE_ENV = "WORKBENCH_LIFELINE_FD"  # the cell's end of the pipe that closes when its parent dies
STARTUP_LIMIT = 180.0
Send = Callable[[str, Any], None]


# ============================================================================ limits
def solver_time_limit(cell_limit: float) -> float:
    """The formulation's own limit: a little below the cell's, so it can stop and report first."""
    return max(0.5 * cell_limit, cell_limit - max(1.0, 0.05 * cell_limit))


# ============================================================================ building a cell's problem
def build_topology(topology: dict[str, Any]):
    from workbench.topology import load_topology, topology_from_dict

    if "doc" in topology:
        return topology_from_dict(topology["doc"], topology.get("label", "topology"))
    source = topology.get("spec") or topology.get("file")
    return load_topology(source, topology.get("alpha"), topology.get("bandwidth"))


def build_problem(cell: dict[str, Any]):
    from workbench.collective import make_collective
    from workbench.registry import Problem

    topology = build_topology(cell["topology"])
    spec = cell["collective"]
    if spec["kind"] == "custom":
        from workbench.collective import custom_collective

        collective = custom_collective(spec["ranks"], spec["pre"], spec["post"], spec.get("combining", False))
    else:
        collective = make_collective(spec["kind"], topology.num_npus, cell["chunks"], spec.get("root"))
    collective.check_reachable(topology)
    return Problem(topology, collective, cell["size_bytes"])


# ============================================================================ evaluation (shared)
def evaluate_algorithms(algorithms: list, problem, evaluation: dict[str, Any]) -> dict[str, Any]:
    """Verify and simulate every algorithm; the headline is the fastest simulated one.

    The bounds are those of the headline algorithm's own chunking (a Pareto search returns
    algorithms with different chunk sizes). Raises ``InvalidAlgorithm`` for an algorithm that does
    not implement the collective.
    """
    from workbench.bounds import lower_bounds, tacos_ideal
    from workbench.simulate import simulate
    from workbench.verify import verify

    options = {k: evaluation.get(k, d) for k, d in (("link_model", "pipelined"), ("order", "in-order"),
                                                    ("switch_model", "cut-through"))}
    entries = []
    best = None  # (algorithm, entry, simulation)
    for algorithm in algorithms:
        default = simulate(algorithm)
        verify(algorithm, simulation=default)
        result = default if options == default.options else simulate(algorithm, **options)
        entry = {"claimed_time": algorithm.meta.get("claimed_time"), "collective_time": result.collective_time,
                 "algbw": result.algbw / 1e9, "busbw": result.busbw / 1e9, "transfers": len(algorithm.transfers),
                 **{k: algorithm.meta.get(k) for k in ("label", "steps", "rounds", "sccl_chunks")}}
        entries.append(entry)
        if best is None or result.collective_time < best[2].collective_time:
            best = (algorithm, entry, result)
    topology = problem.topology
    collective, chunk_bytes = (best[0].collective, best[0].chunk_bytes) if best else (problem.collective,
                                                                                        problem.chunk_bytes)
    bounds = lower_bounds(topology, collective, chunk_bytes, lp=bool(evaluation.get("lp_bound", True)),
                          lp_time_limit=60.0, lp_max_variables=400_000)
    ideal_dims = tacos_ideal(topology, collective, problem.size_bytes, "dimensions") if collective.num_ranks > 1 else None
    fields: dict[str, Any] = {"bound": bounds.best, "bound_exact": bounds.exact, "achievable": bounds.achievable,
                              "ideal": bounds.ideal, "ideal_dims": ideal_dims, "bounds": bounds.to_dict()}
    if best is None:
        return fields
    algorithm, entry, result = best
    fields.update({k: entry[k] for k in ("claimed_time", "collective_time", "algbw", "busbw", "transfers")})
    fields["algorithm_meta"] = {k: algorithm.meta[k] for k in ("label", "steps", "rounds", "sccl_chunks",
                                                               "latency_optimal", "bandwidth_optimal")
                                if k in algorithm.meta}
    fields["efficiency"] = bounds.efficiency(result.collective_time)
    fields["ideal_efficiency"] = (bounds.ideal / result.collective_time) if bounds.ideal else None
    fields["ideal_dims_efficiency"] = (ideal_dims / result.collective_time) if ideal_dims else None
    if len(entries) > 1:
        fields["algorithms"] = entries
    if len(topology.links) <= 20_000:
        fields["link_utilisation"] = [[l.src, l.dst, round(float(u), 6)]
                                      for l, u in zip(topology.links, result.link_utilisation())]
    return fields


def _problem_fields(problem) -> dict[str, Any]:
    return {"npus": problem.topology.num_npus, "links": len(problem.topology.links),
            "chunk_bytes": problem.chunk_bytes}


# ============================================================================ child side
def child_run_schedule(cell: dict[str, Any], send: Send) -> dict[str, Any]:
    from workbench.registry import resolve_formulation

    problem = build_problem(cell)
    formulation = resolve_formulation(cell["formulation"]["name"])
    params = {k: v for k, v in cell["formulation"].get("params", {}).items() if k != "time_limit"}
    send("ready", None)
    started = time.perf_counter()
    result = formulation.synthesize(problem, time_limit=solver_time_limit(cell["time_limit"]), seed=cell["seed"],
                                    on_incumbent=lambda algorithm: send("incumbent", algorithm), **params)
    seconds = time.perf_counter() - started
    summary = {"status": result.status, "synthesis_seconds": seconds, "stats": result.stats,
               "message": result.message, "claimed_times": result.claimed_times}
    send("synthesized", summary)
    fields = {**summary, **_problem_fields(problem)}
    fields.pop("claimed_times", None)
    if result.algorithms:
        from workbench.verify import InvalidAlgorithm

        try:
            fields.update(evaluate_algorithms(result.algorithms, problem, cell["evaluation"]))
        except InvalidAlgorithm as exc:
            fields.update(status="error", message=f"invalid algorithm: {exc}")
        if cell["evaluation"].get("save_algorithms") and cell.get("algorithm_path"):
            fields["algorithm_files"] = save_algorithms(result.algorithms, cell, fields["status"], seconds)
    return fields


def save_algorithms(algorithms: list, cell: dict[str, Any], status: str, seconds: float) -> list[str]:
    """Write each algorithm (one file per Pareto point next to the first) with provenance in meta."""
    path = Path(cell["algorithm_path"])
    written = []
    for index, algorithm in enumerate(algorithms):
        meta = algorithm.meta
        meta.setdefault("formulation", cell["formulation"]["name"])
        meta.setdefault("params", cell["formulation"].get("params", {}))
        meta.setdefault("claimed_time", None)
        meta.update(seed=cell["seed"], status=status, synthesis_seconds=seconds)
        target = path if index == 0 else path.with_name(f"{path.stem}.{index}{path.suffix}")
        algorithm.save(target)
        written.append(str(target))
    return written


def child_run_design(cell: dict[str, Any], send: Send) -> dict[str, Any]:
    from workbench.registry import DesignProblem, resolve_formulation

    formulation = resolve_formulation(cell["formulation"]["name"])
    problem_data = dict(cell["problem"])
    problem = DesignProblem(dimensions=problem_data.pop("dimensions", []),
                            workloads=problem_data.pop("workloads", []),
                            cost_model=problem_data.pop("cost_model", {}),
                            constraints=problem_data.pop("constraints", {}),
                            objective=problem_data.pop("objective", "performance"))
    params = {k: v for k, v in cell["formulation"].get("params", {}).items() if k != "time_limit"}
    send("ready", None)
    started = time.perf_counter()
    result = formulation.synthesize(problem, time_limit=solver_time_limit(cell["time_limit"]), seed=cell["seed"],
                                    **params)
    seconds = time.perf_counter() - started
    send("synthesized", {"status": result.status, "synthesis_seconds": seconds})
    return {"status": result.status, "synthesis_seconds": seconds, "bandwidths": list(result.bandwidths),
            "design_time": result.time, "cost": result.cost, "stats": result.stats, "message": result.message}


# ============================================================================ monitor side
_ENVIRONMENT: dict[str, Any] | None = None


def environment_info() -> dict[str, Any]:
    """Package and solver versions, git commit and host (cached)."""
    global _ENVIRONMENT
    if _ENVIRONMENT is None:
        import importlib.metadata

        versions = {"python": platform.python_version()}
        for package in ("collective-workbench", "numpy", "scipy", "networkx", "highspy", "pulp", "z3-solver",
                        "ortools", "distributed"):
            try:
                versions[package] = importlib.metadata.version(package)
            except importlib.metadata.PackageNotFoundError:
                pass
        commit = None
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    timeout=10, cwd=Path(__file__).resolve().parent).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            pass
        _ENVIRONMENT = {"versions": versions, "git_commit": commit, "host": socket.gethostname()}
    return _ENVIRONMENT


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([os.getcwd()] + paths))
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class _Child:
    """A running cell process and the thread that reads its messages."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.stderr = tempfile.TemporaryFile()
        # the lifeline: the child holds the read end and takes its process group down when it reads EOF,
        # which happens however this process ends (SIGKILL, the OOM killer, a batch scheduler), since
        # the kernel closes our write end then; a signal to the child on our death would not do (it
        # fires when the creating thread exits, and cells are started from worker threads)
        lifeline, self.lifeline = os.pipe()
        env = _child_env()
        env[LIFELINE_ENV] = str(lifeline)
        try:
            self.process = subprocess.Popen([sys.executable, "-m", "workbench.cell"], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=self.stderr, env=env,
                                            start_new_session=True, pass_fds=(lifeline,))
        finally:
            os.close(lifeline)
        self.messages: queue.Queue = queue.Queue()
        import pickle

        try:
            self.process.stdin.write(pickle.dumps(request))
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        from workbench.messages import read_message

        try:
            while True:
                message = read_message(self.process.stdout)
                if message is None:
                    break
                self.messages.put(message)
        except Exception as exc:  # a corrupt stream is reported as an error row
            self.messages.put(("error", f"unreadable message from the cell process: {exc}"))
        self.messages.put(("eof", None))

    def kill(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.process.kill()
        self.process.wait()

    def stderr_tail(self, lines: int = 3) -> str:
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:])

    def close(self) -> None:
        self.kill()
        self.stderr.close()
        if self.lifeline >= 0:
            os.close(self.lifeline)
            self.lifeline = -1


def execute(request: dict[str, Any], stop: threading.Event | None = None) -> dict[str, Any] | None:
    """Run one cell in a child process under its hard limit; return its row fields.

    Returns None when ``stop`` is set (the run was interrupted): an interrupted cell leaves no row.
    Runs anywhere: in the runner's threads or inside a Dask worker.
    """
    cell = request["cell"]
    limit = float(cell["time_limit"])
    evaluation_limit = float(cell.get("evaluation", {}).get("evaluation_time_limit", 600.0))
    started = time.time()
    child = _Child(request)
    incumbent = None
    phase = "startup"
    deadline = time.monotonic() + STARTUP_LIMIT
    fields: dict[str, Any] = {}
    try:
        while True:
            if stop is not None and stop.is_set():
                return None
            try:
                kind, payload = child.messages.get(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() < deadline:
                    continue
                child.kill()
                fields = _overrun(phase, limit, evaluation_limit, incumbent, request)
                break
            if kind == "ready":
                phase, deadline = "synthesis", time.monotonic() + limit + GRACE_SECONDS
                synthesis_started = time.monotonic()
            elif kind == "incumbent":
                incumbent = payload
            elif kind == "synthesized":
                phase, deadline = "evaluation", time.monotonic() + evaluation_limit
            elif kind == "result":
                fields = payload
                break
            elif kind == "error":
                message = payload["message"] if isinstance(payload, dict) else str(payload)
                fields = {"status": "error", "message": message}
                if phase == "synthesis":
                    fields["synthesis_seconds"] = time.monotonic() - synthesis_started
                break
            elif kind == "eof":
                code = child.process.wait()
                if code < 0:
                    why = f"cell process killed by {_signal_name(code)}"
                    if code == -signal.SIGKILL:
                        why += " (out of memory?)"
                else:
                    why = f"cell process exited with code {code} without a result"
                tail = child.stderr_tail()
                fields = {"status": "error", "message": why + (f": {tail}" if tail else "")}
                break
    finally:
        child.close()
    fields.setdefault("message", "")
    fields["wall_seconds"] = time.time() - started
    fields["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    return fields


def _overrun(phase: str, limit: float, evaluation_limit: float, incumbent, request) -> dict[str, Any]:
    if phase == "startup":
        return {"status": "error", "message": f"the cell process did not start within {STARTUP_LIMIT:.0f} s"}
    if phase == "evaluation":
        return {"status": "error", "message": f"verifying and simulating exceeded {evaluation_limit:g} s"}
    fields: dict[str, Any] = {"status": "timeout", "synthesis_seconds": limit,
                              "message": f"killed at the cell's time limit ({limit:g} s)"}
    if incumbent is None or request["kind"] != "schedule":
        fields["message"] += "; no incumbent was reported"
        return fields
    from workbench.verify import InvalidAlgorithm

    try:
        problem = build_problem(request["cell"])
        fields.update(_problem_fields(problem))
        fields.update(evaluate_algorithms([incumbent], problem, request["cell"]["evaluation"]))
        fields["message"] += "; best incumbent attached"
        cell = request["cell"]
        if cell["evaluation"].get("save_algorithms") and cell.get("algorithm_path"):
            fields["algorithm_files"] = save_algorithms([incumbent], cell, "timeout", limit)
    except InvalidAlgorithm as exc:
        fields["message"] += f"; the incumbent is invalid: {exc}"
    return fields


# ============================================================================ result store
class ResultStore:
    """``rows.jsonl``: one JSON object per finished cell, appended with fsync."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / "rows.jsonl"
        self._lock = threading.Lock()
        self._repair_tail()

    def _repair_tail(self) -> None:
        """Drop a partial last line left by a crash mid-write, so appends start on a fresh line."""
        if not self.path.exists():
            return
        with open(self.path, "rb+") as handle:
            data = handle.read()
            if data and not data.endswith(b"\n"):
                handle.truncate(data.rfind(b"\n") + 1)

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        rows = []
        for line in self.path.read_text().splitlines():
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return rows

    def append(self, row: dict[str, Any]) -> None:
        line = (json.dumps(row, default=_json_default, allow_nan=True) + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)


def _json_default(value: Any) -> Any:
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray):
            return value.tolist()
    except ImportError:
        pass
    return str(value)


# ============================================================================ progress
class Progress:
    """A bar with counts and ETA on a terminal; plain lines otherwise."""

    def __init__(self, total: int, stream=None) -> None:
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.started = time.monotonic()
        self._lock = threading.Lock()

    def update(self, description: str, row: dict[str, Any]) -> None:
        with self._lock:
            self.done += 1
            elapsed = time.monotonic() - self.started
            eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
            status = row.get("status", "?")
            time_text = ""
            if row.get("collective_time") is not None:
                from workbench.units import format_time

                time_text = f" {format_time(row['collective_time'])}"
            synth = row.get("synthesis_seconds")
            synth_text = f" (synthesis {synth:.3g} s)" if isinstance(synth, (int, float)) else ""
            if self.tty:
                width = 28
                filled = int(width * self.done / max(self.total, 1))
                bar = "#" * filled + "-" * (width - filled)
                self.stream.write(f"\r[{bar}] {self.done}/{self.total} cells  ETA {_duration(eta)}  "
                                  f"{description[:50]}: {status}{time_text}\x1b[K")
                if self.done == self.total:
                    self.stream.write("\n")
            else:
                self.stream.write(f"[{self.done}/{self.total}] {description}: {status}{time_text}{synth_text}"
                                  f"  (ETA {_duration(eta)})\n")
            self.stream.flush()

    def note(self, text: str) -> None:
        with self._lock:
            self.stream.write(("\n" if self.tty else "") + text + "\n")
            self.stream.flush()


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"


# ============================================================================ running an experiment
class RunSummary:
    def __init__(self, folder: Path, total: int, ran: int, skipped: int, interrupted: bool) -> None:
        self.folder, self.total, self.ran, self.skipped, self.interrupted = folder, total, ran, skipped, interrupted


def _schedule_row(cell: Cell, fields: dict[str, Any]) -> dict[str, Any]:
    row = {"cell_id": cell.cell_id, "experiment": cell.experiment, "kind": "schedule",
           "topology": cell.topology.get("label"),
           "topology_source": cell.topology.get("spec") or cell.topology.get("file") or cell.topology.get("from"),
           "collective": cell.collective["kind"], "root": cell.collective.get("root"),
           "size_bytes": cell.size_bytes, "chunks": cell.chunks, "formulation": cell.formulation["label"],
           "formulation_name": cell.formulation["name"], "params": cell.formulation.get("params", {}),
           "seed": cell.seed, "time_limit": cell.time_limit}
    row.update(fields)
    row.update(environment_info())
    return row


def _design_row(cell: DesignCell, fields: dict[str, Any]) -> dict[str, Any]:
    row = {"cell_id": cell.cell_id, "experiment": cell.experiment, "kind": "design", "design": cell.name,
           "formulation": cell.formulation["label"], "formulation_name": cell.formulation["name"],
           "params": cell.formulation.get("params", {}), "seed": cell.seed, "time_limit": cell.time_limit}
    row.update(fields)
    row.update(environment_info())
    return row


def _resolve_design_topology(topology: dict[str, Any], design_rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Turn ``{from: design, builder, expand}`` into a buildable topology with the design's bandwidths."""
    from workbench.topology import expand_per_npu

    row = design_rows.get(topology["from"])
    if row is None or row.get("status") not in ("optimal", "feasible") or not row.get("bandwidths"):
        status = row.get("status") if row else "not run"
        raise RuntimeError(f"design cell {topology['from']!r} has no bandwidths (status {status})")
    bandwidths = [float(b) for b in row["bandwidths"]]
    if topology["expand"] == "per-npu":
        bandwidths = expand_per_npu(topology["builder"], bandwidths)
    resolved = dict(topology)
    resolved.update(spec=topology["builder"], bandwidth=bandwidths)
    return resolved


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
    finished = {r["cell_id"] for r in existing if not (retry_errors and r.get("status") == "error")}
    designs = experiment.design_cells()
    cells = experiment.cells()
    todo_designs = [d for d in designs if d.cell_id not in finished]
    todo_cells = [c for c in cells if c.cell_id not in finished]
    total = len(todo_designs) + len(todo_cells)
    skipped = len(designs) + len(cells) - total
    progress = Progress(total, progress_stream)
    if skipped:
        progress.note(f"{skipped} finished cell(s) found in {store.path}; running the other {total}")
    stop = threading.Event()
    executor = _Executor(jobs, scheduler, stop)
    ran = 0
    try:
        for design, fields in executor.map(
                [(d, {"kind": "design", "cell": d.to_dict()}) for d in todo_designs]):
            row = _design_row(design, fields)
            store.append(row)
            progress.update(f"design {design.name}", row)
            ran += 1
        design_rows = {r["design"]: r for r in store.rows() if r.get("kind") == "design"}
        requests = []
        for cell in todo_cells:
            data = cell.to_dict()
            if "from" in cell.topology:
                try:
                    data["topology"] = _resolve_design_topology(cell.topology, design_rows)
                except RuntimeError as exc:
                    row = _schedule_row(cell, {"status": "error", "message": str(exc)})
                    store.append(row)
                    progress.update(cell.describe(), row)
                    ran += 1
                    continue
            if cell.evaluation.get("save_algorithms"):
                data["algorithm_path"] = str(Path(folder).resolve() / "algorithms" /
                                             f"{cell.cell_id.replace(':', '-')}.json")
            requests.append((cell, {"kind": "schedule", "cell": data}))
        for cell, fields in executor.map(requests):
            row = _schedule_row(cell, fields)
            store.append(row)
            progress.update(cell.describe(), row)
            ran += 1
    except KeyboardInterrupt:
        stop.set()
        executor.shutdown()
        again = f"`{resume_command}`" if resume_command else "the same command again"
        progress.note(f"interrupted: {ran} cell(s) finished this run and are saved in {store.path}; "
                      f"run {again} to finish the other {total - ran}")
        return RunSummary(Path(folder), total + skipped, ran, skipped, True)
    executor.shutdown()
    return RunSummary(Path(folder), total + skipped, ran, skipped, False)


class _Executor:
    """Runs requests on local threads (each watching a child process) or on a Dask cluster."""

    def __init__(self, jobs: int, scheduler: str | None, stop: threading.Event) -> None:
        self.stop = stop
        self.client = None
        self.pool = None
        if scheduler:
            try:
                from distributed import Client
            except ImportError:
                raise RuntimeError("--scheduler needs dask distributed: pip install 'collective-workbench[cluster]'")
            try:
                self.client = Client(scheduler, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise RuntimeError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
        else:
            self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs))

    def map(self, items: list[tuple[Any, dict[str, Any]]]) -> Iterable[tuple[Any, dict[str, Any]]]:
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
        futures = {self.pool.submit(execute, request, self.stop): key for key, request in items}
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

    def shutdown(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        if self.client is not None:
            self.client.close()
