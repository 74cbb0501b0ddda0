"""Data paths in a config are read relative to the config's folder; cell ids do not move."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.config.experiment import load_experiment

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "libra"

DESIGN = """name: one_design
time_limit: 60s
grid:
  designs:
    - name: GPT-3 EqualBW
      formulation: libra
      problem:
        dimensions: {{file: {network}}}
        workloads:
          - {{workload: {workload}, communicator: {communicator}}}
        cost_model: {{file: {cost}}}
        constraints: {{total_bandwidth: 100}}
        objective: equal-bw
"""


def _config(folder: Path, network: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rel = lambda *parts: os.path.relpath(DATA.joinpath(*parts), folder)  # noqa: E731
    path = folder / "design.yaml"
    path.write_text(DESIGN.format(network=network or rel("network", "4d_network.yml"),
                                  workload=rel("workload", "GPT_3.txt"),
                                  communicator=rel("communicator", "GPT_3_4d.yml"),
                                  cost=rel("cost_model", "4d_cost_model.yml")))
    return path


def test_a_libra_config_runs_from_any_directory(tmp_path, monkeypatch, capsys):
    config = _config(tmp_path / "configs" / "deep")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["run", str(config), "--results-dir", str(tmp_path / "results"), "--no-figures"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "results" / "one_design" / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["status"] != "error", rows


def test_a_missing_data_file_is_one_line_before_any_cell(tmp_path, capsys):
    config = _config(tmp_path / "configs", network="no/such/network.yml")
    assert main(["run", str(config), "--results-dir", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "grid.designs[0].problem.dimensions.file: no such file 'no/such/network.yml'" in err[0]
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("name", ["libra_oracles", "libra_sweep", "libra_tacos"])
def test_shipped_configs_keep_the_ids_of_their_committed_rows(name):
    ids = load_experiment(ROOT / "experiments" / f"{name}.yaml").cell_ids()
    committed = {json.loads(line)["cell_id"] for line in (ROOT / "results" / name / "rows.jsonl").read_text().splitlines()
                 if line.strip()}
    assert ids == committed


def test_report_names_lines_that_are_not_rows(tmp_path, capsys):
    config = tmp_path / "tiny.yaml"
    config.write_text("name: tiny\ngrid:\n  topologies: [ring:4]\n  collectives: [allgather]\n  sizes: [1MB]\n"
                      "  formulations: [ring]\n")
    assert main(["run", str(config), "--results-dir", str(tmp_path / "r"), "--no-figures"]) == 0
    folder = tmp_path / "r" / "tiny"
    with open(folder / "rows.jsonl", "a") as handle:
        handle.write("garbage\n[1, 2]\n")
    capsys.readouterr()
    assert main(["report", str(folder), "--no-figures"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"warning: {folder / 'rows.jsonl'}: 2 line(s) that are not result rows (lines 2, 3) left out of "
                   f"the tables; the file keeps them"]
