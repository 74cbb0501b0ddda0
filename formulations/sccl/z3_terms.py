"""The few z3 terms SCCL's encoding writes, built through z3's C API (``z3core``).

z3's Python operators (``a < b``, ``Implies``, ``PbEq``, ``Solver.add``) check and coerce every
argument before they reach the C API; over the thousands of terms of one instance that is most of
the time a small synthesis takes. ``Z3Terms`` makes the same calls with the checks left out: the
encoding hands it only Bool and Int terms of one context, which is what the checks would accept.
z3 shares equal terms, so the terms are the very ones the operators build (the tests compare the
two assertion by assertion), and the solver sees the same model in the same order.

Every method returns a wrapped term (``BoolRef`` / ``ArithRef``), which holds a reference, so a
term lives as long as Python needs it, as with the operators.

What the left-out checks would have caught is the caller's to respect: every term comes from z3's
main context, comparisons take Int terms (or Python ints), Boolean builders take Bool terms. The
one check kept is the 32-bit range of pseudo-Boolean coefficients and bounds, which ctypes would
otherwise wrap around silently.
"""

from __future__ import annotations

import ctypes
from typing import Any, Sequence

__all__ = ["Z3Terms"]

_INT_MIN, _INT_MAX = -(2 ** 31), 2 ** 31 - 1  # a C int, what the pseudo-Boolean API takes


class Z3Terms:
    """Term builders over z3's main context: ``lt``, ``le``, ``ge``, ``eq``, ``implies``, ``and_``,
    ``sum_``, ``pb_eq``, ``pb_le``, ``true``, ``false``, and ``assert_`` into a solver."""

    def __init__(self, z3: Any) -> None:
        self.z3 = z3
        self.api = z3.z3core
        self.ctx = z3.main_ctx()
        self.ref = self.ctx.ref()
        self._numerals: dict[int, Any] = {}

    # ------------------------------------------------------------------ wrapping
    def _bool(self, ast: Any) -> Any:
        return self.z3.BoolRef(ast, self.ctx)

    def num(self, value: int) -> Any:
        """The integer numeral ``value`` (kept: an instance uses a handful)."""
        numeral = self._numerals.get(value)
        if numeral is None:
            numeral = self._numerals[value] = self.z3.IntVal(value, self.ctx)
        return numeral

    def _int(self, x: Any) -> Any:
        return self.num(x).as_ast() if type(x) is int else x.as_ast()

    def _array(self, terms: Sequence[Any]) -> Any:
        array = (self.z3.Ast * len(terms))()
        for i, term in enumerate(terms):
            array[i] = term.as_ast()
        return array

    # ------------------------------------------------------------------ comparisons (Int, Int or int)
    def lt(self, a: Any, b: Any) -> Any:
        """``a < b`` (Int terms or Python ints)."""
        return self._bool(self.api.Z3_mk_lt(self.ref, self._int(a), self._int(b)))

    def le(self, a: Any, b: Any) -> Any:
        """``a <= b`` (Int terms or Python ints)."""
        return self._bool(self.api.Z3_mk_le(self.ref, self._int(a), self._int(b)))

    def ge(self, a: Any, b: Any) -> Any:
        """``a >= b`` (Int terms or Python ints)."""
        return self._bool(self.api.Z3_mk_ge(self.ref, self._int(a), self._int(b)))

    def eq(self, a: Any, b: Any) -> Any:
        """``a == b`` (Int terms or Python ints)."""
        return self._bool(self.api.Z3_mk_eq(self.ref, self._int(a), self._int(b)))

    # ------------------------------------------------------------------ Boolean structure
    def implies(self, a: Any, b: Any) -> Any:
        """``a => b`` (Bool terms)."""
        return self._bool(self.api.Z3_mk_implies(self.ref, a.as_ast(), b.as_ast()))

    def and_(self, *terms: Any) -> Any:
        """The conjunction of the Bool ``terms``."""
        return self._bool(self.api.Z3_mk_and(self.ref, len(terms), self._array(terms)))

    def false(self) -> Any:
        """The Bool constant false."""
        return self._bool(self.api.Z3_mk_false(self.ref))

    def true(self) -> Any:
        """The Bool constant true."""
        return self._bool(self.api.Z3_mk_true(self.ref))

    def sum_(self, terms: Sequence[Any]) -> Any:
        """The sum of the Int ``terms``."""
        return self.z3.ArithRef(self.api.Z3_mk_add(self.ref, len(terms), self._array(terms)), self.ctx)

    # ------------------------------------------------------------------ pseudo-Boolean (literal, coefficient) pairs
    def _pb(self, make: Any, pairs: Sequence[tuple[Any, int]], k: int) -> Any:
        for value in (k, *(c for _, c in pairs)):
            if not _INT_MIN <= value <= _INT_MAX:
                raise ValueError(f"pseudo-Boolean coefficient or bound {value} is outside z3's 32-bit range")
        coefficients = (ctypes.c_int * len(pairs))(*[c for _, c in pairs])
        return self._bool(make(self.ref, len(pairs), self._array([lit for lit, _ in pairs]), coefficients, k))

    def pb_eq(self, pairs: Sequence[tuple[Any, int]], k: int) -> Any:
        """``sum(coefficient * literal) == k`` over (literal, coefficient) ``pairs``."""
        return self._pb(self.api.Z3_mk_pbeq, pairs, k)

    def pb_le(self, pairs: Sequence[tuple[Any, int]], k: int) -> Any:
        """``sum(coefficient * literal) <= k`` over (literal, coefficient) ``pairs``."""
        return self._pb(self.api.Z3_mk_pble, pairs, k)

    # ------------------------------------------------------------------ the solver
    def assert_(self, solver: Any, *terms: Any) -> None:
        """Assert each of ``terms`` into the z3 ``solver``."""
        for term in terms:
            self.api.Z3_solver_assert(self.ref, solver.solver, term.as_ast())
