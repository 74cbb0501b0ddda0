"""Every public function and method of ``workbench`` and ``formulations`` has a docstring.

Public: a name not starting with ``_``, at module level or in a public class (dunder methods are
private by that rule). Nested functions are implementation details and are not looked at.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("workbench", "formulations")

def _undocumented(body: list[ast.stmt], where: str) -> list[str]:
    """``where:line name`` of each public function in ``body`` (and in its public classes) without a docstring."""
    found = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not node.name.startswith("_") and not ast.get_docstring(node):
                found.append(f"{where}:{node.lineno} {node.name}")
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            found.extend(f"{entry} (in {node.name})" for entry in _undocumented(node.body, where))
    return found


def test_every_public_function_has_a_docstring():
    missing = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            missing.extend(_undocumented(ast.parse(path.read_text(), relative).body, relative))
    assert not missing, f"{len(missing)} public functions without a docstring:\n" + "\n".join(missing)


def test_the_rule_sees_a_missing_docstring():
    source = 'def shown():\n    pass\n\nclass Open:\n    def method(self):\n        """Said."""\n'
    assert _undocumented(ast.parse(source).body, "m.py") == ["m.py:1 shown"]
