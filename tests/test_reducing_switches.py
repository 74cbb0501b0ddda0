"""Switches that reduce or do not multicast: the topology fields, the file format, the verifier's
rules and the simulator's rate (workbench.topology.abilities, workbench.checking.switch_values)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from workbench.checking.simulate import simulate
from workbench.checking.verify import InvalidAlgorithm, verify
from workbench.kit.schedule import ScheduleBuilder
from workbench.model.algorithm import Algorithm, Transfer, load_algorithm
from workbench.model.algorithm_format import FORMAT_6, AlgorithmFormatError, algorithm_document, read_document
from workbench.model.collective import make_collective
from workbench.topology import TopologyError, build, topology_from_dict
from workbench.topology.abilities import SwitchAbility

GIB = float(1 << 30)


def nvls_allreduce(spec: str, pieces: int = 1, size: float = GIB, **build_args) -> Algorithm:
    """The NVLS All-Reduce on one box: every GPU reduces chunk c into the switch, the sum goes to
    its owner, which stores it to every GPU through the switch's multicast; listed stage by stage,
    so each link streams its stage's chunks back to back."""
    topology = build(spec, **build_args)
    n, switch = topology.num_npus, topology.num_npus
    collective = make_collective("allreduce", n, pieces)
    builder = ScheduleBuilder(topology, collective, size / (n * pieces))
    chunks = range(collective.num_chunks)
    for c in chunks:
        for j in range(n):
            builder.add(c, j, switch, "reduce")
    for c in chunks:
        builder.add(c, switch, c % n, "copy")
    for c in chunks:
        builder.add(c, c % n, switch, "copy")
    for c in chunks:
        for j in range(n):
            if j != c % n:
                builder.add(c, switch, j, "copy")
    return builder.build()


def test_document_round_trip_keeps_abilities_and_old_documents_unchanged():
    plain = build("switch:4")
    assert "reduce" not in json.dumps(plain.to_dict())  # a plain switch writes what it always wrote
    data = plain.to_dict()
    data["nodes"][4].update(reduce=True, reduce_rate="300GB/s", reduce_trees=2, sum_fanout=True)
    reducing = topology_from_dict(data)
    assert reducing.reduces(4) and reducing.ability(4).reduce_rate == 300e9
    assert topology_from_dict(reducing.to_dict()) == reducing != plain
    assert reducing.reversed().abilities == reducing.abilities


@pytest.mark.parametrize("field, value, words", [
    ("reduce", "yes", "expected true or false"),
    ("reduce_rate", "fast", "reduce_rate"),
    ("reduce_trees", 0, "reduce_trees"),
    ("sum_fanout", True, "need reduce: true"),
])
def test_bad_ability_fields_are_named(field, value, words):
    data = build("switch:3").to_dict()
    data["nodes"][3][field] = value
    with pytest.raises(TopologyError, match=words) as caught:
        topology_from_dict(data, "fabric.yaml")
    assert "fabric.yaml: nodes[3]" in str(caught.value)


def test_an_npu_cannot_declare_abilities():
    data = build("switch:3").to_dict()
    data["nodes"][0]["reduce"] = True
    with pytest.raises(TopologyError, match=r"nodes\[0\].reduce: only a switch"):
        topology_from_dict(data)


def test_builders_declare_what_their_switches_do():
    hgx = build("hgx:2,sharp")
    scale_up = hgx.meta["cluster"]["first_node"]["scale_up"]
    assert hgx.reduces(scale_up) and not hgx.ability(scale_up).sum_fanout
    leaf = hgx.meta["cluster"]["first_node"]["leaf"]
    assert hgx.ability(leaf) == SwitchAbility(reduce=True, sum_fanout=True, reduce_trees=2)
    off = build("hgx:2,nvls=off")
    assert not off.reducing_switches() and not off.ability(scale_up).multicast
    assert build("hgx:1,rate=315GB/s").ability(8).reduce_rate == 315e9
    assert build("nvl72").reducing_switches() == [72] and build("nvl72").num_npus == 72
    assert [l.bandwidth for l in build("hgx:1").links if l.src == 0] == [450e9, 50e9]


def test_an_nvls_all_reduce_verifies_and_is_written_as_format_6(tmp_path):
    algorithm = nvls_allreduce("hgx:1", pieces=2)
    verify(algorithm)
    document = algorithm_document(algorithm)
    assert document["format"] == FORMAT_6
    again = Algorithm(*read_document(json.loads(json.dumps(document)), "nvls.json"))
    assert again.topology == algorithm.topology
    document["format"] = "workbench.algorithm/5"
    with pytest.raises(AlgorithmFormatError, match="need format 'workbench.algorithm/6'"):
        read_document(document, "nvls.json")


def nvls_formulation(spec: str, kind: str = "allreduce", size: float = GIB, **params) -> Algorithm:
    from formulations.nvls import Nvls
    from workbench.plugin import call
    from workbench.plugin.registry import Problem

    topology = build(spec)
    problem = Problem(topology, make_collective(kind, topology.num_npus, 1), size)
    return call.synthesize(Nvls(), problem, time_limit=60, seed=0, **params).algorithms[0]


def test_nvls_moves_nine_eighths_of_the_buffer_over_each_link():
    """Oracle: pipelined, every GPU's up-link carries M (its slices read by the load-reduces) plus
    M/8 (its own store), so the time approaches 9M/8 over the link bandwidth."""
    seconds = simulate(nvls_formulation("hgx:1", pieces=64)).collective_time
    assert 9 / 8 * GIB / 450e9 <= seconds <= 1.06 * 9 / 8 * GIB / 450e9  # 64 pieces: a fill of 5 periods


def test_a_reduce_rate_slows_the_reduces_into_the_switch_and_the_sum_out():
    fast = simulate(nvls_formulation("hgx:1", pieces=64)).collective_time
    slow = simulate(nvls_formulation("hgx:1,rate=225GB/s", pieces=64)).collective_time
    # up-links: M at the rate, M/8 at the link's own: (1/225 + 1/(8 * 450)) per GB
    assert slow == pytest.approx(GIB * (1 / 225e9 + 1 / (8 * 450e9)), rel=0.03)
    assert slow > 1.8 * fast


def test_sharp_across_boxes_sends_each_box_sum_once_over_the_nics():
    """Oracle: on hgx:4,sharp every NIC carries its rail's M/8 once each way (the leaves sum), so
    All-Reduce approaches M/8 over 50 GB/s; without SHARP the rail exchange sends 2(B-1)/B of it."""
    sharp = simulate(nvls_formulation("hgx:4,sharp", pieces=64)).collective_time
    direct = simulate(nvls_formulation("hgx:4", pieces=64)).collective_time
    assert GIB / 8 / 50e9 <= sharp <= 1.1 * GIB / 8 / 50e9  # 64 pieces: a fill of 6 periods
    assert direct == pytest.approx(2 * 3 / 4 * GIB / 8 / 50e9, rel=0.06)


def test_a_reduce_into_a_switch_that_does_not_reduce_is_refused_in_one_line():
    with pytest.raises(InvalidAlgorithm, match="reduce into switch 8, which does not reduce") as caught:
        verify(nvls_allreduce("hgx:1,nvls=off"))
    assert "\n" not in str(caught.value)


def test_fan_out_at_a_switch_that_does_not_multicast_is_refused():
    topology = build("hgx:1,nvls=off")
    collective = make_collective("allgather", 8, 1)
    transfers = [Transfer(0, (0,), 0, 8)] + [Transfer(i, (0,), 8, i, deps=(0,)) for i in range(1, 8)]
    with pytest.raises(InvalidAlgorithm, match="switch 8 does not multicast") as caught:
        verify(Algorithm(topology, collective, 1024.0, transfers))
    assert caught.value.kind == "fan-out" and caught.value.transfer == 2


def test_a_sum_from_an_nvswitch_goes_to_one_gpu():
    """The load-reduce returns the sum to the GPU that issued it; the switch cannot multicast it."""
    topology = build("hgx:1")
    collective = make_collective("allreduce", 8, 1)
    builder = ScheduleBuilder(topology, collective, 1024.0)
    for c in range(8):
        for j in range(8):
            builder.add(c, j, 8, "reduce")
        for j in range(8):
            builder.add(c, 8, j, "copy")
    with pytest.raises(InvalidAlgorithm, match="sends a sum it made to one destination"):
        verify(builder.build())


def test_a_switch_forgets_a_sum_once_read_so_the_next_one_starts_afresh():
    """Two operations on one buffer of the switch: the second reduce would double count if the
    switch kept the first sum."""
    topology = build("hgx:1")
    collective = make_collective("reducescatter", 8, 1)
    builder = ScheduleBuilder(topology, collective, 1024.0)
    for j in range(4):
        builder.add(0, j, 8, "reduce")
    builder.add(0, 8, 4, "reduce")  # ranks 0-3 into rank 4
    builder.add(0, 4, 8, "reduce")  # ranks 0-4 through the switch again
    for j in range(5, 8):
        builder.add(0, j, 8, "reduce")
    builder.add(0, 8, 0, "copy")
    for c in range(1, 8):
        for j in range(8):
            builder.add(c, j, 8, "reduce")
        builder.add(c, 8, c, "copy")
    verify(builder.build())


def _six_trees(trees: int | None) -> Algorithm:
    """Reduce-Scatter on one switch of 6 NPUs where chunk c is summed in the switch from ranks c+1
    and c+2 (the other ranks first add theirs into those two): six different trees, all at once."""
    topology = build("switch:6").with_abilities({6: SwitchAbility(reduce=True, sum_fanout=True, reduce_trees=trees)})
    builder = ScheduleBuilder(topology, make_collective("reducescatter", 6, 1), 1 << 20)
    for c in range(6):
        into = [(c + 1) % 6, (c + 2) % 6]
        for k, r in enumerate(x for x in range(6) if x != c and x not in into):
            builder.add(c, r, into[k % 2], "reduce")  # NPU to NPU, carried through the switch
        for r in into:
            builder.add(c, r, 6, "reduce")
        builder.add(c, 6, c, "reduce")
    return builder.build()


def test_a_sharp_switch_runs_at_most_its_trees_at_once():
    """Link order lets two consecutive chunks' trees overlap, never three."""
    verify(_six_trees(None))
    verify(_six_trees(2))
    with pytest.raises(InvalidAlgorithm, match="runs at most 1 reduction trees at once") as caught:
        verify(_six_trees(1))
    assert caught.value.kind == "trees" and "2 are open" in str(caught.value)


@settings(max_examples=12, deadline=None)
@given(spec=st.sampled_from(["hgx:1", "hgx:2", "hgx:2,sharp", "hgx:1,rate=300GB/s"]),
       kind=st.sampled_from(["allreduce", "reducescatter", "allgather"]), log_pieces=st.integers(0, 2),
       size=st.sampled_from([64e3, 1e6, 16e6]))
def test_nvls_formulation_verifies_on_the_reducing_builders(spec, kind, log_pieces, size):
    from formulations.nvls import Nvls
    from workbench.plugin import call
    from workbench.plugin.registry import Problem

    topology = build(spec)
    problem = Problem(topology, make_collective(kind, topology.num_npus, 1), size)
    result = call.synthesize(Nvls(), problem, time_limit=30, seed=0, pieces=1 << log_pieces)
    report = verify(result.algorithms[0])
    assert report.simulation.collective_time > 0


def test_reversal_turns_a_multicast_into_a_sum_only_in_a_switch_that_reduces():
    """An All-Gather multicast through the switch reverses into a Reduce-Scatter summed there."""
    for spec, reduces in (("nvl72", True), ("switch:8", False)):
        topology = build(spec)
        n, switch = topology.num_npus, topology.num_npus
        transfers = []
        for c in range(n):
            first = len(transfers)
            transfers.append(Transfer(first, (c,), c, switch))
            for j in range(n):
                if j != c:
                    transfers.append(Transfer(len(transfers), (c,), switch, j, deps=(first,)))
        gather = Algorithm(topology, make_collective("allgather", n, 1), 1 << 16, transfers)
        verify(gather)
        if reduces:
            scatter = gather.reverse()
            assert {t.op for t in scatter.transfers if t.dst == switch} == {"reduce"}
            verify(scatter)
        else:
            with pytest.raises(ValueError, match="does not reduce, so this cannot be reversed"):
                gather.reverse()


def test_the_owner_adds_the_rails_sum_only_after_its_box_sum_has_landed():
    """Reduce-Scatter through SHARP: the owner's box sum comes by a copy from its box switch (here
    slow: a low reduce rate on box 0's only) and the other box's sum by a reduce from the leaf; the
    reduce must wait for the copy, or the copy lands last and overwrites it."""
    from formulations.nvls import Nvls
    from workbench.plugin import call
    from workbench.plugin.registry import Problem

    topology = build("hgx:2,sharp")
    slow = dict(topology.abilities)
    slow[16] = SwitchAbility(reduce=True, reduce_rate=5e9)
    topology = topology.with_abilities(slow)
    for pieces in (1, 4):
        problem = Problem(topology, make_collective("reducescatter", 16, 1), 1e6)
        verify(call.synthesize(Nvls(), problem, time_limit=30, seed=0, pieces=pieces).algorithms[0])
