"""Claims the simulator reproduces, at every message size.

Every schedule formulation names the model of its claimed time in ``meta.claim_model``: one of the
simulator's models (``pipelined/in-order/cut-through``) or its own (``sccl-steps``). Where it names
a simulator model, simulating in that model gives the claim within 10% at 64 KB, 1 MB, 16 MB and
1 GiB. Also: the floor's spelling of models, ``order_by_start``, what duality carries of a claim,
``workbench simulate --model``, and a ForestColl file order that serves well in the default model.
"""

from __future__ import annotations

import json
import random

import pytest

from workbench.plugin import call
from workbench.model.algorithm import Algorithm
from workbench.cli import main
from workbench.model.collective import make_collective
from workbench.kit.duality import by_duality_phases
from workbench.plugin.registry import Problem, get_formulation
from workbench.kit.schedule import DeliveryChain, claim_in_model, order_by_start
from workbench.checking.simulate import (DEFAULT_MODEL, DEFAULT_MODEL_NAME, LINK_MODELS, ORDERS, SWITCH_MODELS,
                                SimulationError, model_name, parse_model, simulate)
from workbench.topology import build
from workbench.checking.verify import verify

KIB, MIB, GIB = 2**10, 2**20, 2**30
SIZES = (64 * KIB, MIB, 16 * MIB, GIB)
TOLERANCE = 0.10  # a claim in a simulator model is reproduced within this share


def _synth(name: str, spec: str, kind: str = "allgather", size: float = GIB, k: int = 1, **params) -> Algorithm:
    topology = build(spec)
    root = 0 if kind in ("broadcast", "reduce") else None
    problem = Problem(topology, make_collective(kind, topology.num_npus, k, root), size)
    result = call.synthesize(get_formulation(name), problem, time_limit=300, seed=0, **params)
    assert result.algorithms, result.message
    return result.algorithms[0]


def _assert_reproduced(algorithm: Algorithm, where: str) -> None:
    """The claim, simulated in the model it names, within TOLERANCE."""
    model = algorithm.meta.get("claim_model")
    assert model is not None, f"{where}: no claim_model"
    options = parse_model(model)
    assert options is not None, f"{where}: {model!r} is not a simulator model"
    claimed = algorithm.meta["claimed_time"]
    simulated = simulate(algorithm, **options).collective_time
    assert simulated == pytest.approx(claimed, rel=TOLERANCE), f"{where}: {simulated:.4g} s simulated, {claimed:.4g} claimed"


# (formulation, collective, chunks per rank, fabrics): every formulation that claims in a simulator model,
# on the fabrics where it applies (rhd: power-of-two ranks; dbt: all-reduce; hierarchical: a fabric of dimensions)
SIMULATOR_CLAIMS = [
    ("forestcoll", "allgather", 1, ("ring:8", "switch:8")),
    ("tacos", "allgather", 1, ("ring:8", "switch:8")),
    ("tacos", "allreduce", 1, ("ring:8",)),
    ("bfs-trees", "allgather", 1, ("ring:8", "switch:8", "torus:4x4")),
    ("ring", "allgather", 2, ("ring:8", "switch:8", "torus:4x4")),
    ("direct", "allgather", 1, ("ring:8", "switch:8", "torus:4x4")),
    ("rhd", "allgather", 1, ("ring:8", "switch:8", "torus:4x4")),
    ("dbt", "allreduce", 2, ("ring:8", "switch:8", "torus:4x4")),
    ("hierarchical", "allreduce", 2, ("ring:8", "switch:8", "torus:4x4")),
]


@pytest.mark.parametrize("name, kind, k, fabrics", SIMULATOR_CLAIMS, ids=[f"{c[0]}-{c[1]}" for c in SIMULATOR_CLAIMS])
def test_a_claim_in_a_simulator_model_is_reproduced_at_every_size(name, kind, k, fabrics):
    for spec in fabrics:
        for size in SIZES:
            _assert_reproduced(_synth(name, spec, kind, size, k), f"{name} {kind} on {spec} at {size} B")


@pytest.mark.slow  # 117,760 transfers per size
def test_forestcoll_claims_are_reproduced_on_a_torus():
    for size in SIZES:
        _assert_reproduced(_synth("forestcoll", "torus:4x4", size=size), f"forestcoll on torus:4x4 at {size} B")


@pytest.mark.parametrize("kind", ["reducescatter", "allreduce"])
def test_forestcoll_reductions_claim_their_own_time(kind):
    # the claim is timed on the schedule as reversed and concatenated, not summed from its halves
    for size in (64 * KIB, GIB):
        algorithm = _synth("forestcoll", "ring:8", kind, size)
        verify(algorithm)
        _assert_reproduced(algorithm, f"forestcoll {kind} at {size} B")


def test_forestcoll_file_order_serves_small_messages_as_fifo_would():
    # listed by round, each of the 512 rounds waited for the alpha of the one before: 116 us against 2.2 us
    algorithm = _synth("forestcoll", "ring:8", size=64 * KIB)
    verify(algorithm)
    in_order = simulate(algorithm).collective_time
    fifo = simulate(algorithm, order="fifo").collective_time
    assert in_order <= 1.5 * fifo, (in_order, fifo)
    assert algorithm.meta["claim_model"] == DEFAULT_MODEL_NAME


@pytest.mark.parametrize("name, params, model", [
    ("sccl", {"mode": "instance", "steps": 2, "rounds": 2, "backend": "cpsat"}, "sccl-steps"),
    ("teccl", {}, "teccl-epochs"),
    ("taccl", {}, "taccl-milp"),
])
def test_own_models_are_named(name, params, model):
    algorithm = _synth(name, "ring:4", size=MIB, **params)
    assert algorithm.meta["claim_model"] == model and algorithm.meta["claimed_time"] > 0
    assert parse_model(model) is None  # no simulator option reproduces it


# ------------------------------------------------------------------ the floor
def test_model_names_round_trip():
    for link in LINK_MODELS:
        for order in ORDERS:
            for switch in SWITCH_MODELS:
                name = model_name(link, order, switch)
                assert parse_model(name) == {"link_model": link, "order": order, "switch_model": switch}
    assert parse_model(DEFAULT_MODEL_NAME) == DEFAULT_MODEL
    assert parse_model("sccl-steps") is None
    for bad in ("pipelined/in-order", "pipelined/sideways/cut-through", "a/b/c/d"):
        with pytest.raises(SimulationError):
            parse_model(bad)


def _chain_gather(spec: str, seed: int) -> Algorithm:
    """An all-gather whose chunks walk random spanning paths hop by hop (deps from deliveries)."""
    topology = build(spec)
    n = topology.num_npus
    collective = make_collective("allgather", n, 1)
    rng = random.Random(seed)
    chain = DeliveryChain()
    for chunk in range(n):
        order = [chunk] + rng.sample([r for r in range(n) if r != chunk], n - 1)
        for src, dst in zip(order, order[1:]):
            chain.send(chunk, src, dst)
    return chain.build(topology, collective, 1e3)


def test_order_by_start_sorts_stably_and_keeps_deps_first():
    algorithm = _chain_gather("switch:6", 0)
    count = len(algorithm.transfers)
    rng = random.Random(1)
    starts = [float(rng.randrange(4)) for _ in range(count)]  # ties, and dependents planned before their deps
    before = [(t.chunks, t.src, t.dst) for t in algorithm.transfers]
    ordered = order_by_start(algorithm, starts)
    assert sorted((t.chunks, t.src, t.dst) for t in ordered.transfers) == sorted(before)
    for position, t in enumerate(ordered.transfers):
        assert t.id == position and all(d < t.id for d in t.deps)
    verify(ordered)
    # a plan whose deps come first is followed exactly, ties in their old order
    consistent = _chain_gather("switch:6", 2)
    depth = []
    for t in consistent.transfers:
        depth.append(1 + max((depth[d] for d in t.deps), default=-1))
    old = [(t.chunks, t.src, t.dst) for t in consistent.transfers]
    ordered = order_by_start(consistent, [float(d) for d in depth])
    expected = [old[i] for i in sorted(range(len(old)), key=lambda i: (depth[i], i))]
    assert [(t.chunks, t.src, t.dst) for t in ordered.transfers] == expected


def test_order_by_start_reads_t_start_and_refuses_missing_ones():
    algorithm = _chain_gather("ring:4", 0)
    with pytest.raises(ValueError, match="t_start"):
        order_by_start(algorithm)
    for t in algorithm.transfers:
        t.t_start = float(len(algorithm.transfers) - t.id)  # reverse: every dep would come last
    ordered = order_by_start(algorithm)
    assert all(d < t.id for t in ordered.transfers for d in t.deps)


def test_claim_in_model_records_the_simulated_time():
    algorithm = _chain_gather("ring:4", 3)
    claimed = claim_in_model(algorithm, "blocking/fifo/cut-through")
    assert algorithm.meta == {"claimed_time": claimed, "claim_model": "blocking/fifo/cut-through"}
    assert claimed == simulate(algorithm, link_model="blocking", order="fifo").collective_time
    with pytest.raises(ValueError, match="not a simulator model"):
        claim_in_model(algorithm, "sccl-steps")


@pytest.mark.parametrize("model, carried", [("own-steps", True), (DEFAULT_MODEL_NAME, False)])
def test_duality_carries_only_a_formulations_own_model(model, carried):
    topology = build("ring:4")

    def gather(view, collective, chunk_bytes, phase):
        algorithm = _chain_gather("ring:4", phase.index)
        algorithm = Algorithm(view, collective, chunk_bytes, algorithm.transfers, {})
        algorithm.meta.update(claimed_time=1.0, claim_model=model)
        return algorithm

    for kind in ("reducescatter", "allreduce"):
        algorithm = by_duality_phases(topology, make_collective(kind, 4, 1), 1e3, gather)
        verify(algorithm)
        assert (algorithm.meta.get("claim_model") == model) is carried


def test_simulate_takes_the_claims_model(capsys, tmp_path):
    path = tmp_path / "ag.json"
    algorithm = _chain_gather("switch:4", 0)
    claim_in_model(algorithm, "blocking/in-order/store-and-forward")
    algorithm.save(path)
    assert main(["simulate", str(path), "--json", "--model", "claim"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["collective_time"] == data["claimed_time"] and data["switch_model"] == "store-and-forward"
    assert main(["simulate", str(path), "--model", "sccl-steps"]) != 0
    assert "own model" in capsys.readouterr().err
