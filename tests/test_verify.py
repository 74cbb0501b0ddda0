import pytest

from workbench.model.algorithm import Algorithm, Transfer
from workbench.model.collective import custom_collective, make_collective
from workbench.kit.examples import ring_allgather, ring_allreduce, ring_reducescatter
from workbench.topology import build
from workbench.checking.verify import InvalidAlgorithm, verify

M = 1e6


def _expect(algo, kind, pattern):
    with pytest.raises(InvalidAlgorithm, match=pattern) as info:
        verify(algo)
    assert info.value.kind == kind
    return info.value


def test_valid_reference_algorithms():
    for algo in (ring_allgather(5, M), ring_reducescatter(5, M), ring_allreduce(5, M, chunks_per_rank=2),
                 ring_allgather(9, M, build("torus:3x3"))):
        report = verify(algo)
        assert report.transfers == len(algo.transfers)


def test_missing_source_data_names_transfer_chunk_and_ranks():
    algo = ring_allgather(4, M)
    del algo.transfers[0]
    for i, t in enumerate(algo.transfers):
        t.id = i
        t.deps = tuple(d - 1 for d in t.deps if d > 0)
    error = _expect(algo, "missing", r"transfer \d+: rank 1 sends chunk 0 to 2 but holds nothing")
    assert error.chunk == 0 and error.ranks == (1, 2)


def test_postcondition_failure_names_rank_and_chunk():
    algo = ring_allgather(4, M)
    algo.transfers = algo.transfers[:-1]
    _expect(algo, "postcondition", r"rank 0 must end with chunk 1 but holds nothing")


def test_double_counting():
    algo = ring_reducescatter(3, M)
    t = algo.transfers[-1]
    algo.transfers.append(Transfer(len(algo.transfers), t.chunks, t.src, t.dst, "reduce", (t.id,)))
    _expect(algo, "double-count", r"double counts the contributions of ranks")


def test_missing_contributions_in_a_reduction():
    algo = ring_reducescatter(4, M)
    algo.transfers[0].op = "copy"  # overwrite instead of add: a contribution is lost
    _expect(algo, "postcondition", r"missing the contributions of ranks")


def test_race_only_the_timeline_finds():
    # file order: 0->1 then 1->2; but the second has no dependency and starts at t=0
    topo = build("line:3", alpha=1e-6, bandwidth=10e9)
    coll = custom_collective(3, [[0]], [[1, 2]])
    algo = Algorithm.from_steps(topo, coll, M, [(0, 0, 1, "copy", ()), (0, 1, 2, "copy", ())])
    verify(algo, timeline=False)  # the file-order replay alone accepts it
    error = _expect(algo, "race", r"race: transfer 1 reads chunk 0 at node 1 .* transfer 0's write .* not arrived")
    assert error.transfer == 1
    fixed = Algorithm.from_steps(topo, coll, M, [(0, 0, 1, "copy", ()), (0, 1, 2, "copy", (0,))])
    verify(fixed)


def test_race_with_a_write_that_overtakes():
    """A write listed after a read lands before it in the default execution."""
    topo = build("fc:3", alpha=0.0, bandwidth=10e9)
    coll = custom_collective(3, [[0, 1, 2]], [[2]], combining=True)
    steps = [(0, 0, 2, "reduce", ()),  # 0: 0 -> 2
             (0, 1, 2, "reduce", (0,)),  # 1: 1 -> 2, reads node 1 once transfer 0 has arrived
             (0, 0, 1, "copy", ())]  # 2: listed after 1, starts at t=0 and lands on node 1 first
    algo = Algorithm.from_steps(topo, coll, M, steps)
    verify(algo, timeline=False)
    _expect(algo, "race", r"race: transfer 1 reads chunk 0 at node 1 .*transfer 2's write arrived first")


@pytest.mark.parametrize("mutate, pattern", [
    (lambda a: setattr(a.transfers[1], "id", 5), r"position 1 has id 5"),
    (lambda a: setattr(a.transfers[1], "deps", (3,)), r"transfer 1: dependency 3 does not name an earlier"),
    (lambda a: setattr(a.transfers[0], "dst", 0), r"transfer 0: src and dst are both 0"),
    (lambda a: setattr(a.transfers[0], "dst", 99), r"node 99 does not exist"),
    (lambda a: setattr(a.transfers[0], "chunks", (42,)), r"chunk 42 does not exist"),
    (lambda a: setattr(a.transfers[0], "op", "reduce"), r"reduce of chunk \d+ in a non-combining allgather"),
])
def test_structural_rules(mutate, pattern):
    algo = ring_allgather(4, M)
    mutate(algo)
    _expect(algo, "structure", pattern)


def test_reduce_never_into_a_switch():
    topo = build("switch:2")
    coll = make_collective("reduce", 2, 1, root=1)
    algo = Algorithm.from_steps(topo, coll, M, [(0, 0, 2, "reduce", ()), (0, 2, 1, "reduce", (0,))])
    _expect(algo, "structure", r"transfer 0: reduce into switch 2")


def test_disconnected_endpoints():
    from workbench.topology import Topology
    topo = Topology.create(3, [(0, 1, 0.0, 1e9), (1, 0, 0.0, 1e9), (2, 0, 0.0, 1e9)])
    coll = make_collective("broadcast", 3, 1, root=0)
    algo = Algorithm.from_steps(topo, coll, M, [(0, 0, 2, "copy", ())])
    _expect(algo, "structure", r"transfer 0: no path from node 0 to node 2")


def test_switch_may_hold_and_multicast():
    topo = build("switch:3")
    coll = make_collective("broadcast", 3, 1, root=0)
    algo = Algorithm.from_steps(topo, coll, M, [(0, 0, 3, "copy", ()), (0, 3, 1, "copy", (0,)),
                                                 (0, 3, 2, "copy", (0,))])
    verify(algo)


def test_multi_chunk_message_race_is_reported_per_chunk():
    topo = build("line:3", alpha=1e-6, bandwidth=10e9)
    coll = make_collective("allgather", 3, 1)
    steps = [(0, 0, 1, "copy", ()), ((0, 1), 1, 2, "copy", ()), (2, 2, 1, "copy", ()), ((1, 2), 1, 0, "copy", (2,))]
    algo = Algorithm.from_steps(topo, coll, M, steps)
    verify(algo, timeline=False)
    _expect(algo, "race", r"transfer 1 reads chunk 0 at node 1")


def test_verifier_scales_with_bitsets():
    algo = ring_allreduce(64, M)  # 8064 transfers, contribution sets of 64 ranks
    assert verify(algo).delivered_pairs == 64 * 64
