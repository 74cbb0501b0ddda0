"""Switch removal by edge splitting (spec forestcoll 2).

Splitting off ``gamma`` at switch ``w`` for in-arc ``(u, w)`` and out-arc ``(w, t)`` (``u != t``)
lowers both by ``gamma`` and adds ``gamma`` to a logical arc ``(u, t)``. The requirement to keep is
"every NPU v receives ``demand`` from the super-source s" (``lambda(s, v) >= demand``): that is what
makes the tree packing possible, and splitting only ever lowers cuts. A sink side ``Y`` (s not in
Y, at least one NPU in Y) loses ``gamma`` of in-capacity exactly when

  (a) ``w in Y`` and ``u, t not in Y``, or  (b) ``u, t in Y`` and ``w not in Y``,

so the largest safe amount is

  ``gamma = min(cap(u,w), cap(w,t),
                min over NPUs v not in {u,t} of lambda({s,u,t} -> {w,v}) - demand,
                min over NPUs v of lambda({s,w} -> {u,t,v}) - demand)``

(merged endpoints are made with "infinite" arcs; when u or t is an NPU the last minimum is the
single flow ``lambda({s,w} -> {u,t})``). The directed splitting theorem (Bang-Jensen, Frank and
Jackson 1995) says a balanced switch can be split completely; a switch left with capacity raises
``SplittingError`` naming it rather than silently dropping bandwidth.

Switches are processed in increasing id; a split may create a logical arc into or out of a switch
processed later (switch-to-switch links), so ``edge_map`` is recursive: ``edge_map[(u, t)][w]`` is
how many units of logical arc ``(u, t)`` run through ``w`` (``mapping.py`` expands them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from workbench.kit.deadline import Deadline
from workbench.util.lazy import lazy_module
from workbench.plugin.registry import FormulationError
from workbench.topology import Topology

from workbench.kit.maxflow import FlowNetwork
from .optimum import TreeUnits, check_clock

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["SplittingError", "SplitResult", "split_switches", "split_one_switch", "starting_arcs"]


class SplittingError(FormulationError):
    """A switch could not be split completely (unbalanced, or the theorem's conditions fail)."""


@dataclass
class SplitResult:
    """The NPU-only logical graph and how its arcs map back through switches."""

    num_npus: int
    capacity: dict[tuple[int, int], int]  # logical arcs between NPUs, tree-units
    edge_map: dict[tuple[int, int], dict[int, int]]  # (u, t) -> {switch: units through it}
    physical: dict[tuple[int, int], int]  # the budget of every physical link (before splitting)
    flows: int = 0
    pairs: int = 0
    switches: list[int] = field(default_factory=list)
    dropped_loops: int = 0  # tree-units of u -> w -> u pairs removed (proven unnecessary by the exact gamma)
    checks: int = 0  # requirement checks after a planned split (bulk_splitting)
    exact_switches: int = 0  # switches bulk_splitting left to the exact pair-by-pair split
    plan_solver: str = ""  # what solved bulk_splitting's plans (bulk_splitting.PLAN_SOLVERS); "" for the others
    dropped_spare: int = 0  # tree-units of switch-to-switch arcs symmetric_splitting left unused


def split_switches(topology: Topology, units: TreeUnits, deadline: Deadline | None = None,
                   spread: bool = True) -> SplitResult:
    """Remove every switch of ``topology`` by edge splitting under the budgets of ``units``."""
    n_npus, s = topology.num_npus, topology.num_nodes  # s: the super-source
    cap, supply, edge_map, result = starting_arcs(topology, units)
    granule = max(1, int(units.k))
    for w in topology.switches:
        split_one_switch(cap, edge_map, w, supply, units.demand, n_npus, s, result, deadline, granule, spread)
    result.capacity = {arc: c for arc, c in cap.items() if c > 0}
    result.edge_map = {arc: dict(m) for arc, m in edge_map.items()}
    return result


def starting_arcs(topology: Topology, units: TreeUnits) -> tuple[dict, list, dict, SplitResult]:
    """What a splitter starts from: every link's budget as an arc, the super-source's supply arcs,
    an empty ``edge_map`` and a ``SplitResult`` holding the physical budgets."""
    cap: dict[tuple[int, int], int] = {}
    for link, budget in zip(topology.links, units.budgets):
        if budget > 0:
            cap[(link.src, link.dst)] = int(budget)
    supply = [(v, int(c)) for v, c in enumerate(units.supply) if c > 0]
    edge_map: dict[tuple[int, int], dict[int, int]] = defaultdict(dict)
    result = SplitResult(topology.num_npus, {}, {}, dict(cap), switches=list(topology.switches))
    return cap, supply, edge_map, result


def split_one_switch(cap: dict[tuple[int, int], int], edge_map: dict[tuple[int, int], dict[int, int]], w: int,
                     supply: list[tuple[int, int]], demand: int, n_npus: int, s: int, result: SplitResult,
                     deadline: Deadline | None, granule: int, spread: bool) -> None:
    """Split switch ``w`` off completely, pair by pair at the exact safe amount (module docstring);
    ``cap`` and ``edge_map`` change in place. ``SplittingError`` when capacity is left."""

    def split(u: int, w: int, t: int, limit: int | None) -> None:
        check_clock(deadline)
        gamma = _safe_amount(cap, supply, demand, n_npus, s, u, w, t, result, limit)
        result.pairs += 1
        if gamma <= 0:
            return
        for arc in ((u, w), (w, t)):
            cap[arc] -= gamma
            if cap[arc] == 0:
                del cap[arc]
        if t != u:
            cap[(u, t)] = cap.get((u, t), 0) + gamma
            edge_map[(u, t)][w] = edge_map[(u, t)].get(w, 0) + gamma
        else:
            result.dropped_loops += gamma

    if spread:
        _spread_in_arcs(cap, w, granule, split)
    _split_largest(cap, w, split)
    left_in = sum(c for (a, b), c in cap.items() if b == w)
    left_out = sum(c for (a, b), c in cap.items() if a == w)
    if left_in or left_out:
        raise SplittingError(
            f"forestcoll: switch {w} keeps {left_in} tree-units of in-capacity and {left_out} of "
            f"out-capacity after edge splitting (unbalanced switch, or budgets floored unevenly by a "
            f"fixed k); its capacity cannot be mapped to NPU-to-NPU paths")


def _out_of(cap: dict[tuple[int, int], int], node: int) -> list[int]:
    return sorted(b for (a, b), c in cap.items() if a == node and c > 0)


def _into(cap: dict[tuple[int, int], int], node: int) -> list[int]:
    return sorted(a for (a, b), c in cap.items() if b == node and c > 0)


def _spread_in_arcs(cap: dict[tuple[int, int], int], w: int, granule: int,
                    split: Callable[[int, int, int, int | None], None]) -> None:
    """Pass 1 spreads each in-arc evenly over the out-arcs (at most its fair share per pair, still
    capped by the exact gamma): splitting a whole in-arc onto the first out-neighbour, as a
    plain greedy does, turns a switch into a chain of logical arcs and makes the trees deep."""
    for u in _into(cap, w):
        targets = [t for t in _out_of(cap, w) if t != u]
        if not targets:
            continue
        # in whole multiples of k, so a logical arc can carry whole tree groups (fewer clones)
        share = granule * -(-cap[(u, w)] // (granule * len(targets)))
        for t in targets:
            if cap.get((u, w), 0) and cap.get((w, t), 0):
                split(u, w, t, share)


def _split_largest(cap: dict[tuple[int, int], int], w: int, split: Callable[[int, int, int, int | None], None]) -> None:
    """Pass 2: the largest safe amount per pair, as in the reference; u -> w -> u last (splitting it
    off yields a loop, i.e. drops the pair, which the exact gamma allows only when no cut needs
    it; a switch-to-switch trunk can end that way)."""
    for u in _into(cap, w):
        for t in sorted(_out_of(cap, w), key=lambda t: (t == u, t)):
            if cap.get((u, w), 0) == 0:
                break
            if cap.get((w, t), 0):
                split(u, w, t, None)


def _safe_amount(cap: dict[tuple[int, int], int], supply: list[tuple[int, int]], demand: int, n_npus: int,
                 s: int, u: int, w: int, t: int, result: SplitResult, limit: int | None = None) -> int:
    """The exact largest gamma of the module docstring, at most ``limit`` (stops once it reaches 0)."""
    gamma = min(cap[(u, w)], cap[(w, t)])
    if limit is not None:
        gamma = min(gamma, limit)
    arcs = list(cap.items())
    src = [a for (a, _), _ in arcs] + [s] * len(supply)
    dst = [b for (_, b), _ in arcs] + [v for v, _ in supply]
    base = [c for _, c in arcs] + [c for _, c in supply]
    npus = list(range(n_npus))
    # helper arcs, capacity 0 unless switched on: s->u, s->t, s->w, u->t, v->w and v->t per NPU v
    # (no self-loops: v->t is left out for v == t)
    h0 = len(src)
    src += [s, s, s, u if u != t else s] + npus + [v for v in npus if v != t]
    dst += [u, t, w, t if u != t else w] + [w] * n_npus + [t] * (n_npus - (1 if t < n_npus else 0))
    template = FlowNetwork(s + 1, src, dst)
    base_caps = np.zeros(len(src), dtype=np.int64)
    base_caps[:h0] = base
    inf = int(sum(base)) + 1
    to_w = h0 + 4
    to_t = {v: to_w + n_npus + i for i, v in enumerate(v for v in npus if v != t)}
    # (a): Y holds w and an NPU v, not u, t: sources {s, u, t}, sinks {w, v}. Adding v to the sink
    # side never lowers a flow, so lambda({s,u,t} -> w) bounds every one of them from below: where
    # it leaves gamma as it is, no v can lower it and the per-v flows are skipped (same gamma)
    caps_a = base_caps.copy()
    caps_a[h0] = caps_a[h0 + 1] = inf
    if template.value(caps_a, s, w) - demand >= gamma:
        npus_a: list[int] = []
    else:
        npus_a = npus
    for v in npus_a:
        if v in (u, t):
            continue
        caps_a[to_w + v] = inf
        value = template.value(caps_a, s, w)
        caps_a[to_w + v] = 0
        gamma = min(gamma, value - demand)
        if gamma <= 0:
            result.flows += template.calls
            return 0
    # (b): Y holds u and t (and an NPU), not w: sources {s, w}, sinks {u, t(, v)}
    caps_b = base_caps.copy()
    caps_b[h0 + 2] = caps_b[h0 + 3] = inf
    if u < n_npus or t < n_npus:
        gamma = min(gamma, template.value(caps_b, s, t) - demand)
    elif template.value(caps_b, s, t) - demand < gamma:  # the same floor: lambda({s,w} -> {u,t})
        for v in npus:
            caps_b[to_t[v]] = inf
            value = template.value(caps_b, s, t)
            caps_b[to_t[v]] = 0
            gamma = min(gamma, value - demand)
            if gamma <= 0:
                break
    result.flows += template.calls
    return max(gamma, 0)
