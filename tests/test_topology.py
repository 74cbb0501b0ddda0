import json

import networkx as nx
import pytest
from hypothesis import given, settings, strategies as st

from workbench.topology import Link, Topology, TopologyError, build, load_topology, topology_from_dict

# spec -> (npus, switches, directed links)
COUNTS = {
    "ring:8": (8, 0, 16),
    "ring:2": (2, 0, 2),
    "uniring:5": (5, 0, 5),
    "line:5": (5, 0, 8),
    "fc:4": (4, 0, 12),
    "mesh:3x4": (12, 0, 34),
    "mesh:2x2x2": (8, 0, 24),
    "torus:4x4": (16, 0, 64),
    "torus:3x3x3": (27, 0, 162),
    "switch:8": (8, 1, 16),
    "switch:8@1": (8, 0, 8),
    "switch:8@7": (8, 0, 56),
    "md:R4,F8,S4": (128, 32, 128 * 2 + 128 * 7 + 32 * 8),
    "rfs:2x4x8": (64, 8, 64 * 1 + 64 * 3 + 8 * 16),
    "dragonfly:4x5": (20, 0, 5 * 12 + 20),
    "dgx1": (8, 0, 32),
    "dgx1-msccl": (8, 0, 32),
    "ndv2:1": (8, 0, 32),
    "ndv2:2": (16, 0, 66),
    "ndv2:4": (32, 1, 4 * 32 + 8),
    "ndv2-taccl:2": (16, 0, 66),
    "dgx2:2": (32, 2, 64 + 16),
    "dgx2-taccl:2": (32, 2, 64 + 16),
    "amd:1": (16, 0, 56),
    "amd:2": (32, 17, 112 + 2 * 8 * 6),
    "amd-z52": (8, 0, 16),
}


@pytest.mark.parametrize("spec", sorted(COUNTS))
def test_builder_counts(spec):
    topo = build(spec)
    assert (topo.num_npus, topo.num_switches, len(topo.links)) == COUNTS[spec]


@pytest.mark.parametrize("spec", sorted(COUNTS))
def test_json_round_trip(spec, tmp_path):
    topo = build(spec)
    path = tmp_path / "t.json"
    topo.save(path)
    again = load_topology(path)
    assert again == topo
    yaml_path = tmp_path / "t.yaml"
    topo.save(yaml_path)
    assert load_topology(yaml_path) == topo


@pytest.mark.parametrize("spec", ["ring:6", "fc:5", "torus:4x4", "torus:3x3x3", "switch:6", "dgx1", "amd-z52",
                                  "md:R2,F4,S4", "switch:8@7"])
def test_symmetric_topologies_have_both_directions(spec):
    topo = build(spec)
    for link in topo.links:
        back = topo.link(link.dst, link.src)
        assert back.bandwidth == link.bandwidth and back.alpha == link.alpha


@pytest.mark.parametrize("spec, degree", [("ring:7", 2), ("torus:4x4", 4), ("torus:3x3x3", 6), ("fc:6", 5),
                                          ("dgx1", 6 // 1 - 2), ("switch:5@2", 2), ("dragonfly:4x5", 4)])
def test_regular_out_degree(spec, degree):
    topo = build(spec)
    assert {len(topo.out_neighbors(u)) for u in topo.npus} == {degree}


def test_vertex_transitive_torus():
    g = build("torus:4x4").graph()
    # every node has the same eccentricity in a torus
    assert len({nx.eccentricity(g, v) for v in g}) == 1


def test_mesh_corner_and_centre_degrees():
    topo = build("mesh:3x3")
    assert len(topo.out_neighbors(0)) == 2 and len(topo.out_neighbors(4)) == 4


def test_dgx1_properties():
    topo = build("dgx1")
    # every GPU has 6 NVLinks = 150 GB/s out at 25 GB/s per link
    for u in topo.npus:
        assert sum(l.bandwidth for l in topo.out_links(u)) == pytest.approx(150e9)
    assert topo.link(0, 1).bandwidth == 50e9 and topo.link(0, 2).bandwidth == 25e9
    assert max(max(row) for row in topo.hop_distances()) == 2


def test_two_dgx1_numberings_are_isomorphic():
    a, b = build("dgx1").graph(), build("dgx1-msccl").graph()
    match = nx.algorithms.isomorphism.numerical_edge_match("bandwidth", 0)
    assert nx.is_isomorphic(a, b, edge_match=match)
    swap = {0: 1, 1: 0, 6: 7, 7: 6}
    relabelled = nx.relabel_nodes(a, lambda v: swap.get(v, v))
    assert set(relabelled.edges) == set(b.edges)
    for u, v in b.edges:
        assert relabelled.edges[u, v]["bandwidth"] == b.edges[u, v]["bandwidth"]


def test_ndv2_teccl_matches_dgx1_msccl_inside_a_chassis():
    ndv2 = build("ndv2:2")
    dgx1 = build("dgx1-msccl")
    for link in dgx1.links:
        assert ndv2.link(link.src, link.dst).bandwidth == link.bandwidth
        assert ndv2.link(link.src + 8, link.dst + 8).alpha == pytest.approx(0.7e-6)
    assert ndv2.link(0, 9).bandwidth == 12.5e9 and ndv2.link(8, 1).alpha == pytest.approx(1.3e-6)
    assert not ndv2.has_link(9, 0)


def test_switch_links_carry_half_alpha():
    topo = build("switch:4", alpha=[1e-6], bandwidth=[10e9])
    assert topo.link(0, 4).alpha == pytest.approx(0.5e-6)
    assert topo.link(4, 3).alpha == pytest.approx(0.5e-6)
    assert topo.route(0, 3) == (0, 4, 3)


def test_md_per_dimension_values_and_ring_of_two():
    topo = build("rfs:2x4x4", alpha=[0.5e-6], bandwidth=[200e9, 100e9, 50e9])
    assert topo.link(0, 1).bandwidth == 200e9  # ring of 2: one link each way
    assert topo.link(0, 2).bandwidth == 100e9  # dim 1 stride 2
    assert topo.num_switches == 8
    sw = topo.out_neighbors(0)[-1]
    assert topo.is_switch(sw) and topo.link(0, sw).bandwidth == 50e9
    assert len(topo.out_neighbors(sw)) == 4


def test_unwinding_a_switch():
    unwound = build("switch:4").unwind_switches(1)
    assert unwound.num_switches == 0
    assert unwound.link(0, 1).alpha == pytest.approx(0.5e-6)
    assert unwound.link(3, 0).bandwidth == 50e9
    full = build("switch:4").unwind_switches(3)
    assert full.link(0, 3).bandwidth == pytest.approx(50e9 / 3)
    assert unwound == build("switch:4@1") and full == build("switch:4@3")


def test_reversal():
    topo = build("uniring:4")
    rev = topo.reversed()
    assert rev.has_link(1, 0) and not rev.has_link(0, 1)
    assert rev.reversed() == topo


def test_bfs_routing_prefers_lowest_ids():
    topo = build("torus:3x3")
    path = topo.route(0, 4)
    assert path == (0, 1, 4)
    assert topo.route(0, 1) == (0, 1)


def test_dragonfly_global_links_one_per_npu():
    topo = build("dragonfly:4x5")
    for u in topo.npus:
        outside = [v for v in topo.out_neighbors(u) if v // 4 != u // 4]
        assert len(outside) == 1
        v = outside[0]
        assert topo.has_link(v, u)


@pytest.mark.parametrize("spec", ["foo:3", "ring:x", "ring:0", "mesh:3x", "md:R2,Q4", "rfs:2x4", "dragonfly:4",
                                  "ndv2:x"])
def test_bad_specs_raise_clear_errors(spec):
    with pytest.raises(TopologyError) as info:
        build(spec)
    assert spec in str(info.value)


def test_wrong_number_of_dimension_values():
    with pytest.raises(TopologyError, match="one per dimension"):
        build("md:R2,F4,S8", bandwidth=[1e9, 2e9])


@pytest.mark.parametrize("links, message", [
    ([Link(0, 1, 0.0, -5.0)], "0->1: bandwidth must be positive"),
    ([Link(0, 1, 0.0, 0.0)], "0->1: bandwidth must be positive"),
    ([Link(0, 7, 0.0, 1.0)], "unknown node 7"),
    ([Link(0, 1, 0.0, 1.0), Link(0, 1, 0.0, 2.0)], "0->1: duplicate link"),
    ([Link(1, 1, 0.0, 1.0)], "1->1"),
    ([Link(0, 1, -1.0, 1.0)], "alpha must be non-negative"),
])
def test_invalid_graphs_name_the_link(links, message):
    with pytest.raises(TopologyError, match=message):
        Topology.create(2, links)


def test_file_schema_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"nodes": [{"id": 0}, {"id": 1}], "links": [{"src": 0, "dst": 1}]}))
    with pytest.raises(TopologyError, match=r"links\[0\]: missing field 'bandwidth'"):
        load_topology(bad)
    bad.write_text("{not json")
    with pytest.raises(TopologyError, match="malformed"):
        load_topology(bad)
    with pytest.raises(TopologyError, match="no such topology file"):
        load_topology(tmp_path / "missing.yaml")


def test_file_accepts_unit_strings_and_bidirectional(tmp_path):
    data = {"nodes": [{"id": 0}, {"id": 1}, {"id": 2, "kind": "switch"}],
            "links": [{"src": 0, "dst": 2, "alpha": "0.25us", "bandwidth": "50GB/s", "bidirectional": True},
                      {"src": 1, "dst": 2, "alpha": "0.25us", "bandwidth": "25GiB/s", "bidirectional": True}]}
    topo = topology_from_dict(data)
    assert topo.num_switches == 1 and topo.link(2, 1).bandwidth == 25 * 2**30
    assert topo.link(0, 2).alpha == pytest.approx(0.25e-6)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 12).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))))
def test_strong_components_match_scipy(drawn):
    """The pure-Python Kosaraju gives scipy's partition into strongly connected components."""
    import numpy as np
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    from workbench.topology import Link, Topology

    n, pairs = drawn
    pairs = sorted({(a, b) for a, b in pairs if a != b})
    topology = Topology.create(n, [Link(a, b, 1e-6, 1e9) for a, b in pairs], 0, "random")
    ours = topology.strong_components()
    matrix = csr_matrix((np.ones(len(pairs)), ([a for a, _ in pairs], [b for _, b in pairs])), shape=(n, n))
    _, theirs = connected_components(matrix, directed=True, connection="strong")
    for u in range(n):
        for v in range(n):
            assert (ours[u] == ours[v]) == (theirs[u] == theirs[v]), (u, v, pairs)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 10).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1),
                                   st.sampled_from([0.0, 1e-7, 5e-7, 2e-6])), max_size=3 * n))))
def test_alpha_distances_match_scipy_dijkstra(drawn):
    """The plain-Python all-pairs Dijkstra for small fabrics equals scipy's, zero-alpha links included."""
    import numpy as np
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra

    n, triples = drawn
    links = {(a, b): w for a, b, w in triples if a != b}
    topology = Topology.create(n, [Link(a, b, w, 1e9) for (a, b), w in sorted(links.items())], 0, "random")
    ours = topology.alpha_distances()
    keys = sorted(links)
    graph = csr_matrix((np.array([links[k] for k in keys]) + 1e-30, ([a for a, _ in keys], [b for _, b in keys])),
                       shape=(n, n))
    theirs = dijkstra(graph, directed=True)
    assert np.array_equal(np.isinf(ours), np.isinf(theirs))
    finite = ~np.isinf(theirs)
    assert np.allclose(ours[finite], theirs[finite], rtol=1e-12, atol=0)
