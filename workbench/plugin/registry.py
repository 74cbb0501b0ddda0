"""Formulations and how they are found.

The stable surface a formulation (ours or a researcher's plug-in) is written against:

* ``Formulation``: any object with ``name``, ``kind`` (``"schedule"`` or ``"design"``) and
  ``synthesize(problem, *, time_limit, seed, on_incumbent=None, **params)``; ``on_incumbent``
  receives each better algorithm as it is found (kept if a time limit then ends the run);
* ``Problem`` (topology, collective, nccl-tests size) in, ``SynthesisResult`` (algorithms, status,
  seconds, stats, claimed times, message) out; design formulations (LIBRA) take a
  ``DesignProblem`` and return a ``DesignResult``;
* the options object (``workbench.plugin.parameters``): a formulation that names an ``Options`` dataclass
  in its ``options`` attribute gets its params checked, defaulted, described and stamped by the
  floor, and is called with ``options=`` (that object) instead of keyword params; one without it
  gets the params as keywords, as they were written. A design formulation may name, in ``metrics``, the
numeric keys of ``DesignResult.stats`` that a design table can show beside the common status,
bandwidth, time and cost (``table.metrics``; grouped rows get their mean and max).

Formulations are registered with ``register`` or discovered through the
``workbench.formulations`` entry-point group, whose entries point at a formulation class or a
formulation object. A researcher's own package can add one without touching ours:

    [project.entry-points."workbench.formulations"]
    mine = "my_package.module:MyFormulation"

What an import path or entry point names is checked before anything of it is called: a class
must carry ``name`` (a string), ``kind`` and a callable ``synthesize`` as class attributes and is
then instantiated with no arguments; an object must carry the same. Nothing else is accepted, not
even a zero-argument factory, so ``os:system`` or ``os:abort`` is refused (``FormulationError``)
without being called. Importing the named module still runs its top level: an import path runs
code from that module.

An import path's module is looked up on ``sys.path``; a plain module name (no dots) that is not
there is loaded from ``<folder>/<module>.py`` by its file location, that one file only: the folder
(an experiment config's folder, else the current one) is never put on ``sys.path``, so nothing in
it can shadow a library, and the module's own ``import`` of a sibling module in that folder fails.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Protocol, runtime_checkable

from workbench.model.algorithm import Algorithm
from workbench.model.collective import Collective, make_collective
from workbench.kit.solvers import STATUSES, Status, smt_status
from workbench.topology import Topology
from workbench.plugin.installed import entry_points

__all__ = [
    "row_facts",
    "Problem",
    "DesignProblem",
    "SynthesisResult",
    "DesignResult",
    "Formulation",
    "FormulationError",
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

IncumbentCallback = Callable[[Any], None]


class FormulationError(LookupError):
    """An unknown or broken formulation."""


@dataclass
class Problem:
    """A schedule synthesis problem: topology, collective and the nccl-tests size in bytes."""

    topology: Topology
    collective: Collective
    size_bytes: float

    @property
    def chunk_bytes(self) -> float:
        """Bytes per chunk: the size cut as the collective's chunking says."""
        return self.collective.chunk_bytes(self.size_bytes)

    def describe(self) -> str:
        """One line naming the collective, the size and the topology."""
        return f"{self.collective.describe()} of {self.size_bytes:g} B on {self.topology.name}"

    def with_chunks(self, k: int) -> "Problem":
        """The same problem (topology, kind, root, size) cut into ``k`` chunks per rank (per pair
        for All-to-All); a custom collective keeps its own chunks."""
        collective = self.collective
        if k == collective.chunks_per_rank or collective.kind == "custom":
            return self
        return Problem(self.topology, make_collective(collective.kind, collective.num_ranks, k, collective.root),
                       self.size_bytes)


@dataclass
class DesignProblem:
    """A network design problem (LIBRA): dimensions, workloads, cost model, constraints, objective."""

    dimensions: list[dict[str, Any]]
    workloads: list[dict[str, Any]] = field(default_factory=list)
    cost_model: dict[str, Any] = field(default_factory=dict)
    constraints: dict[str, Any] = field(default_factory=dict)
    objective: str = "performance"


@dataclass
class SynthesisResult:
    """What a schedule formulation returns: zero or more algorithms (one per Pareto point)."""

    algorithms: list[Algorithm]
    status: str
    wall_seconds: float
    stats: dict[str, Any] = field(default_factory=dict)  # variables, constraints, gap, bound, nodes
    claimed_times: list[float | None] = field(default_factory=list)
    message: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if not self.claimed_times:
            self.claimed_times = [a.meta.get("claimed_time") for a in self.algorithms]


@dataclass
class DesignResult:
    """What a design formulation returns: per-dimension bandwidths and the modelled time and cost."""

    bandwidths: list[float]
    time: float | None
    cost: float | None
    status: str
    wall_seconds: float
    stats: dict[str, Any] = field(default_factory=dict)
    message: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")


@runtime_checkable
class Formulation(Protocol):
    """What the runner calls (module docstring). A formulation with an ``options`` declaration
    receives ``options=`` and no other params; ``time_limit`` is in seconds."""

    name: str
    kind: Literal["schedule", "design"]

    def synthesize(self, problem: Any, *, time_limit: float, seed: int,
                   on_incumbent: IncumbentCallback | None = None, options: Any = None, **params: Any) -> Any:
        """A ``SynthesisResult`` (``DesignResult`` for a design) within ``time_limit`` seconds,
        reporting each improved answer to ``on_incumbent``."""
        ...


_REGISTRY: dict[str, Formulation] = {}
_DISCOVERED = False


def row_facts(formulation: Any) -> dict[str, str | None]:
    """A formulation's own algorithm facts its rows carry, meta key -> role: its ``row_facts``
    declaration, a list of meta keys (no roles) or a mapping of meta key to the role a figure reads
    it in (``workbench.reports.row_keys.CHUNKS_ROLE``); empty when it declares none."""
    declared = getattr(formulation, "row_facts", None) or ()
    return dict(declared) if isinstance(declared, dict) else {key: None for key in declared}


def register(formulation: Any, name: str | None = None) -> Formulation:
    """Add a formulation (an instance, or a class instantiated with no arguments) under its name.

    Anything else is refused with ``FormulationError`` before it is called (see the module docstring).
    """
    instance = _instantiate(formulation)
    key = name or instance.name
    _REGISTRY[key] = instance
    return instance


def unregister(name: str) -> None:
    """Forget the formulation registered as ``name`` (nothing if there is none)."""
    _REGISTRY.pop(name, None)


_KINDS = ("schedule", "design")


def _shape_fault(obj: Any) -> str | None:
    """Why ``obj`` is not a formulation class or object (None: it is one).

    A class is read with ``inspect.getattr_static`` so that checking it runs none of its code
    (no metaclass ``__getattr__``, no descriptor); an object may have set its attributes itself.
    """
    is_class = isinstance(obj, type)
    missing = object()
    read = inspect.getattr_static if is_class else getattr
    try:
        name = read(obj, "name", missing)
        kind = read(obj, "kind", missing)
        synthesize = read(obj, "synthesize", missing)
    except Exception as exc:  # an object whose attributes raise is no formulation
        return f"reading its attributes failed ({type(exc).__name__}: {exc})"
    where = "as a class attribute" if is_class else ""
    if not isinstance(name, str):
        return f"it has no string 'name' {where}".rstrip()
    if not isinstance(kind, str) or kind not in _KINDS:
        return f"its 'kind' must be 'schedule' or 'design' {where}".rstrip()
    if not (callable(synthesize) or isinstance(synthesize, (staticmethod, classmethod))):
        return "it has no synthesize() method"
    return None


def _instantiate(obj: Any) -> Formulation:
    """A formulation from a class (checked first, then called with no arguments) or an object;
    a function or any other callable is refused uncalled (it could be ``os.system``)."""
    fault = _shape_fault(obj)
    if fault is not None:
        uncalled = "; it was not called" if callable(obj) and not isinstance(obj, type) else ""
        raise FormulationError(f"{_describe(obj)} is not a formulation class or object: {fault}{uncalled} "
                               f"(a formulation has name, kind and synthesize())")
    if not isinstance(obj, type):
        return obj
    try:
        instance = obj()
    except Exception as exc:
        raise FormulationError(f"formulation class {_describe(obj)} could not be created: "
                               f"{type(exc).__name__}: {exc}") from None
    fault = _shape_fault(instance)
    if fault is not None:
        raise FormulationError(f"an instance of {_describe(obj)} is not a formulation: {fault}")
    return instance


def _describe(obj: Any) -> str:
    """A short name for an object in a one-line error (its qualified name, not a long repr)."""
    qualified = getattr(obj, "__qualname__", None)
    if isinstance(qualified, str) and qualified:
        module = getattr(obj, "__module__", None)
        return f"{module}.{qualified}" if isinstance(module, str) else qualified
    text = repr(obj)
    return text if len(text) <= 80 else text[:77] + "..."


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
        _REGISTRY[entry.name] = _instantiate(entry.load())
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
