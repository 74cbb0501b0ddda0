"""TACOS: regression oracles (docs/methods/tacos.md 2.8), small fixed answers (2.7), reductions, switches, errors."""

import collections

import pytest

from workbench.plugin import call
from workbench.plugin.registry import Unsupported
from formulations.tacos import Tacos, greedy_all_gather
from workbench.model.collective import make_collective
from workbench.plugin.registry import Problem, get_formulation
from workbench.checking.simulate import simulate
from workbench.topology import Link, Topology, build
from workbench.checking.verify import verify

GiB = 2**30


def hetero_mesh(width, height, alpha, bw_x, bw_y):
    links = []
    for y in range(height):
        for x in range(width):
            v = y * width + x
            if x + 1 < width:
                links += [Link(v, v + 1, alpha, bw_x), Link(v + 1, v, alpha, bw_x)]
            if y + 1 < height:
                links += [Link(v, v + width, alpha, bw_y), Link(v + width, v, alpha, bw_y)]
    return Topology.create(width * height, links, name=f"hetero{width}x{height}")


def grid(spec, alpha, bw):
    return build(spec, alpha=alpha * 1e-6, bandwidth=bw * GiB)


# (name, topology factory, k, total MiB, expected minimum greedy estimate in us), docs/methods/tacos.md 2.8
ORACLES = [
    ("Mesh5x5", lambda: grid("mesh:5x5", 0.5, 50), 1, 1024, 9606.0),
    ("Mesh10x10", lambda: grid("mesh:10x10", 1, 100), 2, 1024, 5049.0),
    ("Mesh7x12", lambda: grid("mesh:7x12", 1, 100), 3, 4096, 19966.27),
    ("Hetero5x5", lambda: hetero_mesh(5, 5, 0.5e-6, 50 * GiB, 75 * GiB), 1, 1024, 8005.0),
    ("Hetero8x5", lambda: hetero_mesh(8, 5, 1e-6, 80 * GiB, 35 * GiB), 2, 1024, 8595.43),
    ("Hetero7x10", lambda: hetero_mesh(7, 10, 1.5e-6, 16 * GiB, 73 * GiB), 3, 4096, 44612.47),
    ("Torus3x3x3", lambda: grid("torus:3x3x3", 0.5, 50), 1, 1024, 3706.20),
    ("Torus3x4x5", lambda: grid("torus:3x4x5", 0.5, 50), 2, 2048, 6676.67),
    ("Torus4x2x3", lambda: grid("torus:4x2x3", 0.5, 50), 3, 3072, 11673.67),
    ("Hypercube3x3x3", lambda: grid("mesh:3x3x3", 0.5, 50), 1, 1024, 6671.17),
    ("Hypercube3x4x5", lambda: grid("mesh:3x4x5", 0.5, 50), 2, 2048, 13353.33),
    ("Hypercube4x2x3", lambda: grid("mesh:4x2x3", 0.5, 50), 3, 3072, 19178.17),
]
SLOW = {"Mesh10x10", "Mesh7x12", "Hetero7x10", "Torus3x4x5", "Hypercube3x4x5"}


def _oracle_params():
    for case in ORACLES:
        marks = [pytest.mark.slow] if case[0] in SLOW else []
        yield pytest.param(*case, id=case[0], marks=marks)


@pytest.mark.parametrize("name, factory, k, mib, expected_us", list(_oracle_params()))
def test_reference_regression_oracles(name, factory, k, mib, expected_us):
    topo = factory()
    n = topo.num_npus
    collective = make_collective("allgather", n, k)
    chunk = (mib * 2**20) // (n * k)  # the reference's integer division
    problem = Problem(topo, collective, chunk * n * k)
    best = None
    for seed in range(20):
        result = call.synthesize(Tacos(), problem, time_limit=60, seed=seed)
        algorithm = result.algorithms[0]
        estimate = algorithm.meta["greedy_time"]  # the reference's "collective time"
        if best is None or estimate < best.meta["greedy_time"]:
            best = algorithm
    assert best.meta["greedy_time"] * 1e6 == pytest.approx(expected_us, rel=0.01)
    verify(best)
    # switchless: the blocking simulation never finishes later than the synthesizer's plan
    assert simulate(best, link_model="blocking").collective_time <= best.meta["greedy_time"] * (1 + 1e-9)
    # the claim is the default model's time of the schedule written
    assert simulate(best).collective_time == best.meta["claimed_time"]


def _spans(topo: Topology, k: int = 1, seeds=range(50)) -> collections.Counter:
    """Unit link cost (alpha 0, chunk = bandwidth): claimed time counts spans."""
    unit = topo.with_uniform(alpha=0.0, bandwidth=1.0)
    collective = make_collective("allgather", topo.num_npus, k)
    return collections.Counter(round(greedy_all_gather(unit, collective, 1.0, seed).claimed_time)
                               for seed in seeds)


FIG6 = Topology.create(3, [(0, 1, 0.0, 1.0), (0, 2, 0.0, 1.0), (1, 2, 0.0, 1.0), (2, 0, 0.0, 1.0)], name="fig6")


@pytest.mark.parametrize("topo, spans", [
    (FIG6, {2}), (build("fc:4"), {1}), (build("ring:4"), {2}), (build("uniring:4"), {3}), (build("line:4"), {3}),
    (build("ring:8"), {4}), (build("mesh:4x4"), {8}),
])
def test_small_fixed_answers(topo, spans):
    assert set(_spans(topo)) == spans


def test_small_distributions():
    assert set(_spans(build("mesh:3x3"), seeds=range(100))) <= {4, 5, 6}
    assert 4 in _spans(build("mesh:3x3"), seeds=range(100))  # the lower bound is reached sometimes
    assert set(_spans(build("mesh:3x3"), k=2, seeds=range(40))) <= {8, 9}
    assert set(_spans(build("torus:4x4"), seeds=range(40))) <= {4, 5}


def test_seeded_and_reproducible():
    problem = Problem(grid("mesh:4x4", 0.5, 50), make_collective("allgather", 16, 2), GiB)
    a = call.synthesize(Tacos(), problem, time_limit=10, seed=5).algorithms[0]
    b = call.synthesize(Tacos(), problem, time_limit=10, seed=5).algorithms[0]
    assert [(t.src, t.dst, t.chunks) for t in a.transfers] == [(t.src, t.dst, t.chunks) for t in b.transfers]


def test_restarts_keep_the_best_and_report_incumbents():
    problem = Problem(grid("mesh:3x3", 0.5, 50), make_collective("allgather", 9, 1), GiB)
    seen = []
    result = call.synthesize(Tacos(), problem, time_limit=30, seed=0, restarts=10, on_incumbent=seen.append)
    singles = [call.synthesize(Tacos(), problem, time_limit=30, seed=s).algorithms[0].meta["greedy_time"]
               for s in range(10)]
    assert result.algorithms[0].meta["greedy_time"] == pytest.approx(min(singles))
    assert seen and seen[-1].meta["greedy_time"] == pytest.approx(min(singles))
    assert seen[-1].meta["claim_model"] == "pipelined/in-order/cut-through"  # incumbents carry their claim
    assert result.stats["restarts_done"] == 10


@pytest.mark.parametrize("kind", ["reducescatter", "allreduce", "broadcast", "reduce"])
def test_reductions_by_reversal(kind):
    topo = grid("torus:3x3", 0.5, 50)
    root = 4 if kind in ("broadcast", "reduce") else None
    problem = Problem(topo, make_collective(kind, 9, 2, root), GiB)
    algorithm = call.synthesize(Tacos(), problem, time_limit=30, seed=1).algorithms[0]
    verify(algorithm)
    if kind in ("reducescatter", "reduce"):
        assert all(t.op == "reduce" for t in algorithm.transfers)
    assert simulate(algorithm, link_model="blocking").collective_time <= algorithm.meta["greedy_time"] * (1 + 1e-9)


def test_allreduce_phase_two_waits_for_phase_one():
    topo = grid("ring:6", 0.5, 50)
    problem = Problem(topo, make_collective("allreduce", 6, 1), GiB)
    algorithm = call.synthesize(Tacos(), problem, time_limit=30, seed=0).algorithms[0]
    result = simulate(algorithm)
    copies = [t for t in algorithm.transfers if t.op == "copy"]
    reduces = [t for t in algorithm.transfers if t.op == "reduce"]
    for copy in copies:  # a phase-2 send of chunk c from its owner starts after c is fully reduced there
        if copy.src == copy.chunk % 6:
            last = max(result.end[r.id] for r in reduces if r.dst == copy.src and r.chunk == copy.chunk)
            assert result.start[copy.id] >= last - 1e-15


def test_switch_unwinding_is_timed_on_the_physical_topology():
    topo = build("rfs:2x4x2", alpha=0.5e-6, bandwidth=[200 * GiB, 100 * GiB, 50 * GiB])
    problem = Problem(topo, make_collective("allreduce", 16, 1), GiB)
    for degree in (1, "full"):
        algorithm = call.synthesize(Tacos(), problem, time_limit=30, seed=0, switch_degree=degree).algorithms[0]
        assert algorithm.topology.num_switches == topo.num_switches
        assert "unwound" in algorithm.meta["synthesis_view"]
        verify(algorithm)


@pytest.mark.parametrize("mode", ["causal", "reference", "off"])
def test_replacement_modes(mode):
    topo = hetero_mesh(5, 5, 0.5e-6, 50 * GiB, 75 * GiB)
    problem = Problem(topo, make_collective("allgather", 25, 1), 1024 * 2**20)
    result = call.synthesize(Tacos(), problem, time_limit=30, seed=0, replacement=mode)
    verify(result.algorithms[0])
    assert result.stats["wasted_transfers"] > 0  # heterogeneous links: redundant arrivals happen


def test_an_unreachable_destination_is_refused_instead_of_looping():
    topo = Topology.create(3, [(0, 1, 0.0, 1e9), (1, 0, 0.0, 1e9), (2, 0, 0.0, 1e9)])
    problem = Problem(topo, make_collective("allgather", 3), 3e6)
    with pytest.raises(Unsupported, match="rank 2 is unreachable"):
        Tacos().synthesize(problem, time_limit=10, seed=0, options=Tacos.options())
    result = call.synthesize(Tacos(), problem, time_limit=10, seed=0)
    assert result.status == "error" and result.message.startswith("tacos: ") and "rank 2 is unreachable" in result.message


def test_bad_parameters():
    problem = Problem(build("ring:4"), make_collective("allgather", 4), 4e6)
    with pytest.raises(ValueError, match="replacement"):
        call.synthesize(Tacos(), problem, time_limit=10, seed=0, replacement="sometimes")
    with pytest.raises(ValueError, match="tacos has no parameter 'chunkiness'"):
        call.synthesize(Tacos(), problem, time_limit=10, seed=0, chunkiness=3)


def test_time_limit_gives_timeout():
    problem = Problem(build("mesh:16x16"), make_collective("allgather", 256, 1), 1e9)
    result = call.synthesize(Tacos(), problem, time_limit=0.05, seed=0, restarts=50)
    assert result.status == "timeout"


def test_registered():
    assert get_formulation("tacos").name == "tacos"
