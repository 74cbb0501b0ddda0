"""Periodic schedules (``workbench.algorithm/3``, ``workbench.model.periodic``): timed and verified without
being written out, exactly as their expansion; the repetition rule; the file; MSCCL's loop."""

import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from schedules import random_algorithm
from workbench.model.algorithm import FORMAT, FORMAT_3, Algorithm, AlgorithmFormatError, Transfer, load_algorithm
from workbench.cli import main
from workbench.kit.examples import ring_allgather
from workbench.msccl.export import export_xml
from workbench.model.periodic import (Period, PeriodError, expansion_order, expanded, loop_body, one_piece,
                                repeated)
from workbench.checking.simulate import LINK_MODELS, ORDERS, SWITCH_MODELS, simulate
from workbench.topology import build
from workbench.checking.verify import InvalidAlgorithm, verify

ALPHA, BW, M = 1e-6, 10e9, 1e6
SER = M / BW
MODELS = [dict(link_model=l, order=o, switch_model=s) for l in LINK_MODELS for o in ORDERS for s in SWITCH_MODELS]


def _ring(n: int) -> Algorithm:
    return ring_allgather(n, M, build(f"uniring:{n}", alpha=ALPHA, bandwidth=BW))


def _depths(algorithm: Algorithm) -> list[int]:
    depth = [0] * len(algorithm.transfers)
    for t in algorithm.transfers:
        depth[t.id] = 1 + max((depth[d] for d in t.deps), default=-1)
    return depth


def _piece_major(periodic: Algorithm) -> np.ndarray:
    """Where each expanded transfer (in file order) sits in the periodic simulation's arrays."""
    m = len(periodic.transfers)
    return np.array([k * m + i for k, i in expansion_order([t.lag for t in periodic.transfers],
                                                           periodic.period.repeat)], dtype=np.int64)


# ------------------------------------------------------------------ oracles
@pytest.mark.parametrize("n, repeat", [(2, 1), (4, 3), (6, 5)])
def test_lagged_ring_streams_at_link_rate(n, repeat):
    """Each hop one period behind its feeder: every ring link is busy back to back, so R pieces of the
    ring all-gather take R (n-1) serialisations plus one alpha (the last hop's)."""
    periodic = repeated(_ring(n), repeat, lags=_depths(_ring(n)))
    assert simulate(periodic).collective_time == pytest.approx(repeat * (n - 1) * SER + ALPHA, rel=1e-12)


def test_unlagged_pieces_run_one_after_another_per_link():
    """No lag: piece k's step s waits behind piece k-1's whole step list on each link, so the
    pipeline still overlaps (a link serves piece k while the next hop serves piece k-1)."""
    ring = _ring(4)
    alone = simulate(ring).collective_time
    three = simulate(repeated(ring, 3)).collective_time
    assert alone == pytest.approx(3 * (SER + ALPHA))
    assert alone < three < 3 * alone


# ------------------------------------------------------------------ the expansion is the meaning
def _lags(rng: random.Random, algorithm: Algorithm) -> list[int]:
    lag = [0] * len(algorithm.transfers)
    for t in algorithm.transfers:
        lag[t.id] = max((lag[d] for d in t.deps), default=0) + rng.choice((0, 0, 1, 2))
    return lag


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False), kind=st.sampled_from(["ag", "bc", "rs", "ar"]),
       repeat=st.integers(1, 4), lagged=st.booleans(), model=st.sampled_from(MODELS))
def test_periodic_times_and_verdicts_equal_the_expansion(rng, kind, repeat, lagged, model):
    plain = random_algorithm(rng, kind)
    assume(plain.collective.kind != "custom")
    periodic = repeated(plain, repeat, lags=_lags(rng, plain) if lagged else None)
    full = periodic.expanded()
    assert len(full.transfers) == periodic.total_transfers
    ours, theirs = simulate(periodic, **model), simulate(full, **model)
    where = _piece_major(periodic)
    assert ours.collective_time == theirs.collective_time
    assert np.array_equal(ours.end[where], theirs.end) and np.array_equal(ours.start[where], theirs.start)
    assert np.array_equal(ours.link_busy, theirs.link_busy)
    assert verify(periodic).delivered_pairs == verify(full).delivered_pairs


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False), repeat=st.integers(1, 5))
def test_compiled_periodic_pass_is_bit_identical(rng, repeat):
    pytest.importorskip("numba")
    plain = random_algorithm(rng, rng.choice(["ag", "rs"]))
    periodic = repeated(plain, repeat, lags=_lags(rng, plain))
    python, compiled = simulate(periodic, engine="python"), simulate(periodic, engine="compiled")
    assert np.array_equal(python.end, compiled.end) and np.array_equal(python.start, compiled.start)
    assert verify(periodic, engine="compiled").delivered_pairs == verify(periodic, engine="python").delivered_pairs


def test_a_race_is_named_with_its_piece():
    ring = _ring(4)
    for t in ring.transfers:
        t.deps = ()  # a forwarding hop no longer waits for the chunk it forwards
    with pytest.raises(InvalidAlgorithm, match="periodic schedule, piece 0: race") as caught:
        verify(repeated(ring, 3))
    assert caught.value.kind == "race"


# ------------------------------------------------------------------ the repetition rule
@pytest.mark.parametrize("period", [Period(3, 2), Period(4, 4), Period(2, 4), Period(2, 6)])
def test_pieces_that_do_not_tile_the_collective_are_refused(period):
    periodic = repeated(_ring(4), 3)
    periodic.period = period
    with pytest.raises(InvalidAlgorithm, match="periodic schedule: "):
        verify(periodic)


def test_a_template_outside_piece_0_is_refused():
    ring = _ring(4)
    shifted = repeated(ring, 3)
    for t in shifted.transfers:
        t.chunks = tuple(c + 4 for c in t.chunks)
    with pytest.raises(InvalidAlgorithm, match="chunk 4 is not a chunk of piece 0"):
        verify(shifted)


def test_pieces_with_other_holders_are_refused():
    from workbench.model.collective import Collective

    ring = _ring(2)
    periodic = repeated(ring, 2)
    c = periodic.collective
    pre = list(c.pre)
    pre[2], pre[3] = pre[3], pre[2]  # piece 1's chunks swap owners
    periodic.collective = Collective("custom", 2, 1, tuple(pre), c.post, False)
    with pytest.raises(InvalidAlgorithm, match="chunk 2 of piece 1 has other holders"):
        verify(periodic)


def test_a_dependency_on_a_later_lag_is_refused():
    ring = _ring(4)
    lags = [1 if not t.deps else 0 for t in ring.transfers]  # first hops later than the hops they feed
    with pytest.raises(InvalidAlgorithm, match="does not come earlier in the expansion"):
        verify(repeated(ring, 2, lags=lags))
    with pytest.raises(PeriodError):
        expanded(repeated(ring, 2, lags=lags))


def test_one_piece_orders_by_lag_then_id():
    ring = _ring(3)
    lags = _depths(ring)
    piece, order = one_piece(repeated(ring, 2, lags=lags))
    assert [lags[i] for i in order] == sorted(lags)
    assert [t.id for t in piece.transfers] == list(range(len(order)))
    assert piece.period is None and not any(t.lag for t in piece.transfers)


# ------------------------------------------------------------------ the file
def test_file_round_trip_and_format(tmp_path):
    periodic = repeated(_ring(4), 3, lags=_depths(_ring(4)))
    path = tmp_path / "periodic.json"
    periodic.save(path)
    document = json.loads(path.read_text())
    assert document["format"] == FORMAT_3 and document["period"] == {"repeat": 3, "chunk_stride": 4}
    assert len(document["transfers"]) == len(_ring(4).transfers)
    assert document["collective"] == _ring(4).to_dict()["collective"]  # the collective of one piece
    back = load_algorithm(path)
    assert back.period == periodic.period and [t.lag for t in back.transfers] == [t.lag for t in periodic.transfers]
    assert simulate(back).collective_time == simulate(periodic).collective_time
    assert _ring(4).to_dict()["format"] == FORMAT and "period" not in _ring(4).to_dict()


def test_a_large_periodic_file_is_read_with_its_period(tmp_path):
    """Past a megabyte the typed fast reader is tried first: it must not drop the period or the lags."""
    ring = _ring(160)
    periodic = repeated(ring, 2, lags=_depths(ring))
    path = tmp_path / "big.json"
    periodic.save(path)
    assert path.stat().st_size > 1 << 20
    back = load_algorithm(path)
    assert back.period == Period(2, 160) and back.transfers[-1].lag == periodic.transfers[-1].lag


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("period"), "missing field 'period'"),
    (lambda d: d.update(period={"repeat": 0, "chunk_stride": 4}), "period.repeat must be an integer >= 1"),
    (lambda d: d.update(period={"repeat": 2, "chunk_stride": 0}), "chunk_stride must be positive"),
    (lambda d: d.update(period={"repeat": 2, "chunk_stride": 4, "skew": 1}), "unknown field 'skew'"),
    (lambda d: d.update(period={"repeat": 2, "chunk_stride": 8}), "the collective \\(one piece\\) has 4 chunks"),
    (lambda d: d.update(period={"repeat": 10**7, "chunk_stride": 4}), "more than 1,000,000 pieces"),
    (lambda d: d.update(format=FORMAT), "a period needs format"),
    (lambda d: (d.update(format=FORMAT), d.pop("period")), "has a lag, which needs format"),
    (lambda d: d["transfers"][5].update(lag=-1), "lag: expected an integer >= 0"),
])
def test_bad_periodic_documents_are_named(tmp_path, mutate, message):
    document = repeated(_ring(4), 3, lags=_depths(_ring(4))).to_dict()
    mutate(document)
    with pytest.raises(AlgorithmFormatError, match=message):
        Algorithm.from_dict(json.loads(json.dumps(document)))


def test_a_tiny_file_declaring_a_huge_expansion_is_refused_before_it_is_built(tmp_path, monkeypatch):
    document = repeated(_ring(4), 3).to_dict()
    document["period"]["repeat"] = 900_000  # 900,000 pieces of 12 transfers: ~1.5 GB of arrays
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(document))
    monkeypatch.setenv("WORKBENCH_MAX_MEMORY", str(10**9))
    with pytest.raises(AlgorithmFormatError, match="period.repeat=900000"):
        load_algorithm(path)
    assert main(["verify", str(path)]) == 2


def test_cli_verifies_and_simulates_a_periodic_file(tmp_path, capsys):
    periodic = repeated(_ring(4), 3, lags=_depths(_ring(4)))
    good = tmp_path / "good.json"
    periodic.save(good)
    assert main(["verify", str(good)]) == 0
    assert main(["simulate", str(good)]) == 0
    assert "36" in capsys.readouterr().out  # 3 pieces x 12 transfers
    racing = _ring(4)
    for t in racing.transfers:
        t.deps = ()
    bad = tmp_path / "racing.json"
    repeated(racing, 3).save(bad)
    assert main(["verify", str(bad)]) == 1
    assert "periodic schedule, piece 0: race" in capsys.readouterr().err
    document = json.loads(good.read_text())
    document["period"]["repeat"] = "3"
    malformed = tmp_path / "malformed.json"
    malformed.write_text(json.dumps(document))
    assert main(["verify", str(malformed)]) == 2
    err = capsys.readouterr().err
    assert "period.repeat must be an integer" in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------ MSCCL's loop
def test_msccl_export_writes_one_loop_iteration():
    ring = _ring(4)
    periodic = repeated(ring, 5, lags=_depths(ring))
    assert export_xml(periodic) == export_xml(ring)
    body = loop_body(periodic)
    assert body.collective.chunks_per_rank == 1 and body.meta["loop"] == {"repeat": 5, "chunk_stride": 4}


def test_a_custom_collective_repeats_too(tmp_path):
    from workbench.model.collective import custom_collective

    ring = _ring(3)
    ring.collective = custom_collective(3, ring.collective.pre, ring.collective.post)
    periodic = repeated(ring, 4, lags=_depths(ring))
    verify(periodic)
    path = tmp_path / "custom.json"
    periodic.save(path)
    back = load_algorithm(path)
    assert back.collective == periodic.collective and back.collective.num_chunks == 12


def test_transforms_keep_the_period():
    """reverse() and concat() work on the period (tests/test_periodic_transforms.py: equal to their
    expansions); a plain phase does not join a periodic one."""
    periodic = repeated(_ring(4), 2)
    reduction = periodic.reverse()
    assert reduction.period == periodic.period and verify(reduction).delivered_pairs
    with pytest.raises(ValueError, match="same period"):
        reduction.concat(periodic.expanded())
