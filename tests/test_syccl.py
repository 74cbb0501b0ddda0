"""SyCCL: sketch counts per pruning rule, the group sub-model, the stitched collectives and their quality."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from workbench.plugin import call
from formulations.syccl import Syccl
from formulations.syccl.balance import chunk_split
from formulations.syccl.sketches import explore
from formulations.syccl.submodel import broadcast_pattern
from formulations.syccl.synthesis import tier_bandwidth
from workbench.bounds import problem_bounds
from workbench.checking.simulate import simulate
from workbench.checking.verify import verify
from workbench.kit.decomposition import decompose
from workbench.model.collective import make_collective
from workbench.plugin.registry import Problem
from workbench.topology import build


def _solve(spec: str, kind: str, size: float, **params):
    problem = Problem(build(spec), make_collective(kind, build(spec).num_npus, 1), size)
    return problem, call.synthesize(Syccl(), problem, time_limit=120, seed=0, **params)


def test_sketch_counts_per_rule_on_a_small_rails_fabric():
    """rails:2x4: every count follows from the rules, worked out here by hand."""
    found = decompose(build("rails:2x4"))
    exploration = explore(found, tier_bandwidth(found), max_stages=3, prune_ratio=3.0)
    counts = exploration.counts
    assert counts["stage_sequences"] == 4 + 4 ** 2 + 4 ** 3  # stages: {box, rail} x {all, one}
    # destination subsets per group stage: 2^(4-1)-1 = 7 in a box, 2^(2-1)-1 = 1 on a rail;
    # over all sequences each stage kind appears (1 + 2*4 + 3*16) = 57 times
    assert counts["destination_sets"] == 57 * 2 * (7 + 1)
    assert counts["pruned_symmetry"] == 57 * 2 * (7 - 2)  # a rail's lone subset is not pruned
    assert counts["complete"] + counts["incomplete"] + counts["pruned_progress"] == 84
    assert counts["kept"] + counts["pruned_bandwidth"] == counts["complete"]
    names = [s.name for s in exploration.kept]
    assert names[0] == "rail-all>box-all"  # rails first: the NICs carry a chunk once per box
    assert "box-all>rail-all" not in names  # every box GPU on its rail: 4x the NIC bytes, pruned by rule 3
    assert exploration.kept[0].sends == {"box": 2 * 3, "rail": 1}


def test_meta_records_what_the_decomposition_did():
    problem, result = _solve("rails:4x8", "allgather", 1 << 20, depths="1,2")
    assert result.status == "feasible"
    meta = result.algorithms[0].meta["syccl"]
    assert meta["decomposition"]["dimensions"] == [
        {"name": "box", "groups": 4, "group_size": 8, "classes": 1},
        {"name": "rail", "groups": 8, "group_size": 4, "classes": 1}]
    assert meta["sketches"]["kept"] == 2 and meta["sketches"]["pruned_bandwidth"] == 2
    # one model per class and piece size (two depths), reused by the other 3 boxes and 7 rails
    assert meta["sub_models"]["solved"] == 4
    assert meta["sub_models"]["reused"] >= 2 * (3 + 7)
    assert meta["candidates_simulated"] == len(meta["tried"]) >= 4
    assert meta["chosen"]["time"] == min(t["time"] for t in meta["tried"])


@pytest.mark.parametrize("kind", ["allgather", "reducescatter", "allreduce", "alltoall"])
@pytest.mark.parametrize("size", [64e3, 1 << 30])
def test_every_collective_verifies_and_its_claim_is_the_simulated_time(kind, size):
    problem, result = _solve("rails:2x4", kind, size, depths="1,4")
    algorithm = result.algorithms[0]
    verify(algorithm)
    assert algorithm.collective.kind == kind
    assert simulate(algorithm).collective_time == pytest.approx(algorithm.meta["claimed_time"], rel=1e-9)


@pytest.mark.parametrize("kind, depths, share", [
    ("allgather", "32", 0.95),  # the throughput bound T*
    ("alltoall", "1", 0.90),  # the max-concurrent-flow LP bound
])
def test_32_gpus_at_1_gib_come_near_their_bound(kind, depths, share):
    problem, result = _solve("rails:4x8", kind, 1 << 30, depths=depths, max_sketches=1)
    algorithm = result.algorithms[0]
    verify(algorithm)
    bound = problem_bounds(problem.topology, problem.collective, problem.size_bytes).best
    assert bound / simulate(algorithm).collective_time >= share


@given(boxes=st.integers(2, 5), gpus=st.integers(2, 6), piece=st.sampled_from([1e3, 64e3, 4e6]),
       dimension=st.sampled_from(["box", "rail"]))
@settings(max_examples=12, deadline=None)
def test_the_group_broadcast_model_reaches_everyone_once_from_what_has_arrived(boxes, gpus, piece, dimension):
    found = decompose(build(f"rails:{boxes}x{gpus}"))
    assume(found is not None and any(d.name == dimension for d in found.dimensions))
    fabric = found.dimension(dimension).fabrics[0]
    pattern = broadcast_pattern(fabric, piece, time_limit=20, max_columns=20_000)
    assert pattern.status in ("optimal", "feasible", "direct")
    g = fabric.size
    assert sorted(b for _, b, _ in pattern.sends) == list(range(1, g))  # each GPU once, never GPU 0
    for a, b, t in pattern.sends:
        assert a == 0 or pattern.arrival[a] <= t  # a relay sends only what reached it
    if pattern.status == "optimal":  # on a star nothing beats the direct sends' last arrival
        serial = max(piece / l.bandwidth for l in fabric.topology.links)
        direct_last = max(pattern.arrival.values())
        assert direct_last <= math.ceil((g - 1) / 1) + math.ceil(
            sum(l.alpha for l in fabric.topology.links[:2]) / max(pattern.tau, serial)) + 1


@given(shares=st.lists(st.floats(0, 1), min_size=1, max_size=4), chunks=st.integers(1, 64))
def test_chunk_split_gives_whole_counts_that_add_up(shares, chunks):
    assume(sum(shares) > 1e-6)
    counts = chunk_split(shares, chunks)
    assert sum(counts) == chunks and all(c >= 0 for c in counts)
    total = sum(shares)
    assert all(abs(c - chunks * s / total) < 1 + 1e-9 for c, s in zip(counts, shares))


def test_fabrics_without_symmetric_boxes_and_unsupported_kinds_are_errors_naming_why():
    problem = Problem(build("ring:8"), make_collective("allgather", 8, 1), 1e6)
    result = call.synthesize(Syccl(), problem, time_limit=10, seed=0)
    assert result.status == "error" and "boxes joined by rails" in result.message
    problem = Problem(build("rails:2x4"), make_collective("broadcast", 8, 1, 0), 1e6)
    result = call.synthesize(Syccl(), problem, time_limit=10, seed=0)
    assert result.status == "error" and "not broadcast" in result.message
