"""The expression layer of ``workbench.kit.milp``: arithmetic, comparisons, families, tags, and rows
identical to the ones ``add_row`` builds from coefficient lists."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from workbench.kit.milp import Constraint, LinearExpr, MilpModel, total


def _model_with(n: int = 3) -> tuple[MilpModel, list[LinearExpr]]:
    model = MilpModel("test")
    x = model.family("x", range(n), upper=10.0)
    return model, [x[i] for i in range(n)]


def _rows(model: MilpModel) -> list[tuple[float, float, list[tuple[int, float]]]]:
    rows: list[list[tuple[int, float]]] = [[] for _ in range(model.num_rows)]
    for r, c, v in zip(model._row_index, model._col_index, model._values):
        rows[r].append((c, v))
    return [(lo, hi, entries) for lo, hi, entries in zip(model.row_lower, model.row_upper, rows)]


# ------------------------------------------------------------------------------------ arithmetic
def test_arithmetic_sums_repeated_columns_and_keeps_the_constant():
    _, (a, b, c) = _model_with()
    e = 2 * a - b + 3 + a * 0.5 - (c - 1) / 2 + (-b)
    assert e.terms == {0: 2.5, 1: -2.0, 2: -0.5}
    assert e.constant == 3.5
    assert (1 - a).terms == {0: -1.0} and (1 - a).constant == 1
    assert (+a) is a


def test_operations_leave_their_operands_alone():
    _, (a, b, _) = _model_with()
    before = (dict(a.terms), a.constant)
    a + b, a - b, -a, 3 * a, a <= b, total([a, a])  # noqa: B018
    assert (a.terms, a.constant) == before


def test_sum_starting_from_zero_and_total_agree():
    _, xs = _model_with()
    items = [xs[0], 2 * xs[1], xs[0], 4.0]
    assert sum(items).terms == total(items).terms == {0: 2.0, 1: 2.0}
    assert sum(items).constant == total(items).constant == 4.0
    assert total([]).terms == {} and total([]).constant == 0.0


def test_numpy_numbers_on_either_side():
    _, (a, _, _) = _model_with()
    e = np.float64(2.0) * a + np.int64(3)
    assert type(e) is LinearExpr and e.terms == {0: 2.0} and e.constant == 3
    assert type(np.float64(1.0) <= a) is Constraint


def test_a_product_of_expressions_is_refused():
    _, (a, b, _) = _model_with()
    with pytest.raises(TypeError, match="not linear"):
        a * b
    with pytest.raises(TypeError):
        a + "1"  # noqa: B018


# ------------------------------------------------------------------------------------ comparisons
def test_comparisons_move_the_constant_to_the_bound():
    _, (a, b, _) = _model_with()
    le = a <= b + 1
    assert le.terms == {0: 1.0, 1: -1.0} and le.lower == -math.inf and le.upper == 1.0
    ge = 3 <= a  # reflected: a >= 3
    assert ge.terms == {0: 1.0} and ge.lower == 3 and ge.upper == math.inf
    eq = 2 * a - 4 == b
    assert eq.terms == {0: 2.0, 1: -1.0} and eq.lower == eq.upper == 4.0
    ranged = (a + 1).between(0, 5)
    assert ranged.lower == -1 and ranged.upper == 4


def test_a_zero_bound_is_positive_zero():
    _, (a, b, _) = _model_with()
    assert math.copysign(1.0, (a >= b).lower) == 1.0
    assert math.copysign(1.0, (a <= b).upper) == 1.0


def test_a_constraint_has_no_truth_value():
    _, (a, b, _) = _model_with()
    with pytest.raises(TypeError, match="between"):
        0 <= a <= 1  # noqa: B015
    with pytest.raises(TypeError):
        if a == b:
            pass


# ------------------------------------------------------------------------------------ model rows
def test_tags_follow_the_rows_and_are_counted():
    model, (a, b, c) = _model_with()
    assert model.add(a + b <= 1, tag="(4)")
    model.add_row([2], [1.0], lower=1.0)  # untagged, through the coefficient-list path
    assert model.add(c >= a, tag="(4)")
    assert model.add(a == 2, tag="(2)")
    assert model.row_tags == ["(4)", None, "(4)", "(2)"]
    assert model.tag_counts() == {"(4)": 2, "untagged": 1, "(2)": 1}
    assert model.stats(by_tag=True)["rows_by_tag"] == model.tag_counts()
    assert "rows_by_tag" not in model.stats()
    assert model.describe_row(0) == "(4): +1 x[0] +1 x[1] <= 1"
    assert model.describe_row(2) == "(4): +1 x[2] -1 x[0] >= 0"
    assert model.describe_row(3) == "(2): +1 x[0] = 2"


def test_dedupe_skips_a_repeated_row_whichever_way_it_was_written():
    model, (a, b, _) = _model_with()
    assert model.add(a - b <= 0, tag="(4)", dedupe=True)
    assert not model.add(a <= b, tag="(4)", dedupe=True)
    assert not model.add_row([1, 0], [-1, 1], upper=0, dedupe=True)
    assert model.add(a <= b)  # without dedupe a repeat is kept
    assert model.num_rows == 2


def test_empty_rows_are_dropped_or_refused_with_their_tag():
    model, (a, _, _) = _model_with()
    assert not model.add(a - a <= 1, tag="(C2)")
    assert model.num_rows == 0
    with pytest.raises(ValueError, match=r"constraint \(C2\) reduces to 1.0 <= 0"):
        model.add(a - a >= 1, tag="(C2)")
    with pytest.raises(TypeError, match="already decided"):
        model.add(1 <= 2)


def test_families_eager_and_lazy():
    model = MilpModel("families")
    eager = model.family("send", [(0, 1), (1, 0)], upper=5.0)
    assert [eager.col(k) for k in eager] == [0, 1]
    with pytest.raises(KeyError, match=r"send\[\(2, 2\)\]"):
        eager[(2, 2)]
    time = model.var(0.0, 9.0, name="time")
    lazy = model.family("is_sent", upper=1.0, integer=True)
    assert len(lazy) == 0
    v = lazy["b"]
    assert lazy["b"] is v and lazy.col("b") == 3 and time.col == 2
    assert lazy.columns == {"b": 3}
    assert model.upper == [5.0, 5.0, 9.0, 1.0] and model.integer == [False, False, False, True]
    assert model.column_name(1) == "send[1, 0]" and model.column_name(2) == "time"
    assert model.column_name(3) == "is_sent[b]"
    assert lazy.solution([0, 0, 0, 1.0]) == {"b": 1.0}
    assert (2 * v + time + 1).value([0, 0, 3.0, 0.5]) == 5.0
    with pytest.raises(ValueError):
        (2 * v).col


def test_minimise_sets_costs_and_offset():
    model, (a, b, c) = _model_with()
    model.add(a + b >= 2)
    model.add(c >= 1)
    model.minimise(3 * a + b - c + 10)
    assert model.cost == [3.0, 1.0, -1.0] and model.objective_offset == 10.0
    outcome = model.solve(time_limit=10)
    assert outcome.status == "optimal" and outcome.objective == pytest.approx(2.0 + 10 - 10.0)


# ------------------------------------------------------------------------------------ property
coefficient = st.one_of(st.integers(-3, 3).map(float), st.floats(-1e3, 1e3, allow_nan=False),
                        st.sampled_from([1e-13, -1e-13, 0.0]))
bound = st.one_of(st.integers(-5, 5).map(float), st.floats(-1e3, 1e3, allow_nan=False))


def _outcome(build) -> tuple:
    model = MilpModel("property")
    xs = model.family("x", range(4))
    try:
        added = build(model, xs)
    except ValueError as error:
        return ("error", str(error).split(": ", 1)[1])
    return (added, _rows(model), model.row_tags)


@settings(max_examples=300, deadline=None)
@given(cols=st.lists(st.integers(0, 3), min_size=0, max_size=8), data=st.data(),
       sense=st.sampled_from(["<=", ">=", "==", "between"]), lo=bound, hi=bound, dedupe=st.booleans())
def test_an_expression_row_is_the_add_row_row(cols, data, sense, lo, hi, dedupe):
    vals = data.draw(st.lists(coefficient, min_size=len(cols), max_size=len(cols)))
    if sense == "between":
        assume(lo <= hi)
    lower = {"<=": -math.inf, ">=": lo, "==": lo, "between": lo}[sense]
    upper = {"<=": hi, ">=": math.inf, "==": lo, "between": hi}[sense]

    def by_lists(model, xs):
        first = model.add_row(cols, vals, lower, upper, dedupe=dedupe, tag="(t)")
        return first, model.add_row(cols, vals, lower, upper, dedupe=dedupe, tag="(t)")

    def by_expressions(model, xs):
        expr = total(v * xs[c] for c, v in zip(cols, vals))
        constraint = {"<=": lambda: expr <= hi, ">=": lambda: expr >= lo, "==": lambda: expr == lo,
                      "between": lambda: expr.between(lo, hi)}[sense]
        first = model.add(constraint(), tag="(t)", dedupe=dedupe)
        return first, model.add(constraint(), tag="(t)", dedupe=dedupe)

    assert _outcome(by_expressions) == _outcome(by_lists)
