"""Transfers that name their route through switches (``Transfer.via``, ``workbench.algorithm/5``):
simulated over that route, checked by the verifier, written and read back."""

from __future__ import annotations

import json

import pytest

from workbench.checking.simulate import simulate
from workbench.checking.verify import InvalidAlgorithm, verify
from workbench.model.algorithm import Algorithm, Transfer, load_algorithm
from workbench.model.algorithm_format import FORMAT_5, AlgorithmFormatError, read_document
from workbench.model.collective import make_collective
from workbench.topology import Link, Topology

ALPHA, BANDWIDTH = 1e-6, 50e9
LEAF = {0: 4, 1: 4, 2: 5, 3: 5}  # NPUs 0, 1 under leaf 4; 2, 3 under leaf 5; spines 6 and 7


def _two_spines() -> Topology:
    pairs = list(LEAF.items()) + [(leaf, spine) for leaf in (4, 5) for spine in (6, 7)]
    links = [link for u, v in pairs for link in (Link(u, v, ALPHA, BANDWIDTH), Link(v, u, ALPHA, BANDWIDTH))]
    return Topology.create(4, links, 4, "two spines")


def _gather(spread: bool, first_via=None) -> Algorithm:
    """All-Gather on four NPUs, every rank straight to every other; across the leaves rank r's
    messages take spine 6 + r % 2 when ``spread`` (else the breadth-first route, all on spine 6)."""
    topology = _two_spines()
    collective = make_collective("allgather", 4)
    transfers = []
    for src in range(4):
        for dst in range(4):
            if src != dst:
                across = LEAF[src] != LEAF[dst]
                via = (LEAF[src], 6 + src % 2, LEAF[dst]) if spread and across else None
                transfers.append(Transfer(len(transfers), (src,), src, dst, via=via))
    if first_via is not None:
        transfers[0].via = first_via
    return Algorithm(topology, collective, 1e6, transfers)


def test_two_spines_carry_two_leaves_traffic_at_once():
    """NPU 0 sends 1 MB to NPU 2 and NPU 1 to NPU 3. The breadth-first route takes both over spine 6,
    whose link from leaf 4 carries them one after the other (4 alphas + 2 x 20 us); named, each
    crosses its own spine (4 alphas + 20 us)."""
    topology = _two_spines()
    collective = make_collective("allgather", 4)

    def time(vias) -> float:
        transfers = [Transfer(0, (0,), 0, 2, via=vias[0]), Transfer(1, (1,), 1, 3, via=vias[1])]
        return simulate(Algorithm(topology, collective, 1e6, transfers)).collective_time

    assert time([None, None]) == pytest.approx(4 * ALPHA + 2e6 / BANDWIDTH, rel=1e-9)
    assert time([(4, 6, 5), (4, 7, 5)]) == pytest.approx(4 * ALPHA + 1e6 / BANDWIDTH, rel=1e-9)
    assert simulate(_gather(True)).collective_time < simulate(_gather(False)).collective_time


def test_a_named_route_round_trips_as_format_5(tmp_path):
    algorithm = _gather(True)
    verify(algorithm)
    path = tmp_path / "routed.json"
    algorithm.save(path)
    data = json.loads(path.read_text())
    assert data["format"] == FORMAT_5 and data["transfers"][1]["via"] == [4, 6, 5]
    back = load_algorithm(path)
    assert [t.via for t in back.transfers] == [t.via for t in algorithm.transfers]
    assert simulate(back).collective_time == simulate(algorithm).collective_time
    data["format"] = "workbench.algorithm/4"
    with pytest.raises(AlgorithmFormatError, match="names its route .* needs format"):
        read_document(data, "r.json")


@pytest.mark.parametrize("via, message", [((4, 2, 5), "node 2, which is not a switch"),
                                          ((4, 5), "from node 4 to node 5, which no link joins"),
                                          ((6, 4), "from node 0 to node 6, which no link joins")])
def test_a_route_that_is_not_a_walk_through_switches_is_refused(via, message):
    with pytest.raises(InvalidAlgorithm, match=f"transfer 0: its route .*{message}"):
        verify(_gather(False, first_via=via))


@pytest.mark.parametrize("value", [[], "2,4,3", [2, -1], [2.0]])
def test_a_malformed_via_is_named(value):
    document = _gather(True).to_dict()
    document["transfers"][0]["via"] = value
    with pytest.raises(AlgorithmFormatError, match=r"transfers\[0\]\.via: expected a non-empty list of switch ids"):
        read_document(json.loads(json.dumps(document)), "r.json")


@pytest.mark.parametrize("spread", [False, True])
def test_both_engines_time_and_check_named_routes_alike(spread):
    algorithm = _gather(spread)
    python, compiled = simulate(algorithm, engine="python"), simulate(algorithm, engine="compiled")
    assert compiled.collective_time == python.collective_time
    verify(algorithm, engine="compiled")
    bad = _gather(spread, first_via=(4, 5))
    messages = []
    for engine in ("python", "compiled"):
        with pytest.raises(InvalidAlgorithm) as caught:
            verify(bad, engine=engine)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_reversal_takes_the_same_switches_the_other_way_and_concatenation_keeps_them():
    gather = _gather(True)
    scatter = gather.reverse()
    verify(scatter)
    assert [t.via for t in scatter.transfers] == [None if t.via is None else tuple(reversed(t.via))
                                                  for t in reversed(gather.transfers)]
    both = scatter.concat(gather)
    verify(both)
    assert [t.via for t in both.transfers] == [t.via for t in scatter.transfers + gather.transfers]
