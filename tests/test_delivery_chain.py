"""workbench.kit.schedule.DeliveryChain: each send waits for what brought its chunks to its sender."""

from __future__ import annotations

import random

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from schedules import random_connected_topology
from workbench.model.collective import make_collective
from workbench.util.graphs import bfs
from workbench.kit.schedule import DeliveryChain
from workbench.topology import build
from workbench.checking.verify import verify


def test_a_send_waits_for_the_delivery_to_its_sender():
    chain = DeliveryChain()
    first = chain.send(0, 0, 1)
    second = chain.send(0, 1, 2)
    from_origin = chain.send(0, 0, 3)  # nothing delivered chunk 0 to node 0
    assert (first.id, first.deps) == (0, ())
    assert (second.id, second.deps) == (1, (0,))
    assert from_origin.deps == ()
    assert chain.delivered(2, 0) == (1,) and chain.delivered(0, 0) == ()


def test_several_chunks_wait_for_each_delivery_once_sorted():
    chain = DeliveryChain()
    chain.send(1, 2, 0)
    chain.send(0, 1, 0)
    both = chain.send((0, 1), 0, 3, "copy", 1.0, 2.0)
    assert both.deps == (0, 1) and both.chunks == (0, 1)
    assert (both.t_start, both.t_end) == (1.0, 2.0)
    again = chain.send([0, 1], 3, 4, "reduce")
    assert again.deps == (2,) and again.op == "reduce"


def test_a_later_delivery_replaces_the_earlier_unless_every():
    latest, every = DeliveryChain(), DeliveryChain(every=True)
    for chain in (latest, every):
        chain.send(0, 1, 0, "reduce")
        chain.send(0, 2, 0, "reduce")
    assert latest.send(0, 0, 3).deps == (1,)
    assert every.send(0, 0, 3).deps == (0, 1)
    assert every.delivered(0, 0) == (0, 1)


def test_ring_allgather_built_on_the_chain_verifies():
    topology = build("uniring:4")
    collective = make_collective("allgather", 4)
    chain = DeliveryChain()
    for step in range(3):
        for rank in range(4):
            chain.send((rank - step) % 4, rank, (rank + 1) % 4)
    algorithm = chain.build(topology, collective, 1024.0, {"formulation": "test"})
    verify(algorithm)
    assert algorithm.meta == {"formulation": "test"} and len(algorithm.transfers) == 12
    assert algorithm.transfers[4].deps == (3,)  # rank 1 forwards chunk 0, which rank 0 sent it at step 0


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 9), st.integers(0, 12), st.integers(0, 10**6))
def test_allgather_along_bfs_trees_verifies(n, extra, seed):
    """Every chunk along a BFS tree from its origin, hops level by level: the chain's deps make it valid."""
    rng = random.Random(seed)
    topology = random_connected_topology(rng, n, extra)
    assume(len(topology.links) > n)  # more than the bare cycle: trees with branches
    successors = [topology.out_neighbors(v) for v in range(n)]
    hops = []
    for chunk in range(n):
        tree = bfs(successors, [chunk], shuffle=rng.shuffle)
        hops += [(tree.depth[v], chunk, tree.parent[v], v) for v in tree.order[1:]]
    chain = DeliveryChain()
    for _, chunk, u, v in sorted(hops):
        transfer = chain.send(chunk, u, v)
        assert transfer.deps == (() if u == chunk else chain.delivered(u, chunk))
    verify(chain.build(topology, make_collective("allgather", n), 1024.0))
