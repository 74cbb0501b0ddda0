"""A bounds cache entry is not trusted over a verified schedule: a lower bound above the schedule's
simulated time is discarded (one stderr line naming the entry) and solved again; one that is still
above after a fresh solve is recorded in the row. No row is ``optimal`` because of such a bound,
and no efficiency is above 1."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import assume, given
from hypothesis import strategies as st

from workbench.bounds import TIGHT, Bounds, problem_bounds
from workbench.bounds.yardstick import settle_status
from guards import TINY_CELL as TINY
from workbench.cli import main
from workbench.model.collective import make_collective
from workbench.run import bounds_cache
from workbench.run.bounds_cache import bounds_from_dict, cache_key, cached_problem_bounds
from workbench.topology import build

OPTIONS = {"lp_time_limit": 30.0, "lp_max_variables": 400_000, "lp": True}
_NUMBERS = ("injection", "latency", "cut", "flow_lp", "optimum", "splitting_cut", "gossip", "alpha_beta")


def _inflate(path: Path, factor: float) -> None:
    """Multiply every bound of the entry at ``path`` by ``factor`` (a hand edit)."""
    data = json.loads(path.read_text())
    for key in _NUMBERS:
        if isinstance(data.get(key), (int, float)):
            data[key] *= factor
    path.write_text(json.dumps(data))


def _problem():
    """ring:4 All-Gather at 1 MB and its entry's file name."""
    topology, collective = build("ring:4"), make_collective("allgather", 4)
    return topology, collective, f"{cache_key(topology, collective, 1e6, OPTIONS)}.json"


def test_an_entry_above_the_schedule_is_discarded_and_solved_again(tmp_path, capsys):
    topology, collective, name = _problem()
    solved = cached_problem_bounds(topology, collective, 1e6, tmp_path, **OPTIONS)
    path = tmp_path / "bounds" / name
    _inflate(path, 100.0)
    schedule = 2 * solved.best  # a verified schedule well above the true bound, far below the edited one
    again = cached_problem_bounds(topology, collective, 1e6, tmp_path, schedule_time=schedule, **OPTIONS)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "discarded" in err[0], err
    assert again.best == solved.best and str(path) in again.notes["cache"]
    rewritten = bounds_from_dict(json.loads(path.read_text()))
    assert rewritten is not None and rewritten.to_dict() == solved.to_dict()  # the whole entry, no cell note


def test_an_entry_below_the_schedule_is_read_without_a_word(tmp_path, capsys, monkeypatch):
    topology, collective, _ = _problem()
    solved = cached_problem_bounds(topology, collective, 1e6, tmp_path, **OPTIONS)
    calls = []
    monkeypatch.setattr(bounds_cache, "problem_bounds", lambda *a, **k: calls.append(a) or solved)
    for schedule in (solved.best, solved.best * (1 + TIGHT / 2), 10 * solved.best):  # meeting it is no contradiction
        assert cached_problem_bounds(topology, collective, 1e6, tmp_path, schedule_time=schedule,
                                     **OPTIONS).to_dict() == solved.to_dict()
    assert calls == [] and capsys.readouterr().err == ""


def test_a_fresh_bound_above_the_schedule_is_recorded_and_never_optimal(monkeypatch):
    from workbench.config.evaluation import Evaluation
    from workbench.kit.examples import ring_allgather
    from workbench.plugin.registry import Problem
    from workbench.run.evaluate import evaluate_algorithms

    topology = build("ring:4")
    algorithm = ring_allgather(4, 250e3, topology=topology)
    problem = Problem(topology, algorithm.collective, algorithm.collective.size_bytes(algorithm.chunk_bytes))
    true = problem_bounds(topology, algorithm.collective, problem.size_bytes, **OPTIONS)
    inflated = Bounds(**{k: (getattr(true, k) * 50 if getattr(true, k) is not None else None) for k in _NUMBERS},
                      notes={})
    monkeypatch.setattr(bounds_cache, "problem_bounds", lambda *a, **k: inflated)  # a bug in the bounds
    fields = evaluate_algorithms([algorithm], problem, Evaluation())
    assert fields["bound"] > fields["collective_time"]
    assert fields["efficiency"] is None and fields["bound_exact"] is False
    assert "bound bug" in fields["message"] and "above_schedule" in fields["bounds"]["notes"]
    for solver_status in ("optimal", "feasible"):
        row = {**fields, "status": solver_status}
        settle_status(row)
        assert row["status"] == "feasible" and row["efficiency"] is None


def test_settling_a_row_whose_bound_is_above_its_time():
    row = {"status": "optimal", "bound": 2e-3, "collective_time": 1e-3, "efficiency": 2.0}
    settle_status(row)
    assert row["status"] == "feasible" and row["solver_status"] == "optimal" and row["efficiency"] is None
    met = {"status": "feasible", "bound": 1e-3 * (1 + TIGHT / 2), "collective_time": 1e-3, "efficiency": 1.0}
    settle_status(met)  # float sums differ: a bound within TIGHT of the time is met, not contradicted
    assert met["status"] == "optimal" and met["efficiency"] == 1.0


@given(st.floats(1e-9, 1e3), st.floats(1e-9, 1e3))
def test_efficiency_is_never_above_1(best, time):
    bounds = Bounds(injection=best, latency=0.0, schedule_time=time)
    efficiency = bounds.efficiency(time)
    if best > time * (1 + TIGHT):
        assert efficiency is None and bounds.above_schedule and not bounds.exact
        assert "above_schedule" in bounds.to_dict()["notes"]
    else:
        assert 0 < efficiency <= 1 and not bounds.above_schedule


@given(st.floats(1e-9, 1e3), st.floats(1 + 2 * TIGHT, 1e6))
def test_a_bound_above_by_more_than_tight_is_never_exact(time, ratio):
    best = time * ratio
    assume(best > time * (1 + TIGHT))
    bounds = Bounds(injection=best, latency=0.0, schedule_time=time)
    assert not bounds.exact and bounds.label == "bound"




def _rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "rows.jsonl").read_text().splitlines()]


def test_a_tampered_entry_in_a_run_folder_makes_no_row_optimal(tmp_path):
    config = tmp_path / "exp.yaml"
    config.write_text(TINY)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--jobs", "1"]) == 0
    (before,) = _rows(out)
    (entry,) = sorted((out / "bounds").glob("*.json"))
    honest = json.loads(entry.read_text())
    _inflate(entry, 100.0)  # above every simulated time: each row would be "optimal" with efficiency ~50
    (out / "rows.jsonl").unlink()  # the cell runs again and reads the entry
    assert main(["run", str(config), "--out", str(out), "--jobs", "1"]) == 0
    (row,) = _rows(out)
    assert row["status"] == before["status"] != "optimal"
    assert row["bound"] == before["bound"] <= row["collective_time"]
    assert row["efficiency"] == before["efficiency"] <= 1
    assert str(entry) in row["bounds"]["notes"]["cache"]  # what the cell said on its stderr
    assert json.loads(entry.read_text()) == honest  # rewritten with the bounds solved again
