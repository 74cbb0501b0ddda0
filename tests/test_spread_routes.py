"""Spreading transfers over equally short routes through switches (``workbench.kit.spread_routes``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from workbench.checking.simulate import simulate
from workbench.checking.verify import verify
from workbench.kit.spread_routes import equal_routes, spread_routes
from workbench.model.collective import make_collective
from workbench.plugin import call
from workbench.plugin.registry import Problem, get_formulation
from workbench.topology import build


def test_a_leaf_spine_offers_one_route_per_spine_the_default_first():
    topology = build("leafspine:4x4x2")  # NPUs 0-15, leaves 16-19, spines 20 and 21
    routes = equal_routes(topology, 0, 15)
    assert routes == [(16, 20, 19), (16, 21, 19)]
    assert routes[0] == tuple(topology.route(0, 15)[1:-1])
    assert equal_routes(topology, 0, 1) == [(16,)]  # one leaf: one route
    assert equal_routes(build("ring:4"), 0, 1) == []  # a direct link: nothing to choose


def test_the_four_leaves_traffic_goes_half_over_each_spine():
    topology = build("leafspine:4x4x2")
    collective = make_collective("allgather", 16)
    from workbench.model.algorithm import Algorithm, Transfer

    transfers = [Transfer(i, (src,), src, dst) for i, (src, dst) in enumerate(
        (s, d) for s in range(16) for d in range(16) if s // 4 != d // 4)]
    named = spread_routes(topology, transfers, 1e6)
    spines = [t.via[1] if t.via else 20 for t in transfers]
    assert named == spines.count(21) == spines.count(20) == len(transfers) // 2
    algorithm = Algorithm(topology, collective, 1e6, transfers)
    assert all(t.via is None or len(t.via) == 3 for t in transfers)
    default = Algorithm(topology, collective, 1e6, [Transfer(t.id, t.chunks, t.src, t.dst) for t in transfers])
    assert simulate(algorithm).collective_time < simulate(default).collective_time


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.sampled_from(["leafspine:4x4x2", "leafspine:2x4x4", "rails:4x4", "switch:8", "ring:6", "dgx1"]),
       name=st.sampled_from(["oneshot", "rd", "oneshot-hier"]), size=st.sampled_from([4096, 65536, 2**20]))
def test_one_pass_schedules_with_spread_routes_verify_and_are_no_slower(spec, name, size):
    topology = build(spec)
    problem = Problem(topology, make_collective("allreduce", topology.num_npus), size)
    result = call.synthesize(get_formulation(name), problem, time_limit=30, seed=0)
    assume(result.algorithms)
    algorithm = result.algorithms[0]
    verify(algorithm)
    time = simulate(algorithm).collective_time
    assert time == pytest.approx(algorithm.meta["claimed_time"], rel=1e-9)
    if algorithm.meta.get("routes_named"):
        for t in algorithm.transfers:
            t.via = None
        assert time <= simulate(algorithm).collective_time * (1 + 1e-9)
