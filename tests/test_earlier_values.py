"""Transfers that read an earlier value of their source (``Transfer.read``, ``workbench.algorithm/4``),
and the one-pass All-Reduce rules written with them (``oneshot``, ``rd``)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.bounds import problem_bounds
from workbench.checking.simulate import simulate
from workbench.checking.verify import InvalidAlgorithm, verify
from workbench.kit.schedule import order_by_start
from workbench.model.algorithm import Algorithm, Transfer, load_algorithm
from workbench.model.algorithm_format import FORMAT, FORMAT_4, AlgorithmFormatError, read_document
from workbench.model.collective import make_collective
from workbench.model.transfer import READ_INPUT
from workbench.plugin import call
from workbench.plugin.registry import Problem, get_formulation
from workbench.topology import build


def _oneshot_by_hand(spec: str = "switch:8", read: int | None = READ_INPUT) -> Algorithm:
    topology = build(spec)
    n = topology.num_npus
    collective = make_collective("allreduce", n)
    sends = [(u, (u + r) % n) for r in range(1, n) for u in range(n)]
    transfers = [Transfer(i, tuple(range(n)), u, v, "reduce", (), read=read) for i, (u, v) in enumerate(sends)]
    return Algorithm(topology, collective, collective.chunk_bytes(4096), transfers)


def _synth(name: str, spec: str, size: float = 4096) -> Algorithm:
    topology = build(spec)
    collective = make_collective("allreduce", topology.num_npus)
    result = call.synthesize(get_formulation(name), Problem(topology, collective, size), time_limit=30, seed=0)
    assert result.status == "feasible", result.message
    return result.algorithms[0]


def test_reading_the_inputs_makes_a_one_shot_valid_and_without_them_it_double_counts():
    verify(_oneshot_by_hand())
    with pytest.raises(InvalidAlgorithm, match="double counts the contributions of ranks"):
        verify(_oneshot_by_hand(read=None))


@pytest.mark.parametrize("spec, within, best", [("switch:8", 1.1, 1.0e-6), ("ring:8", 1.2, None)])
def test_oneshot_at_4kb_is_near_the_best_bound(spec, within, best):
    algorithm = _synth("oneshot", spec)
    verify(algorithm)
    time = simulate(algorithm).collective_time
    bound = problem_bounds(algorithm.topology, algorithm.collective, 4096).best
    assert best is None or bound == pytest.approx(best, rel=1e-9)
    assert time <= within * bound


def test_a_relay_forwards_what_it_was_brought_and_adds_it_too():
    algorithm = _synth("oneshot", "ring:8")
    relays = [t for t in algorithm.transfers if t.read is not None and t.read <= -2]
    assert relays and all(algorithm.transfers[-2 - t.read].dst == t.src for t in relays)
    assert {t.op for t in algorithm.transfers} == {"reduce"}
    assert len(algorithm.transfers) == 8 * 7  # every input reaches every other rank once


@settings(max_examples=12, deadline=None)
@given(n=st.integers(2, 12), spec=st.sampled_from(["fc", "ring", "switch"]))
def test_recursive_doubling_is_valid_for_every_rank_count(n, spec):
    algorithm = _synth("rd", f"{spec}:{n}")
    verify(algorithm)
    p = 1 << (n.bit_length() - 1)
    assert algorithm.meta["steps"] == (p.bit_length() - 1) + (2 if n > p else 0)


def test_a_snapshot_read_before_its_transfer_arrives_is_a_race():
    algorithm = _synth("rd", "fc:4")
    stripped = [Transfer(t.id, t.chunks, t.src, t.dst, t.op, (), read=t.read) for t in algorithm.transfers]
    with pytest.raises(InvalidAlgorithm, match="before that transfer has arrived; add the missing dependency"):
        verify(Algorithm(algorithm.topology, algorithm.collective, algorithm.chunk_bytes, stripped))


@pytest.mark.parametrize("change, why", [
    (lambda t: Transfer(t.id, t.chunks, t.src, t.dst, t.op, t.deps, read=t.id), "is not an earlier transfer"),
    (lambda t: Transfer(t.id, t.chunks, t.src, t.dst, t.op, t.deps, read=0), "which delivered chunks"),
])
def test_a_read_names_an_earlier_transfer_into_its_source(change, why):
    algorithm = _synth("rd", "fc:4")
    transfers = list(algorithm.transfers)
    last = transfers[-1]
    transfers[-1] = change(last)
    with pytest.raises(InvalidAlgorithm, match=why):
        verify(Algorithm(algorithm.topology, algorithm.collective, algorithm.chunk_bytes, transfers), timeline=False)


def test_a_switch_keeps_no_earlier_values():
    topology = build("switch:2")
    collective = make_collective("allreduce", 2)
    transfers = [Transfer(0, (0, 1), 0, 2, "copy"), Transfer(1, (0, 1), 2, 1, "reduce", (0,), read=READ_INPUT)]
    with pytest.raises(InvalidAlgorithm, match="switch 2 keeps no earlier values"):
        verify(Algorithm(topology, collective, 1e3, transfers), timeline=False)


def test_the_file_is_version_4_only_where_a_transfer_reads_an_earlier_value(tmp_path):
    algorithm = _synth("rd", "fc:6")
    path = tmp_path / "rd.json"
    algorithm.save(path)
    data = json.loads(path.read_text())
    assert data["format"] == FORMAT_4
    assert {t.get("read") for t in data["transfers"]} >= {"input"}
    again = load_algorithm(path)
    assert [(t.read, t.deps) for t in again.transfers] == [(t.read, t.deps) for t in algorithm.transfers]
    verify(again)
    data["format"] = FORMAT
    with pytest.raises(AlgorithmFormatError, match="reads an earlier value, which needs format"):
        read_document(data, "rd.json")
    ring = _synth("ring", "fc:6", 1e6)
    ring.save(tmp_path / "ring.json")
    assert json.loads((tmp_path / "ring.json").read_text())["format"] == FORMAT


def test_relisting_renumbers_the_snapshots_it_reads():
    algorithm = _synth("rd", "ring:6")
    count = len(algorithm.transfers)
    copy = Algorithm(algorithm.topology, algorithm.collective, algorithm.chunk_bytes,
                     [Transfer(t.id, t.chunks, t.src, t.dst, t.op, t.deps, read=t.read) for t in algorithm.transfers])
    relisted = order_by_start(copy, [float(count - i) for i in range(count)])  # latest first where deps allow
    assert [t.src for t in relisted.transfers] != [t.src for t in algorithm.transfers]
    for t in relisted.transfers:
        if t.read is not None and t.read >= 0:
            assert relisted.transfers[t.read].dst == t.src and t.read in t.deps
    verify(relisted)


def test_a_periodic_schedule_cannot_read_earlier_values(tmp_path):
    from workbench.model.periodic import repeated

    algorithm = _synth("rd", "fc:4")
    periodic = repeated(algorithm, 2)
    with pytest.raises(InvalidAlgorithm, match="a periodic schedule cannot read earlier values"):
        verify(periodic)
    data = json.loads(json.dumps(periodic.to_dict()))
    assert data["format"] == FORMAT_4 and "period" in data
    with pytest.raises(AlgorithmFormatError, match="which a periodic schedule cannot do"):
        read_document(data, "p.json")


def test_oneshot_refuses_a_fabric_too_large_for_one_pass():
    topology = build("rails:64x8")
    collective = make_collective("allreduce", topology.num_npus)
    result = call.synthesize(get_formulation("oneshot"), Problem(topology, collective, 4096), time_limit=30, seed=0)
    assert result.status == "error" and "chunk moves" in result.message and result.message.startswith("oneshot: ")


def test_writes_that_arrive_in_another_order_than_listed_are_a_race():
    """Every read matches file order, but a stale copy listed first arrives last on the timeline."""
    topology = build("fc:3")
    collective = make_collective("allreduce", 3)
    chunks = tuple(range(collective.num_chunks))
    transfers = [Transfer(i, chunks, u, (u + r) % 3, "reduce", (), read=READ_INPUT)
                 for i, (r, u) in enumerate((r, u) for r in (1, 2) for u in range(3))]
    last_into = {t.dst: t.id for t in transfers}
    count = len(transfers)
    transfers.append(Transfer(count, chunks, 0, 1, "copy", tuple(range(count))))  # the full sum onto the full sum
    transfers.append(Transfer(count + 1, chunks, 0, 2, "copy", (count,), read=READ_INPUT))  # rank 0's input alone
    transfers.append(Transfer(count + 2, chunks, 1, 2, "copy", (last_into[1],), read=last_into[1]))  # the sum
    algorithm = Algorithm(topology, collective, collective.chunk_bytes(4096), transfers)
    verify(algorithm, timeline=False)  # in file order the sum is written last
    with pytest.raises(InvalidAlgorithm, match="writes into it arrived in another order than listed"):
        verify(algorithm)


def test_concat_refuses_a_second_phase_that_reads_its_input():
    first = _synth("rd", "fc:4")
    with pytest.raises(ValueError, match="the second phase reads its input"):
        first.concat(_synth("oneshot", "fc:4"), first.collective)
