"""An interrupted --fresh run is finished by the command its interrupt message names, nothing recomputed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from test_run_lock import CONFIG, SPIN


def test_an_interrupted_fresh_run_is_resumed_by_the_same_command(tmp_path):
    (tmp_path / "spin.py").write_text(SPIN)
    (tmp_path / "spin.yaml").write_text(CONFIG)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path)] + sys.path))
    command = [sys.executable, "-m", "workbench", "run", "spin.yaml", "--fresh", "--no-figures",
               "--results-dir", "results"]
    # a background shell starts its jobs with SIGINT ignored, and children inherit that: restore it
    first = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    runs = tmp_path / "results" / "runs"
    deadline = time.monotonic() + 90
    rows: list[str] = []
    while time.monotonic() < deadline and not rows:
        time.sleep(0.2)
        found = list(runs.glob("spin-*/rows.jsonl")) if runs.is_dir() else []
        rows = found[0].read_text().splitlines() if found else []
    assert rows, "no cell finished"
    first.send_signal(signal.SIGINT)
    assert first.wait(timeout=60) == 130
    message = first.stderr.read()
    assert "run `workbench run spin.yaml --fresh` to finish the other" in message
    [folder] = list(runs.iterdir())
    before = (folder / "rows.jsonl").read_text().splitlines()
    assert 1 <= len(before) < 3
    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"resuming the unfinished fresh run in {folder.relative_to(tmp_path)}" in again.stderr
    assert list(runs.iterdir()) == [folder]
    after = (folder / "rows.jsonl").read_text().splitlines()
    assert after[:len(before)] == before  # finished cells untouched
    assert len(after) == 3 and len({json.loads(line)["cell_id"] for line in after}) == 3
