"""Baselines: closed-form costs where they run contention-free, validity everywhere."""

import pytest

from workbench.plugin import call
from formulations.baselines import nccl_btree, _tree
from workbench.model.collective import make_collective
from workbench.plugin.registry import Problem, get_formulation
from workbench.checking.simulate import simulate
from workbench.topology import build
from workbench.checking.verify import verify

A, B = 1e-6, 10e9


def run(name, spec, kind, k=1, size=None, **params):
    topo = build(spec, alpha=A, bandwidth=B)
    n = topo.num_npus
    collective = make_collective(kind, n, k)
    problem = Problem(topo, collective, size or 1e6 * n * k)
    result = call.synthesize(get_formulation(name), problem, time_limit=10, seed=0, **params)
    assert result.status == "feasible", result.message
    algorithm = result.algorithms[0]
    verify(algorithm)
    return algorithm, simulate(algorithm).collective_time, problem.chunk_bytes


@pytest.mark.parametrize("n", [4, 7])
def test_ring_closed_forms(n):
    _, time, m = run("ring", f"uniring:{n}", "allgather", bidirectional=False)
    assert time == pytest.approx((n - 1) * (A + m / B))
    _, time, m = run("ring", f"uniring:{n}", "allreduce", bidirectional=False)
    assert time == pytest.approx(2 * (n - 1) * (A + m / B))
    _, time, m = run("ring", f"ring:{n}", "allreduce", k=2)  # bidirectional: half the data each way
    assert time == pytest.approx(2 * (n - 1) * (A + m / B))


def test_direct_on_fully_connected():
    n, k = 6, 2
    _, time, m = run("direct", f"fc:{n}", "allgather", k=k)
    assert time == pytest.approx(A + k * m / B)
    _, time, m = run("direct", f"fc:{n}", "allreduce", k=k)
    assert time == pytest.approx(2 * (A + k * m / B))


def test_rhd_matches_mpich_cost_on_fully_connected():
    n, k = 8, 1
    _, time, m = run("rhd", f"fc:{n}", "allgather", k=k)
    assert time == pytest.approx(3 * A + (n - 1) * k * m / B)  # lg p alpha + (p-1)/p n beta
    _, time, m = run("rhd", f"fc:{n}", "allreduce", k=k)
    assert time == pytest.approx(2 * (3 * A + (n - 1) * k * m / B))


@pytest.mark.parametrize("n", [3, 5, 6, 7, 12])
def test_rhd_any_rank_count(n):
    """The non-power-of-two fix: 2(n - p) ranks pair up, the rest halve and double; every kind verifies."""
    for kind in ("allgather", "reducescatter", "allreduce"):
        algorithm, _, _ = run("rhd", f"fc:{n}", kind, k=2)
        assert algorithm.meta["sitting_out"] == n - (1 << (n.bit_length() - 1))


def test_rhd_non_power_of_two_cost_on_fully_connected():
    # n = 6: ranks 0 -> 1 and 2 -> 3 fold one block each (A + m/B), 4 <-> 5 swap one; then
    # 3 -> 1 and 4 -> 1 send 2 blocks each (done at 2A + 3m/B); 1 then holds all and unfolds 5
    # blocks to 0: 3A + 8m/B, the last rank to finish
    _, time, m = run("rhd", "fc:6", "allgather")
    assert time == pytest.approx(3 * A + 8 * m / B)


def test_nccl_btree_shape():
    # n = 8: 0 -> 4; 4 -> 2, 6; 2 -> 1, 3; 6 -> 5, 7 (odd ranks are leaves)
    assert nccl_btree(8, 0) == (-1, [4])
    assert nccl_btree(8, 4) == (0, [2, 6])
    assert nccl_btree(8, 6) == (4, [5, 7])
    assert nccl_btree(8, 3) == (2, [])


@pytest.mark.parametrize("n", [2, 5, 8, 12])
def test_double_binary_tree_interiors_are_disjoint(n):
    interiors = []
    for which in (0, 1):
        parents, children = _tree(n, which)
        assert parents.count(-1) == 1
        interiors.append({v for v in range(n) if children[v]})
    if n % 2 == 0:
        assert len(interiors[0] & interiors[1]) <= 1  # at most the two roots' neighbourhood


def test_dbt_allreduce_valid_and_pipelined():
    algorithm, time, m = run("dbt", "fc:8", "allreduce", k=4)
    assert algorithm.collective.kind == "allreduce"
    serial = 2 * 3 * (A + m / B) * 16  # every chunk up and down one at a time
    assert time < serial


def test_hierarchical_closed_form_on_two_fully_connected_dims():
    # md:F4,F2 (8 ranks): Reduce-Scatter over dim 0 (a ring of 4: 3 steps, each one message of the
    # 8/4 = 2 chunks bound for the same dim-0 coordinate), then over dim 1 (1 step of 1 chunk);
    # the All-Gather mirrors it. Each step waits for the one before: no overlap, no contention.
    algorithm, time, m = run("hierarchical", "md:F4,F2", "allreduce")
    assert time == pytest.approx(2 * (3 * (A + 2 * m / B) + (A + m / B)), rel=1e-9)
    with pytest.raises(AssertionError):
        run("hierarchical", "dgx1", "allreduce")


@pytest.mark.parametrize("name", ["ring", "direct", "rhd", "dbt", "hierarchical", "bruck", "pat"])
@pytest.mark.parametrize("spec", ["rfs:2x4x2", "torus:4x4", "md:R2,F4,S2"])
def test_valid_on_multidimensional_topologies(name, spec):
    kinds = ["allreduce"] if name == "dbt" else ["allgather", "reducescatter", "allreduce"]
    for kind in kinds:
        run(name, spec, kind, k=2)
