"""Translations of clusters with switches (workbench.kit.cluster_translations) and ForestColl's split by
switch orbits (formulations.forestcoll.symmetric_splitting)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from workbench.plugin import call
from formulations.forestcoll import build_forest
from formulations.forestcoll.optimum import auto_units
from formulations.forestcoll.packing import PackingError, validate_forest
from formulations.forestcoll.slots import loose_links
from formulations.forestcoll.symmetric import pack_symmetric
from formulations.forestcoll.symmetric_splitting import split_by_translations
from workbench.kit.cluster_translations import cluster_translations
from workbench.model.collective import make_collective
from workbench.kit.maxflow import FlowNetwork
from workbench.plugin.registry import Problem, get_formulation
from workbench.checking.simulate import simulate
from workbench.topology import Link, Topology, build
from workbench.checking.verify import verify

from tests.test_structure import rail_file


def _is_group_of_automorphisms(topology: Topology, nodes: np.ndarray) -> bool:
    links = {(l.src, l.dst): (l.bandwidth, l.alpha, l.overhead) for l in topology.links}
    rows = {tuple(row) for row in nodes.tolist()}
    if len(rows) != len(nodes):
        return False
    for row in nodes:
        if sorted(row.tolist()) != list(range(topology.num_nodes)):
            return False
        if any(links.get((int(row[u]), int(row[v]))) != attrs for (u, v), attrs in links.items()):
            return False
    for a in nodes:  # closed under composition
        for b in nodes:
            if tuple(a[b].tolist()) not in rows:
                return False
    return True


@settings(max_examples=12, deadline=None)
@given(boxes=st.integers(2, 8), per_box=st.integers(2, 4), per_leaf=st.integers(1, 4), spines=st.integers(1, 4),
       over=st.sampled_from([1.0, 2.0]), seed=st.integers(0, 10**6))
def test_rail_files_have_translations_that_move_switches(boxes, per_box, per_leaf, spines, over, seed):
    """On a rail fabric of equal leaf groups, renumbered at random, the group is found: it acts
    freely and transitively on the NPUs (row t takes NPU 0 to t) and maps every link onto a link."""
    assume(boxes % per_leaf == 0 and boxes * per_box >= 4)
    assume(per_leaf > 1 or spines > 1)  # one box a group under one spine: rails are not told apart
    topology, _ = rail_file(boxes, per_box, per_leaf=per_leaf, spines=spines, over=over, shuffle=seed)
    found = cluster_translations(topology)
    assert found is not None
    n = topology.num_npus
    assert found.nodes.shape == (n, topology.num_nodes)
    assert found.table[:, 0].tolist() == list(range(n))
    assert found.table[0].tolist() == list(range(n))
    assert _is_group_of_automorphisms(topology, found.nodes)


def test_unshuffled_rail_files_always_have_them():
    topology, _ = rail_file(8, 4, per_leaf=4, spines=4)
    found = cluster_translations(topology)
    assert found is not None and found.sizes == (2, 4, 4)
    spines = list(range(topology.num_nodes - 4, topology.num_nodes))
    assert len(found.orbit(spines[0])) == 4  # the spines rotate along the boxes of a group


@pytest.mark.parametrize("topology", [
    build("ring:8"),  # no switches
    rail_file(6, 4, per_leaf=4)[0],  # leaf groups of 4 and 2 boxes
])
def test_no_translations_where_there_are_none(topology):
    assert cluster_translations(topology) is None


def test_a_link_that_breaks_the_symmetry_is_caught():
    """One rail link slower to start: boxes and rails are still found, the translation check refuses."""
    topology, _ = rail_file(4, 2, per_leaf=4)
    assert cluster_translations(topology) is not None
    rail_link = next(l for l in topology.links if l.src == 0 and l.bandwidth == 50e9)
    links = [Link(l.src, l.dst, l.alpha * (2 if l is rail_link else 1), l.bandwidth) for l in topology.links]
    assert cluster_translations(Topology.create(topology.num_npus, links, topology.num_switches)) is None


def test_spines_that_no_coordinate_can_rotate_stay_fixed():
    """Three spines over groups of two boxes of two GPUs: no coordinate has an order three divides, so
    every translation fixes every spine, and the group is still verified."""
    topology, _ = rail_file(4, 2, per_leaf=2, spines=3)
    found = cluster_translations(topology)
    assert found is not None and found.sizes == (2, 2, 2)
    for spine in range(topology.num_nodes - 3, topology.num_nodes):
        assert found.orbit(spine).tolist() == [spine]


def _receives(topology_npus: int, capacity: dict, supply: int, v: int) -> int:
    s = topology_npus
    arcs = list(capacity.items())
    network = FlowNetwork(s + 1, [a for (a, _), _ in arcs] + [s] * s, [b for (_, b), _ in arcs] + list(range(s)))
    return network.value([c for _, c in arcs] + [supply] * s, s, v)


@pytest.mark.parametrize("boxes,per_leaf,over", [(4, 4, 1.0), (8, 4, 1.0), (8, 4, 2.0), (12, 4, 1.0)])
def test_split_by_orbits_is_invariant_and_keeps_the_requirement(boxes, per_leaf, over):
    """The logical graph left is invariant under the NPU translations, every NPU still receives
    the demand from the super-source (checked at every NPU, not only NPU 0), and root 0's trees
    translated form a valid forest at the exact optimum."""
    topology, _ = rail_file(boxes, 4, per_leaf=per_leaf, spines=4, over=over)
    group = cluster_translations(topology)
    units, split = split_by_translations(topology, auto_units(topology), group)
    table = group.table
    for (u, t), c in split.capacity.items():
        for row in table[:: max(1, len(table) // 7)]:
            assert split.capacity.get((int(row[u]), int(row[t]))) == c
    n = topology.num_npus
    assert all(_receives(n, split.capacity, int(units.k), v) >= units.demand for v in range(n))
    trees, _ = pack_symmetric(table, split.capacity, int(units.k))
    validate_forest(trees, n, [int(c) for c in units.supply], split.capacity)


def test_forestcoll_on_a_leaf_spine_file_uses_the_translations_and_is_verified():
    topology, _ = rail_file(8, 4, per_leaf=4, spines=4)
    problem = Problem(topology, make_collective("allgather", 32, 1), 256 * 2**20)
    result = call.synthesize(get_formulation("forestcoll"), problem, time_limit=60, seed=0)
    algorithm = result.algorithms[0]
    assert algorithm.meta["splitting"] == {"same": "symmetric"}
    assert algorithm.meta["packing"] == {"same": "symmetric"}
    verify(algorithm)
    simulated = simulate(algorithm).collective_time
    assert simulated == pytest.approx(algorithm.meta["claimed_time"], rel=1e-9)
    assert algorithm.meta["bandwidth_time"] / simulated > 0.9


def test_a_cluster_whose_plans_do_not_divide_falls_back_to_pair_by_pair_splitting():
    """Six boxes of two GPUs in groups of two under three spines: no translated plan keeps the
    requirement at any scale, so ForestColl splits pair by pair (and says so) rather than failing."""
    topology, _ = rail_file(6, 2, per_leaf=2, spines=3)
    assert cluster_translations(topology) is not None
    forest = build_forest(topology, "allgather")
    assert forest.splitting in ("greedy", "spread")
    with pytest.raises(PackingError, match="translated split"):
        build_forest(topology, "allgather", splitting="symmetric")


def test_symmetric_split_with_the_general_packer():
    topology, _ = rail_file(8, 4, per_leaf=4, spines=4)
    forest = build_forest(topology, "allgather", splitting="symmetric", packing="levels")
    assert (forest.splitting, forest.packing) == ("symmetric", "levels")
    with pytest.raises(ValueError, match="one root"):
        build_forest(topology, "broadcast", splitting="symmetric")


def test_loose_links_are_the_ones_with_time_to_spare():
    """Hop by hop on a rail fabric at its optimum the NICs are the busiest links (the box cut is
    tight); the NVSwitch links are loose, and so cut-through goes only through them."""
    topology, _ = rail_file(8, 4, per_leaf=4, spines=4)
    forest = build_forest(topology, "allgather", cut_through=False)
    loose = loose_links(topology, forest.shared)
    n = topology.num_npus
    for index in loose:  # never a NIC (a GPU's link to its leaf)
        link = topology.links[index]
        assert not (min(link.src, link.dst) < n and link.bandwidth == 50e9)
    assert any(topology.links[index].bandwidth == 450e9 for index in loose)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 9), st.sets(st.integers(0, 6), min_size=1, max_size=3)), min_size=1,
                max_size=40))
def test_appended_items_never_share_a_link_at_once(drawn):
    """``slots._append`` (large rounds): no two items overlap on a link, and the round is as long as
    the last item's end."""
    from formulations.forestcoll.slots import _append

    items = [(duration, (i, 0), sorted(links), 1) for i, (duration, links) in enumerate(drawn)]
    placed, length = _append(items, list(range(len(items))))
    spans: dict[int, list[tuple[int, int]]] = {}
    for duration, key, links, _ in items:
        (start, _), = placed[key]
        for link in links:
            spans.setdefault(link, []).append((start, start + duration))
    for intervals in spans.values():
        intervals.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(intervals, intervals[1:]))
    assert length == max(end for intervals in spans.values() for _, end in intervals)
