import pytest

from workbench.model.algorithm import Algorithm
from workbench.model.collective import custom_collective
from workbench.kit.examples import ring_allgather
from workbench.checking.simulate import SimulationError, simulate
from workbench.topology import Topology, build

ALPHA, BW, M = 1e-6, 10e9, 1e6
SER = M / BW


def test_unidirectional_ring_allgather_closed_form():
    for n in (2, 5, 8):
        algo = ring_allgather(n, M, build(f"uniring:{n}", alpha=ALPHA, bandwidth=BW))
        result = simulate(algo)
        assert result.collective_time == pytest.approx((n - 1) * (ALPHA + SER))
        assert result.algbw == pytest.approx(n * M / result.collective_time)
        assert result.busbw == pytest.approx(result.algbw * (n - 1) / n)


def _stream(k: int, h: int) -> Algorithm:
    """k chunks from node 0 down a line of h hops, each hop waiting for the previous one."""
    topo = build(f"line:{h + 1}", alpha=ALPHA, bandwidth=BW)
    coll = custom_collective(h + 1, [[0]] * k, [[h]] * k)
    steps, last = [], {}
    for diagonal in range(k + h - 1):  # planned order: by planned start (i + j)
        for j in range(k):
            i = diagonal - j
            if 0 <= i < h:
                deps = (last[(i - 1, j)],) if i > 0 else ()
                last[(i, j)] = len(steps)
                steps.append((j, i, i + 1, "copy", deps))
    return Algorithm.from_steps(topo, coll, M, steps)


@pytest.mark.parametrize("k, h", [(1, 1), (4, 1), (1, 5), (4, 3), (8, 6)])
def test_pipelined_streaming(k, h):
    algo = _stream(k, h)
    assert simulate(algo).collective_time == pytest.approx((h + k - 1) * SER + h * ALPHA)
    assert simulate(algo, link_model="blocking").collective_time == pytest.approx((h + k - 1) * (SER + ALPHA))


def _serialisation_case() -> Algorithm:
    """X: 0->1 (chunk 0); A: 1->2 chunk 0 after X; B: 1->2 chunk 1, ready at once but listed after A."""
    topo = build("line:3", alpha=ALPHA, bandwidth=BW)
    coll = custom_collective(3, [[0], [1]], [[2], [2]])
    return Algorithm.from_steps(topo, coll, M, [(0, 0, 1, "copy", ()), (0, 1, 2, "copy", (0,)),
                                                (1, 1, 2, "copy", ())])


def test_in_order_serialises_in_file_order_and_fifo_does_not():
    algo = _serialisation_case()
    x_done = SER + ALPHA
    ordered = simulate(algo)
    assert ordered.start[2] == pytest.approx(x_done + SER)  # B waits for A on link 1->2
    assert ordered.collective_time == pytest.approx(x_done + 2 * SER + ALPHA)
    fifo = simulate(algo, order="fifo")
    assert fifo.start[2] == pytest.approx(0.0)  # B goes first: A is not ready yet
    assert fifo.start[1] == pytest.approx(x_done)
    assert fifo.collective_time == pytest.approx(x_done + SER + ALPHA)


def test_fifo_serves_ready_segments_by_ready_time_then_file_order():
    topo = build("line:2", alpha=ALPHA, bandwidth=BW)
    coll = custom_collective(2, [[0]] * 3, [[1]] * 3)
    algo = Algorithm.from_steps(topo, coll, M, [(0, 0, 1, "copy", ()), (1, 0, 1, "copy", ()), (2, 0, 1, "copy", ())])
    fifo = simulate(algo, order="fifo")
    assert list(fifo.start) == pytest.approx([0.0, SER, 2 * SER])


def test_switch_cut_through_and_store_and_forward():
    topo = build("switch:4", alpha=ALPHA, bandwidth=BW)
    coll = custom_collective(4, [[0]], [[3]])
    algo = Algorithm.from_steps(topo, coll, M, [(0, 0, 3, "copy", ())])
    assert simulate(algo).collective_time == pytest.approx(SER + ALPHA)
    assert simulate(algo, switch_model="store-and-forward").collective_time == pytest.approx(2 * SER + ALPHA)


def test_cut_through_segment_occupies_all_its_links():
    topo = build("switch:4", alpha=ALPHA, bandwidth=BW)
    coll = custom_collective(4, [[0], [1]], [[3], [3]])
    algo = Algorithm.from_steps(topo, coll, M, [(0, 0, 3, "copy", ()), (1, 1, 3, "copy", ())])
    result = simulate(algo)  # both need switch->3: the second waits for the first
    assert result.start[1] == pytest.approx(SER)
    down = topo.link_index(4, 3)
    assert result.link_busy[down] == pytest.approx(2 * SER) and result.link_bytes[down] == 2 * M


def test_multi_hop_route_through_an_npu_stores_and_forwards():
    topo = build("line:3", alpha=ALPHA, bandwidth=BW)
    coll = custom_collective(3, [[0]], [[2]])
    algo = Algorithm.from_steps(topo, coll, M, [(0, 0, 2, "copy", ())])
    result = simulate(algo)
    assert result.collective_time == pytest.approx(2 * (SER + ALPHA))
    assert result.link_bytes[topo.link_index(1, 2)] == M


def test_multi_chunk_message_pays_alpha_once():
    topo = build("line:2", alpha=ALPHA, bandwidth=BW)
    coll = custom_collective(2, [[0], [0]], [[1], [1]])
    message = Algorithm.from_steps(topo, coll, M, [((0, 1), 0, 1, "copy", ())])
    separate = Algorithm.from_steps(topo, coll, M, [(0, 0, 1, "copy", ()), (1, 0, 1, "copy", ())])
    assert simulate(message, link_model="blocking").collective_time == pytest.approx(2 * SER + ALPHA)
    assert simulate(separate, link_model="blocking").collective_time == pytest.approx(2 * SER + 2 * ALPHA)
    assert simulate(message).collective_time == pytest.approx(2 * SER + ALPHA)


def test_utilisation_trace_integrates_to_busy_time():
    algo = ring_allgather(6, M, build("uniring:6", alpha=ALPHA, bandwidth=BW))
    result = simulate(algo)
    edges, fraction = result.utilisation_trace(50)
    integral = (fraction * (edges[1] - edges[0])).sum() * len(result.link_busy)
    assert integral == pytest.approx(result.link_busy.sum())
    assert result.link_utilisation().max() <= 1 + 1e-9


def test_options_are_checked():
    algo = ring_allgather(3, M)
    with pytest.raises(SimulationError, match="unknown link model"):
        simulate(algo, link_model="wormhole")


def test_unroutable_transfer_names_it():
    topo = Topology.create(3, [(0, 1, 0.0, 1e9), (1, 0, 0.0, 1e9)])
    coll = custom_collective(3, [[0]], [[2]])
    algo = Algorithm.from_steps(topo, coll, M, [(0, 0, 2, "copy", ())])
    with pytest.raises(SimulationError, match="transfer 0: no path"):
        simulate(algo)
