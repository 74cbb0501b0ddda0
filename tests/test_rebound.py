"""Bound columns in reports, and refreshing a finished run's bounds without re-synthesis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.cli import main

AG = """
name: ag_bounds
description: All-Gather beside its exact optimum
time_limit: 30s
seeds: [0]
grid:
  topologies:
    - {spec: "ring:4", label: R4}
    - {spec: "ndv2:2", label: NDv2x2}
  collectives: [allgather]
  sizes: [64MB]
  formulations:
    - {name: bfs-trees, label: Trees}
table: {rows: topology, value: collective_time, extra_columns: [bound, efficiency]}
"""

AR = AG.replace("name: ag_bounds", "name: ar_bounds").replace("[allgather]", "[allreduce]").replace(
    "extra_columns: [bound, efficiency]", "extra_columns: [bound, achievable, efficiency]")


def _rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "rows.jsonl").read_text().splitlines() if line.strip()]


def _run(tmp_path: Path, text: str) -> Path:
    """Run a config in a fresh folder; the folder."""
    config = tmp_path / "exp.yaml"
    config.write_text(text)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--no-figures"]) == 0
    return out


def test_exact_bounds_are_called_optimum(tmp_path, capsys):
    out = _run(tmp_path, AG)
    rows = _rows(out)
    assert all(r["bound_exact"] for r in rows)
    ndv2 = next(r for r in rows if r["topology"] == "NDv2x2")
    assert ndv2["efficiency"] <= 1.0
    table = (out / "table.md").read_text()
    assert "Optimum" in table and "Efficiency vs optimum" in table


def test_allreduce_tables_say_bound_and_show_the_achievable_reference(tmp_path, capsys):
    out = _run(tmp_path, AR)
    table = (out / "table.md").read_text()
    assert "| Bound |" in table or "Bound |" in table
    assert "Optimum" not in table.split("\n\n")[2]  # the header row names no optimum
    assert "RS*+AG* (achievable)" in table
    rows = _rows(out)
    assert all(r["achievable"] >= r["bound"] for r in rows)


def test_rebound_replaces_a_loose_bound_and_keeps_everything_else(tmp_path, capsys):
    out = _run(tmp_path, AG)
    rows = _rows(out)
    # pretend the run was made with the old, loose bounds
    for row in rows:
        row["bound"] = row["bounds"]["injection"]
        row["bounds"] = {k: row["bounds"][k] for k in ("injection", "latency", "cut")} | {"flow_lp": 1e-9}
        row["efficiency"] = row["bound"] / row["collective_time"]
        row.pop("bound_exact")
    (out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["rebound", str(out)]) == 0
    fresh = _rows(out)
    assert len(fresh) == len(rows)
    for before, after in zip(rows, fresh):
        assert after["collective_time"] == before["collective_time"]
        assert after["bound"] >= before["bound"]
        assert after["bound_exact"] and after["bounds"]["flow_lp"] is None
    ndv2 = next(r for r in fresh if r["topology"] == "NDv2x2")
    # 16 GPUs, one 12.5 GB/s IB link leaves each chassis: 8 * 4 MB / 12.5 GB/s
    assert ndv2["bound"] == pytest.approx(64e6 / 16 * 8 / 12.5e9, rel=1e-3)


def test_rebound_of_a_missing_folder_is_one_line(tmp_path, capsys):
    assert main(["rebound", str(tmp_path / "nope")]) == 2
    assert "no such run folder" in capsys.readouterr().err
