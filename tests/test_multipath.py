"""Multipath: routes from the flow LP, their decomposition and the schedules."""

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from workbench.plugin import call
from formulations.multipath import split_pieces
from workbench.bounds import flow_lp_bound, latency_bound
from workbench.model.collective import make_collective
from workbench.bounds.flow_routes import decompose_flow, flow_routes
from workbench.plugin.registry import Problem, get_formulation
from workbench.checking.simulate import simulate
from workbench.topology import Link, Topology, build
from workbench.checking.verify import verify

A, B = 1e-6, 50e9


def leaf_spine(leaves: int = 2, per_leaf: int = 2, spines: int = 2) -> Topology:
    """NPUs on leaves, every leaf joined to every spine; all links alike."""
    n = leaves * per_leaf
    links = []
    for npu in range(n):
        leaf = n + npu // per_leaf
        links += [Link(npu, leaf, A, B), Link(leaf, npu, A, B)]
    for leaf in range(n, n + leaves):
        for spine in range(n + leaves, n + leaves + spines):
            links += [Link(leaf, spine, A, B), Link(spine, leaf, A, B)]
    return Topology.create(n, links, leaves + spines, f"leafspine:{leaves}x{per_leaf}x{spines}")


def synth(topology, kind, size, **params):
    problem = Problem(topology, make_collective(kind, topology.num_npus), size)
    return call.synthesize(get_formulation("multipath"), problem, time_limit=30, seed=0, **params), problem


def test_decompose_a_diamond_into_its_two_paths():
    topo = Topology.create(4, [Link(0, 1, A, B), Link(0, 2, A, B), Link(1, 3, A, B), Link(2, 3, A, B)], 0, "diamond")
    flow = np.array([0.5, 0.5, 0.5, 0.5])
    assert decompose_flow(topo, flow, frozenset({0}), {3: 1}) == {3: [((0, 1, 3), 0.5), ((0, 2, 3), 0.5)]}


def test_a_cycle_of_round_off_is_cancelled():
    # 0 -> 1 -> 2 -> 3 with a circulation 1 -> 2 -> 1 on top, heavier than the way on at 2
    topo = Topology.create(4, [Link(0, 1, A, B), Link(1, 2, A, B), Link(2, 1, A, B), Link(2, 3, A, B)], 0, "loop")
    flow = np.array([1.0, 2.5, 1.5, 1.0])
    assert decompose_flow(topo, flow, frozenset({0}), {3: 1}) == {3: [((0, 1, 2, 3), 1.0)]}


def test_flow_absorbed_where_nothing_is_needed_is_dropped():
    """The LP lets a node take in more than it needs: a walk that ends there is dropped and the
    demand still comes back on its own paths."""
    links = [Link(0, 1, A, B), Link(0, 2, A, B), Link(1, 3, A, B), Link(2, 3, A, B), Link(0, 4, A, B)]
    topo = Topology.create(5, links, 0, "diamond+sink")
    flow = np.array([0.5, 0.5, 0.5, 0.5, 1.0])
    assert decompose_flow(topo, flow, frozenset({0}), {3: 1}) == {3: [((0, 1, 3), 0.5), ((0, 2, 3), 0.5)]}


@settings(max_examples=40, deadline=None)
@given(data=st.data(), n=st.integers(3, 7))
def test_decomposition_carries_every_demand_on_the_flow(data, n):
    """Paths drawn at random and summed into a flow come back as paths that carry every demand
    within the flow; what they leave unused is a circulation (cycles the drawn paths formed)."""
    topo = build(f"fc:{n}", alpha=A, bandwidth=B)
    demands: dict[int, float] = {}
    flow = np.zeros(len(topo.links))
    for d in range(1, n):
        for _ in range(data.draw(st.integers(1, 3))):
            middle = data.draw(st.lists(st.sampled_from([v for v in range(1, n) if v != d]), max_size=2, unique=True))
            amount = data.draw(st.floats(0.1, 4.0))
            path = [0, *middle, d]
            for u, v in zip(path, path[1:]):
                flow[topo.link_index(u, v)] += amount
            demands[d] = demands.get(d, 0.0) + amount
    assume(demands)
    found = decompose_flow(topo, flow, frozenset({0}), demands)
    loads = np.zeros(len(topo.links))
    for d, paths in found.items():
        assert sum(share for _, share in paths) == pytest.approx(1.0)
        for path, share in paths:
            assert path[0] == 0 and path[-1] == d
            for u, v in zip(path, path[1:]):
                loads[topo.link_index(u, v)] += share * demands[d]
    assert (loads <= flow + 1e-6).all()
    unused = flow - loads
    for v in range(n):
        out = sum(unused[topo.link_index(v, w)] for w in topo.out_neighbors(v))
        into = sum(unused[topo.link_index(u, v)] for u in topo.in_neighbors(v))
        assert out == pytest.approx(into, abs=1e-6)


@given(shares=st.lists(st.floats(0.01, 1.0), min_size=1, max_size=5), pieces=st.integers(1, 20))
def test_pieces_follow_the_shares(shares, pieces):
    total = sum(shares)
    counts = split_pieces([s / total for s in shares], pieces)
    assert sum(counts) == pieces
    assert all(abs(c - s / total * pieces) < 1 for c, s in zip(counts, shares))


def test_routes_reach_the_flow_optimum_on_a_leaf_spine():
    """Both spines carry the cross-leaf traffic, so the routes' loads meet the flow LP's bound."""
    topo = leaf_spine()
    coll = make_collective("alltoall", 4)
    routes = flow_routes(topo, coll, 1e6, time_limit=10)
    assert routes.status == "optimal"
    assert routes.optimum_seconds == pytest.approx(flow_lp_bound(topo, coll, 1e6) - A, rel=1e-5)
    spines = {path[2] for (pre, d), paths in routes.paths.items() for path, _ in paths if len(path) == 5}
    assert spines == {6, 7}


@pytest.mark.parametrize("size", [64e3, 16e6])
def test_alltoall_on_a_leaf_spine_is_valid_and_near_the_bound(size):
    topo = leaf_spine(2, 4, 2)
    result, problem = synth(topo, "alltoall", size)
    assert result.status == "feasible", result.message
    algorithm = result.algorithms[0]
    verify(algorithm)
    simulated = simulate(algorithm).collective_time
    bound = max(flow_lp_bound(topo, problem.collective, problem.chunk_bytes),
                latency_bound(topo, problem.collective, problem.chunk_bytes))
    assert simulated <= 1.35 * bound
    assert set(algorithm.meta["time_by_choice"]["chunks"]) == {"1", "2", "4", "8", "16"}
    assert min(algorithm.meta["time_by_choice"]["chunks"].values()) == algorithm.meta["claimed_time"] == simulated


def test_a_single_path_schedule_is_slower_than_the_multipath_one():
    """On a leaf-spine the BFS route puts all cross-leaf traffic on one spine: twice the load."""
    topo = leaf_spine(2, 4, 2)
    result, problem = synth(topo, "alltoall", 16e6)
    direct = call.synthesize(get_formulation("direct"), problem, time_limit=10, seed=0)
    assert simulate(result.algorithms[0]).collective_time < 0.7 * simulate(direct.algorithms[0]).collective_time


def test_given_chunks_are_kept_and_copies_are_refused():
    topo = build("ring:4", alpha=A, bandwidth=B)
    result, _ = synth(topo, "alltoall", 1e6, chunks=3)
    assert result.algorithms[0].collective.chunks_per_rank == 3
    verify(result.algorithms[0])
    refused, _ = synth(topo, "allgather", 1e6)
    assert refused.status == "error" and "allgather" in refused.message
