"""TE-CCL: epoch model, MILP with copy, LP with path extraction, A* rounds, claims vs simulation."""

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from workbench.plugin import call
from formulations.teccl import Teccl
from formulations.teccl.epochs import epoch_graph
from formulations.teccl.milp import _build
from strategies import problems
from workbench.model.collective import custom_collective, make_collective
from workbench.plugin.registry import Problem
from workbench.checking.simulate import simulate
from workbench.topology import Link, Topology, build
from workbench.checking.verify import verify


def _run(topology, collective, size, **params):
    limit = params.pop("time_limit", 60)
    return call.synthesize(Teccl(), Problem(topology, collective, size), time_limit=limit, seed=0, **params)


def _min_horizon(graph, collective, relax: bool) -> int:
    for horizon in range(1, 15):
        model, *_ = _build(graph, collective, horizon, "paper", None, True)
        if relax:
            model.integer = [False] * model.num_cols
        if model.solve("highs", time_limit=20).status in ("optimal", "feasible"):
            return horizon
    raise AssertionError("no feasible horizon")


# ------------------------------------------------------------------------------------ toy cases (docs/methods/teccl.md 8.4)
def test_integrality_blocks_the_half_chunk_copy_artefact():
    # two chunks of rank 0 to everyone; with fractional flows a node can forward half a chunk on
    # two links and a receiver counts the two (identical) halves as one whole chunk
    bw = {(0, 2): 2e6, (1, 4): 2e6, (2, 0): 1e6, (2, 3): 2e6, (2, 4): 1e6, (3, 4): 1e6, (4, 1): 2e6}
    topology = Topology.create(5, [Link(u, v, 0.0, b) for (u, v), b in bw.items()])
    collective = custom_collective(5, [[0], [0]], [[1, 2, 3, 4], [1, 2, 3, 4]])
    graph = epoch_graph(topology, 1e6)
    assert _min_horizon(graph, collective, relax=True) < _min_horizon(graph, collective, relax=False)
    result = _run(topology, collective, 2e6)
    verify(result.algorithms[0])
    assert result.algorithms[0].meta["epochs"] == _min_horizon(graph, collective, relax=False)


@pytest.mark.parametrize("buffer_limit", [None, 1])
def test_three_sources_one_relay_finish_in_three_seconds(buffer_limit):
    # Fig. 2c: s1, s2 -> h -> d and s3 -> d, 1 MB chunks at 1 MB/s: 3 s with or without buffering at h
    links = [Link(0, 3, 0.0, 1e6), Link(1, 3, 0.0, 1e6), Link(3, 4, 0.0, 1e6), Link(2, 4, 0.0, 1e6)]
    topology = Topology.create(5, links)
    collective = custom_collective(5, [[0], [1], [2]], [[4], [4], [4]])
    result = _run(topology, collective, 3e6, method="milp", buffer_limit=buffer_limit)
    assert result.status == "optimal"
    assert math.isclose(result.claimed_times[0], 3.0)
    verify(result.algorithms[0])
    assert simulate(result.algorithms[0]).collective_time <= 3.0 + 1e-9


# ------------------------------------------------------------------------------------ lower bounds
def test_ndv2_allgather_respects_the_ib_bound():
    topology = build("ndv2:2")
    result = _run(topology, make_collective("allgather", 16, 1), 1e9, time_limit=8)
    algo = result.algorithms[0]
    verify(algo)
    assert result.claimed_times[0] >= 0.040 - 1e-9  # 8 remote chunks over one 12.5 GB/s link
    assert simulate(algo).collective_time >= 0.040 - 1e-9
    assert math.isclose(result.claimed_times[0], 0.04375)  # 35 fast epochs, the paper's optimum


def test_ndv2_alltoall_respects_the_ib_bound():
    topology = build("ndv2:2")
    result = _run(topology, make_collective("alltoall", 16, 1), 1e9, epoch="slowest", time_limit=300)
    algo = result.algorithms[0]
    verify(algo)
    assert result.claimed_times[0] >= 0.320 - 1e-9  # 64 chunks of 62.5 MB over one 12.5 GB/s link
    assert simulate(algo).collective_time >= 0.320 - 1e-9


# ------------------------------------------------------------------------------------ claims vs simulation
@pytest.mark.parametrize("spec, kind, params", [
    ("ndv2:1", "allgather", {}),
    ("dgx2:1", "allgather", {"switch_model": "copy"}),
    ("ndv2:1", "alltoall", {}),
    ("ndv2:2", "allgather", {"time_limit": 10}),
    ("dgx2:1", "allgather", {"switch_model": "hyperedge", "time_limit": 10}),
])
def test_simulated_time_within_one_epoch_of_the_claim(spec, kind, params):
    topology = build(spec)
    size = 2e6 * topology.num_npus
    result = _run(topology, make_collective(kind, topology.num_npus, 1), size, alpha_threshold=0.0, **params)
    algo = result.algorithms[0]
    verify(algo)
    tau = algo.meta["epoch_duration"]
    assert simulate(algo).collective_time <= result.claimed_times[0] + tau + 1e-12


@pytest.mark.parametrize("c", [1, 2, 3, 4])
def test_table7_allgather_instances_match_sccl(c):
    # DGX-1, 25 KB chunks, alpha 0, K = SCCL's rounds (c + 1): transfer time (c + 1) x 1 us, 0% difference
    topology = build("dgx1", alpha=0.0)
    result = _run(topology, make_collective("allgather", 8, c), 25e3 * 8 * c, epoch="slowest", epochs=c + 1)
    assert result.status == "optimal"
    assert math.isclose(result.claimed_times[0], (c + 1) * 1e-6, rel_tol=1e-9)
    verify(result.algorithms[0])


# ------------------------------------------------------------------------------------ collectives and methods
@pytest.mark.parametrize("kind", ["allgather", "alltoall", "reducescatter", "allreduce"])
def test_every_collective_verifies(kind):
    topology = build("ndv2:1")
    result = _run(topology, make_collective(kind, 8, 1), 8e6)
    algo = result.algorithms[0]
    verify(algo)
    assert algo.collective.kind == kind


def test_lp_pieces_become_whole_subchunks():
    topology = build("ndv2:1")
    result = _run(topology, make_collective("alltoall", 8, 1), 8e6, lp_subchunks=4)
    algo = result.algorithms[0]
    assert algo.collective.chunks_per_rank == 4 and algo.meta["method"] == "lp"
    verify(algo)


def test_astar_against_the_milp():
    # one NDv2 box: the MILP proves its optimum in well under a second, so A* can be held to it
    topology = build("ndv2:1")
    collective = make_collective("allgather", 8, 1)
    astar = _run(topology, collective, 1e6, method="astar", time_limit=30)
    milp = _run(topology, collective, 1e6, method="milp", time_limit=60)
    verify(astar.algorithms[0])
    assert astar.stats["rounds"] >= 1
    assert milp.status == "optimal"
    assert astar.claimed_times[0] >= milp.claimed_times[0] * 0.999


def test_early_stop_and_unknown_parameters():
    topology = build("ndv2:1")
    result = _run(topology, make_collective("allgather", 8, 1), 8e6, early_stop=True)
    assert result.algorithms[0].meta["mip_gap"] == 0.3
    with pytest.raises(ValueError, match="teccl has no parameter 'epochz'"):
        _run(topology, make_collective("allgather", 8, 1), 8e6, epochz=3)
    with pytest.raises(ValueError, match="switch_model: expected"):
        _run(topology, make_collective("allgather", 8, 1), 8e6, switch_model="sharp")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems(("allgather", "alltoall", "reducescatter", "allreduce"), max_npus=5),
       method=st.sampled_from(["auto", "astar"]))
def test_output_verifies_on_random_small_topologies(problem, method):
    assume(not (method == "astar" and problem.collective.kind == "alltoall"))  # A* has no copy-free LP path
    result = _run(problem.topology, problem.collective, problem.size_bytes, method=method, time_limit=30)
    assert result.status in ("optimal", "feasible", "timeout"), result.message
    verify(result.algorithms[0])


def test_the_greedy_warm_start_finishes_every_demand():
    from formulations.teccl import greedy
    from formulations.teccl.epochs import finish_epoch, prune_flows

    topology = build("ring:4")
    collective = make_collective("allgather", 4)
    graph = epoch_graph(topology, 1e6)
    flows, finish = greedy.greedy_schedule(graph, collective)
    assert prune_flows(graph, collective, flows) == flows and finish_epoch(graph, collective, flows) == finish
    assert finish >= 2 and len(flows) == 12  # each chunk reaches 3 ranks, one flow per arrival on a ring


def test_the_greedy_spends_a_no_copy_crossing_on_a_destination():
    # a no-copy switch carries a chunk once: an All-to-All chunk behind switch:4 has one way to its
    # destination, so a greedy that crossed to another NPU first could never finish
    from formulations.teccl.greedy import greedy_schedule

    topology = build("switch:4")
    graph = epoch_graph(topology, 1e6, switch_model="no-copy")
    flows, finish = greedy_schedule(graph, make_collective("alltoall", 4))
    crossings = [(c, graph.edges[e].src) for c, e, _ in flows if graph.is_switch(graph.edges[e].src)]
    assert len(crossings) == len(set(crossings)) == 12  # every chunk crosses once, straight to its destination
    assert finish >= 2
    result = _run(topology, make_collective("alltoall", 4), 4e6, method="milp", switch_model="no-copy")
    assert result.status in ("optimal", "feasible"), result.message
    verify(result.algorithms[0])
    # an All-Gather needs a chunk to cross twice: no schedule, and the message says why
    with pytest.raises(ValueError, match="no-copy switches carry each chunk once"):
        greedy_schedule(graph, make_collective("allgather", 4))


def test_the_greedy_still_relays_behind_a_no_copy_switch():
    # chunk 0 from NPU 0 must reach 2 and 3; 3 only through NPU 1, which wants nothing: spending the one
    # crossing on 2 (a destination) strands 3, so the greedy falls back to the plain earliest arrivals
    from formulations.teccl.greedy import greedy_schedule

    links = [(0, 4), (4, 1), (4, 2), (1, 3), (1, 2), (2, 0), (3, 0)]
    topology = Topology.create(4, [Link(u, v, 1e-6, 1e9) for u, v in links], num_switches=1)
    collective = custom_collective(4, [[0]], [[2, 3]])
    graph = epoch_graph(topology, 1e6, switch_model="no-copy")
    flows, _ = greedy_schedule(graph, collective)
    crossings = [graph.edges[e].dst for _, e, _ in flows if graph.is_switch(graph.edges[e].src)]
    assert crossings == [1]
    result = _run(topology, collective, 1e6, method="milp", switch_model="no-copy")
    assert result.status in ("optimal", "feasible"), result.message
    verify(result.algorithms[0])
