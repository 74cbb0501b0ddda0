"""No code runs from where a command is started, an import path names a formulation and nothing
else (nothing it names is called before it is checked), and rebound and report respect a live
run's lock."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.plugin import registry
from workbench.cli import main
from workbench.run.monitor import _child_env
from workbench.util.safe_path import package_root, safe_sys_path

STRAY = '''
import pathlib
pathlib.Path(__file__).with_name("STRAY_RAN").write_text("the current folder's {name}.py ran")
raise SystemExit(3)
'''

BESIDE = '''
import sys
from pathlib import Path

from workbench.kit.examples import ring_allgather
from workbench.plugin.registry import SynthesisResult

HERE = Path(__file__).resolve().parent


class BesideRing:
    name = "beside-ring"
    kind = "schedule"

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        algorithm = ring_allgather(problem.collective.num_ranks, problem.chunk_bytes, problem.topology)
        on_path = any(Path(p or ".").resolve() == HERE for p in sys.path)
        return SynthesisResult([algorithm], "feasible", 0.0,
                               message=f"loaded from {Path(__file__).resolve()}; its folder on sys.path: {on_path}")
'''

CONFIG = """
name: beside
time_limit: 30s
seeds: [0]
grid:
  topologies: [{spec: "ring:4"}]
  collectives: [allgather]
  sizes: [1MB]
  formulations: [{name: "beside_ring:BesideRing", label: Beside}]
"""

HOSTILE = '''
import pathlib

MARK = pathlib.Path(__file__).with_name("CALLED")


def factory():
    MARK.write_text("the factory was called")
    raise SystemExit(7)


class NoSynthesize:
    name = "no-synthesize"
    kind = "schedule"

    def __init__(self):
        MARK.write_text("the class was instantiated")
'''

PROBE = '''
import json
import os
import sys

from workbench.kit.examples import ring_allgather
from workbench.plugin.registry import SynthesisResult


class Probe:
    name = "probe"
    kind = "schedule"

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        with open("cell_sys_path.json", "w") as handle:
            json.dump({"path": sys.path, "cwd": os.getcwd()}, handle)
        algorithm = ring_allgather(problem.collective.num_ranks, problem.chunk_bytes, problem.topology)
        return SynthesisResult([algorithm], "feasible", 0.0)
'''

SYNTH = ["--topology", "ring:4", "--collective", "allgather", "--size", "1MB"]


def _clean_env() -> dict[str, str]:
    """This process's environment without PYTHONPATH: only the installed packages are importable."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONSAFEPATH", None)
    return env


@pytest.fixture(scope="module")
def beside_run(tmp_path_factory):
    """One real run: started with ``python -m workbench`` in a folder holding a stray ``numpy.py``
    and ``json.py``, its config naming a formulation module that sits beside the config."""
    base = tmp_path_factory.mktemp("untrusted")
    work, experiment = base / "work", base / "experiment"
    work.mkdir()
    experiment.mkdir()
    for name in ("numpy", "json"):  # the cell imports both; `python -m` would put this folder first
        (work / f"{name}.py").write_text(STRAY.format(name=name))
    (experiment / "beside_ring.py").write_text(BESIDE)
    (experiment / "beside.yaml").write_text(CONFIG)
    out = base / "run"
    done = subprocess.run([sys.executable, "-m", "workbench", "run", str(experiment / "beside.yaml"), "--out", str(out),
                           "--no-figures"], cwd=work, env=_clean_env(), capture_output=True, text=True, timeout=180)
    return done, work, experiment, out


def test_a_stray_module_in_the_current_folder_never_runs(beside_run):
    done, work, _, out = beside_run
    assert not (work / "STRAY_RAN").exists(), (work / "STRAY_RAN").read_text()
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["feasible"], rows


def test_a_module_beside_the_config_is_loaded_by_its_file_location(beside_run):
    done, _, experiment, out = beside_run
    assert done.returncode == 0, done.stderr
    (row,) = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert row["formulation_name"] == "beside_ring:BesideRing"
    assert row["message"] == (f"loaded from {(experiment / 'beside_ring.py').resolve()}; "
                              f"its folder on sys.path: False")


def test_the_cell_environment_never_holds_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", ".", "relative", str(tmp_path)] + sys.path)
    env = _child_env()
    entries = env["PYTHONPATH"].split(os.pathsep)
    assert str(tmp_path) not in entries and "" not in entries and "." not in entries
    assert all(os.path.isabs(e) for e in entries) and env["PYTHONSAFEPATH"] == "1"
    # started from a checkout's top folder: the package's folder comes back, after everything else
    root = package_root()
    monkeypatch.chdir(root)
    assert safe_sys_path(["", root, str(tmp_path)]) == [str(tmp_path), root]


def test_synth_finds_a_module_in_the_current_folder_and_its_cell_imports_nothing_from_there(
        tmp_path, monkeypatch, capsys):
    (tmp_path / "probe_module.py").write_text(PROBE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", str(tmp_path)] + sys.path)  # as `python -c` in this folder has it
    monkeypatch.delitem(sys.modules, "probe_module", raising=False)
    try:
        assert main(["synth", "probe_module:Probe", *SYNTH, "-o", str(tmp_path / "out.json")]) == 0
    finally:
        registry.unregister("probe_module:Probe")
        sys.modules.pop("probe_module", None)
    seen = json.loads((tmp_path / "cell_sys_path.json").read_text())  # written inside the cell
    assert seen["cwd"] == str(tmp_path)
    assert "" not in seen["path"] and str(tmp_path) not in seen["path"]


@pytest.mark.parametrize("attribute", ["factory", "NoSynthesize"])
def test_a_factory_or_a_class_without_synthesize_is_refused_uncalled(attribute, tmp_path, monkeypatch, capsys):
    (tmp_path / "hostile_module.py").write_text(HOSTILE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "hostile_module", raising=False)
    try:
        code = main(["synth", f"hostile_module:{attribute}", *SYNTH, "-o", str(tmp_path / "out.json")])
    finally:
        sys.modules.pop("hostile_module", None)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and not (tmp_path / "CALLED").exists()
    assert len(err) == 1 and "is not a formulation class or object" in err[0], err
    assert ("no synthesize()" if attribute == "NoSynthesize" else "it was not called") in err[0]


def test_os_abort_and_os_system_are_refused_uncalled(tmp_path):
    script = ("import sys\nfrom workbench.cli import main\n"
              "for name in ('os:abort', 'os:system'):\n"
              f"    print(name, main(['synth', name, *{SYNTH!r}, '-o', 'out.json']), flush=True)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=_clean_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr  # os.abort() would have killed it (SIGABRT)
    assert done.stdout.split("\n")[:2] == ["os:abort 2", "os:system 2"]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and all("is not a formulation class or object" in line and "it was not called" in line
                                   for line in lines), lines


@pytest.fixture
def live_folder(beside_run, tmp_path):
    """A copy of the real run's folder whose lock names a live process (a sleeping child)."""
    folder = tmp_path / "run"
    shutil.copytree(beside_run[3], folder)
    sleeper = subprocess.Popen(["sleep", "60"])
    (folder / ".lock").write_text(json.dumps({"host": socket.gethostname(), "pid": sleeper.pid,
                                              "started": "2024-01-01 00:00:00"}))
    try:
        yield folder, sleeper
    finally:
        sleeper.kill()
        sleeper.wait()


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


def test_rebound_refuses_a_folder_a_live_run_holds(live_folder, capsys):
    folder, sleeper = live_folder
    before = _snapshot(folder)
    assert main(["rebound", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"PID {sleeper.pid} on {socket.gethostname()}" in err[0], err
    assert _snapshot(folder) == before  # rows.jsonl: the same bytes and mtime


def test_report_reads_a_live_folder_and_writes_nothing_into_it(live_folder, capsys):
    folder, sleeper = live_folder
    (folder / "table.md").unlink()
    (folder / "table.csv").unlink()
    with open(folder / "rows.jsonl", "a") as handle:
        handle.write('{"cell_id": "being-written')  # a row the live run is still appending
    before = _snapshot(folder)
    assert main(["report", str(folder), "--no-figures"]) == 0
    out, err = capsys.readouterr()
    assert "Beside" in out and f"PID {sleeper.pid}" in err and "nothing was written" in err
    assert len(err.strip().splitlines()) == 1 and "skipped" not in err
    assert _snapshot(folder) == before
    sleeper.kill()
    sleeper.wait()  # now the lock is stale: the report takes it over, writes, and lets it go
    assert main(["report", str(folder), "--no-figures"]) == 0
    assert (folder / "table.md").exists() and not (folder / ".lock").exists()
