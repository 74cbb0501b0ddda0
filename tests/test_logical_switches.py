"""Multi-tier switching unwound as logical switches (one per rail), and TACOS on it."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings, strategies as st

from workbench.plugin import call
from workbench.model.collective import make_collective
from workbench.plugin.registry import Problem, get_formulation
from workbench.topology import build
from workbench.topology.logical import switch_complexes, unwind
from workbench.checking.verify import verify

GB = 1e9


def test_single_tier_switches_unwind_as_before():
    topology = build("rails:4x4")  # one leaf per rail: no switch touches another
    assert all(len(c) == 1 for c in switch_complexes(topology))
    assert unwind(topology, 1).links == topology.unwind_switches(1).links


@pytest.mark.parametrize("over, expected", [(1, 50), (4, 50), (8, 25)])
def test_crossing_links_share_the_uplink(over, expected):
    """rails:8x2,leaf=4,spines=1: a leaf's one uplink carries 4 x 50 / over GB/s; each rail's
    ring crosses from group 0 to group 1 once each way, so a crossing link gets min(NIC, uplink)."""
    topology = build(f"rails:8x2,leaf=4,spines=1,over={over}")
    view = unwind(topology, 1)
    assert view.num_switches == 0 and view.meta["logical_switches"] == "per rail"
    group = lambda npu: npu // 8  # noqa: E731 - 4 boxes of 2 per group
    crossing = [l for l in view.links if group(l.src) != group(l.dst)]
    rails = {l.src % 2 for l in crossing}
    assert rails == {0, 1} and len(crossing) == 4  # each rail: one link each way between the groups
    assert all(l.bandwidth == pytest.approx(expected * GB) for l in crossing)
    assert all(l.alpha == pytest.approx(0.5e-6 + 0.5e-6 + 0.25e-6 + 0.25e-6) for l in crossing)


@settings(max_examples=10, deadline=None)
@given(boxes=st.integers(3, 12), per_box=st.integers(2, 4), per_leaf=st.integers(2, 4), spines=st.integers(1, 3),
       degree=st.sampled_from([1, 2, None]))
def test_every_rail_is_one_logical_switch(boxes, per_box, per_leaf, spines, degree):
    assume(boxes > per_leaf)  # a spine tier
    topology = build(f"rails:{boxes}x{per_box},leaf={per_leaf},spines={spines}")
    view = unwind(topology, degree)
    position = lambda npu: npu % per_box  # noqa: E731 - the builder's rank = box * G + i
    rail_links = [l for l in view.links if l.src // per_box != l.dst // per_box]
    assert all(position(l.src) == position(l.dst) for l in rail_links)  # only along a rail
    d = boxes - 1 if degree is None else min(degree, boxes - 1)
    assert len(rail_links) == topology.num_npus * d
    assert len(set(view.strong_components())) == 1


@pytest.mark.parametrize("spec", ["rails:8x4,leaf=4", "rails:6x2,leaf=2,over=2", "fattree:4", "nvs-ib:2"])
def test_tacos_runs_on_multi_tier_switches(spec):
    topology = build(spec)
    collective = make_collective("allgather", topology.num_npus, 1)
    result = call.synthesize(get_formulation("tacos"), Problem(topology, collective, 2**26), time_limit=60, seed=0)
    assert result.status == "feasible", result.message
    verify(result.algorithms[0])
    assert "unwound" in result.algorithms[0].meta["synthesis_view"]


def test_a_scale_up_complex_inside_one_box_is_one_logical_switch():
    """Two scale-up chips joined by a trunk inside each box: not split by rail (that would cut the
    box apart); TACOS runs and verifies."""
    from workbench.topology import Link, Topology

    links, node = [], 16

    def both(u, v, bw):
        links.extend((Link(u, v, 1e-6, bw), Link(v, u, 1e-6, bw)))

    for b in range(4):
        chips = (node, node + 1)
        node += 2
        for g in range(4):
            both(b * 4 + g, chips[g // 2], 450 * GB)
        both(*chips, 900 * GB)
    for g in range(4):
        for b in range(4):
            both(b * 4 + g, node, 50 * GB)
        node += 1
    topology = Topology.create(16, links, node - 16, "two-chip boxes")
    view = unwind(topology, 1)
    assert len(set(view.strong_components())) == 1
    collective = make_collective("allgather", 16, 1)
    result = call.synthesize(get_formulation("tacos"), Problem(topology, collective, 2**26), time_limit=60, seed=0)
    verify(result.algorithms[0])
