"""Property tests: random valid schedules verify; random corruptions are caught; bounds hold."""

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pytest

from schedules import random_algorithm
from strategies import problems
from workbench.plugin import call
from workbench.model.algorithm import Transfer
from workbench.bounds import lower_bounds
from workbench.checking.simulate import simulate
from workbench.checking.verify import InvalidAlgorithm, verify

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODELS = [dict(), dict(link_model="blocking"), dict(order="fifo"), dict(switch_model="store-and-forward"),
          dict(order="fifo", link_model="blocking")]


RANDOMS = st.randoms(use_true_random=False)  # every choice a drawn one, so failures shrink


@SETTINGS
@given(rng=RANDOMS, kind=st.sampled_from(["ag", "bc", "rs", "ar"]))
def test_random_valid_schedules_verify_and_bounds_hold(rng, kind):
    algo = random_algorithm(rng, kind)
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
@given(rng=RANDOMS, kind=st.sampled_from(["ag", "rs", "ar"]),
       corruption=st.sampled_from(["drop", "rechunk", "redirect", "double", "opflip"]))
def test_random_corruptions_are_caught(rng, kind, corruption):
    algo = random_algorithm(rng, kind)
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


ALL_KINDS = ("allgather", "reducescatter", "allreduce", "alltoall", "broadcast", "reduce", "gather", "scatter")


@SETTINGS
@given(problem=problems(ALL_KINDS), seed=st.integers(0, 3))
def test_bfs_trees_output_verifies_on_random_topologies(problem, seed):
    from workbench.plugin.registry import get_formulation

    result = call.synthesize(get_formulation("bfs-trees"), problem, time_limit=10, seed=seed)
    assert result.status == "feasible"
    verify(result.algorithms[0])


@SETTINGS
@given(data=st.data(), name=st.sampled_from(["tacos", "ring", "direct", "rhd", "dbt"]), seed=st.integers(0, 3))
def test_tacos_and_baselines_verify_on_random_topologies(data, name, seed):
    from workbench.plugin.registry import get_formulation

    kinds = ("allreduce",) if name == "dbt" else ("allgather", "reducescatter", "allreduce")
    npus = st.sampled_from([2, 4, 8]) if name == "rhd" else None  # recursive halving-doubling: powers of two
    problem = data.draw(problems(kinds, npus=npus), label="problem")
    params = {"restarts": 2, "switch_degree": data.draw(st.sampled_from([1, "full"]))} if name == "tacos" else {}
    result = call.synthesize(get_formulation(name), problem, time_limit=10, seed=seed, **params)
    assert result.status == "feasible", result.message
    verify(result.algorithms[0])


@SETTINGS
@given(problem=problems(("allgather", "reducescatter")))
def test_double_binary_trees_refuse_anything_but_allreduce(problem):
    from workbench.plugin.registry import get_formulation

    assert call.synthesize(get_formulation("dbt"), problem, time_limit=10, seed=0).status == "error"
