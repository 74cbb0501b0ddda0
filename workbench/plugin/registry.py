"""Formulations and how they are found: registered by name, installed as entry points, or named by import path.

This module is also where a formulation imports the plug-in surface from (docs/adding-a-formulation.md):
it offers the ``Formulation`` protocol, ``FormulationError``, ``Unsupported`` and ``row_facts``
(``workbench.plugin.formulation``: what a formulation is), ``synthesize`` (``workbench.plugin.call``:
how one is called), ``Problem`` and ``SynthesisResult``, and for a
design formulation (LIBRA) ``DesignProblem`` and ``DesignResult`` (``workbench.plugin.problem``: what
it is handed and hands back), and the statuses (``workbench.kit.solvers``).

Formulations are registered with ``register`` or discovered through the
``workbench.formulations`` entry-point group, whose entries point at a formulation class or a
formulation object. A researcher's own package can add one without touching ours:

    [project.entry-points."workbench.formulations"]
    mine = "my_package.module:MyFormulation"

What an import path or entry point names is checked before anything of it is called
(``workbench.plugin.formulation.instantiate``): ``os:system`` or ``os:abort`` is refused
(``FormulationError``) without being called. Importing the named module still runs its top level:
an import path runs code from that module.

An import path's module is looked up on ``sys.path``; a plain module name (no dots) that is not
there is loaded from ``<folder>/<module>.py`` by its file location, that one file only: the folder
(an experiment config's folder, else the current one) is never put on ``sys.path``, so nothing in
it can shadow a library, and the module's own ``import`` of a sibling module in that folder fails.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from workbench.kit.solvers import STATUSES, Status, smt_status
from workbench.plugin.call import synthesize
from workbench.plugin.formulation import Formulation, FormulationError, Unsupported, instantiate, row_facts
from workbench.plugin.installed import entry_points
from workbench.plugin.problem import DesignProblem, DesignResult, Problem, SynthesisResult

__all__ = [
    "row_facts",
    "Problem",
    "DesignProblem",
    "SynthesisResult",
    "DesignResult",
    "Formulation",
    "FormulationError",
    "Unsupported",
    "synthesize",
    "STATUSES",
    "Status",
    "smt_status",
    "register",
    "unregister",
    "get_formulation",
    "resolve_formulation",
    "available_formulations",
    "ENTRY_POINT_GROUP",
]

ENTRY_POINT_GROUP = "workbench.formulations"

_REGISTRY: dict[str, Formulation] = {}
_DISCOVERED = False


def register(formulation: Any, name: str | None = None) -> Formulation:
    """Add a formulation (an instance, or a class instantiated with no arguments) under its name.

    Anything else is refused with ``FormulationError`` before it is called (see the module docstring).
    """
    instance = instantiate(formulation)
    key = name or instance.name
    _REGISTRY[key] = instance
    return instance


def unregister(name: str) -> None:
    """Forget the formulation registered as ``name`` (nothing if there is none)."""
    _REGISTRY.pop(name, None)


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    for entry in entry_points(ENTRY_POINT_GROUP):
        if entry.name not in _REGISTRY:
            _load_entry(entry)


def _load_entry(entry: Any) -> None:
    try:
        _REGISTRY[entry.name] = instantiate(entry.load())
    except Exception as exc:  # a broken plug-in must not hide the others
        _BROKEN[entry.name] = f"{type(exc).__name__}: {exc}"


_BROKEN: dict[str, str] = {}


def refresh() -> None:
    """Forget discovered entry points (tests install and remove plug-ins)."""
    global _DISCOVERED
    _DISCOVERED = False
    _BROKEN.clear()


def available_formulations() -> list[str]:
    """The registered names, entry points of ``workbench.formulations`` included, sorted."""
    _discover()
    return sorted(_REGISTRY)


def resolve_formulation(name: str, folder: str | Path | None = None) -> Formulation:
    """A registered name, or an import path ``module:Attribute`` naming a formulation class or object.

    Importing the module runs its top level. The module is looked up on ``sys.path``; a plain
    module name that is not there is loaded from ``<folder>/<module>.py`` by its file location
    (``folder``: an experiment config's folder; None, the current folder), the folder itself never
    going on ``sys.path``. The attribute is checked before it is called (see ``register``).
    """
    if ":" in name and name not in _REGISTRY:
        module_name, _, attribute = name.partition(":")
        module = _import_module(name, module_name, folder)
        try:
            target = getattr(module, attribute)
        except Exception as exc:  # AttributeError, or a module __getattr__ that raises
            raise FormulationError(f"cannot import formulation {name!r}: {type(exc).__name__}: {exc}") from None
        return register(target, name)
    return get_formulation(name)


def _import_module(name: str, module_name: str, folder: str | Path | None) -> Any:
    """The module of import path ``name``: from ``sys.path``, else (a plain name only) the file
    ``<folder>/<module_name>.py`` by its location; every failure is one ``FormulationError`` line."""
    try:
        if not module_name or any(not part.isidentifier() for part in module_name.split(".")):
            raise FormulationError(f"cannot import formulation {name!r}: {module_name!r} is not a module name")
        found = module_name in sys.modules or importlib.util.find_spec(module_name) is not None
        if found:
            return importlib.import_module(module_name)
        file = Path(os.getcwd() if folder is None else folder) / f"{module_name}.py"
        if "." in module_name or not file.is_file():
            raise FormulationError(f"cannot import formulation {name!r}: no module {module_name!r} on the Python "
                                   f"path" + ("" if "." in module_name else f" nor a file {file}"))
        return _load_file(module_name, file)
    except FormulationError:
        raise
    except (Exception, SystemExit) as exc:  # its top level failed (or a parent package is missing)
        raise FormulationError(f"cannot import formulation {name!r}: {type(exc).__name__}: {exc}") from None


def _load_file(module_name: str, file: Path) -> Any:
    """Execute ``file`` as module ``module_name`` (registered in ``sys.modules``, so its classes
    pickle and later look-ups find it; the name is free, as nothing on ``sys.path`` has it)."""
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise FormulationError(f"cannot load {file} as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def _load_one(name: str) -> None:
    """Load just the entry point called ``name`` (a run needs one formulation, not every one's solvers)."""
    if name in _REGISTRY or name in _BROKEN or _DISCOVERED:
        return
    for entry in entry_points(ENTRY_POINT_GROUP):
        if entry.name == name:
            _load_entry(entry)
            return


def get_formulation(name: str) -> Formulation:
    """The formulation registered (or installed as an entry point) under ``name``; ``FormulationError``
    names the available ones when there is none, or why a broken plug-in failed to load."""
    _load_one(name)
    if name in _REGISTRY:
        return _REGISTRY[name]
    _discover()
    if name in _REGISTRY:
        return _REGISTRY[name]
    if name in _BROKEN:
        raise FormulationError(f"formulation {name!r} failed to load: {_BROKEN[name]}")
    known = ", ".join(sorted(_REGISTRY)) or "none registered"
    raise FormulationError(f"unknown formulation {name!r} (available: {known})")

