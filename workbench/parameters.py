"""Declared formulation parameters: checked before any cell runs, and shown as help.

A formulation declares ``parameters``: a tuple of ``Parameter`` (name, accepted types, default,
range or choices, one line of help). ``check_parameters`` validates a params mapping (from an
experiment's ``params:`` or ``workbench synth --set``) against it and raises ``ParameterError``
naming the key and the accepted values, so a typo (``restartz``) or an ill-typed value
(``restarts: abc``) is one line and exit 2 instead of a run whose rows are all ``error``.

Validation never rewrites the values: cell ids hash the params as written, and committed
references keep matching. A formulation without declarations (a researcher's own, named by
import path) still runs; its params pass unchecked and ``undeclared_warning`` says so once.

``time_limit`` is the runner's own key (a per-formulation time limit) and is accepted everywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

__all__ = ["Parameter", "ParameterError", "check_parameters", "declared_parameters", "describe_parameters",
           "undeclared_warning", "RUNNER_KEYS"]

RUNNER_KEYS = ("time_limit",)

_TYPE_WORDS = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false",
               "none": "null", "list": "a list", "dict": "a mapping", "duration": "a duration like '20s'"}


class ParameterError(ValueError):
    """A params key that is unknown or whose value the formulation does not accept."""


@dataclass(frozen=True)
class Parameter:
    """One declared parameter.

    ``types``: the accepted kinds, any of int, float, str, bool, none, list, dict, duration.
    ``choices`` restricts the strings; ``minimum``/``maximum`` the numbers (inclusive).
    ``check``: a further test of an accepted value, raising ``ValueError`` with what is wrong (the
    shape of a nested list, or a file the value names: a sketch). It runs where the parameters are
    checked, so bad input is one line before any cell starts, not an error row; with
    ``read_files=False`` (a report on an old run, whose files may have moved) it is skipped.
    """

    name: str
    types: tuple[str, ...]
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    check: Callable[[Any], None] | None = field(default=None, compare=False)

    def accepts(self, value: Any) -> bool:
        return any(self._matches(kind, value) for kind in self.types)

    def _matches(self, kind: str, value: Any) -> bool:
        if kind == "none":
            return value is None
        if kind == "bool":
            return isinstance(value, bool)
        if kind in ("int", "float"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return False
            if kind == "int" and not isinstance(value, int):
                return False
            if not math.isfinite(value):
                return False
            return ((self.minimum is None or value >= self.minimum)
                    and (self.maximum is None or value <= self.maximum))
        if kind == "str":
            return isinstance(value, str) and (not self.choices or value in self.choices)
        if kind == "list":
            return isinstance(value, (list, tuple))
        if kind == "dict":
            return isinstance(value, dict)
        if kind == "duration":
            from workbench.units import UnitError, parse_time

            if isinstance(value, bool):
                return False
            try:
                seconds = parse_time(value) if isinstance(value, str) else float(value)
            except (UnitError, TypeError, ValueError):
                return False
            return math.isfinite(seconds) and seconds > 0
        raise ValueError(f"unknown parameter type {kind!r}")

    def expected(self) -> str:
        """The accepted values in words, e.g. "an integer >= 1 or 'full'"."""
        words = []
        for kind in self.types:
            if kind == "str" and self.choices:
                words.append(" or ".join(repr(c) for c in self.choices))
                continue
            word = _TYPE_WORDS[kind]
            if kind in ("int", "float"):
                if self.minimum is not None and self.maximum is not None:
                    word += f" in [{self.minimum:g}, {self.maximum:g}]"
                elif self.minimum is not None:
                    word += f" >= {self.minimum:g}"
                elif self.maximum is not None:
                    word += f" <= {self.maximum:g}"
            words.append(word)
        return " or ".join(words)


def declared_parameters(formulation: Any) -> tuple[Parameter, ...] | None:
    """The formulation's declarations, or None when it declares none."""
    declared = getattr(formulation, "parameters", None)
    if declared is None or not all(isinstance(p, Parameter) for p in declared):
        return None
    return tuple(declared)


def check_parameters(formulation: Any, params: Mapping[str, Any], where: str, sep: str = ".",
                     read_files: bool = True) -> None:
    """Raise ``ParameterError`` (one line starting with ``where``) unless every key is declared and
    every value accepted. ``where`` names the place, e.g. ``x.yaml: grid.formulations[2].params``
    (keys joined with ``sep``), or ``--set`` with ``sep=" "``. ``read_files=False`` skips the
    declarations' own ``check`` (see ``Parameter``)."""
    declared = declared_parameters(formulation)
    if declared is None:
        return
    by_name = {p.name: p for p in declared}
    name = getattr(formulation, "name", "formulation")
    for key, value in params.items():
        if key in RUNNER_KEYS:
            continue
        parameter = by_name.get(key)
        if parameter is None:
            known = ", ".join(sorted(by_name)) or "none"
            raise ParameterError(f"{where}{sep}{key}: {name} has no parameter {key!r} (accepted: {known})")
        if not parameter.accepts(value):
            raise ParameterError(f"{where}{sep}{key}: expected {parameter.expected()}, got {value!r}")
        if parameter.check is not None and read_files:
            try:
                parameter.check(value)
            except ValueError as exc:
                raise ParameterError(f"{where}{sep}{key}: {(str(exc).splitlines() or ['refused'])[0]}") from None


def undeclared_warning(formulation: Any) -> str | None:
    """One warning line for a formulation that declares no parameters, else None."""
    if declared_parameters(formulation) is not None:
        return None
    name = getattr(formulation, "name", "formulation")
    return f"warning: formulation {name!r} declares no parameters; its params pass unchecked"


def describe_parameters(formulation: Any) -> list[str]:
    """Help lines: name, accepted values, default, what it does."""
    declared = declared_parameters(formulation)
    if declared is None:
        return ["(declares no parameters; any params pass unchecked)"]
    if not declared:
        return ["(no parameters)"]
    lines = []
    for p in declared:
        lines.append(f"  {p.name:<22} {p.expected()}; default {p.default!r}")
        lines.append(f"  {'':<22} {p.help}")
    return lines
