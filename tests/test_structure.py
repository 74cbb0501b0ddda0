"""Boxes and rails found in the links, and what uses them: hierarchical on a file, the group cuts."""

from __future__ import annotations

import random

import pytest
from hypothesis import assume, given, settings, strategies as st

from workbench.plugin import call
from workbench.model.collective import make_collective
from workbench.bounds.group_cuts import group_cut_bound
from workbench.plugin.registry import Problem, get_formulation
from workbench.checking.simulate import simulate
from workbench.topology.structure import boxes_and_rails
from workbench.topology import Link, Topology
from workbench.checking.verify import verify

GB, US = 1e9, 1e-6


def rail_file(boxes: int, per_box: int, per_leaf: int = 32, spines: int = 4, over: float = 1.0,
              shuffle: int | None = None) -> Topology:
    """A rail fabric written link by link, as a file would give it (no meta). ``shuffle``: a seed
    to renumber the NPUs at random, so positions are not ids."""
    n = boxes * per_box
    label = list(range(n))
    if shuffle is not None:
        random.Random(shuffle).shuffle(label)
    links: list[Link] = []

    def both(u: int, v: int, alpha: float, bw: float) -> None:
        links.extend((Link(u, v, alpha, bw), Link(v, u, alpha, bw)))

    node = n
    for b in range(boxes):
        for i in range(per_box):
            both(label[b * per_box + i], node, 0.2 * US, 450 * GB)
        node += 1
    groups = -(-boxes // per_leaf)
    leaf = {}
    for g in range(groups):
        for i in range(per_box):
            leaf[g, i] = node
            node += 1
    for b in range(boxes):
        for i in range(per_box):
            both(label[b * per_box + i], leaf[b // per_leaf, i], 1 * US, 50 * GB)
    if groups > 1:
        for switch in leaf.values():
            for s in range(spines):
                both(switch, node + s, 0.5 * US, min(per_leaf, boxes) * 50 * GB / spines / over)
        node += spines
    return Topology.create(n, links, node - n, f"railfile:{boxes}x{per_box}"), label


def test_boxes_and_rails_of_a_rail_file():
    topology, label = rail_file(6, 4, per_leaf=4)
    found = boxes_and_rails(topology)
    assert found is not None and found.source == "links"
    assert (found.per_box, found.num_boxes) == (4, 6)
    assert found.groups == ((0, 1, 2, 3), (4, 5))
    assert found.boxes[0] == (0, 1, 2, 3) and found.boxes[5] == (20, 21, 22, 23)
    assert found.dims() == [{"kind": "switch", "size": 4}, {"kind": "rail", "size": 6}]


@settings(max_examples=15, deadline=None)
@given(boxes=st.integers(2, 9), per_box=st.integers(2, 5), per_leaf=st.integers(1, 4), seed=st.integers(0, 10**6))
def test_positions_share_rails_within_a_leaf_group(boxes, per_box, per_leaf, seed):
    """Renumbered at random, the structure is found again: each box is a box, and within a leaf
    group the NPUs at one position hang off one leaf."""
    assume(boxes * per_box >= 4)
    topology, label = rail_file(boxes, per_box, per_leaf=per_leaf, shuffle=seed)
    found = boxes_and_rails(topology)
    assert found is not None
    true_box = {label[b * per_box + i]: b for b in range(boxes) for i in range(per_box)}
    assert sorted(sorted(box) for box in found.boxes) == sorted(
        sorted(label[b * per_box + i] for i in range(per_box)) for b in range(boxes))
    leaf_of = {l.src: l.dst for l in topology.links if l.src < topology.num_npus and l.bandwidth == 50 * GB}
    for group in found.groups:
        assert len({true_box[found.boxes[b][0]] // per_leaf for b in group}) == 1
        for i in range(per_box):
            assert len({leaf_of[found.boxes[b][i]] for b in group}) == 1


@pytest.mark.parametrize("topology", [Topology.create(4, [Link(i, (i + 1) % 4, 1e-6, 1e9) for i in range(4)]),
                                      rail_file(1, 4)[0]])
def test_no_structure_where_there_is_none(topology):
    assert boxes_and_rails(topology) is None  # one tier; one box


def test_hierarchical_runs_on_a_file_as_on_its_ids():
    """A file with no dims: hierarchical finds boxes and rails; renumbered, the same time."""
    times = []
    for shuffle in (None, 3):
        topology, _ = rail_file(4, 4, shuffle=shuffle)
        problem = Problem(topology, make_collective("allreduce", 16, 2), 64e6)
        result = call.synthesize(get_formulation("hierarchical"), problem, time_limit=30, seed=0)
        verify(result.algorithms[0])
        times.append(simulate(result.algorithms[0]).collective_time)
    assert times[0] == pytest.approx(times[1], rel=1e-9)


def test_group_cuts_oracle():
    """Box NIC cut and leaf-group spine cut, by hand: 1 GiB per rank, 8 boxes of 4, 4 per leaf."""
    size = 2**30
    for over, expected in ((1.0, "box"), (4.0, "group")):
        topology, _ = rail_file(8, 4, per_leaf=4, spines=2, over=over)
        n = 32
        collective = make_collective("alltoall", n, 1)
        chunk = collective.chunk_bytes(size)
        bound = group_cut_bound(topology, collective, chunk)
        box = 4 * (n - 4) * chunk / (4 * 50 * GB)
        group = 16 * 16 * chunk / (4 * 4 * 50 * GB / over)
        assert bound == pytest.approx(max(box, group) + 0.2 * US, rel=1e-9)
        assert (box > group) == (expected == "box")


@settings(max_examples=8, deadline=None)
@given(boxes=st.integers(2, 6), per_box=st.integers(2, 4), per_leaf=st.integers(1, 3),
       over=st.sampled_from([1.0, 2.0, 4.0]))
def test_group_cuts_never_above_the_flow_optimum(boxes, per_box, per_leaf, over):
    """The max-concurrent-flow LP is the All-to-All's bandwidth optimum: no cut bound exceeds it."""
    from workbench.bounds.flow_lp import flow_lp_bound

    topology, _ = rail_file(boxes, per_box, per_leaf=per_leaf, spines=2, over=over)
    collective = make_collective("alltoall", topology.num_npus, 1)
    chunk = collective.chunk_bytes(2**24)
    bound = group_cut_bound(topology, collective, chunk)
    optimum = flow_lp_bound(topology, collective, chunk, time_limit=20)
    assume(optimum is not None)
    alpha = min(l.alpha for l in topology.links)
    assert bound is not None and bound - alpha <= optimum * (1 + 1e-6)


@pytest.mark.parametrize("dims, field", [([{"kind": "ring", "size": 3}], "sizes multiply"),
                                         ([{"kind": "ring", "size": "4"}], "meta.dims[0].size"),
                                         ([{"size": 4}], "meta.dims[0].kind"), ("4x4", "meta.dims")])
def test_file_dims_are_checked(tmp_path, dims, field):
    """A file's ``meta.dims`` is read by the dimension baselines: a bad one is one line naming it."""
    import json

    from workbench.topology import TopologyError, load_topology

    path = tmp_path / "ring.json"
    path.write_text(json.dumps({"nodes": [{"id": i, "kind": "npu"} for i in range(4)],
                                "links": [{"src": i, "dst": (i + 1) % 4, "bandwidth": 1e9} for i in range(4)],
                                "meta": {"dims": dims}}))
    with pytest.raises(TopologyError, match=field.replace("[", r"\[").replace("]", r"\]")):
        load_topology(path)


def test_boxes_come_group_by_group_whatever_the_ids():
    """Renumbered NPUs: the boxes are still listed leaf group by leaf group, so a ring along a
    rail crosses between groups only where it must."""
    topology, label = rail_file(6, 4, per_leaf=4, spines=2, shuffle=2)
    found = boxes_and_rails(topology)
    assert found.groups == ((0, 1, 2, 3), (4, 5))
    true_group = {label[b * 4 + i]: b // 4 for b in range(6) for i in range(4)}
    assert [true_group[box[0]] for box in found.boxes] == [true_group[found.boxes[0][0]]] * 4 + \
        [1 - true_group[found.boxes[0][0]]] * 2


def test_a_nic_modelled_as_a_switch_keeps_its_rail():
    """GPU -> NIC node -> leaf: the leaf still makes a rail (a leaf group of two boxes here)."""
    n, links, node = 16, [], 16

    def both(u, v, bw):
        links.extend((Link(u, v, 1e-6, bw), Link(v, u, 1e-6, bw)))

    for b in range(4):
        for g in range(4):
            both(b * 4 + g, node, 450 * GB)
        node += 1
    leaves = {(g, q): node + g * 2 + q for g in range(4) for q in range(2)}
    node += 8
    for b in range(4):
        for g in range(4):
            both(b * 4 + g, node, 50 * GB)
            both(node, leaves[g, b // 2], 50 * GB)
            node += 1
    for leaf in leaves.values():
        both(leaf, node, 100 * GB)
    found = boxes_and_rails(Topology.create(n, links, node + 1 - n, "nic-nodes"))
    assert found is not None and found.groups == ((0, 1), (2, 3))
