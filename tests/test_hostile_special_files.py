"""FIFOs and devices where a run folder's files belong, and the compile lock: nothing blocks and
nothing eats memory. A FIFO as ``.lock``, ``config.yaml`` or ``rows.jsonl`` (opening it for reading
would wait for a writer for good) and a link to ``/dev/zero`` (a read that never ends) are refused
by type before they are opened, in one line, exit 2, well under a second. The compile lock lives in
a folder private to the user, so another user's file can neither block nor delay a compile."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from guards import deadline
from workbench.cli import main
from workbench.compiled import first_call



@pytest.fixture()
def run_folder(tiny_run) -> tuple[Path, Path]:
    return tiny_run  # (config, folder): a copy of a finished two-cell run (tests/conftest.py)


def _make(kind: str, path: Path) -> None:
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize("kind", ["fifo", "zero"])
@pytest.mark.parametrize("name", [".lock", "config.yaml", "rows.jsonl", "run.json"])
def test_a_fifo_or_device_in_a_run_folder_is_refused_unopened(run_folder, capsys, kind, name):
    config, folder = run_folder
    _make(kind, folder / name)
    for argv in (["run", str(config), "--out", str(folder), "--no-figures"], ["report", str(folder), "--no-figures"],
                 ["rebound", str(folder)]):
        capsys.readouterr()
        with deadline(5):  # a FIFO opened for reading would block for good, /dev/zero never end
            code = main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and str(folder / name) in err[0], (argv, err)
    assert stat.S_ISFIFO(os.lstat(folder / name).st_mode) if kind == "fifo" else (folder / name).is_symlink()


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_fifo_or_device_given_as_an_input_is_refused_unopened(tmp_path, capsys, kind):
    special = tmp_path / "special.yaml"
    _make(kind, special)
    for argv in (["run", str(special)], ["topology", str(special)], ["interpret", str(special)],
                 ["verify", str(special)]):
        capsys.readouterr()
        with deadline(5):
            assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(special) in err[0], err


def test_the_compile_lock_folder_is_private_to_the_user(tmp_path, monkeypatch):
    monkeypatch.setattr(first_call.tempfile, "gettempdir", lambda: str(tmp_path))
    path = first_call._lock_path("kernel", __file__)
    folder = Path(path).parent
    assert folder == tmp_path / f"workbench-{os.getuid()}"
    assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700 and os.lstat(folder).st_uid == os.getuid()


@pytest.mark.parametrize("taken", ["open to all", "a link", "a file"])
def test_a_lock_folder_that_is_not_privately_ours_takes_no_lock(tmp_path, monkeypatch, taken):
    """Another user (or anyone) who made the folder first cannot make us wait: no lock is taken."""
    monkeypatch.setattr(first_call.tempfile, "gettempdir", lambda: str(tmp_path))
    folder = tmp_path / f"workbench-{os.getuid()}"
    if taken == "open to all":
        folder.mkdir(mode=0o777)
        os.chmod(folder, 0o777)
    elif taken == "a link":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        folder.symlink_to(tmp_path / "elsewhere")
    else:
        folder.write_text("")
    assert first_call._lock_path("kernel", __file__) is None
    assert first_call.locked_first_call(lambda x: x + 1, "kernel", __file__)(1) == 2


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_a_foreign_file_at_the_lock_path_never_blocks(tmp_path, monkeypatch, kind):
    monkeypatch.setattr(first_call.tempfile, "gettempdir", lambda: str(tmp_path))
    path = Path(first_call._lock_path("kernel", __file__))
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(tmp_path / "held.lock")
    with deadline(5):
        assert first_call.locked_first_call(lambda x: x * 3, "kernel", __file__)(2) == 6
    assert not (tmp_path / "held.lock").exists()  # a link is not followed to create its target
