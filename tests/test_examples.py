"""Every README command that names a file under examples/ runs as written (outputs go to a temporary folder)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from workbench.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("workbench ") and "examples/" in line:
                commands.append(line)
    return commands


COMMANDS = _readme_commands()


def test_the_readme_uses_every_example_file():
    shipped = {p.name for p in (ROOT / "examples").iterdir() if p.is_file()}  # star/: tests/test_example_formulation.py
    named = {m for c in COMMANDS for m in re.findall(r"examples/([\w.]+)", c)}
    assert shipped == named and len(COMMANDS) >= 5


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_example_runs(command, tmp_path, monkeypatch, capsys):
    words = shlex.split(command)[1:]
    for i, word in enumerate(words):
        if words[i - 1] in ("-o", "--output") and i > 0:
            words[i] = str(tmp_path / Path(word).name)
        elif word.startswith("examples/"):
            words[i] = str(ROOT / word)
    monkeypatch.chdir(tmp_path)
    assert main(words) == 0, capsys.readouterr().err
