"""Linear expressions over ``MilpModel`` columns, so that rows read like the paper's equations.

``model.family("send", upper=T)[key]`` and ``model.var(...)`` give a ``LinearExpr``; expressions
combine with ``+``, ``-``, unary ``-``, multiplication by a number, ``sum()`` (or the linear-time
``total``), and a comparison ``<=``, ``>=`` or ``==`` between two expressions, or an expression
and a number, builds a ``Constraint`` that ``model.add(constraint, tag="(4)")`` turns into a row::

    model.add(start[c, s] <= send[c, l] + T * (1 - is_sent[c, l]), tag="(4)")

Everything is immutable: an operation returns a new expression and never changes its operands,
so one variable's expression can be shared by every row that mentions it. An expression is a
dict column -> coefficient (first-use order, repeated columns already summed) and a constant; a
comparison moves every term to the left and the constant to the bound: with ``e = a - b``,
``a <= b`` is the row ``e.terms . x <= -e.constant``. ``model.add`` then drops zero coefficients,
checks a row left empty, and with ``dedupe`` skips a repeated row, as ``add_row`` always has.

The operators are written for the row counts of the big models (10^5-10^6 rows): slots, no
``__init__`` on the internal paths, and an exact ``type(...)`` test before the general one.
Builtin ``sum`` works (start 0) but copies the growing dict at every step; ``total`` is linear.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any, Callable, Hashable, Iterable, Mapping

__all__ = ["LinearExpr", "Constraint", "VarFamily", "total"]

INF = math.inf


def _expr(terms: dict[int, float], constant: float) -> LinearExpr:
    made = object.__new__(LinearExpr)  # skips __init__'s argument handling (hot path)
    made.terms = terms
    made.constant = constant
    return made


def _constraint(terms: dict[int, float], lower: float, upper: float) -> Constraint:
    made = object.__new__(Constraint)
    made.terms = terms
    made.lower = lower
    made.upper = upper
    return made


# the operators test ``type(x) in FAST`` before the slower ``isinstance(x, Real)`` (numpy numbers)
FAST = frozenset((int, float))


def _minus(left: dict[int, float], right: dict[int, float]) -> dict[int, float]:
    """``left - right`` as a new terms dict (``left`` untouched: expressions share their terms)."""
    terms = left.copy()
    get = terms.get
    for c, v in right.items():
        terms[c] = get(c, 0.0) - v
    return terms


class LinearExpr:
    """``sum(terms[col] * x[col]) + constant``. Not meant to be subclassed: the operators test the
    exact type (``type(x) is LinearExpr`` is the cheapest test on the hot path)."""

    __slots__ = ("terms", "constant")
    __array_ufunc__ = None  # numpy scalars on the left hand the operation to us instead of broadcasting
    __hash__ = None  # type: ignore[assignment]  # == builds a constraint, so expressions are not dict keys

    def __init__(self, terms: Mapping[int, float] | None = None, constant: float = 0.0) -> None:
        self.terms: dict[int, float] = dict(terms) if terms else {}
        self.constant: float = constant

    # ------------------------------------------------------------------ arithmetic
    # The loops are spelled out (no helper calls, no comprehensions: both cost a frame in 3.11),
    # since a big model runs each of these a few million times.
    def __add__(self, other: Any) -> LinearExpr:
        if type(other) is LinearExpr:
            terms = self.terms.copy()
            get = terms.get
            for c, v in other.terms.items():
                terms[c] = get(c, 0.0) + v
            return _expr(terms, self.constant + other.constant)
        if type(other) in FAST or isinstance(other, Real):
            return _expr(self.terms, self.constant + other)  # terms are never mutated: share them
        return NotImplemented

    __radd__ = __add__  # sum() starts from 0

    def __sub__(self, other: Any) -> LinearExpr:
        if type(other) is LinearExpr:
            terms = _minus(self.terms, other.terms)
            return _expr(terms, self.constant - other.constant)
        if type(other) in FAST or isinstance(other, Real):
            return _expr(self.terms, self.constant - other)
        return NotImplemented

    def __rsub__(self, other: Any) -> LinearExpr:
        if type(other) in FAST or isinstance(other, Real):
            terms = {}
            for c, v in self.terms.items():
                terms[c] = -v
            return _expr(terms, other - self.constant)
        return NotImplemented

    def __neg__(self) -> LinearExpr:
        terms = {}
        for c, v in self.terms.items():
            terms[c] = -v
        return _expr(terms, -self.constant)

    def __pos__(self) -> LinearExpr:
        return self

    def __mul__(self, other: Any) -> LinearExpr:
        if type(other) in FAST or isinstance(other, Real):
            terms = {}
            for c, v in self.terms.items():
                terms[c] = v * other
            return _expr(terms, self.constant * other)
        if type(other) is LinearExpr:
            raise TypeError("the product of two expressions is not linear")
        return NotImplemented

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> LinearExpr:
        if type(other) in FAST or isinstance(other, Real):
            return self * (1.0 / other)
        return NotImplemented

    # ------------------------------------------------------------------ comparisons
    # each moves ``other``'s terms to the left and the constant to the bound; ``0.0 - c`` makes a
    # zero bound +0.0 rather than -0.0
    def __le__(self, other: Any) -> Constraint:
        if type(other) is LinearExpr:
            terms = _minus(self.terms, other.terms)
            return _constraint(terms, -INF, 0.0 - (self.constant - other.constant))
        return _constraint(self.terms, -INF, 0.0 - (self.constant - _bound(other)))

    def __ge__(self, other: Any) -> Constraint:
        if type(other) is LinearExpr:
            terms = _minus(self.terms, other.terms)
            return _constraint(terms, 0.0 - (self.constant - other.constant), INF)
        return _constraint(self.terms, 0.0 - (self.constant - _bound(other)), INF)

    def __eq__(self, other: Any) -> Constraint:  # type: ignore[override]
        if type(other) is LinearExpr:
            terms = _minus(self.terms, other.terms)
            bound = 0.0 - (self.constant - other.constant)
            return _constraint(terms, bound, bound)
        bound = 0.0 - (self.constant - _bound(other))
        return _constraint(self.terms, bound, bound)

    def between(self, lower: float, upper: float) -> Constraint:
        """``lower <= self <= upper`` as one ranged row (Python's chained comparison cannot build it)."""
        return Constraint(self.terms, lower - self.constant, upper - self.constant)

    # ------------------------------------------------------------------ reading
    @property
    def col(self) -> int:
        """The column of a single variable (``model.var(...).col``)."""
        if len(self.terms) != 1 or self.constant or next(iter(self.terms.values())) != 1.0:
            raise ValueError(f"{self!r} is not a single variable")
        return next(iter(self.terms))

    def value(self, x: Any) -> float:
        """The expression at the point ``x`` (a solution vector)."""
        return float(sum(v * x[c] for c, v in self.terms.items()) + self.constant)

    def __repr__(self) -> str:
        return f"LinearExpr({self.terms!r}, {self.constant!r})"


def _bound(other: Any) -> float:
    if type(other) in FAST or isinstance(other, Real):
        return other
    raise TypeError(f"cannot compare a linear expression with {type(other).__name__}")


class Constraint:
    """``lower <= sum(terms[col] * x[col]) <= upper``, what a comparison of expressions builds."""

    __slots__ = ("terms", "lower", "upper")

    def __init__(self, terms: dict[int, float], lower: float, upper: float) -> None:
        self.terms = terms
        self.lower = lower
        self.upper = upper

    def __bool__(self) -> bool:
        # ``0 <= e <= 1`` would silently keep only its second half, and ``if e == f`` would always be
        # true: both are mistakes, so a constraint has no truth value
        raise TypeError("a constraint has no truth value: add it to a model (chained comparisons: use "
                        "expr.between(lower, upper))")

    def __repr__(self) -> str:
        return f"Constraint({self.lower!r} <= {self.terms!r} <= {self.upper!r})"


def total(items: Iterable[LinearExpr | float]) -> LinearExpr:
    """The sum of expressions and numbers in linear time (``sum`` copies the running dict each step)."""
    terms: dict[int, float] = {}
    constant = 0.0
    get = terms.get
    for item in items:
        if type(item) is LinearExpr:
            for c, v in item.terms.items():
                terms[c] = get(c, 0.0) + v
            constant += item.constant
        elif type(item) in FAST or isinstance(item, Real):
            constant += item
        else:
            raise TypeError(f"cannot add {type(item).__name__} to a linear expression")
    return _expr(terms, constant)


class VarFamily(dict):
    """Variables of one kind indexed by key (``send[c, l]``): a dict key -> ``LinearExpr``.

    Eager (``keys`` given) families create every column at once, in key order; lazy ones create a
    column the first time a key is looked up (``__missing__``), so a model only holds the variables
    its rows use and the column order follows the order of first use. A dict underneath keeps the
    lookup of an existing variable at C speed (the routing model does millions); do not assign to it.
    """

    __slots__ = ("name", "_new", "lazy")

    def __init__(self, name: str, new_column: Callable[[], int], keys: Iterable[Hashable] | None = None,
                 new_columns: Callable[[int], Iterable[int]] | None = None) -> None:
        """``new_column()`` adds one column; ``new_columns(n)``, if given, adds the eager family's
        ``n`` columns in one call (the same columns, in key order, faster)."""
        super().__init__()
        self.name = name
        self._new = new_column
        self.lazy = keys is None
        if keys is not None and new_columns is not None:
            keys = list(keys)
            made = []
            append, new = made.append, object.__new__
            for col in new_columns(len(keys)):  # _expr inlined: a family can hold millions
                var = new(LinearExpr)
                var.terms = {col: 1.0}
                var.constant = 0.0
                append(var)
            dict.update(self, zip(keys, made))
            return
        for key in keys or ():
            self._create(key)

    def _create(self, key: Hashable) -> LinearExpr:
        made = _expr({self._new(): 1.0}, 0.0)
        dict.__setitem__(self, key, made)
        return made

    def __missing__(self, key: Hashable) -> LinearExpr:
        if not self.lazy:
            raise KeyError(f"{self.name}[{key!r}] is not a variable of the model")
        return self._create(key)

    def __repr__(self) -> str:
        return f"VarFamily({self.name!r}, {len(self)} variables)"

    def col(self, key: Hashable) -> int:
        """The column of ``self[key]`` (creating it in a lazy family)."""
        for col in self[key].terms:
            return col
        raise AssertionError("a variable has one column")

    @property
    def columns(self) -> dict[Hashable, int]:
        """key -> column of every variable created so far."""
        return {key: col for key, var in self.items() for col in var.terms}

    def solution(self, x: Any) -> dict[Hashable, float]:
        """key -> value in the solution vector ``x``."""
        return {key: float(x[col]) for key, col in self.columns.items()}
