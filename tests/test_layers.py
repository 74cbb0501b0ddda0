"""The house's floors, read from the source: every import (at module level or inside a function)
of ``workbench`` and ``formulations`` is followed, and

* the floor (``workbench``) never imports ``formulations``;
* no formulation imports another formulation;
* no two modules import each other, directly or round a longer circle;
* the floor's packages stand in role order and import only their own role or one below:
  utilities, the model, checking, the synthesis kit, bounds, the plug-in surface, runtime interop,
  the harness (``ROLES``; the top-level ``__main__`` is harness).

(The size rule is per function, not per file: tests/test_function_rule.py.)
"""

import ast
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("workbench", "formulations")
# the floor by role, lowest first: a package imports its own role or those before it, never after
ROLES = (
    ("utilities", {"util"}),
    ("model", {"model", "topology"}),
    ("checking", {"checking", "compiled"}),
    ("synthesis kit", {"kit"}),
    ("bounds", {"bounds"}),
    ("plug-in surface", {"plugin"}),
    ("runtime interop", {"msccl", "mscclpp"}),
    ("harness", {"run", "config", "reports", "cli", "__main__"}),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The project module an imported name lives in (a name may be a module or a name inside one)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every project module ``module`` imports, wherever the import statement stands."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for name in names:
            target = _resolve(name, known)
            if target is not None and target != module and not module.startswith(target + "."):
                found.add(target)  # a package's own __init__ imported by its submodules is not an edge back
    return found


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {module: _imports(module, path, known) for module, path in known.items()}


def _formulation(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "formulations" and len(parts) > 1 else None


def test_the_floor_never_imports_a_formulation():
    upward = [(m, t) for m, targets in _graph().items() if m.startswith("workbench") for t in targets
              if t.startswith("formulations")]
    assert not upward, upward


def test_no_formulation_imports_another():
    crossing = [(m, t) for m, targets in _graph().items() for t in targets
                if _formulation(m) and _formulation(t) and _formulation(m) != _formulation(t)]
    assert not crossing, crossing


def _role(module: str) -> int | None:
    """The index in ``ROLES`` of a floor module's role (None outside the floor or for the package itself)."""
    parts = module.split(".")
    if parts[0] != "workbench" or len(parts) == 1:
        return None
    return next((i for i, (_, packages) in enumerate(ROLES) if parts[1] in packages), -1)


def test_every_floor_module_has_a_role():
    assert [m for m in _modules() if _role(m) == -1] == []


def test_the_floor_imports_only_its_own_role_or_below():
    upward = [f"{m} ({ROLES[_role(m)][0]}) -> {t} ({ROLES[_role(t)][0]})" for m, targets in _graph().items()
              if (_role(m) or 0) >= 0 for t in targets
              if _role(m) is not None and _role(t) is not None and _role(t) > _role(m)]
    assert upward == []


def test_the_role_rule_sees_an_upward_import():
    assert _role("workbench.util.units") < _role("workbench.run.runner")
    assert _role("workbench") is None and _role("formulations.tacos") is None


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_no_import_circle():
    assert _circles(_graph()) == []


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []

