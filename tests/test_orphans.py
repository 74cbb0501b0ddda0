"""Cell processes die with the process that started them, however it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SPIN = '''
import time

from workbench.plugin.registry import SynthesisResult


class Spin:
    """Busy until its time limit: stands for a solver that would outlive a killed parent."""

    name = "spin"
    kind = "schedule"

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        end = time.monotonic() + time_limit
        while time.monotonic() < end:
            sum(range(10000))
        return SynthesisResult([], "timeout", time_limit)
'''


def _cells(parent: int) -> list[int]:
    """PIDs of live cell processes of ``parent``: started as ``workbench.run.cell``, or forked from it
    (``workbench synth``), in which case they run in a session of their own."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            status = (entry / "status").read_text()
            session = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[3])
        except (OSError, IndexError, ValueError):
            continue
        if f"PPid:\t{parent}\n" not in status or "State:\tZ" in status:
            continue
        if b"workbench.run.cell" in command or session == int(entry.name):
            found.append(int(entry.name))
    return found


def _orphans(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if "State:\tZ" not in status:
            alive.append(pid)
    return alive


CONFIG = """
name: spin
time_limit: 2min
seeds: [0]
grid:
  topologies: [{spec: "ring:4"}, {spec: "ring:6"}]
  collectives: [allgather]
  sizes: [1MB]
  formulations: [{name: "spin:Spin"}]
"""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("command", ["synth", "run"])
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_killing_the_parent_kills_its_cells(tmp_path, command, how):
    (tmp_path / "spin.py").write_text(SPIN)
    (tmp_path / "spin.yaml").write_text(CONFIG)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path)] + sys.path))
    if command == "synth":
        arguments = ["synth", "spin:Spin", "--topology", "ring:4", "--collective", "allgather", "--size", "1MB",
                     "--time-limit", "120", "-o", str(tmp_path / "out.json")]
    else:
        arguments = ["run", str(tmp_path / "spin.yaml"), "--jobs", "2", "--results-dir", str(tmp_path / "results")]
    parent = subprocess.Popen([sys.executable, "-m", "workbench"] + arguments,
                              cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cells: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not cells and time.monotonic() < deadline:
            time.sleep(0.2)
            cells = _cells(parent.pid)
        assert cells, "the cell process never started"
        time.sleep(4)  # past its start-up (a child still reading its request would exit on its own)
        parent.send_signal(how)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 5
        while _orphans(cells) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _orphans(cells), f"cell processes {cells} outlived their parent"
        assert not (tmp_path / "out.json").exists()
    finally:
        if parent.poll() is None:
            parent.kill()
        for pid in _orphans(cells):  # on failure, do not leave them spinning
            os.kill(pid, signal.SIGKILL)
