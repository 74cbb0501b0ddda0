import json

import pytest

from workbench.model.algorithm import FORMAT, Algorithm, AlgorithmFormatError, Transfer, load_algorithm
from workbench.model.collective import make_collective
from workbench.kit.examples import ring_allgather, ring_allreduce, ring_reducescatter
from workbench.checking.simulate import simulate
from workbench.topology import build
from workbench.checking.verify import verify


def test_round_trip_with_multi_chunk_messages(tmp_path):
    topo = build("ring:2")
    coll = make_collective("allgather", 2, 2)
    algo = Algorithm.from_steps(topo, coll, 1e6, [((0, 2), 0, 1, "copy", ()), ((1, 3), 1, 0, "copy", (), 0.0, 1e-5)],
                                meta={"formulation": "hand"})
    path = tmp_path / "a.json"
    algo.save(path)
    data = json.loads(path.read_text())
    assert data["format"] == FORMAT and data["transfers"][0]["chunks"] == [0, 2]
    assert data["collective"]["size_bytes"] == 4e6
    again = load_algorithm(path)
    assert again.transfers == algo.transfers and again.topology == topo and again.meta == algo.meta
    verify(again)


def test_single_chunk_transfer_uses_chunk_field():
    assert Transfer(0, (3,), 0, 1).to_dict()["chunk"] == 3


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(format="other/1"), "format must be"),
    (lambda d: d.pop("transfers"), "missing field 'transfers'"),
    (lambda d: d["transfers"][0].pop("src"), r"transfers\[0\].src: expected an integer"),
    (lambda d: d["transfers"][0].update(op="add"), r"transfers\[0\].op"),
    (lambda d: d["transfers"][0].update(chunks=[1]), "either 'chunk' or 'chunks'"),
    (lambda d: d.update(chunk_bytes=-1), "chunk_bytes must be a positive"),
    (lambda d: d["collective"].update(size_bytes=123.0), "disagrees with chunk_bytes"),
    (lambda d: d["collective"].update(ranks=3), "collective"),
    (lambda d: d["topology"]["links"][0].update(bandwidth=-1), "bandwidth.*(negative|positive)"),
])
def test_malformed_files(tmp_path, mutate, message):
    data = ring_allgather(2, 1e6, build("ring:2")).to_dict()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(AlgorithmFormatError, match=message):
        load_algorithm(path)


def test_reverse_turns_allgather_into_reducescatter():
    topo = build("torus:3x3")
    gather = ring_allgather(9, 1e6, topo)
    rs = gather.reverse()
    assert rs.collective.kind == "reducescatter"
    assert all(t.op == "reduce" for t in rs.transfers)
    verify(rs)
    assert simulate(rs).collective_time == pytest.approx(simulate(gather).collective_time)


def test_reverse_rejects_a_multicasting_switch():
    topo = build("switch:3")
    coll = make_collective("broadcast", 3, 1, root=0)
    algo = Algorithm.from_steps(topo, coll, 1e6, [(0, 0, 3, "copy", ()), (0, 3, 1, "copy", (0,)),
                                                   (0, 3, 2, "copy", (0,))])
    verify(algo)
    with pytest.raises(ValueError, match="multicasts"):
        algo.reverse()


def test_reverse_through_a_switch_keeps_copies_into_it():
    topo = build("switch:2")
    coll = make_collective("broadcast", 2, 1, root=0)
    algo = Algorithm.from_steps(topo, coll, 1e6, [(0, 0, 2, "copy", ()), (0, 2, 1, "copy", (0,))])
    rev = algo.reverse()
    assert [t.op for t in rev.transfers] == ["copy", "reduce"]
    assert [(t.src, t.dst) for t in rev.transfers] == [(1, 2), (2, 0)]
    verify(rev)


def test_concat_allreduce_closed_form():
    n, m = 6, 1e6
    ar = ring_allreduce(n, m)
    assert ar.collective.kind == "allreduce"
    verify(ar)
    assert simulate(ar).collective_time == pytest.approx(2 * (n - 1) * (0.5e-6 + m / 50e9))


def test_concat_wires_dependencies():
    rs = ring_reducescatter(4, 1e6)
    ag = ring_allgather(4, 1e6)
    ar = rs.concat(ag)
    first_ag = ar.transfers[len(rs.transfers)]
    assert first_ag.deps, "the first all-gather send must wait for the reduce-scatter"
