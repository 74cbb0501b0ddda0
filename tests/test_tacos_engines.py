"""TACOS's two engines: the compiled one gives exactly the Python one's schedule for every seed."""

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from workbench.plugin import call
from formulations.tacos import Tacos, choose_engine, greedy_all_gather, to_algorithm
from formulations.tacos import engines, matching, python_engine
import workbench.compiled.engines
from workbench.model.collective import make_collective
from workbench.plugin.registry import Problem
from workbench.topology import Link, Topology, TopologyError, build

pytest.importorskip("numba")
from formulations.tacos import compiled_bits, compiled_engine, compiled_offers  # noqa: E402
from numba import njit  # noqa: E402

GB = 1e9
COLUMNS = ("src", "dst", "chunk", "started", "ended")


@st.composite
def switchless_fabrics(draw, max_npus: int = 9) -> Topology:
    """Strongly connected switchless fabrics; links from a few costs, so ties and cost classes occur."""
    n = draw(st.integers(2, max_npus))
    order = draw(st.permutations(list(range(n))))
    costs = st.tuples(st.sampled_from([0.0, 0.5e-6, 1e-6]), st.sampled_from([10 * GB, 25 * GB, 50 * GB, 75 * GB]))
    links = {}
    for i in range(n):  # a cycle through every rank keeps it strongly connected
        u, v = order[i], order[(i + 1) % n]
        alpha, bandwidth = draw(costs)
        links[(u, v)] = Link(u, v, alpha, bandwidth)
    for u, v, (alpha, bandwidth) in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), costs),
                                                  max_size=3 * n)):
        if u != v:
            links.setdefault((u, v), Link(u, v, alpha, bandwidth))
    return Topology.create(n, links.values(), name="drawn")


def _run(view, collective, seed, replacement, engine):
    try:
        return greedy_all_gather(view, collective, 1e6, seed, replacement, engine=engine)
    except TopologyError as error:
        return str(error)


def _one_cost(topo: Topology) -> Topology:
    """The fabric with every link of one cost: matched by offer counts (matching.DUPLICATE_ON_ONE_COST)."""
    return Topology.create(topo.num_npus, [Link(l.src, l.dst, 0.5e-6, 50 * GB) for l in topo.links], name="one cost")


def _same(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return (a.claimed_time == b.claimed_time
            and (a.deliveries, a.wasted, a.events) == (b.deliveries, b.wasted, b.events)
            and all(np.array_equal(getattr(a, c), getattr(b, c)) for c in COLUMNS))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topo=switchless_fabrics(), kind=st.sampled_from(["allgather", "broadcast", "gather", "scatter", "alltoall"]),
       k=st.sampled_from([1, 2, 3, 9]), replacement=st.sampled_from(matching.REPLACEMENT_MODES),
       seed=st.integers(0, 2**32 - 1))
def test_compiled_engine_gives_the_python_schedule(topo, kind, k, replacement, seed):
    collective = make_collective(kind, topo.num_npus, k, 0 if kind in ("broadcast", "gather", "scatter") else None)
    python = _run(topo, collective, seed, replacement, "python")
    compiled = _run(topo, collective, seed, replacement, "compiled")
    assert _same(python, compiled)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topo=switchless_fabrics(), kind=st.sampled_from(["allgather", "broadcast", "gather", "scatter", "alltoall"]),
       k=st.sampled_from([1, 3, 150]), seed=st.integers(0, 2**32 - 1))
def test_compiled_engine_gives_the_python_schedule_on_one_link_cost(topo, kind, k, seed):
    # fabrics of one link cost take the other way of matching (offer counts by groups of words);
    # 150 chunks per rank make rows of several groups
    topo = _one_cost(topo)
    collective = make_collective(kind, topo.num_npus, k, 0 if kind in ("broadcast", "gather", "scatter") else None)
    assert _same(_run(topo, collective, seed, "causal", "python"), _run(topo, collective, seed, "causal", "compiled"))


@pytest.mark.parametrize("spec, k", [("mesh:5x5", 3), ("torus:3x3x3", 3), ("dgx1", 9), ("fc:6", 12),
                                     ("rfs:2x4x4", 3)])
@pytest.mark.parametrize("replacement", matching.REPLACEMENT_MODES)
def test_engines_agree_with_several_words_of_chunks(spec, k, replacement):
    # 72 to 96 chunks: two 64-bit words per row; the unwound rfs has links of three costs
    topo = build(spec, alpha=0.5e-6, bandwidth=50 * GB) if spec != "rfs:2x4x4" else \
        build(spec, alpha=0.5e-6, bandwidth=[200 * GB, 100 * GB, 50 * GB]).unwind_switches(1)
    collective = make_collective("allgather", topo.num_npus, k)
    for seed in range(3):
        python = _run(topo, collective, seed, replacement, "python")
        assert not isinstance(python, str) and python.wasted + python.deliveries > 0
        assert _same(python, _run(topo, collective, seed, replacement, "compiled"))


@pytest.mark.parametrize("kind", ["allgather", "broadcast"])
def test_engines_agree_on_several_costs_and_rows_of_many_words(kind):
    # links of three costs over rows of nine words, with gaps between the chunks offered
    topo = build("rfs:2x2x2", alpha=0.5e-6, bandwidth=[200 * GB, 100 * GB, 50 * GB]).unwind_switches(1)
    collective = make_collective(kind, 8, 70, 0 if kind == "broadcast" else None)
    for seed in range(2):
        for replacement in matching.REPLACEMENT_MODES:
            python = _run(topo, collective, seed, replacement, "python")
            assert not isinstance(python, str) and python.deliveries > 0
            assert _same(python, _run(topo, collective, seed, replacement, "compiled"))


@pytest.mark.parametrize("spec, kind, k", [("ring:8", "allgather", 520), ("fc:8", "alltoall", 66)])
def test_engines_agree_past_4096_chunks(spec, kind, k):
    # 4,160 and 4,224 chunks: rows of 65 and 66 words, and the Python engine still runs in a second
    topo = build(spec, alpha=0.5e-6, bandwidth=50 * GB)
    collective = make_collective(kind, topo.num_npus, k)
    assert collective.num_chunks > 4096
    for seed in range(2):
        python = _run(topo, collective, seed, "causal", "python")
        assert not isinstance(python, str)
        assert _same(python, _run(topo, collective, seed, "causal", "compiled"))


def test_switch_views_and_reductions_agree_end_to_end():
    for spec, kind in [("switch:6", "allgather"), ("rfs:2x2x2", "allreduce"), ("dgx1", "reducescatter")]:
        problem = Problem(build(spec), make_collective(kind, build(spec).num_npus, 2), 2**26)
        python, compiled = (call.synthesize(Tacos(), problem, time_limit=60, seed=4, engine=engine, switch_degree="full")
                            .algorithms[0] for engine in ("python", "compiled"))
        assert python.meta["claimed_time"] == compiled.meta["claimed_time"]
        assert python.transfers == compiled.transfers
        assert (python.meta["engine"], compiled.meta["engine"]) == ("python", "compiled")


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**64), bounds=st.lists(st.integers(1, 2**32 - 1), min_size=1, max_size=20))
def test_the_compiled_mersenne_twister_is_cpythons(seed, bounds):
    reference = random.Random(seed)
    state = np.array(reference.getstate()[1], dtype=np.int64)
    for bound in bounds:  # interleaved as the engines interleave them
        assert compiled_bits.random_float(state) == reference.random()
        assert compiled_bits.randbelow(state, bound) == reference.randrange(bound)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 9000), data=st.data())
def test_ordered_sets_drain_their_members_in_order_and_empty(n, data):
    members = data.draw(st.lists(st.integers(0, n - 1), max_size=300))
    full = data.draw(st.booleans())
    ordered = compiled_bits.ordered_set(n, full=full)
    out = np.full(n + 1, -1, dtype=np.int64)
    for rounds in range(2):  # the second round finds the set empty, then refilled
        for i in members:
            _add(ordered, i)
        count = _drain(ordered, out)
        expected = sorted(set(members) | (set(range(n)) if full and rounds == 0 else set()))
        assert out[:count].tolist() == expected
        assert not ordered[0].any() and not ordered[1].any()


@njit
def _add(ordered, i):
    compiled_bits.set_add(ordered, i)


@njit
def _drain(ordered, out):
    return compiled_bits.set_drain(ordered, out)


@settings(max_examples=80, deadline=None)
@given(words=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=6), garbage=st.integers(1, 2**64 - 1),
       seed=st.integers(0, 2**32), data=st.data())
def test_a_draw_within_a_span_is_the_python_draw_over_the_whole_row(words, garbage, seed, data):
    assume(any(words))
    first = next(i for i, w in enumerate(words) if w)
    last = max(i for i, w in enumerate(words) if w)
    pad_before, pad_after = data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3))
    row = [garbage] * pad_before + words + [garbage] * pad_after  # words outside the span must not be read
    rows = np.array([row], dtype=np.uint64)
    value = sum(w << (64 * i) for i, w in enumerate([0] * pad_before + words))
    reference = random.Random(seed)
    state = np.array(reference.getstate()[1], dtype=np.int64)
    count = sum(bin(w).count("1") for w in words)
    drawn = compiled_bits.random_bit_within(rows, 0, pad_before + first, pad_before + last, count, state)
    assert drawn == python_engine.random_bit(value, reference)
    assert compiled_bits.random_float(state) == reference.random()  # the same numbers were used up


@settings(max_examples=80, deadline=None)
@given(data=st.data(), words=st.integers(1, 40))
def test_the_nth_offer_of_a_link_is_the_python_nth_bit(data, words):
    # rows of up to 40 words: up to three group counts of 16 words each. Rank 0 holds the offered
    # chunks and more, rank 1 needs them and others (disjoint extras), and the rows the link does
    # not read are noise: only the AND of rank 0's held and rank 1's need is offered
    def row_of_words():
        return data.draw(st.lists(st.sampled_from([0, 0, 1, 2**63, 2**64 - 1, 0x5555]) | st.integers(0, 2**64 - 1),
                                  min_size=words, max_size=words))
    row, extra, noise = row_of_words(), row_of_words(), row_of_words()
    value = sum(w << (64 * i) for i, w in enumerate(row))
    assume(value)
    target = data.draw(st.integers(0, value.bit_count() - 1))
    held_extra = [x & ~r for x, r in zip(extra, row)]
    need_extra = [~x & ~r & (2**64 - 1) & n for x, r, n in zip(extra, row, noise)]
    held = np.array([[r | x for r, x in zip(row, held_extra)], noise], dtype=np.uint64)
    need = np.array([noise, [r | x for r, x in zip(row, need_extra)]], dtype=np.uint64)
    groups = np.zeros((1, compiled_offers.group_count(words)), dtype=compiled_offers.GROUP_COUNT)
    counts = np.zeros(1, dtype=np.int64)
    compiled_offers.initial_offers(np.array([0]), np.array([1]), held, need, groups, counts)
    assert counts[0] == value.bit_count()
    assert compiled_nth_offer(held, need, groups, target) == python_engine.nth_bit(value, target)


@njit
def compiled_nth_offer(held, need, groups, target):
    return compiled_offers.nth_offer(0, 1, held, need, groups, 0, target)


def test_a_match_draws_uniformly_from_the_union_of_its_links_offers():
    # chunk 0 is offered by three links, chunk 1 by two, chunks 2-5 by one: drawing a link by its
    # offer count and then one of its chunks would favour chunk 0 three to one; the draw keeps a
    # chunk only from the first link offering it, so every chunk of the union is equally likely
    engine = object.__new__(python_engine._Engine)
    engine.offer = [0b000111, 0b000011, 0b110001, 0b001000]
    engine.rng = random.Random(7)
    counts = [0] * 6
    draws = 60_000
    for _ in range(draws):
        counts[engine._draw([0, 1, 2, 3], [])] += 1
    assert all(abs(c - draws / 6) < 0.03 * draws / 6 for c in counts), counts
    # chunks already drawn in the match are never drawn again
    assert {engine._draw([0, 1, 2, 3], [0, 1, 2, 3]) for _ in range(200)} == {4, 5}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topo=switchless_fabrics(), kind=st.sampled_from(["allgather", "broadcast", "alltoall"]), seed=st.integers(0, 99))
def test_offers_stay_what_each_link_can_carry(topo, kind, seed):
    # offers are kept on fabrics of one link cost
    topo = _one_cost(topo)
    collective = make_collective(kind, topo.num_npus, 2, 0 if kind == "broadcast" else None)
    fabric = matching.Fabric.of(topo, collective, 1e6)
    engine = python_engine._Engine(fabric, random.Random(seed), "causal", float("inf"))
    stops = {"n": 0}
    match = engine._match

    def checked_match(v, *args):  # before every match: offer[e] == held[src] & need[dst]
        stops["n"] += 1
        assert all(engine.offer[e] == engine.held[u] & engine.need[w]
                   for e, (u, w) in enumerate(zip(fabric.src, fabric.dst)))
        return match(v, *args)
    engine._match = checked_match
    try:
        engine.run(record=False)
    except TopologyError:
        pass  # unreachable chunks (All-to-All on a sparse fabric): checked up to there
    assert stops["n"] > 0


def test_the_engine_names_the_digest_of_the_helpers_it_inlines():
    # numba reuses the engine's cached machine code until the engine's own file changes
    assert compiled_engine.HELPERS_DIGEST == engines_helpers_digest(), (
        f"{', '.join(HELPER_FILES)} changed: set HELPERS_DIGEST = \"{engines_helpers_digest()}\" "
        f"in formulations/tacos/compiled_engine.py")


HELPER_FILES = ("compiled_bits.py", "compiled_calendar.py", "compiled_fronts.py", "compiled_offers.py")


def engines_helpers_digest() -> str:
    import hashlib
    from pathlib import Path

    folder = Path(compiled_engine.__file__).parent
    text = b"".join((folder / name).read_bytes() for name in HELPER_FILES)
    return hashlib.sha256(text).hexdigest()[:16]


def test_a_run_that_does_not_record_keeps_only_counts():
    topo = build("mesh:4x4")
    collective = make_collective("allgather", 16, 1)
    full = greedy_all_gather(topo, collective, 1e6, 0, engine="compiled")
    bare = greedy_all_gather(topo, collective, 1e6, 0, engine="compiled", record=False)
    assert bare.claimed_time == full.claimed_time and bare.deliveries == full.deliveries == 16 * 15
    assert len(bare.src) == 0
    with pytest.raises(ValueError, match="record=False"):
        to_algorithm(topo, collective, 1e6, bare, {})


def test_the_compiled_engine_stops_at_the_deadline():
    topo = build("mesh:8x8")  # 33 events: more than the first batch of 16
    with pytest.raises(matching.OutOfTime):
        greedy_all_gather(topo, make_collective("allgather", 64, 1), 1e6, 0, engine="compiled", deadline=0.0)
    result = call.synthesize(Tacos(), Problem(topo, make_collective("allgather", 64, 1), 2**26), time_limit=0.0, seed=0,
                                engine="compiled")
    assert result.status == "timeout" and not result.algorithms


def test_engine_choice():
    assert choose_engine("python", 10**9) == "python"
    assert choose_engine("compiled", 1) == "compiled"
    assert choose_engine("auto", engines.COMPILED_FROM) == "compiled"
    with pytest.raises(ValueError, match="engine must be one of"):
        choose_engine("fast", 1)


def test_without_numba_auto_falls_back_and_compiled_is_refused(monkeypatch):
    monkeypatch.setattr(workbench.compiled.engines, "compiled_available", lambda: False)
    assert choose_engine("auto", 10**9) == "python"
    with pytest.raises(ValueError, match="needs numba"):
        choose_engine("compiled", 1)


@pytest.mark.parametrize("engine", ["python", "compiled"])
def test_a_duplicate_on_a_fabric_of_one_link_cost_is_an_engine_error(engine, monkeypatch):
    # It cannot happen (matching.DUPLICATE_ON_ONE_COST), so no arrival times are kept there: an engine
    # put out of step (python: link 0 -> 1 made to offer the chunk rank 1 starts with; compiled: a
    # start where rank 1 needs the chunk it holds, and rank 0 holds it too) stops instead of
    # relabelling from times it does not have.
    if engine == "python":
        start = python_engine._Engine.__init__

        def corrupted(self, *args, **kwargs):
            start(self, *args, **kwargs)
            self.offer[0] |= 1 << 1
        monkeypatch.setattr(python_engine._Engine, "__init__", corrupted)
    else:
        fill = compiled_engine.initial_offers

        def corrupted(src, dst, held, need, groups, counts):
            held[0, 0] |= np.uint64(1 << 1)  # rank 0 holds chunk 1 too, and rank 1 needs it
            need[1, 0] |= np.uint64(1 << 1)
            fill(src, dst, held, need, groups, counts)
        monkeypatch.setattr(compiled_engine, "initial_offers", corrupted)
    topo = build("ring:2")
    assert topo.links[0].src == 0 and topo.links[0].dst == 1
    with pytest.raises(RuntimeError, match="arrived twice"):
        greedy_all_gather(topo, make_collective("allgather", 2, 1), 1e6, 0, engine=engine)
