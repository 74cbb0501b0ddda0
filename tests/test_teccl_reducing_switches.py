"""TE-CCL on switches that reduce or do not multicast (docs/methods/teccl.md 2.11): the switch
semantics per switch, Reduce-Scatter summing in the switch, and the reduction-tree limit."""

import pytest

from formulations.teccl import Teccl
from formulations.teccl.epochs import epoch_graph
from workbench.checking.simulate import simulate
from workbench.checking.switch_values import SwitchValues
from workbench.checking.verify import verify
from workbench.model.collective import make_collective
from workbench.plugin import call
from workbench.plugin.registry import Problem
from workbench.topology import Link, Topology, build
from workbench.topology.abilities import SwitchAbility


def _run(topology, kind, size, **params):
    problem = Problem(topology, make_collective(kind, topology.num_npus, 1), size)
    return call.synthesize(Teccl(), problem, time_limit=30, seed=0, **params)


def _ring_and_switch(switch_bandwidth: float) -> Topology:
    """A 4-ring at 1 GB/s whose ranks also reach one switch (node 4) at ``switch_bandwidth``."""
    ring = [Link(i, (i + 1) % 4, 1e-7, 1e9) for i in range(4)] + [Link((i + 1) % 4, i, 1e-7, 1e9) for i in range(4)]
    star = [Link(i, 4, 1e-7, switch_bandwidth) for i in range(4)] + [Link(4, i, 1e-7, switch_bandwidth)
                                                                     for i in range(4)]
    return Topology.create(4, ring + star, num_switches=1, name="ring+switch")


def _sums_in_switches(algorithm) -> list:
    return [op for op in SwitchValues(algorithm).operations if op.is_sum]


def test_the_switch_semantics_are_per_switch():
    off = build("hgx:1,nvls=off")
    w = off.switches[0]
    graph = epoch_graph(off, 1e6)  # the copy model, but this NVSwitch does not multicast
    assert not graph.copies_at(w) and graph.passes_through(w) and not graph.crosses_once(w)
    on = build("hgx:1,sharp")
    nvswitch = on.switches[0]
    leaf = next(s for s in on.switches if on.ability(s).reduce_trees)
    dual = epoch_graph(on.reversed(), 1e6, dual=True)  # a reduction's gather: copy where the switch reduces
    assert dual.copies_at(nvswitch) and dual.one_at_a_time(nvswitch) and not dual.fans_out_fully(nvswitch)
    assert dual.copies_at(leaf) and dual.fans_out_fully(leaf)
    plain = build("switch:4")
    assert not epoch_graph(plain.reversed(), 1e6, dual=True).copies_at(4)  # a switch that cannot sum: no copy
    assert epoch_graph(plain, 1e6).copies_at(4) and not epoch_graph(plain, 1e6, switch_model="no-copy").copies_at(4)


@pytest.mark.parametrize("spec", ["switch:4", "hgx:1,nvls=off"])
def test_allgather_through_a_switch_that_does_not_multicast_verifies(spec):
    topology = build(spec)
    if spec == "switch:4":
        topology = topology.with_abilities({4: SwitchAbility(multicast=False)})
    result = _run(topology, "allgather", 1e6 * topology.num_npus)
    algorithm = result.algorithms[0]
    verify(algorithm)  # no fan-out at the switch (the copy model copied there and was refused)
    silent = [w for w in topology.switches if not topology.ability(w).multicast]
    # it holds no value: each crossing is one transfer through it
    assert not any(t.src in silent or t.dst in silent for t in algorithm.transfers)
    assert any(t.via and set(t.via) & set(silent) for t in algorithm.transfers)


def test_reducescatter_sums_in_a_reducing_switch_and_beats_the_no_copy_schedule():
    topology = _ring_and_switch(8e9).with_abilities({4: SwitchAbility(reduce=True)})
    summed = _run(topology, "reducescatter", 4e6)
    algorithm = summed.algorithms[0]
    verify(algorithm)
    assert any(t.op == "reduce" and t.dst == 4 for t in algorithm.transfers)
    assert _sums_in_switches(algorithm)
    forwarded = _run(topology, "reducescatter", 4e6, switch_model="no-copy")  # the same links, no sum in the switch
    verify(forwarded.algorithms[0])
    assert not _sums_in_switches(forwarded.algorithms[0])
    assert summed.status == forwarded.status == "optimal"
    assert summed.claimed_times[0] < forwarded.claimed_times[0]
    assert simulate(algorithm).collective_time <= simulate(forwarded.algorithms[0]).collective_time


@pytest.mark.parametrize("kind, method", [("reducescatter", "milp"), ("allreduce", "milp"), ("reducescatter", "astar")])
def test_a_lone_reducing_switch_sums_every_chunk(kind, method):
    # without sums a reduction's gather crosses a switch once per chunk, which no star allows
    topology = build("switch:4").with_abilities({4: SwitchAbility(reduce=True)})
    result = _run(topology, kind, 4e6, method=method)
    algorithm = result.algorithms[0]
    verify(algorithm)
    sums = _sums_in_switches(algorithm)
    assert sums and all(len(op.readers) == 1 for op in sums)  # sum_fanout false: each sum leaves once
    with pytest.raises(ValueError, match="cannot reach"):
        _run(build("switch:4"), "reducescatter", 4e6)


def test_reduction_trees_reach_every_port():
    # reduce_trees 1: every sum the switch makes must use the one tree, so each copy of the reduction's
    # gather there reaches all ports; the tree rows keep it so (without them this schedule had 3 trees)
    topology = build("switch:4").with_abilities({4: SwitchAbility(reduce=True, sum_fanout=True, reduce_trees=1)})
    result = _run(topology, "reducescatter", 4e6)
    algorithm = result.algorithms[0]
    verify(algorithm)
    sums = _sums_in_switches(algorithm)
    assert sums and {op.tree(algorithm.transfers) for op in sums} == {frozenset(range(4))}
