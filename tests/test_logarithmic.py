"""Bruck and PAT: the shifted binomial trees, costs where they run contention-free, validity anywhere."""

import pytest
from hypothesis import assume, given, settings, strategies as st

from workbench.plugin import call
from formulations.logarithmic import tree_steps
from workbench.model.collective import make_collective
from workbench.plugin.registry import Problem, get_formulation
from workbench.checking.simulate import simulate
from workbench.topology import build
from workbench.checking.verify import verify

A, B = 1e-6, 10e9


def run(name, spec, kind, k=1, size=None, **params):
    topo = build(spec, alpha=A, bandwidth=B)
    n = topo.num_npus
    problem = Problem(topo, make_collective(kind, n, k), size or 1e6 * n * k)
    result = call.synthesize(get_formulation(name), problem, time_limit=10, seed=0, **params)
    assert result.status == "feasible", result.message
    algorithm = result.algorithms[0]
    verify(algorithm)
    return algorithm, simulate(algorithm).collective_time, problem.chunk_bytes


@given(n=st.integers(2, 70), descending=st.booleans())
def test_every_offset_is_reached_once(n, descending):
    """Each step's hops h + d are new offsets; over all steps they are 1..n-1, each once."""
    reached = [h + d for d, offsets in tree_steps(n, descending) for h in offsets]
    assert sorted(reached) == list(range(1, n))
    assert len(tree_steps(n, descending)) == (n - 1).bit_length()


def test_bruck_and_pat_step_sizes():
    # Bruck: the step of distance d carries min(d, n - d) blocks; PAT reverses the distances
    assert [(d, len(h)) for d, h in tree_steps(8, False)] == [(1, 1), (2, 2), (4, 4)]
    assert [(d, len(h)) for d, h in tree_steps(8, True)] == [(4, 1), (2, 2), (1, 4)]
    assert [(d, len(h)) for d, h in tree_steps(6, False)] == [(1, 1), (2, 2), (4, 2)]
    assert [(d, len(h)) for d, h in tree_steps(6, True)] == [(4, 1), (2, 1), (1, 3)]


@pytest.mark.parametrize("name", ["bruck", "pat"])
def test_logarithmic_cost_on_fully_connected(name):
    # a power of two: each step waits for the last one, lg n alphas and (n-1) blocks
    _, time, m = run(name, "fc:8", "allgather")
    assert time == pytest.approx(3 * A + 7 * m / B)
    _, time, m = run(name, "fc:8", "reducescatter")
    assert time == pytest.approx(3 * A + 7 * m / B)


def test_bruck_beats_ring_where_alpha_dominates():
    _, bruck, _ = run("bruck", "fc:16", "allgather", size=64e3)
    topo = build("fc:16", alpha=A, bandwidth=B)
    problem = Problem(topo, make_collective("allgather", 16), 64e3)
    ring_time = simulate(call.synthesize(get_formulation("ring"), problem, time_limit=10, seed=0).algorithms[0]).collective_time
    assert bruck == pytest.approx(4 * A + 15 * 4e3 / B)
    assert bruck < ring_time / 2


def test_bruck_alltoall_cost_on_fully_connected():
    # lg n steps; each moves the pieces whose offset has that digit: n/2 of a rank's n - 1 pieces
    _, time, m = run("bruck", "fc:8", "alltoall")
    assert time == pytest.approx(3 * (A + 4 * m / B))


def test_pat_aggregation_splits_messages():
    whole, _, _ = run("pat", "fc:8", "allgather")
    split, _, _ = run("pat", "fc:8", "allgather", aggregation=1)
    assert len(whole.transfers) == 8 * 3
    assert len(split.transfers) == 8 * (1 + 2 + 4)
    assert split.meta["aggregation"] == 1


def test_undefined_collectives_are_errors():
    topo = build("fc:4")
    problem = Problem(topo, make_collective("alltoall", 4), 4e6)
    result = call.synthesize(get_formulation("pat"), problem, time_limit=10, seed=0)
    assert result.status == "error" and "alltoall" in result.message


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(["bruck", "pat", "rhd"]), n=st.integers(2, 12),
       kind=st.sampled_from(["allgather", "reducescatter", "allreduce", "alltoall"]),
       fabric=st.sampled_from(["fc", "ring", "switch"]), k=st.integers(1, 2))
def test_valid_for_any_rank_count(name, n, kind, fabric, k):
    assume(kind != "alltoall" or name == "bruck")
    assume(fabric != "ring" or n >= 3)
    run(name, f"{fabric}:{n}", kind, k=k)
