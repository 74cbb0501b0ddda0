"""No row lost: lines of rows.jsonl that are not rows (a trailing comma, stray bytes, a crash's
partial line) are kept byte for byte by every command that reads or rewrites the file, and a
row that cannot be written (a full disk) is named and taken back, never left half written."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from workbench.cli import main
from workbench.reports.results import MAX_TAIL, UNPARSED, ResultStore, RowsFileError



@pytest.fixture()
def run_folder(tiny_run) -> tuple[Path, Path]:
    return tiny_run  # (config, folder): a copy of a finished two-cell run (tests/conftest.py)


def _damage(rows: Path) -> list[bytes]:
    """A trailing comma on the first row and a line of stray bytes after it; the damaged lines."""
    lines = rows.read_bytes().split(b"\n")[:-1]
    bad = [lines[0] + b",", b"\xff\xfe\x00 not a row \x80"]
    rows.write_bytes(b"\n".join([bad[0], bad[1], *lines[1:]]) + b"\n")
    return bad


def test_rebound_keeps_unparsable_rows_byte_for_byte_and_says_where(run_folder, capsys):
    _, folder = run_folder
    bad = _damage(folder / "rows.jsonl")
    capsys.readouterr()
    assert main(["rebound", str(folder)]) == 0
    err = capsys.readouterr().err
    aside = folder / UNPARSED
    assert f"moved, byte for byte, to {aside}" in err and "lines 1, 2" in err
    assert aside.read_bytes() == b"".join(line + b"\n" for line in bad)
    kept = [json.loads(line) for line in (folder / "rows.jsonl").read_text().splitlines()]
    assert len(kept) == 1  # the one good row, refreshed


def test_report_and_resume_keep_every_line(run_folder, capsys):
    config, folder = run_folder
    rows = folder / "rows.jsonl"
    _damage(rows)
    before = rows.read_bytes()
    assert main(["report", str(folder), "--no-figures"]) == 0
    assert rows.read_bytes() == before
    assert "left out of the tables; the file keeps them" in capsys.readouterr().err
    assert main(["run", str(config), "--out", str(folder), "--no-figures"]) == 0  # re-runs the damaged cell
    after = rows.read_bytes()
    assert after.startswith(before) and len(after.split(b"\n")) == len(before.split(b"\n")) + 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tail=st.binary(min_size=1, max_size=300))
def test_a_partial_last_line_is_set_aside_as_written(tmp_path, tail):
    assume(b"\n" not in tail)
    folder = tmp_path / f"f{abs(hash(tail))}"
    folder.mkdir()
    row = json.dumps({"cell_id": "a"}).encode() + b"\n"
    (folder / "rows.jsonl").write_bytes(row + tail)
    store = ResultStore(folder)  # a writer mends the tail before it appends
    assert (folder / "rows.jsonl").read_bytes() == row
    assert (folder / UNPARSED).read_bytes() == tail + b"\n"
    assert [r["cell_id"] for r in store.rows()] == ["a"]


def test_a_tail_longer_than_any_row_is_refused_not_cut(tmp_path):
    rows = tmp_path / "rows.jsonl"
    with open(rows, "wb") as handle:
        handle.write(b'{"cell_id": "a"}\n')
        handle.truncate(17 + MAX_TAIL + 1)
    with pytest.raises(RowsFileError, match="without a newline"):
        ResultStore(tmp_path)
    assert rows.stat().st_size == 17 + MAX_TAIL + 1


def test_a_full_disk_names_the_rows_file_and_takes_the_partial_row_back(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    store.append({"cell_id": "first"})
    before = (tmp_path / "rows.jsonl").read_bytes()
    real_write = os.write
    calls = []

    def full(fd, data):  # takes eight bytes, then the disk is full
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:8]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(RowsFileError, match=r"rows.jsonl: no space left on device"):
        store.append({"cell_id": "second", "padding": "x" * 100})
    monkeypatch.undo()
    assert (tmp_path / "rows.jsonl").read_bytes() == before


def test_a_full_disk_during_a_run_is_exit_2_naming_the_file(run_folder, monkeypatch, capsys):
    from workbench.reports import results

    config, folder = run_folder
    (folder / "rows.jsonl").unlink()

    def refuse(self, row):
        raise RowsFileError(results._describe(self.path, OSError(errno.ENOSPC, "No space left on device")))

    monkeypatch.setattr(results.ResultStore, "append", refuse)
    capsys.readouterr()
    assert main(["run", str(config), "--out", str(folder), "--no-figures"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"error: {folder / 'rows.jsonl'}: no space left on device (the row was not written; free " \
                      f"space and resume the run)"
