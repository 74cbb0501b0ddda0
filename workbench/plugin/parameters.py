"""Declared formulation parameters: one typed options object per formulation, checked before any
cell runs, shown as help, stamped as provenance and handed to ``synthesize``.

A formulation declares its parameters once, as a frozen dataclass deriving from ``Options``, each
field made with ``option(default, help, ...)`` (accepted types, range or choices, a further
``check``), and names it in a class attribute ``options``::

    @dataclass(frozen=True)
    class MyOptions(Options):
        restarts: int = option(1, "independent runs; the best is kept", minimum=1)

        def validate(self) -> None:  # rules across fields, run with the other checks
            ...

    class Mine:
        name, kind, options = "mine", "schedule", MyOptions

        def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
            ...  # options is a MyOptions, built and checked before this call

From that one declaration ``check_parameters`` validates an experiment's ``params:`` or
``workbench synth --set`` and raises ``ParameterError`` naming the key and the accepted values, so a
typo (``restartz``) or an ill-typed value (``restarts: abc``) is one line and exit 2 instead of a run
whose rows are all ``error``; ``describe_parameters`` prints the help; the runner stamps the
declared defaults under the given values as provenance; ``workbench.plugin.call.synthesize`` builds
the object (``Options.from_params``) and hands it to the formulation as ``options=``.

A parameter that scales the work (chunks, pieces, epochs, steps, rounds, ...) is priced too: the
declaration's ``estimate(problem)`` says what the values ask for on a problem given by its numbers
(``workbench.util.size_guard.ProblemSize``), and ``price_parameters`` refuses, once the problem's size
is known and before a cell starts (``workbench synth`` after its topology is built, an experiment with
its grid), one line naming the parameter as given (``SizeError``, exit 2).

Validation never rewrites the params as written: cell ids hash them as given, and committed
references keep matching. The options object holds the values as given (a duration stays ``"20s"``)
with the defaults filled in.

A formulation without an ``options`` attribute takes no parameters: it is given the ``Options`` base.

``time_limit`` is the runner's own key (a per-formulation time limit) and is accepted everywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

if TYPE_CHECKING:
    from workbench.util.size_guard import ProblemSize

__all__ = ["Options", "option", "Parameter", "ParameterError", "check_parameters", "declared_options",
           "declared_parameters", "describe_parameters", "price_parameters", "RUNNER_KEYS"]

RUNNER_KEYS = ("time_limit",)

_TYPE_WORDS = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false",
               "none": "null", "list": "a list", "dict": "a mapping", "duration": "a duration like '20s'"}


class ParameterError(ValueError):
    """A params key that is unknown or whose value the formulation does not accept."""


@dataclass(frozen=True)
class Parameter:
    """One declared parameter: a row ``Options.parameters()`` derives from an ``option(...)`` field.

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
        """Whether ``value`` is one of the declared kinds, within the range or choices."""
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
            from workbench.util.units import UnitError, parse_time

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


def option(default: Any, help: str, *, types: tuple[str, ...] | None = None, choices: tuple[str, ...] = (),
           minimum: float | None = None, maximum: float | None = None,
           check: Callable[[Any], None] | None = None) -> Any:
    """A field of an ``Options`` dataclass: its default and what ``Parameter`` carries (see there).

    ``types`` may be left out where the annotation names only int, float, str, bool, None, list
    and dict (``int | None``, ``list | None``); a duration or anything else is given explicitly.
    """
    spec = {"help": help, "types": types, "choices": tuple(choices), "minimum": minimum, "maximum": maximum,
            "check": check}
    return field(default=default, metadata={"option": spec})


_ANNOTATION_TYPES = {"int": "int", "float": "float", "str": "str", "bool": "bool", "None": "none",
                     "NoneType": "none", "list": "list", "dict": "dict"}


def _annotation_types(annotation: Any, where: str) -> tuple[str, ...]:
    """The accepted kinds an annotation names (``int | None`` -> int, none), in its order."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    kinds = []
    for part in text.split("|"):
        word = part.strip().split("[")[0]
        if word not in _ANNOTATION_TYPES:
            raise TypeError(f"{where}: cannot read the accepted types from {text!r}; give option(types=...)")
        kinds.append(_ANNOTATION_TYPES[word])
    return tuple(kinds)


_DERIVED: dict[type, tuple[Parameter, ...]] = {}


@dataclass(frozen=True)
class Options:
    """Base of a formulation's options: a frozen dataclass whose fields are ``option(...)``.

    The values are those given (as written) over the declared defaults. ``validate`` holds the
    rules a field's declaration cannot say (across fields); the workbench runs it with the other checks.
    This base, with no fields, is the declaration of a formulation that takes no parameters.
    """

    _given: frozenset = field(default=frozenset(), init=False, repr=False, compare=False)

    @classmethod
    def parameters(cls) -> tuple[Parameter, ...]:
        """The declaration as ``Parameter`` rows, in field order (derived once per class)."""
        if cls not in _DERIVED:
            rows = []
            for f in fields(cls):
                spec = f.metadata.get("option")
                if spec is None:
                    continue
                types = spec["types"] or _annotation_types(f.type, f"{cls.__name__}.{f.name}")
                rows.append(Parameter(f.name, tuple(types), f.default, spec["help"], spec["choices"],
                                      spec["minimum"], spec["maximum"], spec["check"]))
            _DERIVED[cls] = tuple(rows)
        return _DERIVED[cls]

    @classmethod
    def from_params(cls, params: Mapping[str, Any], where: str = "params", *, owner: str = "formulation",
                    sep: str = ".", read_files: bool = True) -> "Options":
        """The options from a params mapping: every key checked against the declaration (the
        runner's ``time_limit`` skipped), the defaults filled in, then ``validate``. Raises
        ``ParameterError``, one line starting with ``where`` (``owner`` names the formulation in
        it; ``sep`` and ``read_files`` as in ``check_parameters``)."""
        given = {k: v for k, v in params.items() if k not in RUNNER_KEYS}
        _check_values(cls.parameters(), given, where, sep, owner, read_files)
        options = cls(**given)
        object.__setattr__(options, "_given", frozenset(given))
        try:
            options.validate()
        except ValueError as exc:
            raise ParameterError(f"{where}: {(str(exc).splitlines() or ['refused'])[0]}") from None
        return options

    def validate(self) -> None:
        """Raise ``ValueError`` for a combination of values the formulation refuses (none here)."""

    def estimate(self, problem: "ProblemSize") -> list[tuple[str, float]]:
        """What the work these values ask for needs on ``problem`` (a
        ``workbench.util.size_guard.ProblemSize``: the problem by its numbers, nothing built), as
        (parameter, estimated bytes) parts; the workbench (``price_parameters``) prices the parts of
        the parameters given against the memory budget before a cell starts. None here: a
        formulation whose parameters scale its work or memory says how (its figures documented
        with the size guard's)."""
        return []

    def as_dict(self) -> dict[str, Any]:
        """Every declared parameter and its value, in declaration order."""
        return {p.name: getattr(self, p.name) for p in self.parameters()}

    def is_given(self, name: str) -> bool:
        """Whether ``name`` was given (to ``from_params``) or differs from its default: a default
        that means "chosen for you" can then be told from the same value asked for."""
        return name in self._given or getattr(self, name) != next(p.default for p in self.parameters()
                                                                  if p.name == name)


def declared_options(formulation: Any) -> type[Options]:
    """The formulation's ``Options`` class; the ``Options`` base (no parameters) when it names none."""
    declared = getattr(formulation, "options", None)
    return declared if isinstance(declared, type) and issubclass(declared, Options) else Options


def declared_parameters(formulation: Any) -> tuple[Parameter, ...]:
    """The rows of the formulation's ``Options`` class (empty: it takes no parameters)."""
    return declared_options(formulation).parameters()


def _check_values(declared: tuple[Parameter, ...], params: Mapping[str, Any], where: str, sep: str, name: str,
                  read_files: bool) -> None:
    """``ParameterError`` for the first key not declared or value not accepted (``check_parameters``)."""
    by_name = {p.name: p for p in declared}
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


def check_parameters(formulation: Any, params: Mapping[str, Any], where: str, sep: str = ".",
                     read_files: bool = True) -> None:
    """Raise ``ParameterError`` (one line starting with ``where``) unless every key is declared,
    every value accepted and the values pass the ``Options`` declaration's ``validate``.
    ``where`` names the place, e.g. ``x.yaml: grid.formulations[2].params`` (keys joined with
    ``sep``), or ``--set`` with ``sep=" "``. ``read_files=False`` skips the declarations' own
    ``check`` (see ``Parameter``)."""
    declared_options(formulation).from_params(params, where, owner=getattr(formulation, "name", "formulation"),
                                              sep=sep, read_files=read_files)


def price_parameters(formulation: Any, params: Mapping[str, Any], where: str, problems: Iterable["ProblemSize"],
                     sep: str = ".", limit: float | None = None) -> None:
    """Raise ``SizeError`` (``workbench.util.size_guard``) when the work the given params ask for on
    any of ``problems`` could not fit ``limit`` (default: the memory budget), naming the parameter
    with the largest part as given (``--set chunks=1000000000: needs an estimated ...``; ``where``
    and ``sep`` as in ``check_parameters``). The estimate is the declaration's
    (``Options.estimate``); only the parameters given are priced. The params were checked already
    (``check_parameters``)."""
    from workbench.util import size_guard

    options = declared_options(formulation)
    given = {k: v for k, v in params.items() if k not in RUNNER_KEYS}
    if not given:
        return
    resolved = options.from_params(given, where, owner=getattr(formulation, "name", "formulation"), sep=sep,
                                   read_files=False)
    for problem in problems:
        parts = [(key, bytes_) for key, bytes_ in resolved.estimate(problem) if key in given]
        if not parts:
            continue
        key = max(parts, key=lambda part: part[1])[0]
        size_guard.price(f"{where}{sep}{key}={_as_given(given[key])}", sum(max(b, 0.0) for _, b in parts), limit)


def _as_given(value: Any) -> str:
    """A parameter's value for a message: an integer in full up to 18 digits, other values shortened."""
    from workbench.util.size_guard import shown

    if isinstance(value, int) and not isinstance(value, bool):
        return shown(value)
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def describe_parameters(formulation: Any) -> list[str]:
    """Help lines: name, accepted values, default, what it does."""
    declared = declared_parameters(formulation)
    if not declared:
        return ["(no parameters)"]
    lines = []
    for p in declared:
        lines.append(f"  {p.name:<22} {p.expected()}; default {p.default!r}")
        lines.append(f"  {'':<22} {p.help}")
    return lines
