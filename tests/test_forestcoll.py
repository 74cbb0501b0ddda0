"""ForestColl: exact (k, U), edge splitting, arborescence packing, map-back and the pipelined schedule."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from workbench.plugin import call
from formulations.forestcoll import ForestColl, build_forest
from formulations.forestcoll.mapping import check_link_budgets
from formulations.forestcoll.packing import validate_forest
from formulations.forestcoll.reverse import reverse_periodic, reverse_serialised
from formulations.forestcoll.schedule import emit_schedule
from formulations.forestcoll.stagger import switch_visit_clashes
from workbench.model.collective import make_collective
from workbench.bounds.optimum import allgather_cut_ratio, broadcast_cut, reducescatter_cut_ratio
from workbench.plugin.registry import Problem
from workbench.checking.simulate import simulate
from workbench.topology import Link, Topology, build
from workbench.checking.verify import verify

GB = 1e9
GIB = 2**30


def _synth(topology: Topology, kind: str, size: float = GIB, **params):
    root = 0 if kind in ("broadcast", "reduce") else None
    collective = make_collective(kind, topology.num_npus, 1, root)
    result = call.synthesize(ForestColl(), Problem(topology, collective, size), time_limit=300, seed=0, **params)
    assert result.algorithms, result.message
    return result, result.algorithms[0]


def _fabric(nic_bandwidth: float) -> Topology:
    """Fabrics A/B of docs/methods/forestcoll.md section 6: two 4-GPU boxes on switches 8 and 9 @100,
    NIC switch 10 to every GPU."""
    links = []
    for g in range(8):
        box = 8 if g < 4 else 9
        links += [Link(g, box, 0.5e-6, 100 * GB), Link(box, g, 0.5e-6, 100 * GB),
                  Link(g, 10, 0.5e-6, nic_bandwidth), Link(10, g, 0.5e-6, nic_bandwidth)]
    return Topology.create(8, links, 3, "fabric")


def _two_pairs() -> Topology:
    links = [Link(0, 1, 0.5e-6, 100 * GB), Link(1, 0, 0.5e-6, 100 * GB), Link(2, 3, 0.5e-6, 100 * GB),
             Link(3, 2, 0.5e-6, 100 * GB), Link(0, 2, 0.5e-6, 1 * GB), Link(2, 0, 0.5e-6, 1 * GB)]
    return Topology.create(4, links, 0, "two-pairs")


# docs/methods/forestcoll.md section 6: (topology, k, T* for a 1 GB all-gather in seconds)
WORKED = [
    ("uniring:4", lambda: build("uniring:4"), 1, 15e-3),
    ("ring:8", lambda: build("ring:8"), 2, 8.75e-3),
    ("torus:4x4", lambda: build("torus:4x4"), 4, 4.6875e-3),
    ("dgx1", lambda: build("dgx1"), 6, 7 / 1200),
    ("two-pairs", _two_pairs, 1, 0.5),
    ("fabric-A", lambda: _fabric(12.5 * GB), 1, 10e-3),
    ("fabric-B", lambda: _fabric(25 * GB), 5, 7e-3),
]


def _check_forest(topology: Topology, forest) -> None:
    """Arborescences spanning every NPU, k per root, logical budgets and physical budgets after map-back."""
    n = topology.num_npus
    supply = [int(c) for c in forest.units.supply]
    validate_forest(forest.trees, n, supply, forest.split.capacity)
    per_root = [0] * n
    for group in forest.groups:
        per_root[group.root] += group.multiplicity
        reached = {group.root}
        for (x, y), path in zip(group.edges, group.paths):
            assert x in reached and y not in reached
            assert path[0] == x and path[-1] == y
            assert all(topology.is_switch(v) for v in path[1:-1])
            assert all(topology.has_link(a, b) for a, b in zip(path, path[1:]))
            reached.add(y)
        assert reached == set(range(n))
    assert per_root == supply
    usage = check_link_budgets(forest.groups, forest.split.physical)
    for link, budget in zip(topology.links, forest.units.budgets):
        assert usage.get((link.src, link.dst), 0) <= budget


@pytest.mark.parametrize("name,make,k,t_star", WORKED, ids=[w[0] for w in WORKED])
def test_worked_examples(name, make, k, t_star):
    topology = make()
    forest = build_forest(topology, "allgather")
    assert forest.units.k == k
    assert forest.units.optimal
    # T* = M / N * ratio, the ratio in s/B is U / (k * unit)
    assert math.isclose(1e9 / topology.num_npus * forest.units.seconds_per_byte(), t_star, rel_tol=1e-9)
    assert forest.units.ratio == allgather_cut_ratio(topology).ratio
    assert len(forest.trees) >= topology.num_npus
    _check_forest(topology, forest)


def test_ring8_has_thirteen_distinct_trees_and_integral_budgets():
    forest = build_forest(build("ring:8"), "allgather", packing="fifo")
    assert len(forest.groups) == 13  # docs/methods/forestcoll.md section 6 (the reference's FIFO order)
    assert forest.height == 7
    shallow = build_forest(build("ring:8"), "allgather")  # layer-by-layer growth: shallower trees
    _check_forest(build("ring:8"), shallow)
    assert shallow.height < forest.height
    assert set(int(b) for b in forest.units.budgets) == {7}  # U * b_e = 0.14 s*GB/s * 50 GB/s


@pytest.mark.parametrize("spec", ["ring:8", "torus:4x4", "dgx1", "ndv2:2", "nvs-ib:1"])
def test_every_collective_verifies_and_respects_the_bound(spec):
    topology = build(spec)
    ag = allgather_cut_ratio(topology).seconds_per_byte * GIB / topology.num_npus
    rs = reducescatter_cut_ratio(topology).seconds_per_byte * GIB / topology.num_npus
    bcast = broadcast_cut(topology, 0).seconds_per_byte * GIB
    reduce = broadcast_cut(topology.reversed(), 0).seconds_per_byte * GIB
    bounds = {"allgather": ag, "reducescatter": rs, "allreduce": max(ag, rs), "broadcast": bcast, "reduce": reduce}
    for kind, bound in bounds.items():
        result, algorithm = _synth(topology, kind, pieces=2)
        simulation = simulate(algorithm)
        verify(algorithm, simulation=simulation)
        assert simulation.collective_time >= bound * (1 - 1e-9), (kind, simulation.collective_time, bound)
        assert result.status == ("feasible" if kind == "allreduce" else "optimal")
        assert algorithm.meta["tree_seconds"] >= 0 and "formulation" not in algorithm.meta  # the runner stamps it


@pytest.mark.parametrize("spec", ["ring:8", "torus:4x4", "dgx1"])
def test_allgather_within_two_percent_of_optimum_at_1gib(spec):
    topology = build(spec)
    result, algorithm = _synth(topology, "allgather")
    t_star = allgather_cut_ratio(topology).seconds_per_byte * GIB / topology.num_npus
    assert len(algorithm.transfers) <= 200_000
    simulation = simulate(algorithm)
    verify(algorithm, simulation=simulation)
    assert t_star <= simulation.collective_time <= 1.02 * t_star
    meta = algorithm.meta
    assert result.status == "optimal" and meta["k"] >= 1 and meta["P"] >= 1
    assert math.isclose(meta["bandwidth_time"], t_star, rel_tol=1e-9)


def test_allreduce_within_five_percent_of_rs_plus_ag_on_ring8():
    topology = build("ring:8")
    _, algorithm = _synth(topology, "allreduce")
    target = (allgather_cut_ratio(topology).seconds_per_byte + reducescatter_cut_ratio(topology).seconds_per_byte) \
        * GIB / 8
    simulation = simulate(algorithm)
    verify(algorithm, simulation=simulation)
    assert simulation.collective_time <= 1.05 * target


def test_fixed_k_is_feasible_and_not_better_than_the_optimum():
    topology = build("ring:8")
    result, algorithm = _synth(topology, "allgather", k=1, pieces=4)
    assert result.status == "feasible"
    # T_1 = 10 ms at 1 GB (docs/methods/forestcoll.md section 6)
    assert algorithm.meta["k"] == 1 and algorithm.meta["ratio"] == "4"
    verify(algorithm)
    result, _ = _synth(build("uniring:4"), "allgather", k=1, pieces=2)
    assert result.status == "optimal"  # k = 1 is already optimal there


def test_parameters_and_unsupported_collectives_are_rejected():
    topology = build("ring:4")
    with pytest.raises(ValueError, match="forestcoll has no parameter 'depth'"):
        _synth(topology, "allgather", depth=3)
    refused = call.synthesize(ForestColl(), Problem(topology, make_collective("alltoall", 4), GIB), time_limit=30, seed=0)
    assert refused.status == "error" and refused.message.startswith("forestcoll: alltoall is not supported")
    with pytest.raises(ValueError, match="pieces"):
        _synth(topology, "allgather", pieces=0)


def test_time_limit_returns_timeout():
    topology = build("torus:4x4")
    collective = make_collective("allgather", 16, 1)
    result = call.synthesize(ForestColl(), Problem(topology, collective, GIB), time_limit=1e-9, seed=0)
    assert result.status == "timeout" and not result.algorithms


def test_switch_to_switch_fabric_and_incumbent():
    topology = build("nvs-ib:1")
    seen = []
    collective = make_collective("allgather", 8, 1)
    result = call.synthesize(ForestColl(), Problem(topology, collective, GIB), time_limit=300, seed=0, pieces=4,
                                     on_incumbent=seen.append)
    assert seen and seen[0] is result.algorithms[0]
    forest = build_forest(topology, "allgather")
    _check_forest(topology, forest)


@st.composite
def _fabrics(draw):
    """2-5 NPUs with random directed links, optionally one balanced switch joined to some NPUs."""
    n = draw(st.integers(2, 5))
    links = {}
    for u in range(n):
        for v in range(n):
            if u != v and draw(st.booleans()):
                links[(u, v)] = draw(st.sampled_from([10, 20, 30])) * GB
    switches = 0
    if draw(st.booleans()):
        members = [v for v in range(n) if draw(st.booleans())]
        if len(members) >= 2:
            switches = 1
            for v in members:
                bw = draw(st.sampled_from([10, 20])) * GB
                links[(v, n)] = links[(n, v)] = bw
    return Topology.create(n, [Link(u, v, 0.5e-6, bw) for (u, v), bw in links.items()], switches, "random")


def _strongly_connected(topology: Topology) -> bool:
    return all(topology.reachable(u, v) for u in topology.npus for v in topology.npus)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_fabrics())
def test_random_fabrics_pack_validly_and_never_beat_the_bound(topology):
    assume(_strongly_connected(topology))
    forest = build_forest(topology, "allgather")
    _check_forest(topology, forest)
    _, algorithm = _synth(topology, "allgather", size=1e6, pieces=2)
    simulation = simulate(algorithm)
    verify(algorithm, simulation=simulation)
    t_star = allgather_cut_ratio(topology).seconds_per_byte * 1e6 / topology.num_npus
    assert simulation.collective_time >= t_star * (1 - 1e-9)


def test_cli_synth_nvs_ib(tmp_path, capsys):
    from workbench.cli import main
    from workbench.model.algorithm import load_algorithm

    output = tmp_path / "ag.json"
    code = main(["synth", "forestcoll", "--topology", "nvs-ib:2", "--collective", "allgather", "--size", "1GiB",
                 "--set", "pieces=4", "-o", str(output)])
    assert code == 0
    out = capsys.readouterr().out
    # 4 pieces per tree leave the pipeline's fill above 1% of the bound: optimal only in ForestColl's
    # own throughput model, which the status line names
    assert "status            feasible (optimal in the formulation's own model: forestcoll-throughput)" in out
    algorithm = load_algorithm(output)
    meta = algorithm.meta  # provenance, stamped by the runner: the given parameter over the declared defaults
    assert meta["formulation"] == "forestcoll" and meta["seed"] == 0 and meta["status"] == "feasible"
    assert meta["model_optimal"] == "forestcoll-throughput"
    assert meta["params"]["pieces"] == 4 and meta["params"]["splitting"] == "auto" and meta["synthesis_seconds"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["nvs-ib:2", "dgx2:2", "ndv2:4", "torus:8x8"])
def test_larger_fabrics(spec):
    topology = build(spec)
    _, algorithm = _synth(topology, "allgather")
    simulation = simulate(algorithm)
    verify(algorithm, simulation=simulation)
    t_star = allgather_cut_ratio(topology).seconds_per_byte * GIB / topology.num_npus
    assert simulation.collective_time >= t_star


def test_staggering_keeps_one_partial_sum_per_switch_buffer():
    topology = _fabric(25 * GB).reversed()
    plain = build_forest(topology, "allgather", splitting="greedy", cut_through=False)
    assert switch_visit_clashes(topology, plain.shared) > 0  # two tree edges through one switch, same round
    staggered = build_forest(topology, "allgather", splitting="greedy", reversible=True, cut_through=False)
    assert switch_visit_clashes(topology, staggered.shared) == 0
    assert staggered.height > plain.height  # the delays cost fill rounds, never the per-round load
    assert staggered.per_batch == plain.per_batch


@pytest.mark.parametrize("kind", ["reducescatter", "allreduce"])
def test_reductions_through_switches_stay_near_the_optimum(kind):
    topology = _fabric(25 * GB)  # fabric B: NVSwitch boxes and a NIC switch, T* = 7 ms per phase at 1 GB
    _, algorithm = _synth(topology, kind, GB)
    simulation = simulate(algorithm)
    verify(algorithm, simulation=simulation)
    target = reducescatter_cut_ratio(topology).seconds_per_byte * GB / 8
    if kind == "allreduce":
        target += allgather_cut_ratio(topology).seconds_per_byte * GB / 8
    assert target <= simulation.collective_time <= (1.03 if kind == "reducescatter" else 1.05) * target


def _leaf_spine(leaves: int = 4, per_leaf: int = 4, spines: int = 2) -> Topology:
    """NPUs under leaf switches, every leaf on every spine (two switch tiers, unequal alphas)."""
    n = leaves * per_leaf
    links = []
    for leaf in range(leaves):
        for i in range(per_leaf):
            links += [Link(leaf * per_leaf + i, n + leaf, 0.7e-6, 50 * GB), Link(n + leaf, leaf * per_leaf + i, 0.7e-6, 50 * GB)]
        for s in range(spines):
            links += [Link(n + leaf, n + leaves + s, 2.1e-6, 50 * GB), Link(n + leaves + s, n + leaf, 2.1e-6, 50 * GB)]
    return Topology.create(n, links, leaves + spines, "leaf-spine")


def test_a_cut_through_forest_is_staggered_before_reversal():
    # its tree edges off the simulator's route (the other spine) still go hop by hop through switches
    topology = _leaf_spine().reversed()
    plain = build_forest(topology, "allgather", cut_through=True)
    assert switch_visit_clashes(topology, plain.shared) > 0
    staggered = build_forest(topology, "allgather", reversible=True, cut_through=True)
    assert switch_visit_clashes(topology, staggered.shared) == 0


@pytest.mark.slow  # about 20 s a collective
@pytest.mark.parametrize("kind", ["reducescatter", "allreduce"])
def test_reductions_on_two_switch_tiers_are_valid(kind):
    topology = _leaf_spine()
    for size in (64 * 2**10, GIB):
        problem = Problem(topology, make_collective(kind, topology.num_npus, 1), size)
        result = call.synthesize(ForestColl(), problem, time_limit=300, seed=0)
        assert result.algorithms, result.message
        verify(result.algorithms[0])


# ------------------------------------------------------------------ periodic output (workbench.algorithm/3)
@pytest.mark.parametrize("spec", ["dgx2:2", "torus:3x3", "rails:2x4"])
def test_the_period_expands_to_the_listing(spec):
    """One batch with each hop lagging by its round, repeated: transfer for transfer the listing."""
    topology = build(spec)
    forest = build_forest(topology, "allgather")
    n = topology.num_npus
    for pieces in (1, 4):
        args = (topology, "allgather", n, forest.units.k, pieces, forest.groups, forest.shared, 1e6, None, forest.slots)
        plain, _ = emit_schedule(*args)
        periodic, _ = emit_schedule(*args, periodic=True)
        assert periodic.period.repeat == pieces and len(periodic.transfers) * pieces == len(plain.transfers)
        written = periodic.expanded()
        assert [(t.chunks, t.src, t.dst, t.deps) for t in written.transfers] == \
            [(t.chunks, t.src, t.dst, t.deps) for t in plain.transfers]
        assert simulate(periodic).collective_time == simulate(plain).collective_time


def test_synth_writes_a_period_when_asked_and_claims_its_time():
    result, algorithm = _synth(build("rails:2x4"), "allgather", periodic="true")
    assert algorithm.period is not None and algorithm.meta["periodic"] is True and result.status == "optimal"
    assert algorithm.meta["claimed_time"] == verify(algorithm).simulation.collective_time
    _, plain = _synth(build("rails:2x4"), "allgather", periodic="false")
    assert plain.period is None and simulate(plain).collective_time == algorithm.meta["claimed_time"]


@pytest.mark.parametrize("fabric", ["fabric-B", "unlike-k", "rails:2x4"])
@pytest.mark.parametrize("kind", ["reducescatter", "reduce", "allreduce"])
def test_reductions_are_written_as_a_period(fabric, kind):
    """A reduction is its gather's period reversed and an All-Reduce the two joined piece by piece
    (workbench.model.periodic): valid, its claim its simulated time, a Reduce-Scatter or reduce as fast
    as the listing written out (the same plan, pieces mirrored) and an All-Reduce no slower (its
    phases overlap). fabric-B reverses through switch buffers (reverse_periodic); on "unlike-k" the
    reversed graph's forest has other pieces than the forward one's (the common period: coarsened)."""
    topology = {"fabric-B": lambda: _fabric(25 * GB), "unlike-k": _unlike_k,
                "rails:2x4": lambda: build("rails:2x4")}[fabric]()
    _, periodic = _synth(topology, kind, periodic="true", pieces=4)
    _, plain = _synth(topology, kind, periodic="false", pieces=4)
    assert periodic.period is not None and periodic.meta["periodic"] is True and plain.period is None
    assert periodic.meta["claimed_time"] == verify(periodic).simulation.collective_time
    if kind == "allreduce":
        assert periodic.meta["claimed_time"] <= simulate(plain).collective_time
    else:
        assert periodic.meta["claimed_time"] == simulate(plain).collective_time


def _unlike_k() -> Topology:
    """Four NPUs whose forest packs two trees per root, and one on the reversed graph."""
    import random

    from schedules import random_connected_topology

    rng = random.Random(0)
    topology = random_connected_topology(rng, rng.randint(3, 5), extra=rng.randint(0, 8))
    assert build_forest(topology, "allgather").units.k != build_forest(topology.reversed(), "allgather").units.k
    return topology


def test_a_periodic_gather_through_switches_reverses_with_serialised_buffers():
    """A staggered forest's period reverses with each switch buffer freed before it is entered again,
    as fast as the listing reversed that way; an unstaggered one is refused, naming the buffer."""
    topology = _fabric(25 * GB)
    view = topology.reversed()
    forest = build_forest(view, "allgather", splitting="greedy", reversible=True, cut_through=False)
    args = (view, "allgather", 8, forest.units.k, 4, forest.groups, forest.shared, 1e6, None, forest.slots)
    periodic, _ = emit_schedule(*args, periodic=True)
    with pytest.raises(ValueError, match="multicasts"):
        periodic.reverse(topology)
    reduction = reverse_periodic(periodic, topology)
    assert reduction.period == periodic.period and reduction.collective.kind == "reducescatter"
    verify(reduction)
    assert simulate(reduction).collective_time == simulate(reverse_serialised(emit_schedule(*args)[0],
                                                                              topology)).collective_time
    unstaggered = build_forest(view, "allgather", splitting="greedy", cut_through=False)
    args = (view, "allgather", 8, unstaggered.units.k, 4, unstaggered.groups, unstaggered.shared, 1e6, None,
            unstaggered.slots)
    with pytest.raises(ValueError, match="still there; stagger"):
        reverse_periodic(emit_schedule(*args, periodic=True)[0], topology)


def test_a_period_below_256_mb_is_timed_at_several_depths():
    """With the depth chosen by size, a period is weighed like a listing (sizing): every depth
    written as a period and timed, the fastest kept and claimed."""
    _, algorithm = _synth(build("rails:2x4"), "allreduce", 2**20, periodic="true")
    assert algorithm.period is not None and algorithm.meta["time_by_choice"]["pieces"]
    assert algorithm.meta["claimed_time"] == min(algorithm.meta["time_by_choice"]["trees"].values())
    verify(algorithm)
