"""The floor's decomposition: dimensions, isomorphism classes, group fabrics and stitching."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.kit.decomposition import Send, decompose, stitch
from workbench.checking.verify import verify
from workbench.model.collective import make_collective
from workbench.topology import Topology, build


@pytest.mark.parametrize("spec, box, rail", [("rails:4x8", (4, 8), (8, 4)), ("rails:2x4", (2, 4), (4, 2)),
                                             ("rails:3x2", (3, 2), (2, 3))])
def test_rails_decompose_into_boxes_and_rails_of_one_class(spec, box, rail):
    found = decompose(build(spec))
    assert found is not None and found.source == "meta"
    boxes, rails = found.dimension("box"), found.dimension("rail")
    assert (len(boxes.groups), boxes.group_size) == box and (len(rails.groups), rails.group_size) == rail
    assert len(boxes.classes) == 1 and len(rails.classes) == 1
    # a box's fabric is its GPUs and its scale-up switch; a rail's its GPUs and its leaf
    assert boxes.fabrics[0].topology.num_switches == 1 and rails.fabrics[0].topology.num_switches == 1
    assert all(l.bandwidth == 450e9 for l in boxes.fabrics[0].topology.links)
    assert all(l.bandwidth == 50e9 for l in rails.fabrics[0].topology.links)


def test_a_rail_under_spines_keeps_its_leaves_and_the_spines_only():
    found = decompose(build("rails:64x8"))  # two leaf groups of 32 boxes under 8 spines
    fabric = found.dimension("rail").fabrics[0]
    assert fabric.size == 64 and fabric.topology.num_switches == 2 + 8


def test_a_fabric_without_boxes_and_rails_has_no_decomposition():
    assert decompose(build("ring:8")) is None
    assert decompose(build("leafspine:4x4x2")) is None


@given(spec=st.sampled_from(["rails:4x8", "rails:2x4", "rails:3x2", "rails:5x2"]), data=st.data())
@settings(max_examples=15, deadline=None)
def test_group_translations_act_freely_and_transitively_and_preserve_links(spec, data):
    found = decompose(build(spec))
    dim = found.dimensions[data.draw(st.integers(0, len(found.dimensions) - 1))]
    fabric = dim.fabrics[0]
    table, sub = fabric.translations, fabric.topology
    g = fabric.size
    assert sorted(int(table[t, 0]) for t in range(g)) == list(range(g))  # t takes GPU 0 to t
    links = {(l.src, l.dst): (l.bandwidth, l.alpha) for l in sub.links}
    t = data.draw(st.integers(0, g - 1))
    assert all(links.get((int(table[t, u]), int(table[t, v]))) == attrs for (u, v), attrs in links.items())
    group = data.draw(st.integers(0, len(dim.groups) - 1))
    a = data.draw(st.integers(0, g - 1))
    assert dim.locate(dim.groups[group][a]) == (group, a)


def test_stitch_lists_by_planned_start_and_waits_for_deliveries():
    topology = build("rails:2x2")
    collective = make_collective("allgather", 4, 1)
    # broadcast each chunk along its rail, then in its box, listed in a scrambled order
    sends = []
    for s in range(4):
        box, pos = divmod(s, 2)
        peer = (1 - box) * 2 + pos
        sends.append(Send(1.0, 0, s, peer, (s,)))
        for holder in (s, peer):
            sends.append(Send(2.0, 1, holder, holder ^ 1, (s,)))
    algorithm = stitch(topology, collective, 1e6, reversed(sends))
    verify(algorithm)
    first_box_send = next(t for t in algorithm.transfers if t.src == 2 and t.dst == 3 and t.chunks == (0,))
    assert [algorithm.transfers[d].dst for d in first_box_send.deps] == [2]  # waits for chunk 0's arrival at 2


def test_a_switched_grid_decomposes_into_its_boxes_and_switch_rails():
    # TACOS Table V's fabric: ring 2 x fully connected 4 inside a node, a switch per position across nodes
    topology = build("rfs:2x4x4", bandwidth=[200 * 2**30, 100 * 2**30, 50 * 2**30], alpha=[0.5e-6] * 3)
    found = decompose(topology)
    assert found is not None and found.source == "dims"
    boxes, rails = found.dimension("box"), found.dimension("rail")
    assert boxes.groups[1] == tuple(range(8, 16)) and rails.groups[3] == (3, 11, 19, 27)
    assert boxes.fabrics[0].topology.num_switches == 0  # the node's own ring and all-to-all links
    assert {l.bandwidth for l in boxes.fabrics[0].topology.links} == {200 * 2**30, 100 * 2**30}
    assert rails.fabrics[0].topology.num_switches == 1


def test_spread_sends_spine_crossing_copies_hop_by_hop_through_every_spine():
    topology = build("rails:4x2,leaf=2")  # two leaf groups of two boxes under two spines
    n = topology.num_npus
    collective = make_collective("allgather", n, 1)
    sends = [Send(0.0, 0, s, d, (s,)) for s in range(n) for d in range(n) if d != s]
    algorithm = stitch(topology, collective, 1e6, sends, spread=True)
    verify(algorithm)
    spines = {t.dst for t in algorithm.transfers if topology.is_switch(t.src) and topology.is_switch(t.dst)
              and not any(l.src == t.dst and l.dst < n for l in topology.links)}
    assert len(spines) == 2  # both spines carry traffic (the fixed route would take one)
    up = [t for t in algorithm.transfers if t.src < n and topology.is_switch(t.dst)]
    assert len(up) == len({(t.src, t.chunks) for t in up})  # each chunk climbs to its leaf once


def test_a_rails_fabric_read_without_its_record_decomposes_from_its_links():
    built = build("rails:4x8")
    bare = Topology.create(built.num_npus, built.links, built.num_switches, "from a file", {})
    found = decompose(bare)
    assert found is not None and found.source == "links"
    assert [(len(d.groups), d.group_size, len(d.classes)) for d in found.dimensions] == [(4, 8, 1), (8, 4, 1)]
