"""The per-message link overhead (docs/cost-model.md): hand-computed times, the compiled and Python
simulators agreeing, 0 changing nothing, more never being faster (in-order), bounds staying below
every simulated time, the ``workbench.algorithm/2`` file and ``--overhead`` on the command line."""

import importlib.util
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from schedules import random_algorithm
from workbench.plugin import call
from workbench.model.algorithm import FORMAT, FORMAT_2, Algorithm, AlgorithmFormatError, load_algorithm
from workbench.bounds import lower_bounds
from workbench.cli import main
from workbench.model.collective import Collective, make_collective
from workbench.kit.examples import ring_allgather, ring_allreduce, ring_reducescatter
from workbench.plugin.registry import Problem, get_formulation
from workbench.checking.simulate import LINK_MODELS, ORDERS, SWITCH_MODELS, route_segments, simulate
from workbench.topology import Link, Topology, TopologyError, build, topology_from_dict

US = 1e-6
MODELS = [dict(link_model=l, order=o, switch_model=s) for l in LINK_MODELS for o in ORDERS for s in SWITCH_MODELS]
IN_ORDER = [m for m in MODELS if m["order"] == "in-order"]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _with_overheads(topology: Topology, overheads) -> Topology:
    links = [Link(l.src, l.dst, l.alpha, l.bandwidth, o) for l, o in zip(topology.links, overheads, strict=True)]
    return Topology.create(topology.num_npus, links, topology.num_switches, topology.name, dict(topology.meta))


def _timed(algorithm: Algorithm, topology: Topology, **options):
    algorithm.topology = topology
    return simulate(algorithm, **options)


def _send(topology: Topology, messages: int, message_bytes: float, dst: int = 1) -> Algorithm:
    """``messages`` copies of one chunk each from NPU 0 to ``dst`` (one chunk per message, in order)."""
    n = topology.num_npus
    collective = Collective("custom", n, messages, tuple(frozenset({0}) for _ in range(messages)),
                            tuple(frozenset({0, dst}) for _ in range(messages)), False)
    return Algorithm.from_steps(topology, collective, message_bytes,
                                [(c, 0, dst, "copy", ()) for c in range(messages)])


ONE_LINK = Topology.create(2, [Link(0, 1, 1 * US, 10e9, 2 * US), Link(1, 0, 1 * US, 10e9, 2 * US)])
# 0 -> switch 2 -> 1: the two switch links have different overheads
THROUGH_SWITCH = Topology.create(2, [Link(0, 2, 0.5 * US, 10e9, 2 * US), Link(2, 1, 0.5 * US, 10e9, 3 * US),
                                     Link(1, 2, 0.5 * US, 10e9, 3 * US), Link(2, 0, 0.5 * US, 10e9, 2 * US)], 1)


# ------------------------------------------------------------------ hand-computed (docs/cost-model.md)
@pytest.mark.parametrize("order", ORDERS)
def test_one_message_over_one_link(order):
    pipelined = simulate(_send(ONE_LINK, 1, 1e6), order=order)
    assert pipelined.collective_time == pytest.approx(103 * US, rel=1e-12)  # o + m/B + alpha
    assert pipelined.link_busy[0] == pytest.approx(102 * US, rel=1e-12)  # o + m/B
    blocking = simulate(_send(ONE_LINK, 1, 1e6), link_model="blocking", order=order)
    assert blocking.collective_time == pytest.approx(103 * US, rel=1e-12)
    assert blocking.link_busy[0] == pytest.approx(103 * US, rel=1e-12)  # the link also waits out alpha


@pytest.mark.parametrize("order", ORDERS)
def test_pieces_pay_the_overhead_each(order):
    pipelined = simulate(_send(ONE_LINK, 4, 0.25e6), order=order)
    assert pipelined.link_busy[0] == pytest.approx(4 * 2 * US + 100 * US, rel=1e-12)  # k o + m/B
    assert pipelined.collective_time == pytest.approx(109 * US, rel=1e-12)
    blocking = simulate(_send(ONE_LINK, 4, 0.25e6), link_model="blocking", order=order)
    assert blocking.collective_time == pytest.approx(112 * US, rel=1e-12)  # 4 (o + m/4B + alpha)
    free = _send(ONE_LINK.with_uniform(overhead=0.0), 4, 0.25e6)
    assert simulate(free, order=order).collective_time == pytest.approx(101 * US, rel=1e-12)  # splitting free


def test_a_switch_segment_pays_the_largest_overhead_once_and_a_hop_its_own():
    (segment,) = route_segments(THROUGH_SWITCH, 0, 1)
    assert segment[3] == 3 * US
    cut_through = simulate(_send(THROUGH_SWITCH, 1, 1e6))
    assert cut_through.collective_time == pytest.approx(104 * US, rel=1e-12)  # max(2, 3) + 100 + 0.5 + 0.5
    used = [THROUGH_SWITCH.link_index(0, 2), THROUGH_SWITCH.link_index(2, 1)]
    assert list(cut_through.link_busy[used]) == pytest.approx([103 * US, 103 * US], rel=1e-12)
    hops = simulate(_send(THROUGH_SWITCH, 1, 1e6), switch_model="store-and-forward")
    assert hops.collective_time == pytest.approx(206 * US, rel=1e-12)  # (2 + 100 + 0.5) + (3 + 100 + 0.5)


def test_builders_give_overhead_per_dimension_and_switch_links_the_whole_of_it():
    md = build("md:R2,S4", overhead=[1 * US, 3 * US])
    assert {l.overhead for l in md.links if not md.is_switch(l.src) and not md.is_switch(l.dst)} == {1 * US}
    assert {l.overhead for l in md.links if md.is_switch(l.src) or md.is_switch(l.dst)} == {3 * US}
    assert {l.overhead for l in build("dgx1", overhead=2 * US).links} == {2 * US}  # one value for a system
    assert build("torus:2x3").min_overhead() == 0.0 and not build("torus:2x3").has_overhead()
    with pytest.raises(TopologyError, match="--overhead"):
        build("ring:4", overhead=[1 * US, 2 * US])
    with pytest.raises(TopologyError, match="overhead must be non-negative"):
        Topology.create(2, [Link(0, 1, 0.0, 1e9, -1.0)])
    unwound = build("switch:4", overhead=[2 * US]).unwind_switches()
    assert {l.overhead for l in unwound.links} == {2 * US}
    assert build("ring:3", overhead=[1 * US]).reversed().min_overhead() == 1 * US


# ------------------------------------------------------------------ the two simulators, and 0 changing nothing
def _reference_in_order(algorithm: Algorithm, blocking: bool, switch_model: str) -> list[float]:
    """The in-order pass as it was before overheads existed (docs/cost-model.md's rules, no overhead term)."""
    topology = algorithm.topology
    free = [0.0] * len(topology.links)
    end = [0.0] * len(algorithm.transfers)
    for t in algorithm.transfers:
        ready = max((end[d] for d in t.deps), default=0.0)
        nbytes = algorithm.chunk_bytes * len(t.chunks)
        for links, alpha_sum, bandwidth, _ in route_segments(topology, t.src, t.dst, switch_model):
            begin = max([ready] + [free[l] for l in links])
            serialise = nbytes / bandwidth
            release = begin + serialise + alpha_sum if blocking else begin + serialise
            for l in links:
                free[l] = release
            ready = begin + serialise + alpha_sum
        end[t.id] = ready
    return end


@SETTINGS
@given(rng=st.randoms(use_true_random=False), kind=st.sampled_from(["ag", "bc", "rs", "ar"]),
       model=st.sampled_from(IN_ORDER))
def test_zero_overhead_gives_exactly_the_times_without_it(rng, kind, model):
    algorithm = random_algorithm(rng, kind, max_ranks=6, switch_chance=0.5)
    algorithm.topology = _with_overheads(algorithm.topology, [0.0] * len(algorithm.topology.links))
    expected = _reference_in_order(algorithm, model["link_model"] == "blocking", model["switch_model"])
    for engine in ("python", "compiled"):
        assert simulate(algorithm, engine=engine, **model).end.tolist() == expected


@SETTINGS
@given(rng=st.randoms(use_true_random=False), kind=st.sampled_from(["ag", "bc", "rs", "ar"]),
       model=st.sampled_from(IN_ORDER))
def test_both_simulators_give_bit_identical_timings_with_overhead(rng, kind, model):
    pytest.importorskip("numba")
    algorithm = random_algorithm(rng, kind, max_ranks=6, switch_chance=0.5)
    overheads = [rng.choice([0.0, 0.1 * US, 1 * US, 7 * US]) for _ in algorithm.topology.links]
    algorithm.topology = _with_overheads(algorithm.topology, overheads)
    python = simulate(algorithm, engine="python", **model)
    compiled = simulate(algorithm, engine="compiled", **model)
    for field in ("start", "end", "link_busy", "link_bytes"):
        assert np.array_equal(getattr(compiled, field), getattr(python, field)), field
    for ours, theirs in zip(compiled.occupancy, python.occupancy, strict=True):
        assert np.array_equal(ours, theirs)


@SETTINGS
@given(rng=st.randoms(use_true_random=False), kind=st.sampled_from(["ag", "bc", "rs", "ar"]),
       model=st.sampled_from(IN_ORDER))
def test_more_overhead_never_makes_a_schedule_faster(rng, kind, model):
    """In order every start and arrival is a max of sums of the costs, so each only grows with them.
    (``fifo`` is greedy: a slower link can reorder it, and a schedule may then finish earlier.)"""
    algorithm = random_algorithm(rng, kind, max_ranks=6, switch_chance=0.5)
    base = algorithm.topology
    low = [rng.choice([0.0, 1 * US, 5 * US]) for _ in base.links]
    high = [o + rng.choice([0.0, 0.5 * US, 10 * US]) for o in low]
    assume(high != low)
    slower = _timed(algorithm, _with_overheads(base, high), **model)
    faster = _timed(algorithm, _with_overheads(base, low), **model)
    assert (slower.end >= faster.end).all() and (slower.start >= faster.start).all()
    assert slower.collective_time >= faster.collective_time


# ------------------------------------------------------------------ bounds stay below simulated times
def _two_tier() -> Topology:
    """NPUs 0, 1 on leaf switch 4, NPUs 2, 3 on leaf 5, both leaves on spine 6 (slower, more overhead)."""
    links = []
    for npu, leaf in ((0, 4), (1, 4), (2, 5), (3, 5)):
        links += [Link(npu, leaf, 0.25 * US, 50e9, 1 * US), Link(leaf, npu, 0.25 * US, 50e9, 1 * US)]
    for leaf in (4, 5):
        links += [Link(leaf, 6, 0.25 * US, 25e9, 2 * US), Link(6, leaf, 0.25 * US, 25e9, 2 * US)]
    return Topology.create(4, links, 3, "two-tier")


FABRICS = {"ring:6": lambda: build("ring:6", overhead=[1.5 * US]),
           "switch:4": lambda: build("switch:4", overhead=[2 * US]),
           "two-tier": _two_tier}


def _floor_schedules(topology: Topology):
    n = topology.num_npus
    for k in (1, 4):  # 4 pieces per rank: overhead paid per piece
        yield ring_allgather(n, 2e5 / k, topology, chunks_per_rank=k)
        yield ring_reducescatter(n, 2e5 / k, topology, chunks_per_rank=k)
        yield ring_allreduce(n, 2e5 / k, topology, chunks_per_rank=k)


def _formulation_schedules(topology: Topology):
    from workbench.model.collective import make_collective

    n = topology.num_npus
    for name, kind, params in (("ring", "allreduce", {}), ("direct", "alltoall", {}),
                               ("forestcoll", "allgather", {"pieces": 2})):  # 2 pieces per tree: messages in flight
        problem = Problem(topology, make_collective(kind, n, 1), 1e5 * n)
        result = call.synthesize(get_formulation(name), problem, time_limit=20, seed=0, **params)
        yield from result.algorithms


@pytest.mark.parametrize("fabric", sorted(FABRICS))
def test_bounds_stay_below_every_simulated_time_with_overhead(fabric):
    topology = FABRICS[fabric]()
    for algorithm in [*_floor_schedules(topology), *_formulation_schedules(topology)]:
        bounds = lower_bounds(algorithm.topology, algorithm.collective, algorithm.chunk_bytes)
        for model in MODELS:
            time = simulate(algorithm, **model).collective_time
            assert bounds.best <= time * (1 + 1e-9), (algorithm.collective.kind, model, bounds.to_dict(), time)


def test_a_uniform_overhead_raises_every_bound_by_itself():
    plain = build("ring:6")
    priced = build("ring:6", overhead=[3 * US])
    for algorithm in (ring_allgather(6, 1e5, plain), ring_allreduce(6, 1e5, plain)):
        before = lower_bounds(plain, algorithm.collective, algorithm.chunk_bytes).to_dict()
        after = lower_bounds(priced, algorithm.collective, algorithm.chunk_bytes).to_dict()
        for key in ("injection", "cut", "optimum", "splitting_cut", "gossip"):
            if before[key]:
                assert after[key] == pytest.approx(before[key] + 3 * US, rel=1e-12), key
        # the latency bound's path pays it per segment: three NPU hops to the farthest rank
        assert after["latency"] == pytest.approx(before["latency"] + 3 * 3 * US, rel=1e-12)


@SETTINGS
@given(rng=st.randoms(use_true_random=False), kind=st.sampled_from(["ag", "bc", "rs", "ar"]),
       model=st.sampled_from(MODELS))
def test_bounds_stay_below_random_schedules_with_overhead(rng, kind, model):
    algorithm = random_algorithm(rng, kind, max_ranks=6, switch_chance=0.5)
    overheads = [rng.choice([0.5 * US, 2 * US, 9 * US]) for _ in algorithm.topology.links]
    algorithm.topology = _with_overheads(algorithm.topology, overheads)
    bounds = lower_bounds(algorithm.topology, algorithm.collective, algorithm.chunk_bytes, lp=False)
    assert bounds.best <= simulate(algorithm, **model).collective_time * (1 + 1e-9)


# ------------------------------------------------------------------ files: /2 when needed, /1 as before
def test_format_2_round_trip_keeps_the_overheads_and_the_times(tmp_path, monkeypatch):
    algorithm = ring_allreduce(4, 1e5, build("switch:4", overhead=[2 * US]), chunks_per_rank=2)
    path = tmp_path / "ar.json"
    algorithm.save(path)
    document = json.loads(path.read_text())
    assert document["format"] == FORMAT_2
    assert all(link["overhead"] == 2 * US for link in document["topology"]["links"])
    expected = simulate(algorithm).end
    import workbench.model.algorithm_io as module

    for typed_from in (1 << 40, 0):  # the usual reader, then the typed fast path
        monkeypatch.setattr(module, "TYPED_FROM_BYTES", typed_from)
        loaded = load_algorithm(path)
        assert loaded.topology == algorithm.topology and loaded.transfers == algorithm.transfers
        assert np.array_equal(simulate(loaded).end, expected)


def test_without_overhead_the_file_is_format_1_as_before(tmp_path):
    algorithm = ring_allreduce(4, 1e5, build("switch:4"))
    document = algorithm.to_dict()
    assert document["format"] == FORMAT
    assert all(set(link) == {"src", "dst", "alpha", "bandwidth"} for link in document["topology"]["links"])
    mixed = _with_overheads(build("ring:3"), [0.0, 1 * US, 0.0, 0.0, 0.0, 0.0]).to_dict()["links"]
    assert ["overhead" in link for link in mixed] == [False, True, False, False, False, False]


def test_format_1_with_overheads_is_refused_and_format_2_without_is_read(tmp_path):
    document = ring_allgather(3, 1e5, build("ring:3", overhead=[1 * US])).to_dict()
    document["format"] = FORMAT
    with pytest.raises(AlgorithmFormatError, match="overheads need format 'workbench.algorithm/2'"):
        Algorithm.from_dict(document)
    plain = ring_allgather(3, 1e5, build("ring:3")).to_dict()
    plain["format"] = FORMAT_2
    assert Algorithm.from_dict(plain).topology == build("ring:3")


def test_topology_files_take_overhead_with_units():
    topology = topology_from_dict({"nodes": [{"id": 0}, {"id": 1}],
                                   "links": [{"src": 0, "dst": 1, "bandwidth": "10GB/s", "overhead": "1.5us",
                                              "bidirectional": True}]})
    assert [l.overhead for l in topology.links] == [1.5 * US, 1.5 * US]
    assert topology_from_dict(topology.to_dict()) == topology
    with pytest.raises(TopologyError, match=r"links\[0\]"):
        topology_from_dict({"nodes": [{"id": 0}, {"id": 1}],
                            "links": [{"src": 0, "dst": 1, "bandwidth": 1e9, "overhead": "-1us"}]})


# ------------------------------------------------------------------ the command line
def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_topology_and_bounds_take_overhead(capsys):
    code, out, _ = _run(capsys, "topology", "md:R2,S2", "--overhead", "1us,2us", "--json")
    assert code == 0 and {l.get("overhead") for l in json.loads(out)["links"]} == {1e-6, 2e-6}
    code, out, _ = _run(capsys, "topology", "ring:4", "--overhead", "1us")
    assert code == 0 and "overhead   1 us per message" in out
    argv = ["bounds", "--topology", "ring:4", "--collective", "allgather", "--size", "1MB", "--json"]
    _, plain, _ = _run(capsys, *argv)
    _, priced, _ = _run(capsys, *argv, "--overhead", "1us")
    assert json.loads(priced)["best"] == pytest.approx(json.loads(plain)["best"] + 1e-6, rel=1e-12)
    code, _, err = _run(capsys, *argv, "--overhead", "1parsec")
    assert code == 2 and "--overhead" in err


def test_cli_simulate_takes_overhead_with_and_without_topology(capsys, tmp_path):
    path = tmp_path / "ag.json"
    algorithm = ring_allgather(4, 1e5, build("uniring:4"))
    algorithm.save(path)
    _, plain, _ = _run(capsys, "simulate", str(path), "--json")
    code, own, _ = _run(capsys, "simulate", str(path), "--json", "--overhead", "2us")
    assert code == 0 and json.loads(own)["collective_time"] == pytest.approx(
        json.loads(plain)["collective_time"] + 3 * 2e-6, rel=1e-12)  # three steps, one message each
    code, given_topology, _ = _run(capsys, "simulate", str(path), "--json", "--topology", "uniring:4",
                                   "--overhead", "2us")
    assert code == 0 and json.loads(given_topology)["collective_time"] == json.loads(own)["collective_time"]
    code, _, err = _run(capsys, "simulate", str(path), "--overhead", "1us,2us")
    assert code == 2 and "--overhead" in err
    code, out, _ = _run(capsys, "verify", str(path), "--overhead", "2us", "--json")
    assert code == 0 and json.loads(out)["valid"]


def test_the_verifier_times_its_timeline_with_the_overheads():
    """A send listed after the write it reads, with no dependency on it: it starts when its link is
    free (100 us), which is when the write lands without overhead and 1 us before it lands with."""
    from workbench.checking.verify import InvalidAlgorithm, verify

    def line(overhead: float) -> Algorithm:
        topology = Topology.create(3, [Link(0, 1, 0.0, 10e9, overhead), Link(1, 2, 0.0, 10e9)])
        collective = Collective("custom", 3, 1, (frozenset({0}), frozenset({1})),
                                (frozenset({0, 1, 2}), frozenset({1, 2})), False)
        return Algorithm.from_steps(topology, collective, 1e6,
                                    [(1, 1, 2, "copy", ()), (0, 0, 1, "copy", ()), (0, 1, 2, "copy", ())])

    engines = ("python", "compiled") if importlib.util.find_spec("numba") else ("python",)
    for engine in engines:
        verify(line(0.0), engine=engine)
        with pytest.raises(InvalidAlgorithm) as caught:
            verify(line(1 * US), engine=engine)
        assert caught.value.transfer == 2


def test_experiment_topologies_take_overhead_and_cells_carry_it():
    from workbench.config.checks import ConfigError
    from workbench.config.experiment import parse_experiment
    from workbench.run.evaluate import build_topology

    def grid(**topology):
        return {"name": "o", "grid": {"topologies": [{"spec": "md:R2,S2", **topology}], "collectives": ["allgather"],
                                      "sizes": ["1MB"], "formulations": [{"name": "ring"}]}}

    cell = parse_experiment(grid(overhead=["1us", "2us"]), "o.yaml").cells()[0]
    assert {link.overhead for link in build_topology(cell.topology).links} == {1e-6, 2e-6}
    plain = parse_experiment(grid(), "o.yaml").cells()[0]
    assert "overhead" not in plain.topology.to_dict()  # older configs' cells keep their keys
    with pytest.raises(ConfigError, match=r"topologies\[0\]\.overhead"):
        parse_experiment(grid(overhead="fast"), "o.yaml")
    with pytest.raises(ConfigError, match=r"overhead: expected a duration"):
        parse_experiment(grid(overhead="-1us"), "o.yaml")


def test_the_latency_bound_charges_an_overhead_per_segment():
    from workbench.bounds import latency_bound

    ring = build("ring:8", alpha=1e-6, overhead=2e-6)  # the farthest rank is four NPU hops away
    assert latency_bound(ring, make_collective("allgather", 8), 1e3) == pytest.approx(4 * (1e-6 + 2e-6))
    star = build("switch:4", alpha=1e-6, overhead=2e-6)  # one cut-through segment through the switch
    assert latency_bound(star, make_collective("allgather", 4), 1e3) == pytest.approx(1e-6 + 2e-6)
    plain = build("ring:8", alpha=1e-6)
    assert latency_bound(plain, make_collective("allgather", 8), 1e3) == pytest.approx(4e-6)
