import numpy as np
import pulp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.kit.solvers import coo_to_csc, highs_status, pulp_status, solve_lp


def test_solve_lp_optimal():
    # min x + y s.t. x + 2y >= 4, 3x + y >= 6
    rows = (np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([1.0, 2.0, 3.0, 1.0]))
    out = solve_lp(np.array([1.0, 1.0]), np.zeros(2), np.full(2, np.inf), rows, np.array([4.0, 6.0]),
                   np.full(2, np.inf), time_limit=5)
    assert out.status == "optimal" and out.objective == pytest.approx(2.8)


def test_solve_lp_infeasible():
    rows = (np.array([0]), np.array([0]), np.array([1.0]))
    out = solve_lp(np.array([1.0]), np.zeros(1), np.array([1.0]), rows, np.array([5.0]), np.array([np.inf]), 5)
    assert out.status == "infeasible" and out.x is None


def test_highs_status_mapping():
    assert highs_status("HighsModelStatus.kTimeLimit", True) == "timeout"
    assert highs_status("kOptimal", True) == "optimal"
    assert highs_status("kSolutionLimit", True) == "feasible"
    assert highs_status("kLoadError", False) == "error"


def test_pulp_time_limited_milp_is_not_called_optimal():
    """A knapsack-like MILP stopped by its limit: PuLP's status may say Optimal, sol_status does not."""
    rng = np.random.default_rng(1)
    n = 60
    weights = rng.integers(10, 1000, n)
    values = weights + rng.integers(0, 5, n)
    prob = pulp.LpProblem("k", pulp.LpMaximize)
    x = [pulp.LpVariable(f"x{i}", cat="Binary") for i in range(n)]
    prob += pulp.lpSum(int(v) * xi for v, xi in zip(values, x))
    for j in range(6):
        w = rng.integers(10, 1000, n)
        prob += pulp.lpSum(int(wi) * xi for wi, xi in zip(w, x)) <= int(w.sum() // 2)
    prob.solve(pulp.PULP_CBC_CMD(msg=False, timeLimit=1))
    status = pulp_status(prob, elapsed=1.0, time_limit=1.0)
    if prob.sol_status == pulp.LpSolutionOptimal:
        assert status == "optimal"
    else:
        assert status == "timeout"


@pytest.mark.parametrize("first", ["highspy", "ortools"])
def test_ortools_and_highspy_load_in_either_order(first):
    """They share the soname libhighs.so.1; mismatched versions break whichever loads second."""
    import subprocess
    import sys

    pytest.importorskip("ortools")
    imports = {"highspy": "import highspy; highspy.Highs()",
               "ortools": "from ortools.sat.python import cp_model; cp_model.CpSolver()"}
    second = "ortools" if first == "highspy" else "highspy"
    code = f"{imports[first]}\n{imports[second]}\nprint('ok')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-500:]


@settings(max_examples=60, deadline=None)
@given(shape=st.tuples(st.integers(1, 9), st.integers(1, 9)), data=st.data())
def test_the_column_wise_matrix_is_scipys(shape, data):
    """``coo_to_csc`` against scipy's conversion: duplicates summed, rows ascending in a column."""
    from scipy.sparse import csc_matrix

    num_rows, num_cols = shape
    entries = data.draw(st.lists(st.tuples(st.integers(0, num_rows - 1), st.integers(0, num_cols - 1),
                                           st.floats(-1e3, 1e3, allow_nan=False)), max_size=40))
    rows, cols, values = (np.array([e[i] for e in entries]) for i in range(3))
    starts, indices, data_ = coo_to_csc(rows, cols, values, num_rows, num_cols)
    expected = csc_matrix((values, (rows.astype(int), cols.astype(int))), shape=shape)
    assert starts.tolist() == expected.indptr.tolist()
    assert indices.tolist() == expected.indices.tolist()
    assert data_.tolist() == expected.data.tolist()


def test_duplicates_are_added_in_the_order_given():
    # (0.1 + 0.2) + 0.3 is 0.6000000000000001; 0.1 + (0.2 + 0.3) is 0.6
    _, _, data = coo_to_csc(np.zeros(3, int), np.zeros(3, int), np.array([0.1, 0.2, 0.3]), 1, 1)
    assert data.tolist() == [(0.1 + 0.2) + 0.3]


def test_a_coo_entry_outside_the_matrix_is_refused():
    with pytest.raises(ValueError, match="outside"):
        coo_to_csc(np.array([3]), np.array([0]), np.array([1.0]), 3, 2)
    with pytest.raises(ValueError, match="unequal"):
        coo_to_csc(np.array([0, 1]), np.array([0]), np.array([1.0]), 3, 2)
