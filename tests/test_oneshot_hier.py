"""``oneshot-hier``: a one-shot inside each box, then the box sums across boxes (formulations/oneshot_hier.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from formulations.oneshot_hier import OneShotHier, find_boxes
from workbench.bounds import problem_bounds
from workbench.checking.simulate import simulate
from workbench.checking.verify import verify
from workbench.model.collective import make_collective
from workbench.model.transfer import READ_INPUT, read_target, reads_carried
from workbench.plugin import call
from workbench.plugin.registry import Problem, get_formulation
from workbench.topology import Link, Topology, build, load_topology

US, GB = 1e-6, 1e9
ROOT = Path(__file__).resolve().parents[1]


def _problem(topology: Topology, size: float = 4e3) -> Problem:
    return Problem(topology, make_collective("allreduce", topology.num_npus), size)


def _synth(topology: Topology, size: float = 4e3, **params):
    result = call.synthesize(OneShotHier(), _problem(topology, size), time_limit=30, seed=0, **params)
    assert result.status == "feasible", result.message
    return result.algorithms[0]


def _leaf_spine() -> Topology:
    """The leaf-spine fabric of the honesty sweep's second draw (``python -m benchmarks.honesty --seed 1``)."""
    return load_topology(ROOT / "results" / "honesty_seed1" / "fabrics" / "leafspine_4x4x2.yaml")


def _two_boxes(box_alpha: float = 0.5 * US, box_bw: float = 100 * GB, rail_alpha: float = 2 * US,
               rail_bw: float = 10 * GB) -> Topology:
    """Boxes {0, 1} and {2, 3} (one fast link each way) joined rank by rank (0-2, 1-3) by slow links."""
    links = []
    for u, v, alpha, bw in ((0, 1, box_alpha, box_bw), (2, 3, box_alpha, box_bw),
                            (0, 2, rail_alpha, rail_bw), (1, 3, rail_alpha, rail_bw)):
        links += [Link(u, v, alpha, bw), Link(v, u, alpha, bw)]
    return Topology.create(4, links, 0, "two-boxes")


@pytest.mark.parametrize("spec, boxes", [("ring:8", 1), ("dgx1", 1), ("ndv2:2", 2), ("rails:4x8", 4),
                                         ("leafspine:4x4x2", 4), ("honesty-leafspine", 4)])
def test_it_verifies_and_its_claim_is_its_simulated_time(spec, boxes):
    topology = _leaf_spine() if spec == "honesty-leafspine" else build(spec)
    for size in (4e3, 64e3):
        algorithm = _synth(topology, size)
        verify(algorithm)
        assert algorithm.meta["boxes"] == boxes
        assert algorithm.meta["claimed_time"] == simulate(algorithm).collective_time


@pytest.mark.parametrize("spec", ["ring:8", "dgx1", "switch:8"])
def test_one_box_is_the_flat_one_shot(spec):
    topology = build(spec)
    flat = call.synthesize(get_formulation("oneshot"), _problem(topology), time_limit=30, seed=0).algorithms[0]
    algorithm = _synth(topology)
    assert algorithm.meta["across"] == "none" and find_boxes(topology, topology.num_npus).source == "one box"
    assert algorithm.meta["claimed_time"] == pytest.approx(flat.meta["claimed_time"], rel=1e-12)


def test_the_two_box_oracle_by_hand():
    """docs/cost-model.md on direct links (no contention): whole = a1 + M/B1, then a2 + M/B2 (each
    rank sends its box's sum over its rail); split = a1 + M/2B1 (half to each), a2 + M/2B2 (that
    half over the rail), a1 + M/2B1 (the finished half back)."""
    a1, b1, a2, b2 = 0.5 * US, 100 * GB, 2 * US, 10 * GB
    topology = _two_boxes(a1, b1, a2, b2)
    for size, whole, split in ((4e3, 2.94 * US, 3.24 * US), (40e3, 6.9 * US, 5.4 * US)):
        assert whole == pytest.approx(a1 + size / b1 + a2 + size / b2, rel=1e-12)
        assert split == pytest.approx(2 * (a1 + size / 2 / b1) + a2 + size / 2 / b2, rel=1e-12)
        assert simulate(_synth(topology, size, across="whole")).collective_time == pytest.approx(whole, rel=1e-12)
        assert simulate(_synth(topology, size, across="split")).collective_time == pytest.approx(split, rel=1e-12)
        chosen = _synth(topology, size)
        assert chosen.meta["across"] == ("whole" if whole < split else "split")
        assert chosen.meta["claimed_time"] == pytest.approx(min(whole, split), rel=1e-12)


def test_a_box_sum_is_sent_from_the_value_after_the_last_box_receipt_and_never_sent_back():
    algorithm = _synth(build("rails:4x8"), across="whole")
    n, per_box, count = 32, 8, 4
    assert len(algorithm.transfers) == n * (per_box - 1) + n * (count - 1)
    crossing = [t for t in algorithm.transfers if t.src // per_box != t.dst // per_box]
    assert all(t.src % per_box == t.dst % per_box for t in crossing)  # along rail i
    for t in crossing:
        k = algorithm.transfers[t.read]
        assert not reads_carried(t.read) and t.read != READ_INPUT and k.dst == t.src
        assert k.src // per_box == t.src // per_box  # a receipt inside the box
        later_inside = [u for u in algorithm.transfers if u.dst == t.src and u.id > k.id and u.src // per_box == k.src // per_box]
        assert not later_inside
    relays = [t for t in algorithm.transfers if reads_carried(t.read)]
    assert all(algorithm.transfers[read_target(t.read)].dst == t.src for t in relays)


def test_the_one_cable_of_ndv2_is_crossed_once_each_way_and_relayed_inside_the_box():
    algorithm = _synth(build("ndv2:2"), across="whole")
    crossing = [(t.src, t.dst) for t in algorithm.transfers if (t.src < 8) != (t.dst < 8)]
    assert sorted(crossing) == [(0, 9), (8, 1)]


def test_split_refuses_unequal_boxes():
    links = [Link(u, v, 0.5 * US, 100 * GB) for u in range(3) for v in range(3) if u != v]
    links += [Link(3, 4, 0.5 * US, 100 * GB), Link(4, 3, 0.5 * US, 100 * GB),
              Link(0, 3, 2 * US, 10 * GB), Link(3, 0, 2 * US, 10 * GB)]
    topology = Topology.create(5, links, 0, "three-and-two")
    assert [len(box) for box in find_boxes(topology, 5).boxes] == [3, 2]
    verify(_synth(topology))  # auto: the whole variant
    result = call.synthesize(OneShotHier(), _problem(topology), time_limit=30, seed=0, across="split")
    assert result.status == "error" and result.message.startswith("oneshot-hier: across=split needs boxes of equal size")


def test_a_receipt_that_arrives_after_the_last_listed_one_makes_it_wait():
    """On torus:4x4 the split variant's routed Reduce-Scatter parts arrive out of listing order: the
    last listed waits for them, so the value after it is the whole box's part (and it verifies)."""
    algorithm = _synth(build("torus:4x4"), across="split")
    assert algorithm.meta["snapshot_waits"] > 0
    verify(algorithm)


@st.composite
def _box_fabrics(draw) -> Topology:
    """B boxes of G NPUs, each box a path of fast links plus drawn chords (bandwidths and alphas
    drawn per link), NPU i of each box linked to NPU i of the next box by a slower link."""
    count, per_box = draw(st.integers(2, 4)), draw(st.integers(2, 4))
    pairs: dict[tuple[int, int], tuple[float, float]] = {}
    for b in range(count):
        base = b * per_box
        for i in range(per_box):
            for j in range(i + 1, per_box):
                if j == i + 1 or draw(st.booleans()):
                    pairs[(base + i, base + j)] = (draw(st.sampled_from([0.3, 0.7])) * US,
                                                   draw(st.sampled_from([50, 100])) * GB)
            nxt = ((b + 1) % count) * per_box + i
            if (min(base + i, nxt), max(base + i, nxt)) not in pairs:
                pairs[(min(base + i, nxt), max(base + i, nxt))] = (draw(st.sampled_from([1.3, 2.6])) * US,
                                                                   draw(st.sampled_from([10, 25])) * GB)
    links = [Link(u, v, a, bw) for (x, y), (a, bw) in pairs.items() for u, v in ((x, y), (y, x))]
    return Topology.create(count * per_box, links, 0, f"drawn-boxes:{count}x{per_box}")


_BUILT = st.builds(lambda spec, a, b: build(spec.format(a=a, b=b)),
                   st.sampled_from(["rails:{a}x{b}", "leafspine:{a}x{b}x2", "torus:{a}x{b}", "fc:{a}", "ring:{a}",
                                    "ndv2:{a}"]), st.integers(2, 4), st.integers(2, 4))


@settings(max_examples=12, deadline=None)
@given(topology=st.one_of(_BUILT, _box_fabrics()), size=st.sampled_from([1e3, 4e3, 64e3, 1e6]),
       across=st.sampled_from(["auto", "whole", "split"]))
def test_every_variant_verifies_and_no_bound_is_above_it(topology, size, across):
    assume(topology.num_npus <= 16)
    layout = find_boxes(topology, topology.num_npus)
    assume(across != "split" or (len(layout.boxes) > 1 and layout.equal))
    algorithm = _synth(topology, size, across=across)
    verify(algorithm)
    time = simulate(algorithm).collective_time
    assert algorithm.meta["claimed_time"] == time
    assert problem_bounds(topology, algorithm.collective, size).best <= time * (1 + 1e-9)


@pytest.mark.parametrize("spec", ["ndv2:2", "rails:2x4"])
def test_it_exports_to_msccl_and_comes_back_at_the_same_time(spec):
    from workbench.msccl import export_xml, import_xml, interpret

    topology = build(spec)
    algorithm = _synth(topology, 1e6)
    text = export_xml(algorithm, fuse=False)
    assert interpret(text, schedules=1)["aliasings"] == ["out of place", "in place"]
    imported = import_xml(text, topology, 1e6)
    verify(imported)
    assert simulate(imported).collective_time == pytest.approx(simulate(algorithm).collective_time, rel=1e-9)
