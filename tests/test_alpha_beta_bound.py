"""The alpha-beta bound (``workbench.bounds.alpha_beta``): hand-computed answers on tiny fabrics, the
cut-through pitfall it avoids, and, on drawn multi-tier switched fabrics with unequal alphas, that
it never exceeds a simulated schedule in any of the simulator's eight models."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from schedules import spread_schedule
from workbench.plugin import call
from workbench.bounds import alpha_beta
from workbench.model.algorithm import Algorithm, Transfer
from workbench.bounds.alpha_beta import alpha_beta_bound
from workbench.bounds import lower_bounds
from workbench.model.collective import custom_collective, make_collective
from workbench.bounds.optimum import allgather_cut_ratio
from workbench.plugin.registry import Problem, get_formulation
from workbench.checking.simulate import LINK_MODELS, ORDERS, SWITCH_MODELS, simulate
from workbench.bounds.time_expanded import network_of
from workbench.topology import Link, Topology, build
from workbench.checking.verify import verify

US = 1e-6
MODELS = [dict(link_model=a, order=o, switch_model=s) for a in LINK_MODELS for o in ORDERS for s in SWITCH_MODELS]


def _below_every_model(bound: float, algorithm: Algorithm) -> None:
    for model in MODELS:
        time = simulate(algorithm, **model).collective_time
        assert bound <= time * (1 + 1e-12), (model, bound, time)


# ------------------------------------------------------------------ oracles on tiny fabrics
def test_line_of_three_broadcast_is_the_fluid_quickest_flow():
    # every byte leaves 0 by M/B and needs two alphas to reach 2: 2 alpha + M / B, no less, no more
    topology = build("line:3", alpha=1 * US, bandwidth=1e9)
    collective = make_collective("broadcast", 3, 1, root=0)
    fluid = 2 * US + 1e3 / 1e9
    found = alpha_beta_bound(topology, collective, 1e3)
    assert 0.99 * fluid <= found.seconds <= fluid
    chain = Algorithm(topology, collective, 1e3, [Transfer(0, (0,), 0, 1, "copy", ()),
                                                  Transfer(1, (0,), 1, 2, "copy", (0,))], {})
    _below_every_model(found.seconds, chain)


@pytest.mark.parametrize("kind", ["allgather", "alltoall"])
@pytest.mark.parametrize("per_chunk, expected", [(0.5, 2.5), (2.0, 5.0)])
def test_line_of_three_adds_the_latency_the_other_bounds_miss(kind, per_chunk, expected):
    # an end rank gets its neighbour's chunk (piece) from time 0 and the far one over the same link
    # only after it reached the middle (one alpha): alpha + max(2c/B, alpha + c/B), in alphas. In the
    # All-to-All the far piece also shares its first link with the near one, which changes nothing.
    alpha, bandwidth = 1 * US, 1e9
    chunk = per_chunk * alpha * bandwidth
    topology = build("line:3", alpha=alpha, bandwidth=bandwidth)
    collective = make_collective(kind, 3)
    found = alpha_beta_bound(topology, collective, chunk)
    # the All-to-All's flows share one LP and one unshifted clock: a hop may lose part of a step
    assert (0.99 if kind == "allgather" else 0.97) * expected * alpha <= found.seconds <= expected * alpha
    old = lower_bounds(topology, collective, chunk, lp=False).best
    if per_chunk < 1:  # latency-dominated: neither the alpha path (2) nor the bandwidth (1 + 1) sees 2.5
        assert found.seconds > 1.2 * old
    problem = Problem(topology, collective, collective.size_bytes(chunk))
    from formulations.baselines import direct_schedule, ring_schedule

    for algorithm in ([ring_schedule(problem)] if kind == "allgather" else []) + [direct_schedule(problem)]:
        _below_every_model(found.seconds, algorithm)


def _switch_and_direct_link() -> Topology:
    """NPU 0 -> switch 2 -> NPU 1 with alphas 1 us and 10 us, and a direct link 0 -> 1 (2 us, 10 GB/s)."""
    return Topology.create(2, [Link(0, 2, 1 * US, 50e9), Link(2, 1, 10 * US, 50e9), Link(0, 1, 2 * US, 10e9),
                               Link(1, 0, 2 * US, 10e9)], 1, "switch-and-direct")


def test_a_switch_with_unequal_alphas_and_a_direct_link():
    # two parallel paths: 10 GB/s after 2 us and 50 GB/s after 1 + 10 us; the quickest flow of M
    # bytes ends at T with 10e9 (T - 2 us) + 50e9 (T - 11 us) = M
    topology = _switch_and_direct_link()
    collective = make_collective("broadcast", 2, 8, root=0)
    chunk = 1e6 / 8
    quickest = (1e6 + 10e9 * 2 * US + 50e9 * 11 * US) / 60e9
    found = alpha_beta_bound(topology, collective, chunk)
    assert 0.98 * quickest <= found.seconds <= quickest
    assert found.seconds > lower_bounds(topology, collective, chunk, lp=False).best
    # a schedule: chunks 0..5 through the switch (a transfer to it, then one from it), 6..7 direct
    transfers = []
    for c in range(6):
        transfers.append(Transfer(len(transfers), (c,), 0, 2, "copy", ()))
        transfers.append(Transfer(len(transfers), (c,), 2, 1, "copy", (len(transfers) - 1,)))
    transfers += [Transfer(len(transfers), (6, 7), 0, 1, "copy", ())]
    algorithm = Algorithm(topology, collective, chunk, transfers, {})
    verify(algorithm)
    _below_every_model(found.seconds, algorithm)


def _pitfall() -> tuple[Algorithm, float]:
    """X goes 0 -> switch -> 1 (alphas 1 us, 10 us), then Y, which reached 2 from 3, goes 2 ->
    switch -> 1 (alpha 0 into the switch). Cut-through books the switch's out-link for X at once."""
    topology = Topology.create(4, [Link(0, 4, 1 * US, 10e9), Link(4, 1, 10 * US, 10e9), Link(2, 4, 0.0, 10e9),
                                   Link(3, 2, 0.5 * US, 100e9)], 1, "pitfall")
    collective = custom_collective(4, [[0], [3]], [[1], [1]])
    chunk = 50e3  # 5 us on the 10 GB/s links
    algorithm = Algorithm(topology, collective, chunk, [Transfer(0, (0,), 0, 1, "copy", ()),
                                                        Transfer(1, (1,), 3, 2, "copy", ()),
                                                        Transfer(2, (1,), 2, 1, "copy", (1,))], {})
    verify(algorithm)
    return algorithm, simulate(algorithm).collective_time


def test_cut_through_books_every_link_of_a_segment_at_once(monkeypatch):
    algorithm, time = _pitfall()
    assert time == pytest.approx(20 * US)  # X on the out-link over [0, 5), Y over [5, 10), + 10 us
    found = alpha_beta_bound(algorithm.topology, algorithm.collective, algorithm.chunk_bytes)
    assert 0.99 * time <= found.seconds <= time
    _below_every_model(found.seconds, algorithm)

    # a switch treated as a node with per-link transits books the out-link 1 us after the in-link:
    # X then blocks [1, 6) and the "bound" passes the schedule (the reason for the hubs)
    def links_only(topology: Topology):
        net = network_of(topology)
        keep = [i for i, (u, v) in enumerate(zip(net.tail, net.head)) if max(u, v) < net.num_nodes]
        return dataclasses.replace(net, **{f: tuple(getattr(net, f)[i] for i in keep)
                                           for f in ("tail", "head", "link", "transit")})

    monkeypatch.setattr(alpha_beta, "network_of", links_only)
    wrong = alpha_beta_bound(algorithm.topology, algorithm.collective, algorithm.chunk_bytes)
    assert wrong.seconds > 1.01 * time  # about 20.3 us (20.5 us as the steps shrink) for a 20 us schedule


# ------------------------------------------------------------------ where it runs, and the hook
def test_all_reduce_takes_its_reduce_scatter_bound():
    ring = build("ring:5")
    reduce_scatter = alpha_beta_bound(ring, make_collective("reducescatter", 5, 2), 1e5)
    all_reduce = alpha_beta_bound(ring, make_collective("allreduce", 5, 2), 1e5)
    assert all_reduce.seconds == reduce_scatter.seconds and all_reduce.seconds is not None
    for name in ("ring", "bruck", "direct"):  # and it stays below All-Reduce schedules
        problem = Problem(ring, make_collective("allreduce", 5, 2), 5 * 2 * 1e5)
        algorithm = call.synthesize(get_formulation(name), problem, time_limit=10, seed=0).algorithms[0]
        assert all_reduce.seconds <= simulate(algorithm).collective_time


def test_it_says_why_it_does_not_run():
    ring = build("ring:4")
    several = custom_collective(4, [[0, 1], [1, 2]], [[2, 3], [0, 3]], combining=True)
    assert "several post ranks" in alpha_beta_bound(ring, several, 1e5).note
    too_many = alpha_beta_bound(ring, make_collective("allgather", 4), 1e5, max_npus=3)
    assert too_many.seconds is None and "NPUs" in too_many.note
    too_big = alpha_beta_bound(ring, make_collective("allgather", 4), 1e5, max_columns=50)
    assert too_big.seconds is None and "columns" in too_big.note
    bounds = lower_bounds(ring, several, 1e5)
    assert bounds.alpha_beta is None and "alpha_beta" in bounds.notes
    assert lower_bounds(ring, make_collective("allgather", 4), 1e5, lp=False).alpha_beta is None


def test_lower_bounds_reports_it_and_best_uses_it():
    topology, collective = build("ndv2:2"), make_collective("allgather", 16)
    bounds = lower_bounds(topology, collective, collective.chunk_bytes(64e3))
    assert bounds.alpha_beta is not None and bounds.to_dict()["alpha_beta"] == bounds.alpha_beta
    assert bounds.best == bounds.alpha_beta > 1.2 * lower_bounds(topology, collective, collective.chunk_bytes(64e3),
                                                                 lp=False).best


def test_a_search_stopped_by_its_time_limit_keeps_what_it_proved():
    topology, collective = build("torus:4x4"), make_collective("allgather", 16)
    full = alpha_beta_bound(topology, collective, 4e3)
    cut_short = alpha_beta_bound(topology, collective, 4e3, time_limit=0.0)
    assert "stopped" in cut_short.note
    assert 0 < cut_short.seconds <= full.seconds


# ------------------------------------------------------------------ drawn switched fabrics
ALPHAS = (0.0, 0.3 * US, 1 * US, 10 * US)
BANDWIDTHS = (10e9, 25e9, 50e9)


@st.composite
def switched_fabrics(draw) -> Topology:
    """2-8 NPUs under 1-3 switches in a chain of tiers (each switch linked both ways to the one
    before it), every link with its own drawn alpha and bandwidth, plus a few direct NPU links."""
    n = draw(st.integers(2, 8))
    switches = draw(st.integers(1, 3))
    cost = st.tuples(st.sampled_from(ALPHAS), st.sampled_from(BANDWIDTHS))
    links: dict[tuple[int, int], Link] = {}

    def add(u: int, v: int) -> None:
        if u != v and (u, v) not in links:
            links[(u, v)] = Link(u, v, *draw(cost))

    for j in range(switches):
        for m in draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)):
            add(m, n + j)
            add(n + j, m)
        if j:
            add(n + j, n + j - 1)
            add(n + j - 1, n + j)
    for u, v in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=n)):
        add(u, v)
    topology = Topology.create(n, links.values(), switches, "drawn")
    labels = topology.strong_components()
    assume(len({labels[v] for v in range(topology.num_nodes)}) == 1)
    return topology


def _schedules(topology: Topology, kind: str, k: int, size: float, rng) -> list[Algorithm]:
    from formulations.baselines import direct_schedule, ring_schedule

    n = topology.num_npus
    collective = make_collective(kind, n, k, 0 if kind == "broadcast" else None)
    problem = Problem(topology, collective, size)
    chunk = collective.chunk_bytes(size)
    if kind == "broadcast":
        return [spread_schedule(rng, topology, "broadcast", n, k, root=0, chunk_bytes=chunk)]
    if kind == "alltoall":
        return [direct_schedule(problem)]
    found = [ring_schedule(problem), direct_schedule(problem)]
    if kind == "allgather":  # (a spread reversed into a reduce-scatter may need a switch to reduce)
        found.append(spread_schedule(rng, topology, "allgather", n, k, chunk_bytes=chunk, multi=True))
    return found


def _check_drawn(topology: Topology, kind: str, k: int, size: float, rng) -> None:
    algorithms = _schedules(topology, kind, k, size, rng)
    collective, chunk = algorithms[0].collective, algorithms[0].chunk_bytes
    found = alpha_beta_bound(topology, collective, chunk)
    assert found.seconds is not None and math.isfinite(found.seconds) and found.seconds > 0, found
    old = lower_bounds(topology, collective, chunk, lp=False)
    # it starts from the alpha path and each rank's in-link load, so it never falls below them
    assert found.seconds >= old.latency * (1 - 1e-6)
    if kind == "allgather":  # and its LP holds the throughput optimum's bandwidth term (to its tolerance)
        bandwidth = size / topology.num_npus * allgather_cut_ratio(topology).seconds_per_byte
        assert found.seconds >= bandwidth / (1 + 2 * alpha_beta.RTOL)
    for algorithm in algorithms:
        verify(algorithm)
        _below_every_model(found.seconds, algorithm)


DRAWN = dict(topology=switched_fabrics(), k=st.integers(1, 2), size=st.sampled_from([4e3, 64e3, 1e6, 16e6]),
             rng=st.randoms(use_true_random=False))
COPIES = ["allgather", "broadcast", "reducescatter"]  # one small LP per rank: fast


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(kind=st.sampled_from(COPIES), **DRAWN)
def test_never_above_a_simulated_schedule_on_drawn_switched_fabrics(topology, kind, k, size, rng):
    _check_drawn(topology, kind, k, size, rng)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(kind=st.sampled_from([*COPIES, "alltoall"]), **DRAWN)  # All-to-All: one LP of all flows, seconds each
def test_never_above_a_simulated_schedule_on_many_drawn_switched_fabrics(topology, kind, k, size, rng):
    _check_drawn(topology, kind, k, size, rng)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ring:8", "dgx1", "torus:4x4", "ndv2:2", "dgx2:2"])
@pytest.mark.parametrize("size", [64e3, 1e6, 16e6])
def test_never_above_tacos_and_the_baselines_on_named_fabrics(name, size):
    from formulations.baselines import direct_schedule, ring_schedule
    from formulations.tacos import Tacos

    topology = build(name)
    problem = Problem(topology, make_collective("allgather", topology.num_npus), size)
    found = alpha_beta_bound(topology, problem.collective, problem.chunk_bytes)
    algorithms = [ring_schedule(problem), direct_schedule(problem),
                  *call.synthesize(Tacos(), problem, time_limit=30, seed=0).algorithms]
    for algorithm in algorithms:
        _below_every_model(found.seconds, algorithm)
