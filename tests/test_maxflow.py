"""Max-flow engines agree: plain-Python Dinic (small networks), scipy and networkx."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from workbench.kit import maxflow
from workbench.kit.maxflow import FlowNetwork


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 9).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.integers(0, 2**40)), min_size=1,
             max_size=4 * n),
    st.integers(0, n - 1), st.integers(0, n - 1))))
def test_dinic_matches_networkx_value_and_cut(drawn):
    n, arcs, source, sink = drawn
    arcs = [(a, b, c) for a, b, c in arcs if a != b]
    if source == sink or not arcs:
        sink = (source + 1) % n
        arcs = arcs or [(source, sink, 1)]
    network = FlowNetwork(n, [a for a, _, _ in arcs], [b for _, b, _ in arcs])
    network.set_capacities([c for _, _, c in arcs])
    value, side = network.min_cut(source, sink)
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    for a, b, c in arcs:
        if graph.has_edge(a, b):
            graph[a][b]["capacity"] += c
        else:
            graph.add_edge(a, b, capacity=c)
    expected, _ = nx.minimum_cut(graph, source, sink)
    assert value == expected  # exact beyond int32 (capacities up to 2^40)
    # the source side is the set reachable in the residual graph: the same for every maximum flow
    assert side[source] and not side[sink]
    crossing = sum(c for a, b, c in arcs if side[a] and not side[b])
    assert crossing == value
    assert network.value([c for _, _, c in arcs], source, sink) == value


def test_large_networks_still_take_scipy(monkeypatch):
    calls = []
    monkeypatch.setattr(maxflow, "_dinic", lambda *a: calls.append(a) or (0, set()))
    n = 40
    src = [i for i in range(n) for j in range(n) if i != j]
    dst = [j for i in range(n) for j in range(n) if i != j]
    network = FlowNetwork(n, src, dst)
    network.set_capacities(np.ones(len(src), dtype=np.int64))
    assert network.min_cut(0, 1)[0] == n - 1 and not calls


@settings(max_examples=25, deadline=None)
@given(nodes=st.integers(3, 40), seed=st.integers(0, 10**6), big=st.booleans())
def test_compiled_value_agrees_with_the_python_paths(nodes, seed, big):
    """OR-Tools' value (where installed) equals Dinic's / scipy's on the same arcs and capacities."""
    pytest.importorskip("ortools")
    rng = np.random.default_rng(seed)
    arcs = rng.integers(0, nodes, size=(nodes * 5, 2))
    arcs = arcs[arcs[:, 0] != arcs[:, 1]]
    assume(len(arcs) > 0)
    network = FlowNetwork(nodes, arcs[:, 0], arcs[:, 1])
    capacities = rng.integers(0, 2**20 if big else 50, size=len(arcs))
    compiled = network.value(capacities, 0, nodes - 1)
    assert network._ortools  # the compiled path answered
    network._ortools = False  # as on a machine without OR-Tools
    assert network.value(capacities, 0, nodes - 1) == compiled


def test_value_refuses_a_source_that_is_the_sink():
    network = FlowNetwork(3, [0, 1], [1, 2])
    with pytest.raises(ValueError, match="differ"):
        network.value([1, 1], 1, 1)


@settings(max_examples=40, deadline=None)
@given(nodes=st.integers(3, 30), seed=st.integers(0, 10**6), compiled=st.booleans())
def test_flows_are_a_maximum_flow(nodes, seed, compiled):
    """Per-arc flows: within capacity, conserved at every inner node, of the max-flow value."""
    rng = np.random.default_rng(seed)
    pairs = {(int(u), int(v)) for u, v in rng.integers(0, nodes, size=(nodes * 4, 2)) if u != v}
    assume(pairs)
    src, dst = zip(*sorted(pairs))
    network = FlowNetwork(nodes, src, dst)
    if not compiled:
        network._ortools = False
    capacities = rng.integers(0, 30, size=len(src)).tolist()
    flows = network.flows(capacities, 0, nodes - 1)
    assert all(0 <= f <= c for f, c in zip(flows, capacities))
    balance = [0] * nodes
    for u, v, f in zip(src, dst, flows):
        balance[u] -= f
        balance[v] += f
    assert all(b == 0 for b in balance[1:-1])
    assert balance[-1] == -balance[0] == network.value(capacities, 0, nodes - 1)


def test_flows_refuse_parallel_arcs():
    with pytest.raises(ValueError, match="distinct arcs"):
        FlowNetwork(3, [0, 0, 1], [1, 1, 2]).flows([1, 1, 1], 0, 2)
