"""The size rule is per function, not per file: ruff's ``C901`` (McCabe complexity at most 15) and
``PLR0915`` (at most 60 statements), configured under ``[tool.ruff.lint]`` in pyproject.toml.

The rule is asserted over ``workbench/`` and ``formulations/``: a function over it fails the test.

Skipped when ruff is not installed (it is in the ``dev`` extra).
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ASSERTED = ("workbench", "formulations")


def _ruff() -> list[str]:
    exe = shutil.which("ruff")
    if exe is None:
        candidate = Path(sys.executable).with_name("ruff")
        if candidate.exists():
            exe = str(candidate)
    if exe is not None:
        return [exe]
    probe = subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True)
    if probe.returncode == 0:
        return [sys.executable, "-m", "ruff"]
    pytest.skip("ruff is not installed (pip install -e '.[dev]')")


def _over_the_rule(folder: str) -> list[str]:
    """One line per function over the rule in ``folder``, read with the project's configuration."""
    done = subprocess.run(
        [*_ruff(), "check", "--no-cache", "--exit-zero", "--output-format", "json",
         "--config", str(ROOT / "pyproject.toml"), folder],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout or "[]")
    return sorted(
        f"{Path(f['filename']).relative_to(ROOT)}:{f['location']['row']}: {f['code']} {f['message']}"
        for f in found
    )


def test_the_rule_is_configured():
    text = (ROOT / "pyproject.toml").read_text()
    for line in ('select = ["C901", "PLR0915"]', "max-complexity = 15", "max-statements = 60"):
        assert line in text


@pytest.mark.parametrize("folder", ASSERTED)
def test_no_function_over_the_rule(folder):
    over = _over_the_rule(folder)
    assert not over, f"{len(over)} over the function rule:\n" + "\n".join(over)
