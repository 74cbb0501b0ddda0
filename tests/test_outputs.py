"""Output paths: every command that writes a user-named file or folder checks it before any work and
writes it through one writer (``workbench.util.files``): a character device is written through (never
renamed over), a FIFO, socket or folder where a file belongs is refused, a full device or an
uncreatable file is one line with exit code 2, and nothing is left half-written."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.util.files import OutputError, check_output_file, check_output_folder, write_output

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = str(ROOT / "examples" / "ring8_allreduce.json")
SYNTH = ["synth", "ring", "--topology", "ring:4", "--collective", "allgather", "--size", "1MB"]

TINY_RUN = """
name: tiny_outputs
time_limit: 30s
grid:
  topologies: [{spec: "ring:4", label: R4}]
  collectives: [allgather]
  sizes: [1MB]
  formulations: [{name: ring, label: Ring}]
table: {rows: topology, columns: formulation, value: collective_time}
"""


def _one_error(capsys, named: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and named in err[0] and "Traceback" not in err[0], err
    return err[0]


@pytest.fixture()
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


def _is_fifo(path: Path) -> bool:
    return stat.S_ISFIFO(os.stat(path).st_mode)


def _is_char(path: str) -> bool:
    return stat.S_ISCHR(os.stat(path).st_mode)


# ------------------------------------------------------------------ FIFOs: refused before any work
def test_topology_into_a_fifo_is_refused(fifo, capsys):
    assert main(["topology", "ring:4", "-o", str(fifo)]) == 2
    assert "FIFO" in _one_error(capsys, str(fifo))
    assert _is_fifo(fifo)


@pytest.mark.parametrize("fmt, name", [("msccl-xml", "pipe.xml"), ("mscclpp", "pipe.json")])
def test_export_into_a_fifo_is_refused(tmp_path, capsys, fmt, name):
    target = tmp_path / name
    os.mkfifo(target)
    assert main(["export", EXAMPLE, "--format", fmt, "-o", str(target)]) == 2
    assert "FIFO" in _one_error(capsys, str(target))
    assert _is_fifo(target)


def test_import_into_a_fifo_is_refused_before_reading(fifo, tmp_path, capsys):
    assert main(["import", str(tmp_path / "missing.xml"), "--topology", "ring:4", "--size", "1MB",
                 "-o", str(fifo)]) == 2
    _one_error(capsys, str(fifo))  # the output is named, not the missing input: checked first
    assert _is_fifo(fifo)


def test_synth_into_a_fifo_is_refused_before_synthesis(fifo, capsys):
    assert main(SYNTH + ["-o", str(fifo)]) == 2
    captured = capsys.readouterr()
    assert "synthesizing" not in captured.err and captured.out == ""
    assert captured.err.count("\n") == 1 and str(fifo) in captured.err and "FIFO" in captured.err
    assert _is_fifo(fifo)


def test_synth_refuses_a_fifo_where_a_frontier_file_would_go(tmp_path, capsys):
    os.mkfifo(tmp_path / "ag.1.json")
    assert main(SYNTH + ["-o", str(tmp_path / "ag.json")]) == 2
    _one_error(capsys, str(tmp_path / "ag.1.json"))
    assert _is_fifo(tmp_path / "ag.1.json") and not (tmp_path / "ag.json").exists()


# ------------------------------------------------------------------ character devices: written through
def test_dev_null_is_written_through_not_replaced(capsys):
    assert main(["topology", "ring:4", "-o", "/dev/null"]) == 0
    assert main(["export", EXAMPLE, "-o", "/dev/null"]) == 0  # no extension check on a device
    assert main(["export", EXAMPLE, "--format", "mscclpp", "-o", "/dev/null"]) == 0
    assert "wrote /dev/null" in capsys.readouterr().out
    assert _is_char("/dev/null")


def test_synth_into_dev_null_writes_one_document_through(capsys):
    assert main(SYNTH + ["-o", "/dev/null"]) == 0
    assert capsys.readouterr().out.count("wrote") == 1
    assert _is_char("/dev/null") and not os.path.exists("/dev/null.1")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("argv", [["topology", "ring:4"], ["export", EXAMPLE],
                                  ["export", EXAMPLE, "--format", "mscclpp"]])
def test_a_full_device_is_one_line_exit_2(argv, capsys):
    assert main(argv + ["-o", "/dev/full"]) == 2
    assert "no space left" in _one_error(capsys, "/dev/full")
    assert _is_char("/dev/full")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_synth_into_a_full_device_is_exit_2_naming_it(capsys):
    assert main(SYNTH + ["-o", "/dev/full"]) == 2
    captured = capsys.readouterr()
    assert "wrote" not in captured.out
    assert captured.err.strip().splitlines()[-1].startswith("error: /dev/full: no space left")
    assert _is_char("/dev/full")


# ------------------------------------------------------------------ folders, extensions, uncreatable files
@pytest.mark.parametrize("argv", [["topology", "ring:4"], ["export", EXAMPLE], SYNTH,
                                  ["import", "missing.xml", "--topology", "ring:4", "--size", "1MB"]])
def test_a_folder_where_a_file_belongs_is_refused_before_work(argv, tmp_path, capsys):
    folder = tmp_path / "already.json"
    folder.mkdir()
    assert main(argv + ["-o", str(folder)]) == 2
    assert "is a folder" in _one_error(capsys, str(folder))
    assert folder.is_dir() and list(folder.iterdir()) == []


@pytest.mark.parametrize("argv, accepted", [(["topology", "ring:4"], ".yaml, .yml or .json"),
                                            (["export", EXAMPLE], ".xml"),
                                            (["export", EXAMPLE, "--format", "mscclpp"], ".json"),
                                            (SYNTH, ".json")])
def test_a_wrong_extension_is_refused_naming_the_accepted_ones(argv, accepted, tmp_path, capsys):
    target = tmp_path / "x.txt"
    assert main(argv + ["-o", str(target)]) == 2
    assert _one_error(capsys, str(target)).endswith(f"end in {accepted}")
    assert list(tmp_path.iterdir()) == []


def test_the_extension_decides_the_topology_format_in_any_case(tmp_path, capsys):
    assert main(["topology", "ring:3", "-o", str(tmp_path / "t.YAML")]) == 0
    assert (tmp_path / "t.YAML").read_text().startswith("name:")  # YAML, not JSON
    assert main(["topology", str(tmp_path / "t.YAML")]) == 0


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc here")
@pytest.mark.parametrize("argv", [["topology", "ring:4"], SYNTH])
def test_an_uncreatable_file_is_refused_before_work(argv, capsys):
    assert main(argv + ["-o", "/proc/x.json"]) == 2
    assert "synthesizing" not in _one_error(capsys, "/proc/x.json")


def test_a_file_where_a_parent_folder_belongs_is_refused(tmp_path, capsys):
    blocker = tmp_path / "plain"
    blocker.write_text("keep\n")
    assert main(SYNTH + ["-o", str(blocker / "sub" / "ag.json")]) == 2
    assert "not a folder" in _one_error(capsys, str(blocker))
    assert blocker.read_text() == "keep\n"


def test_a_missing_parent_folder_is_created(tmp_path, capsys):
    target = tmp_path / "new" / "deeper" / "ar.xml"
    assert main(["export", EXAMPLE, "-o", str(target)]) == 0
    assert target.read_text().startswith("<algo")


# ------------------------------------------------------------------ run folders
def test_run_out_an_existing_file_is_refused_before_any_cell(tmp_path, capsys):
    config = tmp_path / "exp.yaml"
    config.write_text(TINY_RUN)
    target = tmp_path / "taken"
    target.write_text("keep\n")
    assert main(["run", str(config), "--out", str(target), "--no-figures"]) == 2
    assert "not a folder" in _one_error(capsys, str(target))  # and no "cell(s) ->" line: nothing ran
    assert target.read_text() == "keep\n"


def test_run_results_dir_an_existing_file_is_refused(tmp_path, capsys):
    config = tmp_path / "exp.yaml"
    config.write_text(TINY_RUN)
    target = tmp_path / "results"
    target.write_text("keep\n")
    assert main(["run", str(config), "--results-dir", str(target), "--no-figures"]) == 2
    _one_error(capsys, str(target))
    assert target.read_text() == "keep\n"


def test_report_into_a_file_is_refused(tmp_path, capsys):
    target = tmp_path / "not-a-run"
    target.write_text("keep\n")
    assert main(["report", str(target), "--no-figures"]) == 2
    assert "not a folder" in _one_error(capsys, str(target))


# ------------------------------------------------------------------ the writer itself
def test_write_output_refuses_a_fifo_without_blocking(fifo):
    with pytest.raises(OutputError, match="FIFO"):
        write_output(fifo, "x")
    assert _is_fifo(fifo)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "a.json"
    target.write_text("old\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputError, match="no space left"):
        write_output(target, "new\n")
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_the_checks_write_nothing(tmp_path):
    check_output_file(tmp_path / "a" / "b.json", (".json",))
    check_output_folder(tmp_path / "run" / "inner")
    assert list(tmp_path.iterdir()) == []  # the probe file is gone, no folder was made
