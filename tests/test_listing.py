"""Listings: list scheduling in the default model (settle_order) and the faster-listing choice (claim_listing)."""

import pytest

from workbench.plugin import call
from workbench.model.algorithm import Algorithm, Transfer
from workbench.model.collective import Collective, make_collective
from workbench.plugin.registry import Problem, get_formulation
from workbench.kit.schedule import claim_listing, settle_order
from workbench.checking.simulate import simulate
from workbench.topology import Link, Topology
from workbench.checking.verify import verify


def waiting_first() -> Algorithm:
    """Chunk 0 goes 0 -> 1 -> 2 and is listed before chunk 1, ready at 1 from the start, on 1 -> 2.
    Every transfer takes 1 ms and no alpha."""
    topo = Topology.create(3, [Link(0, 1, 0.0, 1e9), Link(1, 2, 0.0, 1e9), Link(2, 1, 0.0, 1e9)], 0, "line")
    coll = Collective("custom", 3, 1, (frozenset({0}), frozenset({1})), (frozenset({0, 2}), frozenset({1, 2})),
                      False, None)
    transfers = [Transfer(0, (0,), 0, 1, "copy", ()), Transfer(1, (0,), 1, 2, "copy", (0,)),
                 Transfer(2, (1,), 1, 2, "copy", ())]
    return Algorithm(topo, coll, 1e6, transfers, {})


def test_settled_order_lets_the_ready_transfer_go_first():
    """Listed first, the transfer that waits holds link 1 -> 2 in the default model; settled, the
    ready one goes first and the schedule is one transfer time shorter."""
    planned = waiting_first()
    assert simulate(planned).collective_time == pytest.approx(3e-3)
    settled = settle_order(planned)
    verify(settled)
    assert (settled.transfers[1].chunks, settled.transfers[1].src) != ((0,), 1)  # the ready one is not behind
    assert simulate(settled).collective_time == pytest.approx(2e-3)
    assert sorted((t.chunks, t.src, t.dst) for t in settled.transfers) == \
        sorted((t.chunks, t.src, t.dst) for t in planned.transfers)


def test_claim_listing_keeps_the_faster_listing_below_256_mb_only():
    chosen = claim_listing(waiting_first(), 3e6)
    assert chosen.meta["listing"] == "settled"
    assert chosen.meta["claimed_time"] == pytest.approx(2e-3) and chosen.meta["planned_listing_time"] == pytest.approx(3e-3)
    large = claim_listing(waiting_first(), 1e9)
    assert "listing" not in large.meta and large.meta["claimed_time"] == pytest.approx(3e-3)
    no_time = claim_listing(waiting_first(), 3e6, seconds_left=0.0)
    assert "listing" not in no_time.meta


def test_a_listing_that_settling_cannot_improve_stays_planned():
    """Ring All-Gather on a ring is contention-free as planned: the planned listing is kept."""
    from workbench.topology import build

    topo = build("ring:6", alpha=1e-6, bandwidth=10e9)
    result = call.synthesize(get_formulation("ring"), Problem(topo, make_collective("allgather", 6), 6e5),
                                                time_limit=10, seed=0)
    algorithm = result.algorithms[0]
    assert algorithm.meta["listing"] == "planned"
    assert algorithm.meta["claimed_time"] == simulate(algorithm).collective_time


def test_placed_times_are_the_simulated_ones_on_routes_through_npus():
    """Direct All-Gather on a ring sends to ranks two and three hops away: routes of several
    segments (NPUs store and forward). The settled listing's t_start/t_end are its simulated times."""
    from workbench.topology import build

    topo = build("ring:6", alpha=1e-6, bandwidth=10e9)
    result = call.synthesize(get_formulation("direct"), Problem(topo, make_collective("allgather", 6), 6e5),
                                                  time_limit=10, seed=0)
    settled = settle_order(result.algorithms[0])
    verify(settled)
    simulated = simulate(settled)
    assert [t.t_start for t in settled.transfers] == simulated.start.tolist()
    assert [t.t_end for t in settled.transfers] == simulated.end.tolist()
