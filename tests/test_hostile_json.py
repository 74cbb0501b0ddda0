"""What the workbench writes or prints as JSON is standard JSON: a NaN or an infinity is null,
never a token a strict parser refuses. An efficiency that is None (a bound above the simulated
time) is printed as a word, not a traceback; a unit error in an experiment config keeps the
units module's reason beside the field's path; a run names a discarded bounds cache entry."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from guards import TINY_CELL as TINY
from workbench.plugin import call
from workbench.cli import main

NAN, INF = float("nan"), float("inf")


def _refuse(token: str):
    raise ValueError(f"non-standard JSON token {token}")


def strict(text: str):
    """``text`` parsed as standard JSON: NaN / Infinity / -Infinity raise."""
    return json.loads(text, parse_constant=_refuse)


def test_the_strict_parser_refuses_the_tokens():
    for text in ("NaN", "[Infinity]", '{"a": -Infinity}'):
        with pytest.raises(ValueError, match="non-standard"):
            strict(text)


def test_fastjson_text_writes_null_for_every_non_finite_value():
    import numpy as np

    from workbench.util import fastjson

    value = {"a": NAN, "b": [INF, -INF, (1.5, np.float64("nan"))], "c": {"d": np.float32("inf")}, "e": 2}
    assert strict(fastjson.text(value, indent=1, sort_keys=True)) == {"a": None, "b": [None, None, [1.5, None]],
                                                                     "c": {"d": None}, "e": 2}


# ------------------------------------------------------------------ shared inputs
@pytest.fixture(scope="module")
def algo(tmp_path_factory) -> Path:
    """ring's All-Gather on ring:4 at 1 MB, saved as an algorithm file."""
    from workbench.model.collective import make_collective
    from workbench.plugin.registry import Problem, get_formulation
    from workbench.topology import build

    path = tmp_path_factory.mktemp("algo") / "ring.json"
    result = call.synthesize(get_formulation("ring"), Problem(build("ring:4"), make_collective("allgather", 4), 1e6),
                                                time_limit=10, seed=0)
    result.algorithms[0].save(str(path))
    return path




@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A finished run of TINY (copied by each test that changes it)."""
    base = tmp_path_factory.mktemp("run")
    (base / "exp.yaml").write_text(TINY)
    out = base / "run"
    assert main(["run", str(base / "exp.yaml"), "--out", str(out), "--jobs", "1", "--no-figures"]) == 0
    return out


def _copy_run(run: Path, tmp_path: Path) -> Path:
    config = tmp_path / "exp.yaml"
    config.write_text(TINY)
    out = tmp_path / "run"
    shutil.copytree(run, out)
    return out


def _inflated_bounds(monkeypatch, **changes):
    """``workbench.bounds.problem_bounds`` returning the real bounds with ``changes`` applied."""
    import workbench.bounds as bounds_module

    real = bounds_module.problem_bounds

    def fake(*args, **kwargs):
        bounds = real(*args, **kwargs)
        return replace(bounds, notes=dict(bounds.notes), **{k: (v(bounds) if callable(v) else v)
                                                             for k, v in changes.items()})

    monkeypatch.setattr(bounds_module, "problem_bounds", fake)


# ------------------------------------------------------------------ writers
def test_rebound_rewrites_old_non_finite_tokens_as_null(finished_run, tmp_path, capsys):
    out = _copy_run(finished_run, tmp_path)
    (row,) = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    row["claimed_time"], row["ideal_dims"] = NAN, INF
    (out / "rows.jsonl").write_text(json.dumps(row) + "\n")  # an old file: NaN and Infinity tokens
    assert "NaN" in (out / "rows.jsonl").read_text()
    assert main(["rebound", str(out)]) == 0
    lines = (out / "rows.jsonl").read_text().splitlines()
    (fresh,) = [strict(line) for line in lines]
    assert fresh["claimed_time"] is None and fresh["ideal_dims"] is None
    assert fresh["collective_time"] == row["collective_time"]


def test_simulate_json_prints_null_for_an_infinite_bound_and_a_nan(algo, monkeypatch, capsys):
    _inflated_bounds(monkeypatch, injection=INF, rs_ag_throughput=NAN)
    assert main(["simulate", str(algo), "--json"]) == 0
    data = strict(capsys.readouterr().out)
    assert data["bound"] is None and data["efficiency"] is None and data["rs_ag_throughput"] is None
    assert data["collective_time"] > 0


def test_bounds_json_prints_null_for_an_infinity(monkeypatch, capsys):
    _inflated_bounds(monkeypatch, injection=INF, rs_ag_throughput=NAN)
    assert main(["bounds", "--topology", "ring:4", "--collective", "allgather", "--size", "1MB", "--json"]) == 0
    data = strict(capsys.readouterr().out)
    assert data["injection"] is None and data["best"] is None and data["rs_ag_throughput"] is None


def test_verify_json_prints_standard_json(algo, monkeypatch, capsys):
    from workbench.checking.verify import VerifyReport

    real = VerifyReport.to_dict
    monkeypatch.setattr(VerifyReport, "to_dict", lambda self: {**real(self), "seconds": NAN})
    assert main(["verify", str(algo), "--json"]) == 0
    data = strict(capsys.readouterr().out)
    assert data["valid"] is True and data["seconds"] is None


def _infinite_link(topology):
    """``topology`` with its first link's bandwidth made infinite after validation (a writer's input
    that a file could never give)."""
    first = replace(topology.links[0], bandwidth=INF)
    topology.links = (first, *topology.links[1:])
    return topology


def test_a_topology_file_and_topology_json_hold_null_for_an_infinity(tmp_path, monkeypatch, capsys):
    import workbench.cli.files as files
    from workbench.topology import build

    path = tmp_path / "t.json"
    _infinite_link(build("ring:4")).save(path)
    assert strict(path.read_text())["links"][0]["bandwidth"] is None
    monkeypatch.setattr(files, "topology_from_args", lambda *a: _infinite_link(build("ring:4")))
    assert main(["topology", "ring:4", "--json"]) == 0
    assert strict(capsys.readouterr().out)["links"][0]["bandwidth"] is None


def _plan_with_nan(monkeypatch):
    import workbench.mscclpp as mscclpp

    real = mscclpp.export_plan
    monkeypatch.setattr(mscclpp, "export_plan", lambda *a, **k: {**real(*a, **k), "note": NAN})


def test_an_exported_mscclpp_plan_holds_null_for_a_nan(algo, tmp_path, monkeypatch, capsys):
    _plan_with_nan(monkeypatch)
    out = tmp_path / "plan.json"
    assert main(["export", str(algo), "--format", "mscclpp", "-o", str(out)]) == 0
    assert strict(out.read_text())["note"] is None


def test_tune_summary_and_plans_hold_null_for_non_finite_values(algo, tmp_path, monkeypatch, capsys):
    import workbench.cli.tune as tune

    def candidate(topology, kind, bucket, name, limit, out):
        return {"status": "feasible", "collective_time": 1e-3, "bound": INF, "efficiency": NAN,
                "algorithm_files": [str(algo)], "path": algo}

    monkeypatch.setattr(tune, "_run_candidate", candidate)
    _plan_with_nan(monkeypatch)
    out = tmp_path / "bundle"
    assert main(["tune", "--topology", "ring:4", "--collective", "allgather", "--sizes", "1MB..1MB",
                 "--formulations", "ring", "-o", str(out)]) == 0
    (row,) = strict((out / "summary.json").read_text())["buckets"]
    assert row["winner"] == "ring" and row["bound"] is None and row["efficiency"] is None
    (plan,) = (out / "mscclpp").iterdir()
    assert strict(plan.read_text())["note"] is None


def test_libra_json_prints_null_for_non_finite_values(monkeypatch, capsys):
    from formulations.libra import Libra

    stats = {"bandwidth_gbps": [INF, 1.0], "speedup": NAN, "perf_per_cost_gain": -INF}
    result = SimpleNamespace(stats=stats, time=INF, cost=NAN, status="infeasible")
    monkeypatch.setattr(Libra, "synthesize", lambda self, problem, **kwargs: result)
    assert main(["libra", "--network", "n.yaml", "--workload", "w.txt", "--communicator", "c.yaml",
                 "--cost", "cost.yaml", "--budget", "100GB/s", "--json"]) == 0
    data = strict(capsys.readouterr().out)
    assert data["bandwidth"] == [None, 1.0] and data["time"] is None and data["cost"] is None
    assert data["speedup_vs_equal_bw"] is None and data["perf_per_cost_gain_vs_equal_bw"] is None


# ------------------------------------------------------------------ an efficiency that is None
def test_simulate_names_a_bound_above_the_simulated_time(algo, monkeypatch, capsys):
    _inflated_bounds(monkeypatch, injection=lambda b: 50 * b.best)  # a bug in the bounds
    assert main(["simulate", str(algo)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    (line,) = [l for l in out.splitlines() if "efficiency" in l]
    assert "efficiency -" in line and "above the simulated time" in line and "bounds bug" in line


def test_synth_names_a_bound_above_the_simulated_time(tmp_path, monkeypatch, capsys):
    import workbench.run.monitor as monitor

    fields = {"status": "feasible", "solver_status": "optimal", "synthesis_seconds": 0.01,
              "collective_time": 1e-4, "algbw": 10.0, "busbw": 7.5, "bound": 1e-2, "bound_exact": False,
              "efficiency": None, "algorithm_files": []}
    monkeypatch.setattr(monitor, "prestart", lambda: SimpleNamespace(close=lambda: None))
    monkeypatch.setattr(monitor, "execute", lambda request, **kwargs: dict(fields))
    assert main(["synth", "ring", "--topology", "ring:4", "--collective", "allgather", "--size", "1MB",
                 "-o", str(tmp_path / "a.json")]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    (line,) = [l for l in out.splitlines() if l.startswith("efficiency")]
    assert "10 ms" in line and "above the simulated time" in line and "bounds bug" in line


# ------------------------------------------------------------------ a unit error in a config
@pytest.mark.parametrize("field, value, reason", [
    ("bandwidth", "5gb/s", "ambiguous (bits or bytes?)"),
    ("alpha", "1e-300s", "out of range"),
])
def test_a_unit_error_in_a_config_keeps_the_reason(tmp_path, capsys, field, value, reason):
    config = tmp_path / "exp.yaml"
    config.write_text(TINY.replace('["ring:4"]', f'[{{spec: "ring:4", {field}: "{value}"}}]'))
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"grid.topologies[0].{field}: " in err[0] and value in err[0] and reason in err[0]
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------ a discarded cache entry
def test_a_run_names_a_discarded_cache_entry_on_its_progress(finished_run, tmp_path, capsys):
    out = _copy_run(finished_run, tmp_path)
    (entry,) = sorted((out / "bounds").glob("*.json"))
    data = json.loads(entry.read_text())
    for key in ("injection", "latency", "cut", "flow_lp", "optimum", "splitting_cut", "gossip", "alpha_beta"):
        if isinstance(data.get(key), (int, float)):
            data[key] *= 100  # above every simulated time
    entry.write_text(json.dumps(data))
    (out / "rows.jsonl").unlink()  # the cell runs again and reads the entry
    capsys.readouterr()
    assert main(["run", str(tmp_path / "exp.yaml"), "--out", str(out), "--jobs", "1", "--no-figures"]) == 0
    err = capsys.readouterr().err.splitlines()
    named = [line for line in err if str(entry) in line]
    assert len(named) == 1 and "discarded" in named[0], err
