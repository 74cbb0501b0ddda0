"""The repository stands alone: no code, test, config, benchmark or document reaches for files
beside it (the method notes live in docs/methods/, LIBRA's inputs in data/libra/ with their licence)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ["workbench", "formulations", "tests", "benchmarks", "experiments", "docs", "examples", "results", "data"]
SUFFIXES = {".py", ".yaml", ".yml", ".md", ".toml", ".json", ".jsonl", ".txt", ".cfg"}
OUTSIDE = re.compile(r"\.\./shared|shared/(spec|data|papers)|DESIGN\.md|prior-art\.md|parents\[1\]\.parent")


def _files() -> list[Path]:
    files = [ROOT / name for name in ("README.md", "Makefile", "pyproject.toml", ".ci/run")]
    for folder in FOLDERS:
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in SUFFIXES and p.stat().st_size < 5_000_000]
    return [p for p in files if p.is_file() and p != Path(__file__)]


@pytest.mark.parametrize("folder", ["top"] + FOLDERS)
def test_nothing_points_outside_the_repository(folder):
    chosen = [p for p in _files() if (p.parent == ROOT) == (folder == "top")
              and (folder == "top" or p.relative_to(ROOT).parts[0] == folder)]
    offenders = [f"{p.relative_to(ROOT)}:{n}: {line.strip()[:100]}" for p in chosen
                 for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if OUTSIDE.search(line)]
    assert offenders == []


def test_libra_inputs_travel_with_their_licence():
    data = ROOT / "data" / "libra"
    assert "MIT License" in (data / "LICENSE").read_text()
    for kind, count in (("network", 2), ("communicator", 8), ("cost_model", 2), ("workload", 5)):
        assert len(list((data / kind).iterdir())) == count, kind
