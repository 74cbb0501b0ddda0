"""Exact optima by max-flow: oracles with known answers, brute-force enumeration, and bound safety."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from workbench.plugin import call
from workbench.bounds import lower_bounds
from workbench.model.collective import make_collective
from workbench.bounds.flow_lp import flow_lp_bound
from workbench.bounds.optimum import (allgather_cut_ratio, broadcast_cut, reducescatter_cut_ratio, scatter_cut_ratio,
                               smallest_splitting_cut)
from workbench.topology import Link, Topology, build

GB = 1e9
ONE_GB = 1e9


def four_islands() -> Topology:
    """{0,1} and {2,3} at 100 GB/s, joined by one 1 GB/s link each way (alpha 0)."""
    links = [Link(0, 1, 0.0, 100 * GB), Link(1, 0, 0.0, 100 * GB), Link(2, 3, 0.0, 100 * GB),
             Link(3, 2, 0.0, 100 * GB), Link(1, 2, 0.0, 1 * GB), Link(2, 1, 0.0, 1 * GB)]
    return Topology.create(4, links, 0, "islands")


def test_four_islands_every_cut_or_lp_bound_reaches_two_seconds():
    topo = four_islands()
    coll = make_collective("allgather", 4)
    chunk = coll.chunk_bytes(4e9)
    bounds = lower_bounds(topo, coll, chunk)
    assert bounds.optimum == pytest.approx(2.0, rel=1e-6)
    assert bounds.cut == pytest.approx(2.0, rel=1e-6)
    assert bounds.best >= 2.0 * (1 - 1e-6)
    # exact in the bandwidth term; no schedule shown to reach it, so not labelled the optimum
    assert bounds.optimum_exact and not bounds.exact and bounds.label == "bound"
    # the flow LP has no circulation to hide behind any more
    assert flow_lp_bound(topo, coll, chunk) == pytest.approx(2.0, rel=1e-6)


@pytest.mark.parametrize("spec, ratio_ms", [
    ("uniring:4", 15.0), ("ring:8", 8.75), ("torus:4x4", 4.6875), ("dgx1", 35 / 6)])
def test_spec_worked_examples(spec, ratio_ms):
    topo = build(spec)
    cut = allgather_cut_ratio(topo)
    assert ONE_GB / topo.num_npus * cut.seconds_per_byte * 1e3 == pytest.approx(ratio_ms, rel=1e-12)
    assert cut.exact


def test_fabric_a_and_b_of_the_spec():
    def fabric(nic_bw: float) -> Topology:
        links = []
        for g in range(8):
            box = 8 if g < 4 else 9
            links += [Link(g, box, 0.0, 100 * GB), Link(box, g, 0.0, 100 * GB),
                      Link(g, 10, 0.0, nic_bw), Link(10, g, 0.0, nic_bw)]
        return Topology.create(8, links, 3, "fabric")

    a = allgather_cut_ratio(fabric(12.5 * GB))
    assert ONE_GB / 8 * a.seconds_per_byte == pytest.approx(10e-3, rel=1e-12)
    b = allgather_cut_ratio(fabric(25 * GB))
    assert ONE_GB / 8 * b.seconds_per_byte == pytest.approx(7e-3, rel=1e-12)


@pytest.mark.parametrize("n", [3, 5, 8, 13])
def test_ring_closed_form(n):
    # any V \ {v} leaves over the two links into v; no arc of the ring does worse
    cut = allgather_cut_ratio(build(f"ring:{n}", bandwidth=50 * GB))
    assert cut.seconds_per_byte == pytest.approx((n - 1) / (2 * 50 * GB), rel=1e-12)
    assert cut.ratio == Fraction(n - 1, 2)  # integer capacities: one unit per link


@pytest.mark.parametrize("a, b", [(3, 3), (4, 4), (4, 6), (5, 3)])
def test_torus_and_mesh_closed_forms(a, b):
    n = a * b
    torus = allgather_cut_ratio(build(f"torus:{a}x{b}", bandwidth=50 * GB))
    assert torus.seconds_per_byte == pytest.approx((n - 1) / (4 * 50 * GB), rel=1e-12)
    mesh = allgather_cut_ratio(build(f"mesh:{a}x{b}", bandwidth=50 * GB))
    assert mesh.seconds_per_byte == pytest.approx((n - 1) / (2 * 50 * GB), rel=1e-12)


def test_multi_node_fabrics_meet_the_issue_floor():
    ag = make_collective("allgather", 32)
    assert lower_bounds(build("ndv2:4"), ag, ag.chunk_bytes(ONE_GB)).best >= 60e-3
    ag16 = make_collective("allgather", 16)
    assert lower_bounds(build("ndv2-nic:2"), ag16, ag16.chunk_bytes(ONE_GB)).best >= 40e-3
    ar = make_collective("allreduce", 8)
    bounds = lower_bounds(build("ring:8"), ar, ar.chunk_bytes(ONE_GB))
    assert bounds.best >= 17.5e-3
    assert bounds.gossip == pytest.approx(17.5e-3 + 0.5e-6, rel=1e-9)
    assert bounds.rs_ag_throughput >= bounds.best and not bounds.exact and bounds.label == "bound"


def test_switch_to_switch_fabric_has_an_exact_optimum():
    topo = build("nvs-ib:2")
    cut = allgather_cut_ratio(topo)
    # every GPU has 150 (NVSwitch) + 25 (NIC) GB/s in: V \ {v} gives 15 / 175 GB/s
    assert cut.seconds_per_byte == pytest.approx(15 / 175e9, rel=1e-12)


# ------------------------------------------------------------------ brute force oracle
@st.composite
def fabrics(draw, max_npus: int = 5, max_switches: int = 2) -> Topology:
    """Random strongly connected fabrics with up to two switches, bandwidths from a few values."""
    n = draw(st.integers(2, max_npus))
    s = draw(st.integers(0, max_switches))
    nodes = n + s
    bandwidths = st.sampled_from([1 * GB, 2.5 * GB, 10 * GB, 25 * GB, 40 * GB])
    links: dict[tuple[int, int], Link] = {}
    order = draw(st.permutations(list(range(nodes))))
    for i in range(nodes):  # a cycle through every node keeps it strongly connected
        u, v = order[i], order[(i + 1) % nodes]
        if u != v:
            links[(u, v)] = Link(u, v, draw(st.sampled_from([0.0, 1e-6])), draw(bandwidths))
    extra = draw(st.lists(st.tuples(st.integers(0, nodes - 1), st.integers(0, nodes - 1), bandwidths), max_size=8))
    for u, v, bw in extra:
        if u != v and (u, v) not in links:
            links[(u, v)] = Link(u, v, 0.0, bw)
    return Topology.create(n, links.values(), s, "drawn")


def _subsets(nodes: int):
    for size in range(1, nodes):
        yield from combinations(range(nodes), size)


def _leaving(topo: Topology, side: set[int]) -> float:
    return sum(l.bandwidth for l in topo.links if l.src in side and l.dst not in side)


def brute_allgather(topo: Topology) -> float:
    best = 0.0
    for subset in _subsets(topo.num_nodes):
        side = set(subset)
        inside = sum(1 for v in side if v < topo.num_npus)
        if 0 < inside < topo.num_npus:
            best = max(best, inside / _leaving(topo, side))
    return best


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(topo=fabrics())
def test_allgather_and_reducescatter_match_enumeration(topo):
    assert allgather_cut_ratio(topo).seconds_per_byte == pytest.approx(brute_allgather(topo), rel=1e-9)
    assert reducescatter_cut_ratio(topo).seconds_per_byte == pytest.approx(brute_allgather(topo.reversed()),
                                                                          rel=1e-9)


@SETTINGS
@given(topo=fabrics(), root_choice=st.integers(0, 10))
def test_single_root_cuts_match_enumeration(topo, root_choice):
    root = root_choice % topo.num_npus
    broadcast = max(1 / _leaving(topo, set(s)) for s in _subsets(topo.num_nodes)
                    if root in s and any(v not in s for v in topo.npus))
    assert broadcast_cut(topo, root).seconds_per_byte == pytest.approx(broadcast, rel=1e-9)
    scatter = max(sum(1 for v in topo.npus if v not in s) / _leaving(topo, set(s)) for s in _subsets(topo.num_nodes)
                  if root in s and any(v not in s for v in topo.npus))
    assert scatter_cut_ratio(topo, root).seconds_per_byte == pytest.approx(scatter, rel=1e-9)


@SETTINGS
@given(topo=fabrics())
def test_splitting_cut_matches_enumeration(topo):
    assume(topo.num_npus >= 2)
    weakest = min(min(_leaving(topo, set(s)), _leaving(topo, set(range(topo.num_nodes)) - set(s)))
                  for s in _subsets(topo.num_nodes)
                  if 0 < sum(1 for v in s if v < topo.num_npus) < topo.num_npus)
    assert smallest_splitting_cut(topo)[0] == pytest.approx(weakest, rel=1e-12)


def test_quantised_bandwidths_still_give_a_real_cut():
    # profiled costs are not multiples of a common quantum: the cut found is still a real cut
    topo = build("ndv2-taccl:2")
    cut = allgather_cut_ratio(topo)
    assert not cut.exact
    inside = sum(1 for v in cut.cut if v < topo.num_npus)
    assert cut.seconds_per_byte == pytest.approx(inside / _leaving(topo, set(cut.cut)), rel=1e-12)


# ------------------------------------------------------------------ no bound beats a real schedule
MODELS = [dict(), dict(link_model="blocking"), dict(order="fifo"), dict(switch_model="store-and-forward")]


# 50 draws: every one now solves the alpha-beta LPs too (tests/test_alpha_beta_bound.py draws more fabrics)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topo=fabrics(max_npus=5), formulation=st.sampled_from(["bfs-trees", "direct", "ring", "tacos"]),
       kind=st.sampled_from(["allgather", "reducescatter", "allreduce", "broadcast", "reduce", "alltoall",
                             "scatter", "gather"]),
       chunks=st.integers(1, 2), seed=st.integers(0, 3))
def test_no_bound_exceeds_a_verified_schedule(topo, formulation, kind, chunks, seed):
    from workbench.plugin.registry import Problem, get_formulation
    from workbench.checking.simulate import simulate
    from workbench.checking.verify import verify

    root = 0 if kind in ("broadcast", "reduce", "scatter", "gather") else None
    collective = make_collective(kind, topo.num_npus, chunks, root)
    problem = Problem(topo, collective, collective.size_bytes(1e6))
    try:
        result = call.synthesize(get_formulation(formulation), problem, time_limit=20, seed=seed)
    except (ValueError, NotImplementedError):
        result = None  # this formulation refuses this collective or fabric
    assume(result is not None and result.algorithms)
    algorithm = result.algorithms[0]
    verify(algorithm)
    bounds = lower_bounds(algorithm.topology, algorithm.collective, algorithm.chunk_bytes, lp_time_limit=10)
    for options in MODELS:
        time = simulate(algorithm, **options).collective_time
        assert bounds.best <= time * (1 + 1e-9), (formulation, kind, options, bounds.to_dict(), time)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 6), min_size=1, max_size=3), st.sampled_from(["torus", "uniring", "fc"]),
       st.lists(st.sampled_from([25e9, 50e9, 100e9]), min_size=3, max_size=3))
def test_symmetry_gives_the_same_optimum_with_one_sink(sizes, family, bandwidths):
    """On tori, one-way rings and fully connected fabrics, one sink per ratio finds the same cut ratio."""
    if family == "torus":
        assume(len(sizes) >= 2)
        spec = "torus:" + "x".join(map(str, sizes))
    else:
        spec = f"{family}:{sizes[0] + 1}"
    topology = build(spec, bandwidth=bandwidths[:len(sizes)] if family == "torus" else bandwidths[0])
    assume(topology.num_npus >= 2)
    fast, slow = allgather_cut_ratio(topology), allgather_cut_ratio(topology, symmetry=False)
    assert fast.ratio == slow.ratio
    assert fast.flows <= slow.flows
    assert reducescatter_cut_ratio(topology).ratio == allgather_cut_ratio(topology.reversed(), symmetry=False).ratio
