"""two-level: verified and simulated on rail and leaf-spine fabrics, the same with or without recorded
dimensions, an oracle timed by hand from the cost model, and a property test over drawn rail fabrics."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from formulations.two_level import TwoLevel
from formulations.two_level.cost import pipeline_time, stage_costs
from formulations.two_level.exchange import allowed, pattern
from formulations.two_level.layout import find_layout
from workbench.bounds import lower_bounds
from workbench.checking.simulate import simulate
from workbench.checking.verify import verify
from workbench.model.collective import make_collective
from workbench.plugin import call
from workbench.plugin.registry import Problem
from workbench.topology import build, topology_from_dict

KINDS = ("allreduce", "reducescatter", "allgather")


def synth(topology, kind: str, size: float, **params):
    """The formulation's algorithm for ``kind`` of ``size`` bytes on ``topology``, verified, and its time."""
    problem = Problem(topology, make_collective(kind, topology.num_npus, 1), size)
    result = call.synthesize(TwoLevel(), problem, time_limit=60, seed=0, **params)
    assert result.status == "feasible", result.message
    algorithm = result.algorithms[0]
    verify(algorithm)
    return algorithm, simulate(algorithm).collective_time


def bare(topology):
    """The same fabric as a topology file would give it: links only, no recorded dimensions."""
    return topology_from_dict(topology.to_dict())


@pytest.mark.parametrize("spec", ["rails:4x8", "rails:8x4", "rails:8x4,leaf=2", "leafspine:4x4x2"])
@pytest.mark.parametrize("kind", KINDS)
def test_valid_and_near_the_bound_with_or_without_dimensions(spec, kind):
    topology = build(spec)
    algorithm, time = synth(topology, kind, 2**28, max_transfers=40_000)
    again, time_again = synth(bare(topology), kind, 2**28, max_transfers=40_000)
    assert time_again == time
    assert [(t.src, t.dst, t.chunks, t.deps, t.lag) for t in again.transfers] == \
           [(t.src, t.dst, t.chunks, t.deps, t.lag) for t in algorithm.transfers]
    assert algorithm.meta["claimed_time"] == time
    bound = lower_bounds(topology, algorithm.collective, algorithm.chunk_bytes, lp=False).best
    assert bound <= time <= bound / 0.9  # 16 to 128 pieces: the fill and drain cost a few percent


def test_the_layout_is_found_from_recorded_dims_or_from_the_links():
    for spec, source in (("rails:8x4,leaf=2", "recorded"), ("leafspine:4x4x2", "recorded")):
        topology = build(spec)
        found, from_links = find_layout(topology, topology.num_npus), find_layout(bare(topology), topology.num_npus)
        assert found.source == source and from_links.source == "links"
        assert (found.boxes, found.groups) == (from_links.boxes, from_links.groups)
    layout = find_layout(build("rails:8x4,leaf=2"), 32)
    assert (layout.num_boxes, layout.per_box, layout.num_groups, layout.per_group) == (8, 4, 4, 2)


@pytest.mark.parametrize("spec", ["ring:8", "torus:4x4", "switch:8"])
def test_a_fabric_without_boxes_is_refused_in_one_line(spec):
    topology = build(spec)
    problem = Problem(topology, make_collective("allreduce", topology.num_npus, 1), 1e6)
    result = call.synthesize(TwoLevel(), problem, time_limit=10, seed=0)
    assert result.status == "error" and result.message.startswith("two-level") and "\n" not in result.message


def test_halving_doubling_is_refused_where_a_level_is_not_a_power_of_two():
    topology = build("rails:3x4")
    problem = Problem(topology, make_collective("allreduce", 12, 1), 1e6)
    result = call.synthesize(TwoLevel(), problem, time_limit=10, seed=0, rail="halving-doubling")
    assert result.status == "error" and "power of two" in result.message


def test_oracle_one_piece_on_two_boxes_of_two():
    """rails:2x2, one piece, direct exchanges: each stage is one message a rank, contention-free, one
    after another: box-rs (B = 2 chunks over the scale-up switch), rail-rs and rail-ag (one chunk
    through the rail's leaf), box-ag (2 chunks). Each costs overhead + bytes / bandwidth + alpha."""
    alpha, bandwidth, overhead = [1e-6, 2e-6], [100e9, 10e9], [0.5e-6, 3e-6]
    topology = build("rails:2x2", alpha=alpha, bandwidth=bandwidth, overhead=overhead)
    size = 4e6
    chunk = size / 4  # one chunk per rank
    box = overhead[0] + 2 * chunk / bandwidth[0] + alpha[0]
    rail = overhead[1] + chunk / bandwidth[1] + alpha[1]
    algorithm, time = synth(topology, "allreduce", size, pieces=1, box="direct", rail="direct")
    assert time == pytest.approx(2 * box + 2 * rail, rel=1e-12)
    assert algorithm.meta["estimated_time"] == pytest.approx(time, rel=1e-12)  # the cost model is exact here
    _, time = synth(topology, "reducescatter", size, pieces=1)
    assert time == pytest.approx(box + rail, rel=1e-12)


def test_the_estimate_falls_with_pieces_without_overhead_and_has_a_minimum_with_one():
    plain = build("rails:8x8")
    layout = find_layout(plain, 64)
    stages = stage_costs(plain, layout, "allreduce", {"box": "direct", "rail": "direct"})
    times = [pipeline_time(stages, 2**30 / 64, p) for p in (1, 4, 16, 64)]
    assert times == sorted(times, reverse=True)
    costly = build("rails:8x8", overhead=[2.8e-6, 3e-6])
    stages = stage_costs(costly, layout, "allreduce", {"box": "direct", "rail": "direct"})
    times = [pipeline_time(stages, 16e6 / 64, p) for p in (1, 4, 16, 64)]
    assert min(times) < times[-1]


def test_the_choice_by_size_is_recorded():
    """The exchanges and pieces are the cost model's, in ``meta``. With NCCL's per-message overheads,
    16 MB takes halving-doubling inside the boxes (log2 G messages, not G - 1) and fewer pieces than
    1 GiB, and is faster than direct exchanges pinned."""
    costly = build("rails:4x8", overhead=[2.8e-6, 3e-6])
    small, time = synth(costly, "allreduce", 16e6, max_transfers=40_000)
    large, _ = synth(costly, "allreduce", 2**30, max_transfers=40_000)
    assert small.meta["chosen_by"] == {"box": "cost model", "rail": "cost model", "pieces": "cost model"}
    assert small.meta["exchanges"]["box"] == "halving-doubling" and small.meta["pieces"] < large.meta["pieces"]
    _, pinned = synth(costly, "allreduce", 16e6, max_transfers=40_000, box="direct", rail="direct")
    assert time < pinned
    plain, _ = synth(build("rails:4x8"), "allreduce", 16e6, box="direct", pieces=4)
    assert plain.meta["chosen_by"] == {"box": "given", "rail": "cost model", "pieces": "given"}


def test_a_period_times_as_its_expansion():
    topology = build("rails:8x4,leaf=2")
    periodic, time = synth(topology, "allreduce", 2**26, pieces=4, periodic="true")
    written, time_written = synth(topology, "allreduce", 2**26, pieces=4, periodic="false")
    assert periodic.period is not None and periodic.period.repeat == 4 and written.period is None
    assert time == time_written and periodic.total_transfers == len(written.transfers)


def test_cross_group_messages_name_their_spines_and_never_share_one_partial_sum():
    """rails:8x4,leaf=2: four leaf groups; every cross message is stored at its leaves and a spine
    (four hops), and at every spine the partial sums of one chunk of one piece come one at a time."""
    topology = build("rails:8x4,leaf=2")
    algorithm, _ = synth(topology, "reducescatter", 2**24, pieces=1)
    spines = set(range(topology.num_npus + 8 + 16, topology.num_nodes))
    through = [t for t in algorithm.transfers if t.dst in spines]
    assert through and {t.op for t in through} == {"copy"}
    used = {t.dst for t in through}
    assert len(used) > 1  # spread, not all on the lowest-id spine


@pytest.mark.parametrize("q", [2, 4, 8])
def test_exchange_patterns_deliver_every_share_once(q):
    for how in allowed(q):
        held = {m: {m} for m in range(q)}  # All-Gather: every member ends with every share
        for level in pattern(q, False, how):
            for sends in level:
                arrived = [(b, set(shares)) for a, b, shares in sends if set(shares) <= held[a]]
                assert len(arrived) == len(sends)
                for b, shares in arrived:
                    assert not shares & held[b]
                    held[b] |= shares
        assert all(held[m] == set(range(q)) for m in range(q))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(boxes=st.integers(2, 6), per_box=st.integers(2, 4), per_leaf=st.integers(1, 4),
       kind=st.sampled_from(KINDS), pieces=st.integers(1, 3),
       box=st.sampled_from(["auto", "direct", "halving-doubling"]),
       rail=st.sampled_from(["auto", "direct", "halving-doubling"]))
def test_property_every_drawn_rail_fabric_gets_a_valid_schedule_within_the_bounds(
        boxes, per_box, per_leaf, kind, pieces, box, rail):
    topology = build(f"rails:{boxes}x{per_box},leaf={per_leaf}")
    layout = find_layout(topology, topology.num_npus)
    assume(box in ("auto", *allowed(layout.per_box)) and rail in ("auto", *allowed(layout.per_group)))
    algorithm, time = synth(topology, kind, 1e6 * topology.num_npus, pieces=pieces, box=box, rail=rail)
    assert algorithm.meta["layout"]["groups"] * algorithm.meta["layout"]["per_group"] == boxes
    assert lower_bounds(topology, algorithm.collective, algorithm.chunk_bytes, lp=False).best <= time * (1 + 1e-9)
