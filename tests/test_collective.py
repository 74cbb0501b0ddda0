import pytest

from workbench.model.collective import CollectiveError, bus_factor, collective_from_dict, custom_collective, make_collective
from workbench.topology import TopologyError, build


def test_allgather_numbering_and_sizes():
    c = make_collective("allgather", 4, 2)
    assert c.num_chunks == 8
    assert c.pre[5] == {1} and c.post[5] == set(range(4))  # chunk j*n + r: j=1, r=1
    assert c.chunk_bytes(8e6) == 1e6 and not c.combining


def test_alltoall_numbering():
    c = make_collective("alltoall", 3, 2)
    assert c.num_chunks == 18
    chunk = (1 * 3 + 2) * 3 + 0  # piece 1 from 2 to 0
    assert c.pre[chunk] == {2} and c.post[chunk] == {0}
    assert c.chunk_bytes(6e6) == 1e6


@pytest.mark.parametrize("kind, combining, chunks", [
    ("reducescatter", True, 8), ("allreduce", True, 8), ("broadcast", False, 2), ("reduce", True, 2),
    ("gather", False, 8), ("scatter", False, 8),
])
def test_kinds(kind, combining, chunks):
    c = make_collective(kind, 4, 2, root=1 if kind in ("broadcast", "reduce", "gather", "scatter") else None)
    assert c.combining == combining and c.num_chunks == chunks


def test_broadcast_chunk_size_is_size_over_k():
    c = make_collective("broadcast", 8, 4, root=3)
    assert c.chunk_bytes(4e6) == 1e6 and c.pre[0] == {3}


def test_bus_factors():
    assert bus_factor("allreduce", 8) == pytest.approx(1.75)
    assert bus_factor("allgather", 8) == pytest.approx(0.875)
    assert bus_factor("broadcast", 8) == 1.0


def test_errors():
    with pytest.raises(CollectiveError, match="unknown collective"):
        make_collective("allscatter", 4)
    with pytest.raises(CollectiveError, match="root 9"):
        make_collective("broadcast", 4, root=9)
    with pytest.raises(CollectiveError, match="chunk 0 names rank 5"):
        custom_collective(2, [[5]], [[0]])


def test_explicit_fields_are_authoritative():
    c = make_collective("allgather", 3)
    data = c.to_dict(3e6)
    assert collective_from_dict(data).pre == c.pre
    data["post"][0][1] = [0, 1]
    with pytest.raises(CollectiveError, match="disagree"):
        collective_from_dict(data)
    data["kind"] = "custom"
    assert collective_from_dict(data).post[0] == {0, 1}


def test_reachability_names_the_rank():
    c = make_collective("allgather", 3)
    with pytest.raises(TopologyError, match="rank 2 is unreachable from rank"):
        c.check_reachable(build("line:3").__class__.create(3, [(0, 1, 0.0, 1.0), (1, 0, 0.0, 1.0)]))
    c.check_reachable(build("ring:3"))
