"""Reversal and concatenation of periodic schedules (``Algorithm.reverse``, ``Algorithm.concat`` on a
``workbench.model.periodic`` period): done on the period, equal to doing them on the expansion in the
sense the periodic module docstring states, for the verifier and the simulator."""

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from schedules import random_connected_topology, spread_schedule
from workbench.checking.simulate import LINK_MODELS, ORDERS, SWITCH_MODELS, simulate
from workbench.checking.verify import verify
from workbench.kit.duality import by_duality
from workbench.kit.examples import ring_allgather
from workbench.model.algorithm import Algorithm, load_algorithm
from workbench.model.collective import make_collective
from workbench.model.periodic import Period, PeriodError, coarsened, expansion_order, mirrored, repeated, reversed_lags
from workbench.topology import build

ALPHA, BW, M = 1e-6, 10e9, 1e6
SER = M / BW
MODELS = [dict(link_model=l, order=o, switch_model=s) for l in LINK_MODELS for o in ORDERS for s in SWITCH_MODELS]


def _lags(rng: random.Random, algorithm: Algorithm) -> list[int]:
    """Random lags that keep every dependency earlier (a feeder's lag or more)."""
    lag = [0] * len(algorithm.transfers)
    for t in algorithm.transfers:
        lag[t.id] = max((lag[d] for d in t.deps), default=0) + rng.choice((0, 0, 1, 2))
    return lag


def _depths(algorithm: Algorithm) -> list[int]:
    depth = [0] * len(algorithm.transfers)
    for t in algorithm.transfers:
        depth[t.id] = 1 + max((depth[d] for d in t.deps), default=-1)
    return depth


def _pipelined_ring(n: int, repeat: int, topology: str = "uniring") -> Algorithm:
    """The ring All-Gather, each hop one period behind its feeder (it streams at link rate)."""
    ring = ring_allgather(n, M, build(f"{topology}:{n}", alpha=ALPHA, bandwidth=BW))
    return repeated(ring, repeat, lags=_depths(ring))


def _reversible(algorithm: Algorithm) -> bool:
    """Whether every chunk a switch receives it sends on exactly once: reversed, a switch must
    receive what it sends and cannot add two partial sums (``Algorithm.reverse`` refuses a multicast,
    and a chunk left at a switch would be sent from nothing)."""
    sends: dict[tuple[int, int], int] = {}
    for t in algorithm.transfers:
        for c in t.chunks:
            if algorithm.topology.is_switch(t.dst):
                sends.setdefault((t.dst, c), 0)
            if algorithm.topology.is_switch(t.src):
                sends[(t.src, c)] = sends.get((t.src, c), 0) + 1
    return all(count == 1 for count in sends.values())


def _listing(algorithm: Algorithm) -> list[tuple]:
    return [(t.id, t.chunks, t.src, t.dst, t.op, t.deps, t.lag) for t in algorithm.transfers]


# ------------------------------------------------------------------ reverse
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False), kind=st.sampled_from(["allgather", "broadcast"]),
       repeat=st.integers(1, 4), lagged=st.booleans(), switch=st.booleans(), model=st.sampled_from(MODELS))
def test_reversing_the_period_is_reversing_the_expansion(rng, kind, repeat, lagged, switch, model):
    n = rng.randint(2, 5)
    topology = random_connected_topology(rng, n, extra=rng.randint(0, 2 * n), switch=switch)
    gather = spread_schedule(rng, topology, kind, n, rng.randint(1, 2), multi=rng.random() < 0.5)
    assume(_reversible(gather))
    periodic = repeated(gather, repeat, lags=_lags(rng, gather) if lagged else None)
    ours = periodic.reverse()
    theirs = periodic.expanded().reverse()
    assert ours.period == periodic.period and ours.collective == theirs.collective
    # the statement of the periodic module docstring: equal transfer for transfer, pieces mirrored
    assert _listing(ours.expanded()) == _listing(mirrored(theirs, periodic.period))
    assert verify(ours).delivered_pairs == verify(ours.expanded()).delivered_pairs == verify(theirs).delivered_pairs
    timed = simulate(ours, **model)
    written, reversed_plain = simulate(ours.expanded(), **model), simulate(theirs, **model)
    assert timed.collective_time == written.collective_time == reversed_plain.collective_time
    assert np.array_equal(written.end, reversed_plain.end) and np.array_equal(written.link_busy, timed.link_busy)


def test_reversed_lags_mirror_the_template():
    assert reversed_lags([0, 0, 1, 3, 2]) == [1, 0, 2, 3, 3]
    assert reversed_lags([]) == []


@pytest.mark.parametrize("n, repeat", [(2, 1), (4, 3), (6, 5)])
def test_a_reversed_lagged_ring_streams_like_the_gather(n, repeat):
    """The Reduce-Scatter of a pipelined ring All-Gather keeps its pipelining: R (n-1) serialisations
    and the last hop's alpha, exactly the All-Gather's time."""
    gather = _pipelined_ring(n, repeat)
    reduction = gather.reverse()
    assert reduction.collective.kind == "reducescatter" and reduction.period == gather.period
    assert all(t.op == "reduce" for t in reduction.transfers)
    verify(reduction)
    assert simulate(reduction).collective_time == pytest.approx(repeat * (n - 1) * SER + ALPHA, rel=1e-12)


def test_a_broadcast_reverses_into_a_periodic_reduce():
    topology = build("ring:4", alpha=ALPHA, bandwidth=BW)
    steps = [(0, 0, 1, "copy", ()), (0, 1, 2, "copy", (0,)), (0, 2, 3, "copy", (1,))]
    chain = Algorithm.from_steps(topology, make_collective("broadcast", 4, 1, 0), M, steps)
    periodic = repeated(chain, 3, lags=[0, 1, 2])
    reduction = periodic.reverse()
    assert reduction.collective.kind == "reduce" and reduction.collective.root == 0
    assert [t.lag for t in reduction.transfers] == [0, 1, 2]
    verify(reduction)
    assert simulate(reduction).collective_time == simulate(periodic).collective_time


def test_a_periodic_switch_multicast_is_refused_like_a_plain_one():
    topology = build("switch:3", alpha=ALPHA, bandwidth=BW)
    switch = topology.num_npus
    steps = [(0, 0, switch, "copy", ()), (0, switch, 1, "copy", (0,)), (0, switch, 2, "copy", (0,))]
    broadcast = Algorithm.from_steps(topology, make_collective("broadcast", 3, 1, 0), M, steps)
    with pytest.raises(ValueError, match=f"switch {switch} multicasts chunk 0"):
        repeated(broadcast, 2).reverse()


# ------------------------------------------------------------------ concat
def _dependency_graph(algorithm: Algorithm, keys: list[tuple]) -> dict[tuple, set[tuple]]:
    """Each transfer's dependencies by canonical keys (phase, piece, template index), and its payload."""
    return {keys[t.id]: (t.chunks, t.src, t.dst, t.op, {keys[d] for d in t.deps}) for t in algorithm.transfers}


def _keys(phases: list[Algorithm]) -> list[tuple]:
    """The canonical key of every transfer of the plain concatenation of the phases' expansions."""
    keys = []
    for phase, periodic in enumerate(phases):
        keys += [(phase, k, i) for k, i in expansion_order([t.lag for t in periodic.transfers], periodic.period.repeat)]
    return keys


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False), repeat=st.integers(1, 4), lagged=st.booleans(),
       model=st.sampled_from(MODELS))
def test_concatenating_periods_is_concatenating_expansions_interleaved(rng, repeat, lagged, model):
    n, k = rng.randint(2, 5), rng.randint(1, 2)
    topology = random_connected_topology(rng, n, extra=rng.randint(0, 2 * n))
    dual = spread_schedule(rng, topology.reversed(), "allgather", n, k, multi=rng.random() < 0.5)
    gather = spread_schedule(rng, topology, "allgather", n, k, multi=rng.random() < 0.5)
    assume(_reversible(dual))
    first = repeated(dual, repeat, lags=_lags(rng, dual) if lagged else None).reverse(topology)
    second = repeated(gather, repeat, lags=_lags(rng, gather) if lagged else None)
    periodic = first.concat(second)
    plain = first.expanded().concat(second.expanded())
    assert periodic.collective == plain.collective and periodic.collective.kind == "allreduce"
    # the same transfers waiting for the same transfers, only listed otherwise
    m1 = len(first.transfers)
    canonical = [(0, k, i) if i < m1 else (1, k, i - m1)
                 for k, i in expansion_order([t.lag for t in periodic.transfers], repeat)]
    assert _dependency_graph(periodic.expanded(), canonical) == _dependency_graph(plain, _keys([first, second]))
    assert verify(periodic).delivered_pairs == verify(periodic.expanded()).delivered_pairs \
        == verify(plain).delivered_pairs
    assert simulate(periodic, **model).collective_time == simulate(periodic.expanded(), **model).collective_time


def test_piece_k_of_the_all_gather_follows_piece_k_of_the_reduce_scatter():
    """A pipelined ring All-Reduce on a bidirectional ring (Reduce-Scatter one way, All-Gather the
    other): piece k's All-Gather is listed from the period after piece k's last reduction on, so the two
    pipelines overlap. The phases share no link, so the listing order across them is immaterial: the
    time is that of the plain concatenation of the two expansions: one phase and a pipeline fill."""
    n, repeat = 4, 12
    gather = _pipelined_ring(n, repeat, "ring")
    reduction = _pipelined_ring(n, repeat, "ring").reverse()
    periodic = reduction.concat(gather)
    verify(periodic)
    # each root's first All-Gather hop waits for its chunk's last reduction: a period after the deepest
    assert min(t.lag for t in periodic.transfers[len(reduction.transfers):]) == max(
        t.lag for t in reduction.transfers) + 1 == n - 1
    phase = simulate(gather).collective_time
    overlapped = simulate(periodic).collective_time
    assert overlapped == simulate(reduction.expanded().concat(gather.expanded())).collective_time
    assert overlapped < 1.3 * phase  # two phases one after the other would take twice one


def test_concat_refuses_mixed_or_unequal_periods():
    gather = _pipelined_ring(4, 3, "ring")
    reduction = _pipelined_ring(4, 3, "ring").reverse()
    with pytest.raises(ValueError, match="same period"):
        reduction.concat(gather.expanded())
    with pytest.raises(ValueError, match="same period"):
        reduction.concat(_pipelined_ring(4, 2, "ring"))


def test_a_periodic_all_reduce_file_round_trips(tmp_path):
    periodic = _pipelined_ring(4, 3, "ring").reverse().concat(_pipelined_ring(4, 3, "ring"))
    path = tmp_path / "allreduce.json"
    periodic.save(path)
    back = load_algorithm(path)
    assert back.period == Period(3, 4) and back.collective == periodic.collective
    assert [t.lag for t in back.transfers] == [t.lag for t in periodic.transfers]
    verify(back)
    assert simulate(back).collective_time == simulate(periodic).collective_time


# ------------------------------------------------------------------ coarsened
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False), kind=st.sampled_from(["allgather", "broadcast"]),
       pieces=st.integers(1, 3), factor=st.integers(1, 3), lagged=st.booleans())
def test_coarsening_a_period_keeps_its_expansion(rng, kind, pieces, factor, lagged):
    n = rng.randint(2, 5)
    topology = random_connected_topology(rng, n, extra=rng.randint(0, 2 * n))
    gather = spread_schedule(rng, topology, kind, n, rng.randint(1, 2))
    periodic = repeated(gather, pieces * factor, lags=_lags(rng, gather) if lagged else None)
    coarse = coarsened(periodic, factor)
    assert coarse.period == Period(pieces, factor * periodic.period.chunk_stride)
    assert _listing(coarse.expanded()) == _listing(periodic.expanded())
    assert verify(coarse).delivered_pairs == verify(periodic).delivered_pairs
    assert simulate(coarse).collective_time == simulate(periodic).collective_time


def test_coarsening_needs_a_factor_of_the_pieces():
    with pytest.raises(PeriodError, match="does not divide"):
        coarsened(_pipelined_ring(4, 3), 2)


# ------------------------------------------------------------------ duality (the formulations' path)
@pytest.mark.parametrize("kind", ["reducescatter", "allreduce"])
def test_duality_keeps_a_gathers_period(kind):
    """``by_duality``, how ForestColl and SyCCL build their reductions, on a gather written as a period:
    the Reduce-Scatter and All-Reduce come out as periods of the same pieces, valid, their expansions
    timed alike."""
    n, repeat = 4, 3
    topology = build(f"ring:{n}", alpha=ALPHA, bandwidth=BW)

    def gather(view, collective, chunk_bytes):
        ring = ring_allgather(n, chunk_bytes, view)
        return repeated(ring, collective.chunks_per_rank, lags=_depths(ring))

    algorithm = by_duality(topology, make_collective(kind, n, repeat), M, gather)
    assert algorithm.collective.kind == kind and algorithm.period == Period(repeat, n)
    assert verify(algorithm).delivered_pairs == verify(algorithm.expanded()).delivered_pairs
    assert simulate(algorithm).collective_time == simulate(algorithm.expanded()).collective_time
