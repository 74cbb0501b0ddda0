"""The floor's graph searches (workbench.util.graphs): known answers, then drawn graphs against networkx
and scipy."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from workbench.util.graphs import (all_pairs_hops, all_pairs_shortest, bfs, dijkstra, hop_distances,
                              successor_lists)

# ------------------------------------------------------------------------------------------ known answers
DIAMOND = [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)]  # two equally short ways from 0 to 3


def test_successor_lists_keep_arc_order_and_parallel_arcs():
    assert successor_lists(3, [(0, 2), (0, 1), (2, 0), (0, 2), (1, 1, 5.0)]) == [[2, 1, 2], [1], [0]]


def test_bfs_order_parents_and_depths_on_a_diamond():
    result = bfs(successor_lists(6, DIAMOND), [0])
    assert result.order == [0, 1, 2, 3, 4]
    assert result.parent == [0, 0, 0, 1, 3, -1]  # 3 keeps the first parent that reached it
    assert result.depth == [0, 1, 1, 2, 3, -1]
    assert bfs(successor_lists(6, [(0, 2), (0, 1), (2, 3), (1, 3), (3, 4)]), [0]).parent[3] == 2


def test_bfs_from_several_sources_takes_the_nearest():
    result = bfs(successor_lists(5, [(0, 1), (1, 2), (2, 3), (4, 3)]), [4, 0, 4])
    assert result.order == [4, 0, 3, 1, 2]
    assert result.depth == [0, 1, 2, 1, 0]
    assert result.parent == [0, 0, 1, 4, 4]


def test_bfs_expand_goes_on_through_chosen_nodes_only():
    # NPUs 0..2, switch 3: 0 -> 3 -> {1, 2}, 1 -> 2 directly; from 0 through the switch only
    successors = successor_lists(4, [(0, 3), (3, 1), (3, 2), (1, 2), (2, 0)])
    result = bfs(successors, [0], expand=lambda v: v == 3)
    assert result.order == [0, 3, 1, 2]
    assert result.parent == [0, 3, 3, 0]
    assert bfs(successors, [1], expand=lambda v: False).order == [1, 2]  # the source itself is searched


def test_bfs_shuffle_sees_each_searched_node_in_visit_order():
    seen = []

    def reverse(heads: list[int]) -> None:
        seen.append(list(heads))
        heads.reverse()

    successors = successor_lists(5, DIAMOND)
    result = bfs(successors, [0], shuffle=reverse)
    assert seen == [[1, 2], [3], [3], [4], []]  # 0, then 2 (explored first after the reversal), 1, 3, 4
    assert result.order == [0, 2, 1, 3, 4] and result.parent[3] == 2
    assert successors[0] == [1, 2]  # the caller's lists stay as they were


def test_hop_distances_and_all_pairs_hops():
    successors = successor_lists(4, [(0, 1), (1, 2), (2, 0)])
    assert hop_distances(successors, [0]) == [0, 1, 2, -1]
    assert hop_distances(successors, [0, 2]) == [0, 1, 0, -1]
    assert all_pairs_hops(successors) == [[0, 1, 2, -1], [2, 0, 1, -1], [1, 2, 0, -1], [-1, -1, -1, 0]]


def test_dijkstra_weights_and_arcs():
    arcs = [(0, 1, 1.0), (0, 2, 4.0), (1, 2, 2.0), (2, 3, 1.0), (1, 3, 5.0)]
    cost, via = dijkstra(5, arcs, [0])
    assert cost == {0: 0.0, 1: 1.0, 2: 3.0, 3: 4.0}  # node 4 unreached: absent
    assert via == {1: 0, 2: 2, 3: 3}


def test_dijkstra_ties_keep_the_arc_relaxed_first():
    cost, via = dijkstra(4, [(0, 1, 1.0), (0, 2, 1.0), (2, 3, 1.0), (1, 3, 1.0)], [0])
    assert cost[3] == 2.0 and via[3] == 3  # node 1 leaves the heap before node 2 at equal cost
    _, via = dijkstra(3, [(0, 2, 2.0), (0, 1, 1.0), (1, 2, 1.0)], [0])
    assert via[2] == 0  # an equal cost found later does not replace the arc


def test_dijkstra_lexicographic_cost_with_an_arrival_rule():
    # (hops, latency): fewest hops first, then the lowest latency among them (TACCL's trees)
    arcs = [(0, 1), (1, 2), (0, 2), (0, 3), (3, 2)]
    latency = [1.0, 1.0, 9.0, 0.5, 0.5]
    cost, via = dijkstra(4, arcs, [0], arrive=lambda c, i: (c[0] + 1, c[1] + latency[i]), start=(0, 0.0))
    assert cost[2] == (1, 9.0) and via[2] == 2
    cost, via = dijkstra(4, arcs[:2] + arcs[3:], [0], arrive=lambda c, i: (c[0] + 1, c[1] + [1.0, 1.0, 0.5, 0.5][i]),
                         start=(0, 0.0))
    assert cost[2] == (2, 1.0) and via[2] == 3


def test_dijkstra_epoch_arrival_rule():
    # TE-CCL style: sent in the epoch a chunk is ready, arrives 1 + delay epochs later
    arcs = [(0, 1), (1, 2), (0, 2)]
    delay = [0, 0, 3]
    cost, _ = dijkstra(3, arcs, {0}, arrive=lambda k, i: k + 1 + delay[i], start=0)
    assert cost == {0: 0, 1: 1, 2: 2}


def test_all_pairs_shortest_engines_parallel_arcs_and_zero_weights():
    arcs = [(0, 1, 5.0), (0, 1, 2.0), (1, 2, 0.0), (2, 0, 1.0), (3, 3, 1.0)]
    expected = np.array([[0, 2, 2, np.inf], [1, 0, 0, np.inf], [1, 3, 0, np.inf], [np.inf] * 3 + [0]])
    for engine in ("auto", "python", "scipy"):
        assert np.array_equal(all_pairs_shortest(4, arcs, engine=engine), expected), engine
    with pytest.raises(ValueError, match="engine"):
        all_pairs_shortest(2, [], engine="networkx")


# ------------------------------------------------------------------------------------------ drawn graphs
def _arcs(n: int, with_weights: bool):
    node = st.integers(0, n - 1)
    arc = st.tuples(node, node, st.sampled_from([0.0, 0.5, 1.0, 2.5, 7.0])) if with_weights else st.tuples(node, node)
    return st.lists(arc, max_size=4 * n)


graphs = st.integers(1, 10).flatmap(lambda n: st.tuples(st.just(n), _arcs(n, False)))
weighted_graphs = st.integers(1, 10).flatmap(lambda n: st.tuples(st.just(n), _arcs(n, True)))


def _nx_graph(n: int, arcs) -> nx.DiGraph:
    """The same graph for networkx: nodes by id, each node's arcs in first-seen order, lowest weight kept."""
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    for arc in arcs:
        weight = arc[2] if len(arc) > 2 else 1.0
        if not graph.has_edge(arc[0], arc[1]) or weight < graph[arc[0]][arc[1]]["weight"]:
            graph.add_edge(arc[0], arc[1], weight=weight)
    return graph


@settings(max_examples=80, deadline=None)
@given(graphs, st.data())
def test_bfs_is_networkx_bfs(drawn, data):
    n, arcs = drawn
    source = data.draw(st.integers(0, n - 1))
    graph = _nx_graph(n, arcs)
    result = bfs(successor_lists(n, arcs), [source])
    assert result.order == [source] + [v for _, v in nx.bfs_edges(graph, source)]
    assert {v: p for v, p in enumerate(result.parent) if p >= 0 and v != source} == dict(nx.bfs_predecessors(graph, source))
    lengths = nx.single_source_shortest_path_length(graph, source)
    assert result.depth == [lengths.get(v, -1) for v in range(n)]


@settings(max_examples=80, deadline=None)
@given(graphs, st.data())
def test_several_sources_and_expand_against_networkx(drawn, data):
    n, arcs = drawn
    sources = data.draw(st.sets(st.integers(0, n - 1), min_size=1))
    through = data.draw(st.sets(st.integers(0, n - 1)))
    graph = _nx_graph(n, arcs)
    nearest = nx.multi_source_dijkstra_path_length(graph, sources, weight=lambda u, v, d: 1)
    assert hop_distances(successor_lists(n, arcs), sources) == [nearest.get(v, -1) for v in range(n)]
    # arcs leave a reached node only if it is a source or chosen: the search stops elsewhere
    cut = graph.edge_subgraph([(u, v) for u, v in graph.edges if u in sources or u in through]).copy()
    cut.add_nodes_from(range(n))
    reached = set().union(*(nx.descendants(cut, s) | {s} for s in sources))
    expanded = bfs(successor_lists(n, arcs), sorted(sources), expand=lambda v: v in through)
    assert set(expanded.order) == reached and len(expanded.order) == len(reached)


@settings(max_examples=80, deadline=None)
@given(graphs)
def test_bfs_both_ways_is_scipys_undirected_breadth_first_order(drawn):
    """bounds.alltoall_cut_bound's sweep order: out-neighbours then in-neighbours, each by id."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order

    n, arcs = drawn
    pairs = sorted({(a, b) for a, b in arcs if a != b})
    assume(pairs)
    matrix = csr_matrix((np.ones(len(pairs)), ([a for a, _ in pairs], [b for _, b in pairs])), shape=(n, n))
    outs = successor_lists(n, pairs)
    ins = successor_lists(n, sorted((b, a) for a, b in pairs))
    ours = bfs([o + i for o, i in zip(outs, ins)], [0]).order
    assert ours == breadth_first_order(matrix, 0, directed=False, return_predecessors=False).tolist()


@settings(max_examples=60, deadline=None)
@given(graphs)
def test_all_pairs_hops_is_scipys_unweighted_shortest_path(drawn):
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    n, arcs = drawn
    pairs = sorted({(a, b) for a, b in arcs})
    matrix = csr_matrix((np.ones(len(pairs)), ([a for a, _ in pairs], [b for _, b in pairs])), shape=(n, n))
    theirs = shortest_path(matrix, unweighted=True, directed=True)
    theirs[~np.isfinite(theirs)] = -1
    assert np.array_equal(np.array(all_pairs_hops(successor_lists(n, arcs))).reshape(n, n), theirs)


@settings(max_examples=80, deadline=None)
@given(weighted_graphs, st.data())
def test_dijkstra_is_networkx_dijkstra(drawn, data):
    n, arcs = drawn
    assume(arcs)
    sources = data.draw(st.sets(st.integers(0, n - 1), min_size=1))
    cost, via = dijkstra(n, arcs, sources)
    theirs = nx.multi_source_dijkstra_path_length(_nx_graph(n, arcs), sources)
    assert cost.keys() == theirs.keys()
    for v, c in theirs.items():
        assert math.isclose(cost[v], c, rel_tol=1e-12, abs_tol=1e-12)
    for v, index in via.items():  # each arc on the tree realises its head's cost
        src, dst, weight = arcs[index]
        assert dst == v and cost[src] + weight == cost[v] and v not in sources
    assert not sources & via.keys()


@settings(max_examples=60, deadline=None)
@given(weighted_graphs)
def test_lexicographic_dijkstra_is_networkx_on_combined_weights(drawn):
    """(hops, latency) costs against one integer weight, 1000 per hop plus the latency."""
    n, arcs = drawn
    latency = [int(w * 2) for _, _, w in arcs]  # whole numbers below 15: sums stay exact and below 1000
    cost, _ = dijkstra(n, arcs, [0], arrive=lambda c, i: (c[0] + 1, c[1] + latency[i]), start=(0, 0))
    combined = [(a, b, 1000 + lat) for (a, b, _), lat in zip(arcs, latency)]
    theirs = nx.single_source_dijkstra_path_length(_nx_graph(n, combined), 0)
    assert {v: h * 1000 + lat for v, (h, lat) in cost.items()} == theirs


@settings(max_examples=60, deadline=None)
@given(weighted_graphs)
def test_all_pairs_shortest_engines_agree_with_each_other_and_networkx(drawn):
    n, arcs = drawn
    python = all_pairs_shortest(n, arcs, engine="python")
    assert np.array_equal(python, all_pairs_shortest(n, arcs, engine="scipy"))  # the same sums, bit for bit
    theirs = dict(nx.all_pairs_dijkstra_path_length(_nx_graph(n, arcs)))
    for s in range(n):
        for t in range(n):
            expected = theirs[s].get(t, math.inf)
            assert python[s, t] == expected or math.isclose(python[s, t], expected, rel_tol=1e-12)
