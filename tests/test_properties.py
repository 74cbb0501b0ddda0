"""Property tests: random valid schedules verify; random corruptions are caught; bounds hold."""

import random

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pytest

from schedules import random_algorithm, random_connected_topology
from workbench.algorithm import Transfer
from workbench.bounds import lower_bounds
from workbench.simulate import simulate
from workbench.verify import InvalidAlgorithm, verify

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODELS = [dict(), dict(link_model="blocking"), dict(order="fifo"), dict(switch_model="store-and-forward"),
          dict(order="fifo", link_model="blocking")]


def _algorithm(seed: int, kind: str):
    return random_algorithm(seed, kind)


@SETTINGS
@given(seed=st.integers(0, 10**9), kind=st.sampled_from(["ag", "bc", "rs", "ar"]))
def test_random_valid_schedules_verify_and_bounds_hold(seed, kind):
    algo = _algorithm(seed, kind)
    verify(algo)
    bounds = lower_bounds(algo.topology, algo.collective, algo.chunk_bytes, lp_time_limit=5)
    for options in MODELS:
        time = simulate(algo, **options).collective_time
        assert bounds.best <= time * (1 + 1e-9), (options, bounds.to_dict(), time)


def _renumber(transfers):
    old_to_new = {t.id: i for i, t in enumerate(transfers)}
    result = []
    for i, t in enumerate(transfers):
        deps = tuple(old_to_new[d] for d in t.deps if d in old_to_new)
        result.append(Transfer(i, t.chunks, t.src, t.dst, t.op, deps))
    return result


@SETTINGS
@given(seed=st.integers(0, 10**9), kind=st.sampled_from(["ag", "rs", "ar"]),
       corruption=st.sampled_from(["drop", "rechunk", "redirect", "double", "opflip"]))
def test_random_corruptions_are_caught(seed, kind, corruption):
    algo = _algorithm(seed, kind)
    rng = random.Random(seed + 1)
    transfers = algo.transfers
    victim = rng.randrange(len(transfers))
    t = transfers[victim]
    if corruption == "drop":
        # every schedule here writes each (node, chunk) once, and every write into an NPU is needed
        assume(kind == "ag" and not algo.topology.is_switch(t.dst))
        algo.transfers = _renumber(transfers[:victim] + transfers[victim + 1:])
    elif corruption == "rechunk":
        # a write into a switch that no later transfer reads is harmless whatever chunk it carries
        assume(not algo.topology.is_switch(t.dst))
        others = [c for c in range(algo.collective.num_chunks) if c not in t.chunks]
        assume(others)
        t.chunks = (rng.choice(others),) + t.chunks[1:]
    elif corruption == "redirect":
        assume(kind == "ag" and not algo.topology.is_switch(t.dst))
        targets = [v for v in range(algo.topology.num_npus) if v not in (t.src, t.dst)]
        assume(targets)
        t.dst = rng.choice(targets)
    elif corruption == "double":
        assume(algo.collective.combining)
        reduces = [x for x in transfers if x.op == "reduce"]
        t = rng.choice(reduces)
        algo.transfers.append(Transfer(len(transfers), t.chunks, t.src, t.dst, "reduce", (t.id,)))
    elif corruption == "opflip":
        t.op = "reduce" if t.op == "copy" else "copy"
        # copy -> reduce into an NPU can be harmless in a reduction
        assume(not (algo.collective.combining and t.op == "reduce" and not algo.topology.is_switch(t.dst)))
    with pytest.raises(InvalidAlgorithm):
        verify(algo)


@SETTINGS
@given(seed=st.integers(0, 10**9),
       kind=st.sampled_from(["allgather", "reducescatter", "allreduce", "alltoall", "broadcast", "reduce", "gather",
                             "scatter"]))
def test_bfs_trees_output_verifies_on_random_topologies(seed, kind):
    from workbench.collective import make_collective
    from workbench.registry import Problem, get_formulation

    rng = random.Random(seed)
    n = rng.randint(2, 7)
    topo = random_connected_topology(rng, n, extra=rng.randint(0, 2 * n), switch=rng.random() < 0.4)
    problem = Problem(topo, make_collective(kind, n, rng.randint(1, 2), 0 if kind in ("broadcast", "reduce", "gather",
                                                                                        "scatter") else None), 1e6)
    result = get_formulation("bfs-trees").synthesize(problem, time_limit=10, seed=seed)
    assert result.status == "feasible"
    verify(result.algorithms[0])


@SETTINGS
@given(seed=st.integers(0, 10**9), kind=st.sampled_from(["allgather", "reducescatter", "allreduce"]),
       name=st.sampled_from(["tacos", "ring", "direct", "rhd", "dbt"]))
def test_tacos_and_baselines_verify_on_random_topologies(seed, kind, name):
    from workbench.collective import make_collective
    from workbench.registry import Problem, get_formulation

    rng = random.Random(seed)
    n = rng.choice([2, 4, 8]) if name == "rhd" else rng.randint(2, 7)
    topo = random_connected_topology(rng, n, extra=rng.randint(0, 2 * n), switch=rng.random() < 0.3)
    k = rng.randint(1, 2)
    problem = Problem(topo, make_collective(kind, n, k), 1e6 * n * k)
    params = {"restarts": 2, "switch_degree": rng.choice([1, "full"])} if name == "tacos" else {}
    result = get_formulation(name).synthesize(problem, time_limit=10, seed=seed, **params)
    if name == "dbt" and kind != "allreduce":
        assert result.status == "error"
        return
    assert result.status == "feasible", result.message
    verify(result.algorithms[0])
