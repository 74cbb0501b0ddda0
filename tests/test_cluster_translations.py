"""Translations of clusters with switches (workbench.cluster_translations) and ForestColl's split by
switch orbits (formulations.forestcoll.symmetric_splitting)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from formulations.forestcoll.optimum import auto_units
from formulations.forestcoll.packing import validate_forest
from formulations.forestcoll.symmetric import pack_symmetric
from formulations.forestcoll.symmetric_splitting import split_by_translations
from workbench.cluster_translations import cluster_translations
from workbench.collective import make_collective
from workbench.maxflow import FlowNetwork
from workbench.registry import Problem, get_formulation
from workbench.simulate import simulate
from workbench.topology import Link, Topology, build
from workbench.verify import verify

from tests.test_structure import rail_file


def _is_group_of_automorphisms(topology: Topology, nodes: np.ndarray) -> bool:
    links = {(l.src, l.dst): (l.bandwidth, l.alpha) for l in topology.links}
    rows = {tuple(row) for row in nodes.tolist()}
    if len(rows) != len(nodes):
        return False
    for row in nodes:
        if sorted(row.tolist()) != list(range(topology.num_nodes)):
            return False
        if any(links.get((int(row[u]), int(row[v]))) != attrs for (u, v), attrs in links.items()):
            return False
    for a in nodes[:5]:  # closed under composition (a sample: the table is N rows)
        for b in nodes[:5]:
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
    topology, _ = rail_file(boxes, per_box, per_leaf=per_leaf, spines=spines, over=over, shuffle=seed)
    found = cluster_translations(topology)
    assume(found is not None)  # NPU 0 must sit at the origin of the coordinates found
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
    topology, _ = rail_file(4, 2, per_leaf=4)
    links = [Link(l.src, l.dst, l.alpha, l.bandwidth * (2 if (l.src, l.dst) == (0, 8) else 1))
             for l in topology.links]
    assert cluster_translations(Topology.create(topology.num_npus, links, topology.num_switches)) is None


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
    result = get_formulation("forestcoll").synthesize(problem, time_limit=60, seed=0)
    algorithm = result.algorithms[0]
    assert algorithm.meta["splitting"] == {"same": "symmetric"}
    assert algorithm.meta["packing"] == {"same": "symmetric"}
    verify(algorithm)
    simulated = simulate(algorithm).collective_time
    assert simulated == pytest.approx(algorithm.meta["claimed_time"], rel=1e-9)
    assert algorithm.meta["bandwidth_time"] / simulated > 0.9
