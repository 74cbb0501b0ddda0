"""A run keeps each problem's bounds in its folder (``workbench.run.bounds_cache``): the entry gives
back exactly the bounds solved, a key that follows the problem and not the chunking, entries that
are not ours solved again, and a run whose cells of one problem share one entry."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from guards import TINY_CELL

from workbench.bounds import problem_bounds
from workbench.cli import main
from workbench.model.collective import make_collective
from workbench.run import bounds_cache
from workbench.run.bounds_cache import bounds_from_dict, bounds_to_dict, cache_key, cached_problem_bounds
from workbench.topology import build

OPTIONS = {"lp_time_limit": 30.0, "lp_max_variables": 400_000, "lp": True}


def _entries(folder: Path) -> list[Path]:
    return sorted((folder / "bounds").glob("*.json"))


@pytest.mark.parametrize("spec, kind", [("ring:4", "allgather"), ("switch:4", "allreduce"), ("line:3", "alltoall")])
def test_an_entry_gives_back_the_bounds_solved(spec, kind):
    topology = build(spec, alpha=1.3e-6)
    collective = make_collective(kind, topology.num_npus)
    solved = problem_bounds(topology, collective, 1e6, **OPTIONS)
    again = bounds_from_dict(json.loads(json.dumps(bounds_to_dict(solved))))
    assert again is not None and again.to_dict() == solved.to_dict()


def test_the_key_follows_the_problem_and_not_the_chunking():
    ring = build("ring:4")
    one, four = make_collective("allgather", 4, 1), make_collective("allgather", 4, 4)
    key = cache_key(ring, one, 1e6, OPTIONS)
    assert cache_key(ring, four, 1e6, OPTIONS) == key
    assert cache_key(ring, one, 2e6, OPTIONS) != key
    assert cache_key(build("ring:4", alpha=2e-6), one, 1e6, OPTIONS) != key
    assert cache_key(ring, make_collective("reducescatter", 4, 1), 1e6, OPTIONS) != key
    assert cache_key(ring, one, 1e6, {**OPTIONS, "lp": False}) != key


def test_a_second_cell_reads_the_entry_and_refresh_solves_again(tmp_path, monkeypatch):
    topology, collective = build("ring:4"), make_collective("allgather", 4)
    first = cached_problem_bounds(topology, collective, 1e6, tmp_path, **OPTIONS)
    (entry,) = _entries(tmp_path)
    calls = []
    monkeypatch.setattr(bounds_cache, "problem_bounds", lambda *a, **k: calls.append(a) or first)
    assert cached_problem_bounds(topology, make_collective("allgather", 4, 3), 1e6, tmp_path, **OPTIONS).to_dict() \
        == first.to_dict()
    assert calls == []  # read, not solved
    cached_problem_bounds(topology, collective, 1e6, tmp_path, refresh=True, **OPTIONS)
    assert len(calls) == 1 and _entries(tmp_path) == [entry]


@pytest.mark.parametrize("damage", ["garbage", "other-format", "wrong-type", "fifo", "huge", "folder", "nan",
                                    "negative", "deep", "long-integer", "symlink"])
def test_an_entry_that_is_not_ours_is_solved_again(tmp_path, damage):
    topology, collective = build("ring:4"), make_collective("allgather", 4)
    expected = problem_bounds(topology, collective, 1e6, **OPTIONS).to_dict()
    path = tmp_path / "bounds" / f"{cache_key(topology, collective, 1e6, OPTIONS)}.json"
    path.parent.mkdir()
    good = bounds_to_dict(problem_bounds(topology, collective, 1e6, **OPTIONS))
    if damage == "garbage":
        path.write_text('{"format": "workbench.bounds-cache/1", "injection": ')
    elif damage == "other-format":
        path.write_text(json.dumps({**good, "format": "something/9", "injection": 1.0}))
    elif damage == "wrong-type":
        path.write_text(json.dumps({**good, "latency": "fast"}))
    elif damage == "fifo":
        os.mkfifo(path)  # never opened: a read would wait for a writer forever
    elif damage == "huge":
        path.write_text(json.dumps({**good, "notes": {"x": "y" * (2 << 20)}}))
    elif damage == "nan":
        path.write_text(json.dumps({**good, "latency": float("nan")}))
    elif damage == "negative":
        path.write_text(json.dumps({**good, "injection": -1.0}))
    elif damage == "deep":
        path.write_text("[" * 200_000)
    elif damage == "long-integer":
        path.write_text(json.dumps(good).replace('"injection": ', '"injection": 1' + "0" * 400 + ", \"x\": ", 1))
    elif damage == "symlink":  # an entry is never read through a link
        target = tmp_path / "elsewhere.json"
        target.write_text(json.dumps({**good, "injection": 1.0}))
        path.symlink_to(target)
    else:
        path.mkdir()
    assert cached_problem_bounds(topology, collective, 1e6, tmp_path, **OPTIONS).to_dict() == expected
    if damage != "folder":  # the damaged entry is replaced by a whole one
        assert bounds_from_dict(json.loads(path.read_text())).to_dict() == expected


def test_bounds_cut_short_by_a_time_limit_are_not_kept(tmp_path):
    # All-to-All on a DGX-1: its alpha-beta LPs need seconds, a 0.2 s limit stops the search
    topology, collective = build("dgx1"), make_collective("alltoall", 8)
    bounds = cached_problem_bounds(topology, collective, 1e6, tmp_path, lp=True, lp_time_limit=0.2)
    assert bounds.cut_short and _entries(tmp_path) == []


def test_a_run_folder_that_does_not_exist_here_is_not_made(tmp_path):
    # a Dask worker on another machine gets the head's run folder: nothing is created on the worker
    topology, collective = build("ring:4"), make_collective("allgather", 4)
    cached_problem_bounds(topology, collective, 1e6, tmp_path / "not" / "here", **OPTIONS)
    assert not (tmp_path / "not").exists()


def test_a_folder_that_cannot_be_written_still_gives_the_bounds(tmp_path):
    topology, collective = build("ring:4"), make_collective("allgather", 4)
    (tmp_path / "bounds").write_text("a file where the folder would be")
    bounds = cached_problem_bounds(topology, collective, 1e6, tmp_path, **OPTIONS)
    assert bounds.to_dict() == problem_bounds(topology, collective, 1e6, **OPTIONS).to_dict()


# the tiny one-cell experiment with three formulations on its one problem
SHARED = TINY_CELL.replace("name: tiny", "name: shared").replace(
    "formulations: [{name: ring}]", "formulations: [{name: ring}, {name: direct}, {name: bfs-trees}]")


def test_the_cells_of_one_problem_share_one_entry(tmp_path):
    config = tmp_path / "exp.yaml"
    config.write_text(SHARED)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--jobs", "1"]) == 0
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and len(_entries(out)) == 1
    problem_part = [{k: v for k, v in r["bounds"].items() if k not in ("exact", "label")} for r in rows]
    assert problem_part[0] == problem_part[1] == problem_part[2]  # exact and label are each schedule's
    # rebound solves it again (once) and rewrites the entry; the rows keep the same numbers
    (entry,) = _entries(out)
    entry.write_text("{}")
    assert main(["rebound", str(out)]) == 0
    assert bounds_from_dict(json.loads(entry.read_text())) is not None
    rebounded = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert [r["bound"] for r in rebounded] == [r["bound"] for r in rows]
