"""Symbolic links where the workbench writes: a link the user names as an output is replaced by the
new file, never written through; nothing is created outside the folder the user named; a link
among a run folder's own files is refused before anything is read or written, and the file it
points to is left exactly as it was."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from workbench.cli import main

SYNTH = ["synth", "ring", "--topology", "ring:4", "--collective", "allgather", "--size", "1MB", "-o"]


def _digest(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (links not followed) with a digest of its bytes or its link target."""
    seen = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            seen[str(path)] = "-> " + os.readlink(path)
        elif path.is_file():
            seen[str(path)] = hashlib.sha1(path.read_bytes()).hexdigest()
        else:
            seen[str(path)] = "folder"
    return seen


@pytest.fixture()
def watched(tmp_path) -> Path:
    """A folder outside every command's target, with a file and a folder links may point into."""
    folder = tmp_path / "watched"
    (folder / "inner").mkdir(parents=True)
    (folder / "victim.json").write_text('{"keep": true}\n')
    (folder / "victim.jsonl").write_text('{"cell_id": "x"}\n{"cell_id": "y"}\n')
    return folder


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize("command", [SYNTH, ["topology", "ring:4", "-o"], ["export"]])
def test_a_link_named_as_the_output_is_replaced_not_written_through(tmp_path, watched, capsys, command):
    if command == ["export"]:  # an algorithm file first, then its XML through a link
        source = tmp_path / "ring.json"
        assert main(SYNTH + [str(source)]) == 0
        (watched / "victim.xml").write_text("<keep/>\n")
        command, target = ["export", str(source), "-o"], watched / "victim.xml"
        link = tmp_path / "out.xml"
    else:
        target = watched / "victim.json"
        link = tmp_path / "out.json"
    before = _digest(watched)
    link.symlink_to(target)
    capsys.readouterr()
    assert main(command + [str(link)]) == 0
    assert not link.is_symlink() and link.is_file() and link.stat().st_size > 20
    assert _digest(watched) == before


def test_a_dangling_link_creates_nothing_where_it_points(tmp_path, watched):
    link = tmp_path / "out.json"
    link.symlink_to(watched / "new-folder" / "out.json")
    before = _digest(watched)
    assert main(SYNTH + [str(link)]) == 0
    assert link.is_file() and not link.is_symlink()
    assert _digest(watched) == before and not (watched / "new-folder").exists()


def test_frontier_files_go_beside_the_link_not_beside_its_target(tmp_path, watched):
    """A Pareto search writes FILE.1.json ... beside the file it was named: beside the link."""
    from workbench.model.algorithm import load_algorithm
    from workbench.run import evaluate

    source = tmp_path / "ring.json"
    assert main(SYNTH + [str(source)]) == 0
    algorithm = load_algorithm(source)
    link = tmp_path / "front.json"
    link.symlink_to(watched / "victim.json")
    before = _digest(watched)
    written = evaluate.save_algorithms([algorithm, algorithm], _request(link), "feasible", 0.1)
    assert written == [str(link), str(tmp_path / "front.1.json")]
    assert (tmp_path / "front.1.json").is_file() and not link.is_symlink()
    assert _digest(watched) == before


def _request(link: Path):
    """A schedule request whose algorithm goes to ``link``."""
    from workbench.config.evaluation import Evaluation
    from workbench.config.experiment import Cell
    from workbench.run.request import CellRequest

    cell = Cell(experiment="t", topology={"label": "ring:4"}, collective={"kind": "allgather", "root": None},
                size_bytes=1e6, chunks=1, formulation={"name": "ring", "label": "ring", "params": {}}, seed=0,
                time_limit=10.0, evaluation=Evaluation(save_algorithms=True))
    return CellRequest("schedule", cell, algorithm_path=str(link))


@pytest.fixture()
def run_folder(tiny_run) -> tuple[Path, Path]:
    return tiny_run  # (config, folder): a copy of a finished two-cell run (tests/conftest.py)


@pytest.mark.parametrize("name", ["rows.jsonl", "config.yaml", "run.json", ".lock", "rows.unparsed.jsonl"])
def test_a_link_among_a_run_folders_files_is_refused_and_its_target_untouched(run_folder, watched, capsys, name):
    config, folder = run_folder
    (folder / name).unlink(missing_ok=True)
    (folder / name).symlink_to(watched / "victim.jsonl")
    before = _digest(watched)
    for argv in (["run", str(config), "--out", str(folder), "--no-figures"], ["report", str(folder), "--no-figures"],
                 ["rebound", str(folder)]):
        capsys.readouterr()
        assert main(argv) == 2
        line = _one_line(capsys)
        assert f"{folder / name}: is a symbolic link" in line
    assert _digest(watched) == before


@pytest.mark.parametrize("name", ["figures", "bounds", "algorithms"])
def test_a_linked_folder_in_a_run_folder_is_refused(run_folder, watched, capsys, name):
    config, folder = run_folder
    if (folder / name).exists():
        (folder / name).rename(folder / f"{name}.old")
    (folder / name).symlink_to(watched / "inner", target_is_directory=True)
    before = _digest(watched)
    capsys.readouterr()
    assert main(["report", str(folder)]) == 2
    assert f"{folder / name}: is a symbolic link, not a folder" in _one_line(capsys)
    assert main(["run", str(config), "--out", str(folder)]) == 2
    assert _digest(watched) == before


def test_a_link_in_figures_is_replaced_by_the_figure(run_folder, watched):
    _, folder = run_folder
    figures = folder / "figures"
    figures.mkdir(exist_ok=True)
    (figures / "synthesis_vs_time.png").symlink_to(watched / "victim.json")
    (folder / "table.md").unlink()
    (folder / "table.md").symlink_to(watched / "victim.jsonl")
    before = _digest(watched)
    assert main(["report", str(folder)]) == 0
    assert (figures / "synthesis_vs_time.png").is_file() and not (figures / "synthesis_vs_time.png").is_symlink()
    assert (figures / "synthesis_vs_time.png").read_bytes()[:4] == b"\x89PNG"
    assert not (folder / "table.md").is_symlink()
    assert _digest(watched) == before


def test_tune_replaces_an_earlier_bundle_and_refuses_foreign_files(tmp_path, capsys):
    out = tmp_path / "bundle"
    tune = ["tune", "--topology", "ring:4", "--collective", "allgather", "--formulations", "ring",
            "--time-limit", "20s", "-o", str(out)]
    assert main(tune + ["--sizes", "64KB..4MB"]) == 0
    assert sorted(p.name for p in (out / "msccl").iterdir()) == ["allgather-0.xml", "allgather-1.xml",
                                                                  "allgather-2.xml"]
    assert main(tune + ["--sizes", "64KB..256KB"]) == 0
    for folder, suffix in (("msccl", "xml"), ("mscclpp", "json")):  # no overlapping ranges left behind
        assert sorted(p.name for p in (out / folder).iterdir()) == [f"allgather-0.{suffix}", f"allgather-1.{suffix}"]
    assert sorted(p.name for p in (out / "candidates").iterdir()) == ["allgather-0-ring.json", "allgather-1-ring.json"]
    (out / "msccl" / "mine.xml").write_text("<algo/>")
    capsys.readouterr()
    assert main(tune + ["--sizes", "64KB..256KB"]) == 2
    assert "mine.xml: not a file of a tune bundle" in _one_line(capsys)
    assert (out / "msccl" / "mine.xml").read_text() == "<algo/>"
