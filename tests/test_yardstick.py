"""The problem's yardstick: the row status rule, bounds that do not move with a schedule's
chunking, the All-Reduce gossip bound on switched fabrics, and "optimum" only where proven."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from strategies import fabrics
from workbench.model.algorithm import Algorithm, Transfer
from workbench.bounds import gossip_bound, lower_bounds, problem_bounds
from workbench.model.collective import make_collective
from workbench.config.evaluation import Evaluation
from workbench.config.experiment import Cell
from workbench.kit.examples import ring_allgather, ring_allreduce
from workbench.run.evaluate import child_run_schedule
from workbench.run.request import CellRequest
from workbench.checking.simulate import simulate
from workbench.topology import Link, Topology, build
from workbench.checking.verify import verify
from workbench.bounds.yardstick import floor_status, settle_status

HERE = Path(__file__).resolve().parent
GiB = 2**30
MODELS = [dict(), dict(link_model="blocking"), dict(order="fifo"), dict(switch_model="store-and-forward")]


# ------------------------------------------------------------------ the status rule
def _row(monkeypatch, formulation: str, spec: str, size: float, params: dict | None = None) -> dict:
    """One cell run in this process (no child, no folder): the row fields the runner would write."""
    monkeypatch.syspath_prepend(str(HERE))
    cell = Cell("yardstick", {"label": spec, "spec": spec}, {"kind": "allgather"}, size, 1,
                {"name": formulation, "label": "x", "params": params or {}}, 0, 30.0, Evaluation())
    return child_run_schedule(CellRequest("schedule", cell), lambda kind, payload: None)


def test_an_optimal_claim_on_a_slow_schedule_is_feasible_and_keeps_its_proof(monkeypatch):
    # a one-way ring all-gather on a two-way ring: twice the bound, whatever the formulation proved
    row = _row(monkeypatch, "cell_formulations:ClaimsOptimal", "ring:4", 100e6)
    assert row["collective_time"] > 1.5 * row["bound"]
    assert row["status"] == "feasible"
    assert row["solver_status"] == "optimal" and row["model_optimal"] == "toy-steps"
    assert row["algorithm_meta"]["model_optimal"] == "toy-steps"


def test_a_feasible_schedule_that_meets_the_bound_is_optimal(monkeypatch):
    # the same ring on a one-way ring: (N-1) alphas over 1.5 ms of serialisation, inside 1%
    row = _row(monkeypatch, "cell_formulations:Slow", "uniring:4", 100e6, {"delay": 0.0})
    assert row["collective_time"] <= 1.01 * row["bound"]
    assert row["status"] == "optimal" and row["solver_status"] == "feasible" and row["model_optimal"] is None


def test_only_answers_with_a_schedule_are_judged():
    assert floor_status("optimal", 2.0, 1.0) == "feasible"
    assert floor_status("feasible", 1.005, 1.0) == "optimal"
    for status in ("timeout", "infeasible", "error"):
        assert floor_status(status, 1.0, 1.0) == status
    assert floor_status("optimal", None, 1.0) == "optimal"  # nothing simulated: nothing to judge
    row = {"status": "feasible", "collective_time": 3.0, "default_collective_time": 1.0, "bound": 1.0}
    settle_status(row)  # the default model decides, not the evaluation's
    assert row["status"] == "optimal" and row["solver_status"] == "feasible"
    row.update(bound=0.5)
    settle_status(row)  # settled again (a new bound): the formulation's answer is kept
    assert row["status"] == "feasible" and row["solver_status"] == "feasible"


# ------------------------------------------------------------------ a yardstick that is the problem's
SPECS = ["ring:4", "uniring:5", "line:3", "fc:4", "mesh:2x3", "torus:2x3", "switch:5", "rfs:2x2x2", "dgx1"]
KINDS = ["allgather", "reducescatter", "allreduce", "broadcast", "reduce", "gather", "scatter", "alltoall"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # 3 bounds each, LPs in them
@given(spec=st.sampled_from(SPECS), kind=st.sampled_from(KINDS), size=st.sampled_from([64e3, 1e6, 2**30]),
       chunks=st.tuples(st.integers(1, 4), st.integers(1, 4)), root=st.integers(0, 2))
def test_the_best_bound_does_not_depend_on_the_chunking(spec, kind, size, chunks, root):
    topology = build(spec)
    n = topology.num_npus
    # All-to-All's coupled LP on 8 NPUs runs into the 10 s limit, and two answers cut short by a
    # clock need not agree; the All-to-All LPs here stay on fabrics where they finish
    assume(kind != "alltoall" or n <= 6)
    root = root if kind in ("broadcast", "reduce", "gather", "scatter") else None
    first, second = (make_collective(kind, n, k, root) for k in chunks)
    best = problem_bounds(topology, first, size, lp_time_limit=10).best
    assert problem_bounds(topology, second, size, lp_time_limit=10).best == best
    # lower_bounds of a chunked collective is the same problem's, up to float sums and the LP's tolerance
    assert lower_bounds(topology, second, second.chunk_bytes(size), lp_time_limit=10).best == pytest.approx(best,
                                                                                                          rel=1e-6)


# ------------------------------------------------------------------ All-Reduce gossip on switched fabrics
def test_gossip_on_the_rfs_fabric_of_table_v():
    topology = build("rfs:2x4x16", alpha=0.5e-6, bandwidth=[200 * GiB, 100 * GiB, 50 * GiB])
    collective = make_collective("allreduce", topology.num_npus)
    # 2 * 127 GiB over 128 NPUs x (200 + 3 x 100 + 50) GiB/s into each, plus one alpha
    assert gossip_bound(topology, collective, collective.chunk_bytes(GiB)) >= 3.608e-3


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology=fabrics(min_npus=2, max_npus=6, switch=True), chunks=st.integers(1, 2))
def test_gossip_never_exceeds_a_ring_allreduce_on_a_switched_fabric(topology, chunks):
    n = topology.num_npus
    algorithm = ring_allreduce(n, 1e6, topology, chunks)
    bound = gossip_bound(topology, algorithm.collective, algorithm.chunk_bytes)
    for options in MODELS:
        assert bound <= simulate(algorithm, **options).collective_time * (1 + 1e-9), options


def test_a_switch_that_copies_beats_the_out_link_form():
    """Why only the NPUs' in-links count: on a star whose up-links are slow, an All-Reduce that sends
    each reduced chunk into the switch once and lets the switch copy it out beats 2(N-1)M over the
    NPUs' out-link bandwidth; the in-link form still holds."""
    n, up, down = 4, 1e9, 10e9
    links = [link for r in range(n) for link in (Link(r, n, 0.0, up), Link(n, r, 0.0, down))]
    topology = Topology.create(n, links, 1, "slow-up star")
    collective = make_collective("allreduce", n)
    transfers: list[Transfer] = []
    into = {c: [] for c in range(n)}
    for c in range(n):  # reduce-scatter: every rank's share of chunk c into rank c, through the switch
        for r in range(n):
            if r != c:
                into[c].append(len(transfers))
                transfers.append(Transfer(len(transfers), (c,), r, c, "reduce"))
    for c in range(n):  # all-gather: once into the switch, copied out to every other rank
        sent = len(transfers)
        transfers.append(Transfer(sent, (c,), c, n, "copy", tuple(into[c])))
        transfers += [Transfer(sent + 1 + i, (c,), n, r, "copy", (sent,)) for i, r in enumerate(x for x in range(n)
                                                                                                if x != c)]
    algorithm = Algorithm(topology, collective, 1e6, transfers, {})
    verify(algorithm)
    size = collective.size_bytes(algorithm.chunk_bytes)
    fastest = min(simulate(algorithm, **options).collective_time for options in MODELS)
    assert fastest < 2 * (n - 1) * size / (n * up)  # the out-link form is no bound here
    assert gossip_bound(topology, collective, algorithm.chunk_bytes) <= fastest


# ------------------------------------------------------------------ labels
def test_dgx1_allgather_at_1mb_is_a_bound_not_the_optimum():
    topology = build("dgx1")
    collective = make_collective("allgather", 8)
    bounds = problem_bounds(topology, collective, 1e6)
    assert bounds.optimum is not None and bounds.optimum_exact  # the bandwidth term is exact ...
    assert not bounds.exact and bounds.label == "bound"  # ... but nothing shows a schedule reaches it
    bounds.schedule_time = simulate(ring_allgather(8, collective.chunk_bytes(1e6), topology)).collective_time
    assert bounds.schedule_time > bounds.best and bounds.label == "bound"


def test_a_schedule_that_meets_the_bound_proves_it():
    topology = build("uniring:4", alpha=0.0)
    algorithm = ring_allgather(4, 1e6, topology)
    bounds = problem_bounds(topology, algorithm.collective, algorithm.collective.size_bytes(1e6))
    bounds.schedule_time = simulate(algorithm).collective_time
    assert bounds.exact and bounds.label == "optimum" and bounds.to_dict()["label"] == "optimum"


def test_tables_print_the_formulations_own_proof_beside_the_status():
    from workbench.reports.report_bounds import status_text

    assert status_text({"status": "feasible", "solver_status": "optimal", "model_optimal": "sccl-steps"}) == \
        "feasible (optimal in sccl-steps)"
    assert status_text({"status": "feasible", "solver_status": "optimal"}) == "feasible (solver: optimal)"
    assert status_text({"status": "optimal", "solver_status": "feasible"}) == "optimal (solver: feasible)"
    assert status_text({"status": "timeout"}) == "timeout"
