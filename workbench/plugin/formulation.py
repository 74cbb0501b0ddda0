"""What a formulation is: the ``Formulation`` protocol, and the check that a class or object is one.

A formulation is any object with ``name``, ``kind`` (``"schedule"`` or ``"design"``), ``options``
(an ``Options`` dataclass, ``workbench.plugin.parameters``; absent means the ``Options`` base: no
parameters) and ``synthesize(problem, *, time_limit, seed, options, on_incumbent=None)``. It is
called through ``workbench.plugin.call.synthesize``, which builds ``options`` from the params
(checked, defaulted) before the call; ``on_incumbent`` receives each better algorithm as it is found
(kept if a time limit then ends the run). A problem it does not define a schedule for is refused by
raising ``Unsupported`` with the reason (an ``error`` row naming it). A design formulation may name, in
``metrics``, the numeric keys of ``DesignResult.stats`` that a design table can show beside the
common status, bandwidth, time and cost (``table.metrics``; grouped rows get their mean and max).
A formulation's own algorithm facts for its rows are its ``row_facts`` declaration (``row_facts``).

What an import path or entry point names is checked before anything of it is called
(``instantiate``): a class must carry ``name`` (a string), ``kind`` and a callable ``synthesize``
as class attributes and is then instantiated with no arguments; an object must carry the same.
Nothing else is accepted, not even a zero-argument factory, so ``os:system`` or ``os:abort`` is
refused (``FormulationError``) without being called.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Literal, Protocol, runtime_checkable

__all__ = ["Formulation", "FormulationError", "IncumbentCallback", "Unsupported", "instantiate", "row_facts"]

IncumbentCallback = Callable[[Any], None]


class FormulationError(LookupError):
    """An unknown or broken formulation."""


class Unsupported(ValueError):
    """The formulation defines no schedule for this problem (collective, rank count, fabric); the
    message is the reason, led by the formulation's name."""


@runtime_checkable
class Formulation(Protocol):
    """What ``workbench.plugin.call.synthesize`` calls (module docstring); ``time_limit`` is in seconds."""

    name: str
    kind: Literal["schedule", "design"]

    def synthesize(self, problem: Any, *, time_limit: float, seed: int, options: Any,
                   on_incumbent: IncumbentCallback | None = None) -> Any:
        """A ``SynthesisResult`` (``DesignResult`` for a design) within ``time_limit`` seconds,
        reporting each improved answer to ``on_incumbent``; raises ``Unsupported`` for a problem
        it defines no schedule for."""
        ...


def row_facts(formulation: Any) -> dict[str, str | None]:
    """A formulation's own algorithm facts its rows carry, meta key -> role: its ``row_facts``
    declaration, a list of meta keys (no roles) or a mapping of meta key to the role a figure reads
    it in (``workbench.reports.row_keys.CHUNKS_ROLE``); empty when it declares none."""
    declared = getattr(formulation, "row_facts", None) or ()
    return dict(declared) if isinstance(declared, dict) else {key: None for key in declared}


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


def instantiate(obj: Any) -> Formulation:
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

