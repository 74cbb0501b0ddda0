"""The in-tree example formulation (examples/star/) is the one docs/adding-a-formulation.md shows, and it runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from workbench.cli import main

ROOT = Path(__file__).resolve().parents[1]
STAR = ROOT / "examples" / "star"
DOC = (ROOT / "docs" / "adding-a-formulation.md").read_text()


def _block(first_line: str) -> str:
    """The body of the doc's code block that opens with ``first_line`` (that line left out)."""
    for body in re.findall(r"```\w*\n(.*?)```", DOC, flags=re.S):
        head, _, rest = body.partition("\n")
        if head == first_line:
            return rest
    raise AssertionError(f"docs/adding-a-formulation.md has no block opening with {first_line!r}")


def test_the_doc_shows_the_example_files_as_they_are():
    assert _block("# examples/star/star.py") == (STAR / "star.py").read_text()
    assert _block("# examples/star/pyproject.toml") == (STAR / "pyproject.toml").read_text()


def test_the_example_runs_by_import_path_and_refuses_a_bad_choice(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(STAR)  # `synth` looks an import path's module up in the current folder
    out = tmp_path / "star.json"
    argv = ["synth", "star:Star", "--topology", "torus:4x4", "--collective", "allgather", "--size", "64MB"]
    assert main([*argv, "-o", str(out)]) == 0
    meta = json.loads(out.read_text())["meta"]
    assert meta["formulation"] == "star:Star" and meta["params"] == {"order": "near-first"}
    assert meta["claim_model"] == "pipelined/in-order/cut-through" and meta["claimed_time"] > 0
    capsys.readouterr()
    refused = tmp_path / "s.json"
    assert main([*argv, "--set", "order=sideways", "-o", str(refused)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "order" in err[0] and "'near-first' or 'by-id'" in err[0]
    assert not refused.exists()
