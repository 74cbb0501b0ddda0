"""The experiment runner end to end: CLI, isolation, limits, resumability, reports, Dask."""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.plugin import call
from workbench.cli import main
from workbench.model.collective import make_collective
from workbench.plugin.registry import Problem, get_formulation
from workbench.checking.simulate import simulate
from workbench.topology import build

HERE = Path(__file__).resolve().parent

TINY = """
name: tiny
description: Tiny experiment for the tests
time_limit: 30s
seeds: [0, 1]
grid:
  topologies:
    - {spec: "ring:4", label: R4}
    - {spec: "rfs:2x2x2", bandwidth: [200GB/s, 100GB/s, 50GB/s], label: RFS8}
  collectives: [allgather, allreduce]
  sizes: [1MB]
  formulations:
    - {name: bfs-trees, label: Trees}
table: {rows: topology, columns: formulation, value: collective_time}
paper:
  unit: us
  values:
    - {row: "R4 / allgather", column: Trees, value: 100.0}
"""


def write(tmp_path: Path, text: str, name: str = "exp.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def rows_of(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "rows.jsonl").read_text().splitlines() if line.strip()]


def test_tiny_experiment_end_to_end(tmp_path, capsys):
    config = write(tmp_path, TINY)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--jobs", "2"]) == 0
    rows = rows_of(out)
    assert len(rows) == 2 * 2 * 2
    formulation = get_formulation("bfs-trees")
    for row in rows:
        assert row["status"] == "feasible" and row["cell_id"]
        assert row["versions"]["python"] and row["host"]
        topo = build(row["topology_source"], bandwidth=[200e9, 100e9, 50e9] if row["topology"] == "RFS8" else None)
        problem = Problem(topo, make_collective(row["collective"], topo.num_npus, 1), 1e6)
        algorithm = call.synthesize(formulation, problem, time_limit=10, seed=row["seed"]).algorithms[0]
        expected = simulate(algorithm)
        assert row["collective_time"] == pytest.approx(expected.collective_time, rel=1e-12)
        assert row["algbw"] == pytest.approx(expected.algbw / 1e9)
        assert 0 < row["efficiency"] <= 1
    with open(out / "table.csv") as handle:
        table = {(r["row"], r["column"]): r for r in csv.DictReader(handle)}
    for row in rows:
        cell = table[(f"{row['topology']} / {row['collective']}", "Trees")]
        same = [r["collective_time"] for r in rows if (r["topology"], r["collective"]) == (row["topology"], row["collective"])]
        assert float(cell["ours"]) == pytest.approx(sorted(same)[len(same) // 2] if len(same) % 2 else sum(same) / 2)
    paper_cell = table[("R4 / allgather", "Trees")]
    assert float(paper_cell["paper"]) == pytest.approx(100e-6)
    assert float(paper_cell["ratio"]) == pytest.approx(float(paper_cell["ours"]) / 100e-6)
    markdown = (out / "table.md").read_text()
    assert "geomean" in markdown and "ours / paper" in markdown
    assert (out / "figures" / "synthesis_vs_time.png").exists()
    assert (out / "figures" / "link_heatmap.png").exists()
    # a second run finds everything finished and runs nothing
    capsys.readouterr()
    assert main(["run", str(config), "--out", str(out)]) == 0
    assert len(rows_of(out)) == 8
    assert "8 finished cell(s) found" in capsys.readouterr().err


def test_report_ignores_rows_of_cells_no_longer_in_the_config(tmp_path):
    config = write(tmp_path, TINY)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--jobs", "2"]) == 0
    before = (out / "table.csv").read_text()
    stale = dict(rows_of(out)[0], cell_id="Trees:stale", collective_time=1.0, seed=7)
    with open(out / "rows.jsonl", "a") as handle:  # a row left by an earlier version of the config
        handle.write(json.dumps(stale) + "\n")
    assert main(["report", str(out), "--no-figures"]) == 0
    assert (out / "table.csv").read_text() == before


SLOW = """
name: slow
time_limit: 60s
grid:
  topologies: ["ring:3", "ring:4", "ring:5", "ring:6"]
  collectives: [allgather]
  sizes: [1MB]
  formulations:
    - {name: "cell_formulations:Slow", label: Slow, params: {delay: 1.5}}
"""


def test_killed_parent_resumes_with_every_cell_exactly_once(tmp_path):
    config = write(tmp_path, SLOW)
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, "-m", "workbench", "run", str(config), "--out", str(out), "--no-figures"]
    parent = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows_path = out / "rows.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if rows_path.exists() and rows_path.read_text().count("\n") >= 1:
            break
        time.sleep(0.05)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    done_before = len(rows_of(out))
    assert 1 <= done_before < 4
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    rows = rows_of(out)
    ids = [r["cell_id"] for r in rows]
    assert len(ids) == 4 and len(set(ids)) == 4
    assert all(r["status"] == "feasible" for r in rows)


def test_partial_last_line_is_repaired(tmp_path):
    from workbench.run.runner import ResultStore

    store = ResultStore(tmp_path)
    store.append({"cell_id": "a", "status": "feasible"})
    with open(store.path, "a") as handle:
        handle.write('{"cell_id": "b", "sta')  # a crash mid-write
    store = ResultStore(tmp_path)
    store.append({"cell_id": "c", "status": "feasible"})
    assert [r["cell_id"] for r in store.rows()] == ["a", "c"]


LIMITS = """
name: limits
time_limit: 2s
grid:
  topologies: ["ring:4"]
  collectives: [allgather]
  sizes: [1MB]
  formulations:
    - {name: "cell_formulations:Sleeper", label: Sleeper}
    - {name: "cell_formulations:Raiser", label: Raiser}
    - {name: "cell_formulations:Aborter", label: Aborter}
    - {name: bfs-trees, label: Trees}
"""


def test_timeout_error_and_abort_are_recorded_and_the_run_continues(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    config = write(tmp_path, LIMITS)
    out = tmp_path / "run"
    started = time.monotonic()
    assert main(["run", str(config), "--out", str(out), "--jobs", "2", "--no-figures"]) == 0
    elapsed = time.monotonic() - started
    rows = {r["formulation"]: r for r in rows_of(out)}
    sleeper = rows["Sleeper"]
    assert sleeper["status"] == "timeout"
    assert sleeper["collective_time"] is not None and sleeper["claimed_time"] == 1.0  # the incumbent
    assert sleeper["wall_seconds"] < 2 + 10
    assert rows["Raiser"]["status"] == "error" and "boom from the formulation" in rows["Raiser"]["message"]
    assert rows["Aborter"]["status"] == "error" and "SIGABRT" in rows["Aborter"]["message"]
    assert rows["Trees"]["status"] == "feasible"
    assert elapsed < 60


@pytest.mark.parametrize("text, fragment", [
    (TINY.replace("name: bfs-trees", "name: no-such-method"),
     "grid.formulations[0].name: unknown formulation 'no-such-method'"),
    (TINY.replace("time_limit: 30s", "time_limit: soon"), "time_limit: expected a duration like '30s'"),
    (TINY.replace("{name: bfs-trees, label: Trees}", "{name: bfs-trees, label: Trees, params: {time_limit: later}}"),
     "grid.formulations[0].params.time_limit: expected a duration like '30s'"),
    (TINY.replace("  sizes: [1MB]\n", ""), "grid.sizes: missing required key"),
    (TINY.replace("name: tiny\n", ""), "name: missing required key"),
    (TINY.replace("collectives: [allgather, allreduce]", "collectives: [allgather, allreduce"), "YAML syntax error"),
    (TINY.replace('spec: "ring:4"', 'spec: "ring:x"'), "grid.topologies[0]"),
    (TINY.replace("sizes: [1MB]", "sizes: [big]"), "grid.sizes[0]: expected a size"),
    (TINY + "\nbogus: 1\n", "bogus: unknown key"),
])
def test_malformed_configs_give_one_line_and_exit_2(tmp_path, capsys, text, fragment):
    config = write(tmp_path, text)
    code = main(["run", str(config), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert str(config) in err and fragment in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "run" / "rows.jsonl").exists()


def test_missing_config_file(tmp_path, capsys):
    assert main(["run", str(tmp_path / "none.yaml")]) == 2
    assert "no such experiment file" in capsys.readouterr().err


def test_quick_shrinks_the_grid(tmp_path):
    from workbench.config.experiment import load_experiment

    config = write(tmp_path, TINY + "quick: {topologies: [R4], time_limit: 5s, seeds: [0]}\n")
    full, quick = load_experiment(config), load_experiment(config, quick=True)
    assert len(full.cells()) == 8 and len(quick.cells()) == 2
    assert quick.time_limit == 5.0


DESIGN = """
name: designed
time_limit: 30s
grid:
  designs:
    - {name: split, formulation: "cell_formulations:EvenSplit",
       problem: {dimensions: [{kind: ring, size: 2}, {kind: switch, size: 4}], constraints: {total_bandwidth: 300e9}}}
  topologies:
    - {from: split, builder: "md:R2,S4", expand: per-npu, label: designed}
  collectives: [allgather]
  sizes: [8MB]
  formulations: [bfs-trees]
"""


def test_design_cells_feed_topologies(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    config = write(tmp_path, DESIGN)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--no-figures"]) == 0
    rows = rows_of(out)
    design = next(r for r in rows if r["kind"] == "design")
    schedule = next(r for r in rows if r["kind"] == "schedule")
    assert design["bandwidths"] == [150e9, 150e9]
    topo = build("md:R2,S4", bandwidth=[150e9, 150e9])  # ring of 2: one link carries the whole B
    problem = Problem(topo, make_collective("allgather", 8), 8e6)
    algorithm = call.synthesize(get_formulation("bfs-trees"), problem, time_limit=5, seed=0).algorithms[0]
    assert schedule["collective_time"] == pytest.approx(simulate(algorithm).collective_time)


# ------------------------------------------------------------------------------ synth
def test_synth_writes_the_algorithm_with_provenance(tmp_path, capsys):
    target = tmp_path / "ag.json"
    code = main(["synth", "bfs-trees", "--topology", "torus:3x3", "--collective", "allgather", "--size", "9MB",
                 "--seed", "3", "-o", str(target)])
    out = capsys.readouterr().out
    assert code == 0 and "feasible" in out and "collective time" in out
    data = json.loads(target.read_text())
    assert data["meta"]["status"] == "feasible" and data["meta"]["seed"] == 3
    assert data["meta"]["synthesis_seconds"] >= 0 and "claimed_time" in data["meta"]
    assert main(["verify", str(target)]) == 0


def test_synth_custom_demand(tmp_path, capsys):
    demand = tmp_path / "demand.yaml"
    demand.write_text("matrix: [[0, 2, 0], [0, 0, 1], [1, 0, 0]]\n")
    target = tmp_path / "custom.json"
    code = main(["synth", "bfs-trees", "--topology", "ring:3", "--demand", str(demand), "--size", "4MB",
                 "-o", str(target)])
    assert code == 0
    data = json.loads(target.read_text())
    assert data["collective"]["kind"] == "custom" and len(data["collective"]["pre"]) == 4
    assert data["chunk_bytes"] == 1e6


def test_synth_timeout_and_infeasible_have_distinct_messages(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    # 3 s: the child must start and report its incumbent first, which on a loaded machine can take 1 s
    code = main(["synth", "cell_formulations:Sleeper", "--topology", "ring:4", "--collective", "allgather",
                 "--size", "4MB", "--time-limit", "3s", "-o", str(tmp_path / "t.json")])
    err = capsys.readouterr().err
    assert code == 4 and "timed out after 3 s; its best algorithm was written" in err, err
    assert (tmp_path / "t.json").exists()
    code = main(["synth", "cell_formulations:Impossible", "--topology", "ring:4", "--collective", "allgather",
                 "--size", "4MB", "-o", str(tmp_path / "i.json")])
    err = capsys.readouterr().err
    assert code == 3 and "infeasible:" in err and "no schedule in 0 steps" in err


@pytest.mark.parametrize("argv, fragment", [
    (["synth", "nope", "--topology", "ring:4", "--collective", "allgather", "--size", "1MB", "-o", "x.json"],
     "unknown formulation 'nope'"),
    (["synth", "bfs-trees", "--topology", "ring:4", "--collective", "allgather", "--size", "lots", "-o", "x.json"],
     "cannot parse size 'lots'"),
    (["synth", "bfs-trees", "--topology", "ring:4", "--collective", "allsum", "--size", "1MB", "-o", "x.json"],
     "unknown collective"),
    (["synth", "bfs-trees", "--topology", "ring:4", "--size", "1MB", "-o", "x.json"], "--collective"),
    (["synth", "bfs-trees", "--topology", "ring:4", "--collective", "allgather", "--size", "1MB"], "-o/--output"),
    (["synth", "bfs-trees", "--topology", "ring:4", "--demand", "missing.yaml", "--size", "1MB", "-o", "x.json"],
     "missing.yaml: no such file"),
    (["run", "exp.yaml", "--jobs", "0"], "--jobs"),
    (["report", "/no/such/folder"], "no such run folder"),
])
def test_synth_and_run_bad_arguments(tmp_path, capsys, monkeypatch, argv, fragment):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, TINY)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------------------ Dask
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def dask_cluster(tmp_path):
    pytest.importorskip("distributed")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = Path(sys.executable).with_name("dask")
    base = [str(dask)] if dask.exists() else [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    logs = open(tmp_path / "dask.log", "w")
    scheduler = subprocess.Popen(base + ["scheduler", "--host", "127.0.0.1", "--port", str(port),
                                         "--dashboard-address", ":0", "--no-show"],
                                 stdout=logs, stderr=logs, cwd=tmp_path)
    worker = subprocess.Popen(base + ["worker", address, "--host", "127.0.0.1", "--nworkers", "1", "--nthreads", "2",
                                      "--no-nanny", "--dashboard-address", ":0"],
                              stdout=logs, stderr=logs, cwd=tmp_path)
    try:
        from distributed import Client

        deadline = time.monotonic() + 60
        while True:
            try:
                with Client(address, timeout="5s") as client:
                    client.wait_for_workers(1, timeout=30)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        yield address
    finally:
        for process in (worker, scheduler):
            process.terminate()
        for process in (worker, scheduler):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        logs.close()


def test_dask_scheduler_gives_the_same_results_as_local_jobs(tmp_path, dask_cluster):
    config = write(tmp_path, TINY)
    local, remote = tmp_path / "local", tmp_path / "remote"
    assert main(["run", str(config), "--out", str(local), "--jobs", "2", "--no-figures"]) == 0
    assert main(["run", str(config), "--out", str(remote), "--scheduler", dask_cluster, "--no-figures"]) == 0
    def key(row):
        return row["cell_id"]
    a = {key(r): r for r in rows_of(local)}
    b = {key(r): r for r in rows_of(remote)}
    assert set(a) == set(b) and len(a) == 8
    for cell_id in a:
        assert a[cell_id]["status"] == b[cell_id]["status"]
        assert a[cell_id]["collective_time"] == b[cell_id]["collective_time"]
        assert a[cell_id]["algbw"] == b[cell_id]["algbw"]


def test_unreachable_scheduler_is_a_clear_error(tmp_path, capsys, monkeypatch):
    from workbench.run import runner

    monkeypatch.setattr(runner, "SCHEDULER_CONNECT_SECONDS", 2.0)  # the same error, sooner
    config = write(tmp_path, TINY)
    code = main(["run", str(config), "--out", str(tmp_path / "r"), "--scheduler", f"tcp://127.0.0.1:{_free_port()}"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot reach the Dask scheduler" in err


def test_ctrl_c_keeps_finished_rows_and_the_next_run_finishes(tmp_path):
    config = write(tmp_path, SLOW)
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, "-m", "workbench", "run", str(config), "--out", str(out), "--no-figures"]
    # a shell's background job starts with SIGINT ignored, and Python then keeps it ignored: restore it
    parent = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    rows_path = out / "rows.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (rows_path.exists() and rows_path.read_text().count("\n") >= 1):
        time.sleep(0.05)
    parent.send_signal(signal.SIGINT)
    _, err = parent.communicate(timeout=60)
    assert parent.returncode == 130
    assert "interrupted" in err and "Traceback" not in err
    before = rows_of(out)
    assert 1 <= len(before) < 4
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    ids = [r["cell_id"] for r in rows_of(out)]
    assert len(ids) == 4 and len(set(ids)) == 4


EVALUATION_LIMIT = """
name: evaluation_limit
time_limit: 2s
evaluation: {evaluation_time_limit: 1ms}
grid:
  topologies: ["ring:64"]
  collectives: [allgather]
  sizes: [64MB]
  formulations:
    - {name: "cell_formulations:Sleeper", label: Sleeper}
"""


def test_a_timed_out_incumbent_is_evaluated_under_the_evaluation_limit(tmp_path, monkeypatch):
    """Verifying and simulating the incumbent of a killed cell runs in a child of its own, bounded."""
    monkeypatch.syspath_prepend(str(HERE))
    out = tmp_path / "run"
    assert main(["run", str(write(tmp_path, EVALUATION_LIMIT)), "--out", str(out), "--no-figures"]) == 0
    (row,) = rows_of(out)
    assert row["status"] == "timeout" and row.get("collective_time") is None
    assert "the incumbent was not evaluated: verifying and simulating exceeded 0.001 s" in row["message"]


def test_synth_counts_its_time_limit_from_the_command_start(tmp_path, monkeypatch, capsys):
    """Pre-checks use up the limit: with 10 s already gone, a 12 s limit leaves the Sleeper 2 s."""
    import workbench.cli.synth as cli_synth

    monkeypatch.syspath_prepend(str(HERE))
    real_time = time.time
    monkeypatch.setattr(cli_synth, "_command_start", lambda entered: real_time() - 10.0)
    started = time.monotonic()
    code = main(["synth", "cell_formulations:Sleeper", "--topology", "ring:4", "--collective", "allgather",
                 "--size", "4MB", "--time-limit", "12s", "-o", str(tmp_path / "t.json")])
    elapsed = time.monotonic() - started
    assert code == 4 and (tmp_path / "t.json").exists()
    # killed at command start + limit + grace (about 4 s from here), not 12 s after the child started
    assert elapsed < 10.0
    assert "timed out" in capsys.readouterr().err
