"""Translation symmetry (workbench.kit.symmetry) and ForestColl's symmetric packing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from workbench.plugin import call
from formulations.forestcoll import build_forest
from formulations.forestcoll.optimum import auto_units
from formulations.forestcoll.packing import pack_arborescences, validate_forest
from formulations.forestcoll.slots import _place, _stack
from formulations.forestcoll.splitting import split_switches
from formulations.forestcoll.symmetric import pack_symmetric
from workbench.kit.symmetry import translations
from workbench.topology import Link, Topology, build


def _is_group_of_automorphisms(topology: Topology, table: np.ndarray) -> bool:
    links = {(l.src, l.dst): l.bandwidth for l in topology.links}
    for shift in table:
        if sorted(shift.tolist()) != list(range(topology.num_npus)):
            return False
        if any(links.get((int(shift[u]), int(shift[v]))) != b for (u, v), b in links.items()):
            return False
    return True


@pytest.mark.parametrize("spec", ["ring:8", "uniring:5", "torus:4x4", "torus:2x4", "torus:3x4x2", "fc:5"])
def test_wrapping_grids_have_a_transitive_translation_group(spec):
    topology = build(spec)
    table = translations(topology)
    assert table is not None
    n = topology.num_npus
    assert table.shape == (n, n)
    assert table[:, 0].tolist() == list(range(n))  # translation t takes NPU 0 to t: transitive and free
    assert table[0].tolist() == list(range(n))  # the identity
    assert _is_group_of_automorphisms(topology, table)


@pytest.mark.parametrize("spec", ["mesh:4x4", "line:4", "dgx1", "ndv2:2", "switch:8", "dragonfly:4x4"])
def test_fabrics_without_translation_symmetry_get_none(spec):
    assert translations(build(spec)) is None


def test_one_slower_link_breaks_the_symmetry():
    torus = build("torus:4x4")
    links = list(torus.links)
    links[3] = Link(links[3].src, links[3].dst, links[3].alpha, links[3].bandwidth / 2)
    skewed = Topology.create(torus.num_npus, links, 0, "skewed", dict(torus.meta))
    assert translations(skewed) is None


@pytest.mark.parametrize("spec", ["torus:4x6", "torus:3x4x2", "ring:9", "uniring:7", "fc:6"])
def test_a_grid_read_from_a_file_is_recognised_without_its_dimensions(spec):
    from workbench.topology import topology_from_dict

    plain = topology_from_dict(build(spec).to_dict(), "file")
    assert not plain.meta
    table = translations(plain)
    assert table is not None and table[:, 0].tolist() == list(range(plain.num_npus))
    assert _is_group_of_automorphisms(plain, table)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["torus:4x4", "ring:8", "torus:2x3x2"]), st.randoms(use_true_random=False))
def test_relabelled_grids_are_refused_or_still_symmetric(spec, rng):
    """Whatever shape is inferred for a relabelled fabric, a returned table is a group of automorphisms."""
    topology = build(spec)
    order = list(range(topology.num_npus))
    rng.shuffle(order)
    links = [Link(order[l.src], order[l.dst], l.alpha, l.bandwidth) for l in topology.links]
    relabelled = Topology.create(topology.num_npus, links, 0, "relabelled")
    table = translations(relabelled)
    assert table is None or _is_group_of_automorphisms(relabelled, table)


@st.composite
def _tori(draw):
    dims = draw(st.lists(st.integers(1, 5), min_size=2, max_size=3))
    assume(3 <= int(np.prod(dims)) <= 36)
    return build("torus:" + "x".join(map(str, dims)))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_tori(), st.integers(0, 3))
def test_symmetric_packing_is_a_valid_translation_invariant_forest(topology, seed):
    table = translations(topology)
    assert table is not None
    units = auto_units(topology)
    split = split_switches(topology, units)
    supply = [int(c) for c in units.supply]
    groups, flows = pack_symmetric(table, split.capacity, units.k, seed)
    validate_forest(groups, topology.num_npus, supply, split.capacity)
    base = [(sorted(g.edges), g.multiplicity) for g in groups if g.root == 0]
    for t in range(topology.num_npus):
        shifted = sorted((sorted((int(table[t, x]), int(table[t, y])) for x, y in edges), m) for edges, m in base)
        mine = sorted((sorted(g.edges), g.multiplicity) for g in groups if g.root == t)
        assert mine == shifted
    # far fewer max-flows than the general packer, which needs one per tested arc
    _, general = pack_arborescences(topology.num_npus, split.capacity, supply)
    assert flows <= max(general, 1) + 2


def test_auto_packing_uses_symmetry_on_a_torus_only():
    torus = build_forest(build("torus:4x4"), "allgather")
    assert torus.packing == "symmetric"
    assert build_forest(build("mesh:4x4"), "allgather").packing == "levels"
    assert build_forest(build("torus:4x4"), "allgather", packing="levels").packing == "levels"
    with pytest.raises(ValueError, match="translation-symmetric"):
        build_forest(build("mesh:4x4"), "allgather", packing="symmetric")


def test_capacities_that_are_not_symmetric_are_refused():
    table = translations(build("ring:4"))
    capacity = {(u, (u + 1) % 4): 2 for u in range(4)} | {((u + 1) % 4, u): 2 for u in range(4)}
    capacity[(0, 1)] = 3
    with pytest.raises(ValueError, match="not translation-symmetric"):
        pack_symmetric(table, capacity, 1)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 4), st.integers(1, 3)), min_size=1, max_size=30))
def test_stacking_single_link_items_equals_the_earliest_fit_placement(raw):
    items = [(duration, (i, 0), [link], chunks) for i, (duration, link, chunks) in enumerate(raw)]
    load: dict[int, int] = {}
    for duration, _, (link,), _ in items:
        load[link] = load.get(link, 0) + duration
    order = sorted(range(len(items)), key=lambda i: (-load[items[i][2][0]], items[i][1]))
    makespan, placed = _place(items, order, max(load.values()))
    assert makespan == max(load.values())
    assert _stack(items, order) == placed


def test_auto_falls_back_to_the_general_packer_when_the_symmetric_one_is_stuck(monkeypatch):
    from formulations.forestcoll import synthesis as forestcoll
    from formulations.forestcoll.packing import PackingError

    def stuck(*args, **kwargs):
        raise PackingError("stuck")

    monkeypatch.setattr(forestcoll, "pack_symmetric", stuck)
    forest = build_forest(build("torus:4x4"), "allgather")
    assert forest.packing == "levels"
    with pytest.raises(PackingError):
        build_forest(build("torus:4x4"), "allgather", packing="symmetric")


# ------------------------------------------------------------------ a switch at a time (bulk_splitting)
def _requirement_holds(split, units) -> bool:
    from workbench.kit.maxflow import FlowNetwork

    n = split.num_npus
    s = n + len(split.switches)
    arcs = list(split.capacity.items())
    supply = [(v, int(c)) for v, c in enumerate(units.supply) if c > 0]
    network = FlowNetwork(s + 1, [a for (a, _), _ in arcs] + [s] * len(supply),
                          [b for (_, b), _ in arcs] + [v for v, _ in supply])
    caps = [c for _, c in arcs] + [c for _, c in supply]
    return all(network.value(caps, s, v) >= units.demand for v in range(n))


@pytest.mark.parametrize("spec", ["rails:2x4", "rails:4x8,leaf=2,spines=4", "fattree:4", "dgx2:2", "nvs-ib:2"])
@pytest.mark.parametrize("solver", [pytest.param("or-tools", marks=pytest.mark.requires_ortools),
                                    "networkx"])  # bulk_splitting.PLAN_SOLVERS
def test_bulk_splitting_keeps_the_requirement_and_removes_every_switch(spec, solver, monkeypatch):
    from formulations.forestcoll import bulk_splitting

    monkeypatch.setattr(bulk_splitting, "plan_solver", lambda: solver)  # here and in build_forest below
    topology = build(spec)
    units = auto_units(topology)
    split = bulk_splitting.split_in_bulk(topology, units)
    assert split.plan_solver == solver
    assert all(a < topology.num_npus and b < topology.num_npus for a, b in split.capacity)
    assert _requirement_holds(split, units)
    for (u, t), through in split.edge_map.items():  # every logical arc maps to switches it went through
        assert set(through) <= set(topology.switches)
    forest = build_forest(topology, "allgather", splitting="bulk")  # packs, maps back, checks link budgets
    assert forest.splitting == "bulk" and forest.units.optimal


def test_a_failed_check_falls_back_switch_by_switch_then_pair_by_pair(monkeypatch):
    from formulations.forestcoll import bulk_splitting

    topology = build("rails:4x8,leaf=2,spines=4")
    units = auto_units(topology)
    monkeypatch.setattr(bulk_splitting, "SLACKS", (None,))  # one plan per attempt, always one
    answers = iter([False] + [False] * 3 + [True] * 1000)  # the first batch, then its first switches fail
    real = bulk_splitting._Requirement.holds
    monkeypatch.setattr(bulk_splitting._Requirement, "holds",
                        lambda self, cap, deadline: next(answers) and real(self, cap, deadline))
    split = bulk_splitting.split_in_bulk(topology, units)
    assert split.exact_switches >= 3  # the three refused (and any switch no plan fits)
    assert _requirement_holds(split, units)


@pytest.mark.requires_ortools
def test_both_plan_solvers_find_plans_of_the_same_least_cost():
    """OR-Tools' min-cost flow and NetworkX's (without OR-Tools) on the same plans: both whole,
    within the bounds, every sum exact, the same cost; None for both where no plan meets the bounds."""
    from formulations.forestcoll import bulk_splitting

    rng = np.random.default_rng(0)
    for case in range(40):
        n_in, n_out = rng.integers(1, 7, size=2)
        amounts = rng.integers(1, 9, size=n_in)
        outs = np.bincount(rng.integers(0, n_out, size=int(amounts.sum())), minlength=n_out)  # the same total
        tails = [i for i in range(n_in) for j in range(n_out)]
        heads = [n_in + j for i in range(n_in) for j in range(n_out)]
        bounds = rng.integers(0, 6, size=len(tails)).tolist()
        costs = rng.integers(-20, 20, size=len(tails)).tolist()
        supplies = amounts.tolist() + (-outs).tolist()
        a = bulk_splitting._min_cost_flow_ortools(tails, heads, bounds, costs, supplies)
        b = bulk_splitting._min_cost_flow_networkx(tails, heads, bounds, costs, supplies)
        assert (a is None) == (b is None), case
        if b is None:
            continue
        assert all(isinstance(x, int) and 0 <= x <= bound for x, bound in zip(b, bounds))
        net = [0] * len(supplies)
        for tail, head, x in zip(tails, heads, b):
            net[tail] += x
            net[head] -= x
        assert net == supplies
        assert np.dot(a, costs) == np.dot(b, costs), case


def test_without_ortools_the_bulk_plans_are_named_in_meta(monkeypatch):
    from formulations.forestcoll import ForestColl, bulk_splitting
    from workbench.model.collective import make_collective
    from workbench.plugin.registry import Problem

    topology = build("rails:2x4")
    problem = Problem(topology, make_collective("allgather", topology.num_npus, 1), 1e6)
    installed = bulk_splitting.plan_solver()
    monkeypatch.setattr(bulk_splitting, "plan_solver", lambda: "networkx")
    meta = call.synthesize(ForestColl(), problem, time_limit=60, seed=0, splitting="bulk").algorithms[0].meta
    assert meta["splitting"] == {"same": "bulk"} and meta["bulk_plans"] == {"same": "networkx"}
    assert "OR-Tools is not installed" in meta["bulk_plans_note"]
    if installed == "or-tools":  # with it, the meta is what it was: nothing added
        monkeypatch.setattr(bulk_splitting, "plan_solver", lambda: "or-tools")
        meta = call.synthesize(ForestColl(), problem, time_limit=60, seed=0, splitting="bulk").algorithms[0].meta
        assert meta["splitting"] == {"same": "bulk"} and "bulk_plans" not in meta and "bulk_plans_note" not in meta
