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
    "extra_columns: [bound, efficiency]", "extra_columns: [bound, rs_ag_throughput, efficiency]")


def _rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "rows.jsonl").read_text().splitlines() if line.strip()]


def _run(tmp_path: Path, text: str) -> Path:
    """Run a config in a fresh folder; the folder."""
    config = tmp_path / "exp.yaml"
    config.write_text(text)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--no-figures"]) == 0
    return out


def test_a_bound_is_called_optimum_only_where_a_schedule_meets_it(tmp_path, capsys):
    from workbench.reports.report import build_table
    from workbench.run.folder import load_run

    # the exact All-Gather optimum is a bound until a schedule meets it: the trees do on a one-way
    # ring without alpha, not on the others
    text = AG.replace('- {spec: "ndv2:2", label: NDv2x2}', '- {spec: "ndv2:2", label: NDv2x2}\n'
                      '    - {spec: "uniring:4", alpha: 0us, label: U4}')
    out = _run(tmp_path, text)
    rows = {r["topology"]: r for r in _rows(out)}
    assert rows["U4"]["bound_exact"] and not rows["R4"]["bound_exact"] and not rows["NDv2x2"]["bound_exact"]
    assert rows["NDv2x2"]["efficiency"] <= 1.0
    table = (out / "table.md").read_text()
    assert "| Bound |" in table and "Optimum" not in table.split("\n\n")[2]
    assert "(optimum)" in next(line for line in table.splitlines() if line.startswith("| U4 "))
    assert "| [480.5 us, 641 us] |" in next(line for line in table.splitlines() if line.startswith("| R4 "))
    experiment, all_rows = load_run(out)  # where every row is proven, the column is the optimum
    proven = build_table([r for r in all_rows if r["topology"] == "U4"], experiment)
    assert "Optimum" in proven.columns and "Efficiency vs optimum" in proven.columns


def test_allreduce_tables_say_bound_and_show_the_rs_ag_throughput_figure(tmp_path, capsys):
    out = _run(tmp_path, AR)
    table = (out / "table.md").read_text()
    assert "| Bound |" in table or "Bound |" in table
    assert "Optimum" not in table.split("\n\n")[2]  # the header row names no optimum
    assert "RS*+AG* throughput" in table and "achievable" not in table
    rows = _rows(out)
    assert all(r["rs_ag_throughput"] is not None and "achievable" not in r for r in rows)


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
        # the exact optimum is back, but the trees do not meet it, so it is not called the optimum
        assert after["bounds"]["optimum"] == pytest.approx(after["bound"]) and after["bounds"]["flow_lp"] is None
        assert not after["bound_exact"] and after["status"] == after["solver_status"] == "feasible"
    ndv2 = next(r for r in fresh if r["topology"] == "NDv2x2")
    # 16 GPUs, one 12.5 GB/s IB link leaves each chassis: 8 * 4 MB / 12.5 GB/s
    assert ndv2["bound"] == pytest.approx(64e6 / 16 * 8 / 12.5e9, rel=1e-3)


def test_rebound_of_a_missing_folder_is_one_line(tmp_path, capsys):
    assert main(["rebound", str(tmp_path / "nope")]) == 2
    assert "no such run folder" in capsys.readouterr().err


def test_rebound_reaches_topologies_that_a_design_cell_made(tmp_path, capsys):
    """LIBRA's EqualBW and LIBRA designs feed TACOS and multi-rail All-Reduce cells (the committed
    libra_tacos run): their topologies come from the design rows, so rebound rebuilds them from
    those rows and refreshes their bounds too."""
    import shutil

    root = Path(__file__).resolve().parent.parent
    run = tmp_path / "libra_tacos"
    shutil.copytree(root / "results" / "libra_tacos", run, ignore=shutil.ignore_patterns("figures"))
    rows = _rows(run)
    schedules = [r for r in rows if r.get("kind", "schedule") == "schedule"]
    assert schedules and all(r["topology_source"] for r in schedules)
    for row in schedules:  # as if made with a loose bound
        row["bound"] = row["bounds"]["injection"]
        row["bounds"] = {k: row["bounds"][k] for k in ("injection", "latency", "cut")}
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["rebound", str(run)]) == 0
    assert f"bounds refreshed in {len(schedules)} row(s)" in capsys.readouterr().out
    for row in (r for r in _rows(run) if r.get("kind", "schedule") == "schedule"):
        assert row["bounds"]["refreshed"] and row["rs_ag_throughput"] is not None
        assert row["bounds"]["injection"] <= row["bound"] <= row["collective_time"]
