"""bfs-trees with switches=multicast: hop-by-hop trees through switches, copied in the switch."""

import pytest

from workbench.plugin import call
from workbench.model.collective import make_collective
from workbench.plugin.registry import Problem, get_formulation
from workbench.checking.simulate import simulate
from workbench.topology import Link, Topology, build
from workbench.checking.verify import verify

GB = 1e9


def leaf_spine(leaves=3, per_leaf=4, spines=2):
    n = leaves * per_leaf
    links = []
    for leaf in range(leaves):
        for npu in range(leaf * per_leaf, (leaf + 1) * per_leaf):
            links += [Link(npu, n + leaf, 0.5e-6, 50 * GB), Link(n + leaf, npu, 0.5e-6, 50 * GB)]
        for s in range(spines):
            links += [Link(n + leaf, n + leaves + s, 1e-6, 50 * GB), Link(n + leaves + s, n + leaf, 1e-6, 50 * GB)]
    return Topology.create(n, links, leaves + spines, "leafspine:3x4x2")


def synth(topology, kind, size, switches):
    problem = Problem(topology, make_collective(kind, topology.num_npus), size)
    return call.synthesize(get_formulation("bfs-trees"), problem, time_limit=10, seed=0, switches=switches)


@pytest.mark.parametrize("kind", ["allgather", "alltoall", "broadcast"])
def test_multicast_trees_verify_and_each_npu_sends_its_own_data_once(kind):
    topology = leaf_spine()
    result = synth(topology, kind, 1e6, "multicast")
    assert result.status == "feasible", result.message
    algorithm = result.algorithms[0]
    verify(algorithm)
    if kind == "allgather":  # its chunk goes up to the leaf once; the switches copy it from there
        for npu in range(topology.num_npus):
            sent = [c for t in algorithm.transfers if t.src == npu for c in t.chunks]
            assert sent == [npu]


def test_multicast_beats_routed_trees_on_a_two_tier_fabric():
    topology = leaf_spine()
    routed = simulate(synth(topology, "allgather", 1e6, "route").algorithms[0]).collective_time
    copied = simulate(synth(topology, "allgather", 1e6, "multicast").algorithms[0]).collective_time
    assert copied < routed / 2


def test_switch_copies_make_the_one_switch_all_gather_a_broadcast_per_chunk():
    # switch:4 (alpha 0.25 us a half, 50 GB/s): each chunk up once (a + m/B, stored in the switch),
    # then each down link serves the three others' chunks back to back: a + 3 m/B after the first
    topology = build("switch:4")
    m = 1e6 / 4
    time = simulate(synth(topology, "allgather", 1e6, "multicast").algorithms[0]).collective_time
    a, b = 0.25e-6, 50 * GB
    assert time == pytest.approx(a + m / b + a + 3 * m / b)


def test_reductions_need_routed_trees():
    result = synth(leaf_spine(), "reducescatter", 1e6, "multicast")
    assert result.status == "error" and "switches=route" in result.message
    assert synth(leaf_spine(), "reducescatter", 1e6, "route").status == "feasible"
    assert synth(build("ring:4"), "allreduce", 1e6, "multicast").status == "feasible"  # no switch: as routed
