"""One run per folder: a second run is refused with the holder named; a dead holder's lock is taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from workbench.run.lock import RunLock, RunLockError

SPIN = '''
import time

from workbench.plugin.registry import SynthesisResult


class Spin:
    name = "spin"
    kind = "schedule"

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        time.sleep(min(time_limit, 3.0))
        return SynthesisResult([], "timeout", time_limit)
'''

CONFIG = """
name: spin
time_limit: 30s
seeds: [0]
grid:
  topologies: [{spec: "ring:4"}, {spec: "ring:6"}, {spec: "ring:8"}]
  collectives: [allgather]
  sizes: [1MB]
  formulations: [{name: "spin:Spin"}]
"""


def test_a_live_holder_is_named_and_a_dead_one_taken_over(tmp_path):
    with RunLock(tmp_path):
        with pytest.raises(RunLockError, match=rf"another run writes here \(PID {os.getpid()} on "):
            RunLock(tmp_path).acquire()
    assert not (tmp_path / ".lock").exists()  # released on exit
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    (tmp_path / ".lock").write_text(json.dumps({"host": socket.gethostname(), "pid": finished.pid,
                                                "started": "earlier"}))
    with RunLock(tmp_path):  # its process is gone: stale
        assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
    (tmp_path / ".lock").write_text(json.dumps({"host": "elsewhere", "pid": 1, "started": "earlier"}))
    with pytest.raises(RunLockError, match="on elsewhere"):  # another host: never guessed stale
        RunLock(tmp_path).acquire()


def test_a_second_run_on_a_busy_folder_is_refused(tmp_path):
    (tmp_path / "spin.py").write_text(SPIN)
    (tmp_path / "spin.yaml").write_text(CONFIG)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path)] + sys.path))
    command = [sys.executable, "-m", "workbench", "run", str(tmp_path / "spin.yaml"), "--no-figures",
               "--results-dir", str(tmp_path / "results")]
    first = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
    try:
        lock = tmp_path / "results" / "spin" / ".lock"
        deadline = time.monotonic() + 60
        while not lock.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lock.exists()
        second = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and f"PID {first.pid} on" in lines[0] and "Traceback" not in second.stderr
        assert first.wait(timeout=120) == 0, first.stderr.read()
    finally:
        if first.poll() is None:
            first.kill()
    rows = [json.loads(line) for line in (tmp_path / "results" / "spin" / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and len({r["cell_id"] for r in rows}) == 3
    assert not lock.exists()
