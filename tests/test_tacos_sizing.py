"""TACOS's chunks per NPU by message size (``formulations.tacos.sizing``): below 256 MB, where the
problem has one chunk per rank, the fastest of 1, 2, 4 and 8 by the simulated claim (at every size
where links pay a per-message overhead); the problem's chunking from 256 MB up, when it pins more
than one, and with ``chunks="given"``."""

from __future__ import annotations

import pytest

from workbench.plugin import call
from formulations.tacos import Tacos
from formulations.tacos.sizing import CHOICES, MULTI_TIER_CHOICES, SIZED_BELOW
from workbench.model.collective import make_collective
from workbench.plugin.registry import Problem
from workbench.checking.simulate import simulate
from workbench.topology import build


def _synth(spec: str, kind: str, size: float, k: int = 1, overhead: float = 0.0, **params):
    topology = build(spec, overhead=overhead) if overhead else build(spec)
    problem = Problem(topology, make_collective(kind, topology.num_npus, k), size)
    result = call.synthesize(Tacos(), problem, time_limit=60, seed=0, **params)
    assert result.algorithms, result.message
    return result.algorithms[0]


@pytest.mark.parametrize("kind", ["allgather", "allreduce"])
def test_the_fastest_chunking_is_kept_and_beats_one_chunk(kind):
    # dgx1 at 16 MB: one chunk per NPU is 1.72x the bound, the sized choice 1.18x (All-Gather)
    sized = _synth("dgx1", kind, 16e6)
    timed = sized.meta["time_by_choice"]["chunks"]
    assert sorted(map(int, timed)) == list(CHOICES)
    assert sized.collective.chunks_per_rank == int(min(timed, key=timed.get))
    assert sized.meta["claimed_time"] == min(timed.values()) == simulate(sized).collective_time
    given = _synth("dgx1", kind, 16e6, chunks="given")
    assert given.collective.chunks_per_rank == 1 and "chunks" not in given.meta.get("time_by_choice", {})
    assert simulate(sized).collective_time < 0.9 * simulate(given).collective_time


def test_large_messages_and_pinned_chunkings_are_kept():
    assert _synth("dgx1", "allgather", SIZED_BELOW).collective.chunks_per_rank == 1
    priced = _synth("dgx1", "allgather", SIZED_BELOW, overhead=2e-6)  # overheads: sized at any size
    assert sorted(map(int, priced.meta["time_by_choice"]["chunks"])) == list(CHOICES)
    pinned = _synth("dgx1", "allgather", 16e6, k=2)
    assert pinned.collective.chunks_per_rank == 2 and "chunks" not in pinned.meta.get("time_by_choice", {})


def test_leaf_spine_tiers_weigh_chunkings_at_large_messages_too():
    """Switches above switches (unwound per rail): one and two chunks per rank are both tried at 1 GiB."""
    sized = _synth("rails:8x4,leaf=2,over=2", "allgather", 2**30)
    timed = sized.meta["time_by_choice"]["chunks"]
    assert sorted(map(int, timed)) == list(MULTI_TIER_CHOICES)
    assert sized.meta["claimed_time"] == min(timed.values()) == simulate(sized).collective_time
    assert "chunks" not in _synth("rails:2x4", "allgather", 2**30).meta.get("time_by_choice", {})  # one tier: as before


def test_an_unknown_chunks_value_is_refused():
    with pytest.raises(ValueError, match=r"chunks: expected .auto. or .given., got .many."):
        _synth("ring:4", "allgather", 1e6, chunks="many")
