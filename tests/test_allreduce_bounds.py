"""All-Reduce's group gossip and two-hop bounds: known values, and never above a verified schedule."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from strategies import fabrics
from workbench.bounds.group_gossip import candidate_groups, entering_links, group_gossip_bound
from workbench.bounds.two_hop import two_hop_bound
from workbench.checking.simulate import simulate
from workbench.checking.verify import verify
from workbench.model.collective import make_collective
from workbench.plugin import call
from workbench.plugin.registry import Problem, get_formulation
from workbench.topology import Link, Topology, build

GiB = 2**30
MODELS = [dict(), dict(link_model="blocking"), dict(order="fifo"), dict(switch_model="store-and-forward")]


def _allreduce(topology: Topology, size: float):
    collective = make_collective("allreduce", topology.num_npus)
    return collective, collective.chunk_bytes(size)


def test_the_group_bound_on_a_rail_cluster_counts_the_nics():
    # 32 boxes of 8 over 50 GB/s NICs (alpha 0.5 us): 2 x 31 x 1 GiB over 256 x 50 GB/s, plus one alpha
    topology = build("rails:32x8")
    collective, chunk = _allreduce(topology, GiB)
    expected = 2 * 31 * GiB / (256 * 50e9) + 0.5e-6
    assert group_gossip_bound(topology, collective, chunk) == pytest.approx(expected, rel=1e-9)


def test_the_boxes_are_found_from_the_links_alone():
    topology = build("rails:4x8")
    stripped = Topology.create(topology.num_npus, topology.links, topology.num_switches, "no layout")
    boxes = [[v // 8 for v in range(32)]]
    assert boxes[0] in [list(groups) for groups in candidate_groups(stripped)]
    # every GPU's NIC link enters its box; no scale-up link does
    links = entering_links(stripped, boxes[0])
    assert len(links) == 32 and {l.bandwidth for l in links} == {50e9}


def test_two_hops_or_seven_raw_inputs_on_a_switch():
    # switch:8, 0.25 us per link, 50 GB/s: two deliveries take 1 us; seven raw 4 KB inputs through
    # one in-link take 0.57 us plus the 0.5 us path
    topology = build("switch:8")
    collective, chunk = _allreduce(topology, 4096)
    assert two_hop_bound(topology, collective, chunk) == pytest.approx(1.0e-6, rel=1e-9)
    collective, chunk = _allreduce(topology, 1024)
    assert two_hop_bound(topology, collective, chunk) == pytest.approx(7 * 1024 / 50e9 + 0.5e-6, rel=1e-9)


def test_a_remote_rank_inside_a_sum_needs_a_detour_through_a_third_npu():
    """Two leaves of two NPUs under one spine, 1 us per link, 50 GB/s. A leaf mate reaches v in 2 us
    and inside a sum in 4 us (a(u) + d(u, v)); a rank on the other leaf in 4 us, inside a sum in
    6 us (2 + 4: summed at its own leaf mate, at v's, or at itself after a receipt). At 1 MB sending
    both remote inputs raw costs 2 x 21 us, so 6 us; at 64 KB it costs 2 x 1.31 us + a(v) = 4.62 us,
    above the 4 us a leaf mate's sum takes. The first form gave 4 us at both sizes."""
    leaf, spine = {0: 4, 1: 4, 2: 5, 3: 5}, 6
    links = [link for npu, sw in leaf.items() for link in (Link(npu, sw, 1e-6, 50e9), Link(sw, npu, 1e-6, 50e9))]
    links += [link for sw in (4, 5) for link in (Link(sw, spine, 1e-6, 50e9), Link(spine, sw, 1e-6, 50e9))]
    topology = Topology.create(4, links, 3, "two leaves")
    collective, chunk = _allreduce(topology, 2**20)
    assert two_hop_bound(topology, collective, chunk) == pytest.approx(6e-6, rel=1e-9)
    collective, chunk = _allreduce(topology, 65536)
    assert two_hop_bound(topology, collective, chunk) == pytest.approx(2 * 65536 / 50e9 + 2e-6, rel=1e-9)


def test_neither_applies_to_another_collective():
    topology = build("rails:2x4")
    collective = make_collective("allgather", 8)
    assert group_gossip_bound(topology, collective, 1e6) is None and two_hop_bound(topology, collective, 1e6) is None


@st.composite
def boxes_on_a_switch(draw) -> Topology:
    """Boxes of NPUs joined by fast links, every NPU also on one shared, slower switch."""
    boxes, size = draw(st.integers(2, 3)), draw(st.integers(1, 3))
    n = boxes * size
    fast, slow = draw(st.sampled_from([100e9, 400e9])), draw(st.sampled_from([10e9, 25e9, 50e9]))
    alpha = draw(st.sampled_from([0.0, 0.2e-6, 1e-6]))
    links = [Link(u, v, alpha, fast) for b in range(boxes) for u in range(b * size, (b + 1) * size)
             for v in range(b * size, (b + 1) * size) if u != v]
    links += [link for v in range(n) for link in (Link(v, n, alpha, slow), Link(n, v, alpha, slow))]
    return Topology.create(n, links, 1, "boxes on a switch")


SCHEDULES = ["ring", "direct", "rhd", "tacos", "bfs-trees", "oneshot", "rd"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology=st.one_of(fabrics(min_npus=2, max_npus=6), boxes_on_a_switch()),
       formulation=st.sampled_from(SCHEDULES), size=st.sampled_from([4096, 65536, 1e6, 16e6]),
       seed=st.integers(0, 2))
def test_no_schedule_beats_either_bound(topology, formulation, size, seed):
    collective, chunk = _allreduce(topology, size)
    result = call.synthesize(get_formulation(formulation), Problem(topology, collective, size), time_limit=20,
                             seed=seed)
    assume(result.algorithms)
    algorithm = result.algorithms[0]
    verify(algorithm)
    bounds = [b for b in (group_gossip_bound(topology, collective, chunk), two_hop_bound(topology, collective, chunk))
              if b is not None]
    for options in MODELS:
        time = simulate(algorithm, **options).collective_time
        assert all(b <= time * (1 + 1e-9) for b in bounds), (formulation, options, bounds, time)


SIZES = [4096, 65536, 2**20, 2**24, GiB]


def _builder_fabrics() -> list[str]:
    """One example spec of every builder, with 2 to 64 NPUs."""
    from workbench.topology.builder_table import TABLE

    specs = []
    for builder in TABLE:
        for spec in builder.examples:
            topology = build(spec)
            if 2 <= topology.num_npus <= 64:
                specs.append(spec)
                break
    return specs


def test_no_output_calls_a_figure_achievable_and_the_figure_is_no_bound(capsys):
    from workbench.bounds import lower_bounds
    from workbench.cli import main

    specs = _builder_fabrics()
    assert len(specs) >= 15
    for spec in specs:
        topology = build(spec)
        for size in SIZES:
            collective, chunk = _allreduce(topology, size)
            record = lower_bounds(topology, collective, chunk, lp=False).to_dict()
            assert "achievable" not in record
            assert record["best"] == max(record[k] for k in ("injection", "latency", "cut", "splitting_cut", "gossip",
                                                            "group_gossip", "two_hop", "egress") if record[k] is not None)
    assert main(["bounds", "--topology", "ring:8", "--collective", "allreduce", "--size", "4KB"]) == 0
    text = capsys.readouterr().out
    assert "achievable" not in text and "rs_ag_throughput" in text and "not a bound" in text
