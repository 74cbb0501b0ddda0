"""Module names retired in 0.2 (``workbench.retired``): importing one fails at once with an
ImportError naming the new module, ``python -m`` on one says the same, no import hook is installed,
and nothing in the project itself uses an old name."""

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.retired import RETIRED

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("old", sorted(RETIRED))
def test_an_old_name_fails_naming_its_new_module(old):
    new = f"workbench.{RETIRED[old]}"
    importlib.import_module(new)
    with pytest.raises(ImportError, match=re.escape(f"workbench.{old} moved to {new}")):
        importlib.import_module(f"workbench.{old}")


def test_a_name_that_never_existed_still_fails_as_missing():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("workbench.no_such_module")


def test_every_retired_name_has_its_stub_and_every_stub_a_name():
    stubs = {path.stem for path in (ROOT / "workbench" / "_retired").glob("*.py")}
    assert stubs == set(RETIRED)
    for new in RETIRED.values():
        assert (ROOT / "workbench" / (new.replace(".", "/") + ".py")).is_file(), new


def test_no_import_hook_is_installed():
    import workbench  # noqa: F401

    assert all(type(finder).__module__.split(".")[0] != "workbench" for finder in sys.meta_path)


def test_python_m_on_an_old_name_says_where_it_went():
    done = subprocess.run([sys.executable, "-m", "workbench.cell_monitor"], capture_output=True, text=True)
    assert done.returncode != 0 and "moved to workbench.run.monitor" in done.stderr


OLD = re.compile(r"\bworkbench\.(" + "|".join(map(re.escape, RETIRED)) + r")\b(?!/\d)")  # not workbench.algorithm/1


@pytest.mark.parametrize("folder", ["workbench", "formulations", "tests", "benchmarks"])
def test_the_project_itself_uses_only_the_new_names(folder):
    offenders = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        if path.name in ("retired.py", "test_retired_names.py") or path.parent.name == "_retired":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = OLD.findall(node.value) and [node.value]
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno}: {name}" for name in names
                          if OLD.search(name)]
    assert offenders == []
