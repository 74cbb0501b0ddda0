"""Switch removal one switch orbit at a time, by the fabric's translations (clusters as built).

On a rail-optimized cluster the translations of ``workbench.kit.cluster_translations`` map the fabric
onto itself: boxes onto boxes, rails onto rails, leaf groups onto leaf groups, NPUs freely and
transitively. If every switch is split the same way as its images (the plan of switch ``g w`` is
the plan of ``w`` moved by ``g``), the logical NPU graph left is translation-invariant too, and
the symmetric packer (``symmetric``) grows root 0's trees only and shifts them to every root.

* Switches are taken orbit by orbit (an orbit's smallest id first). The plan of the orbit's first
  switch ``w`` must be invariant under ``w``'s stabilizer ``H`` (the translations that fix it),
  or its images would not be well defined: it gives one amount ``x_c`` to each orbit ``c`` of
  (in-arc, out-arc) pairs under ``H`` (no ``u -> w -> u`` pair). An NPU's arc is used exactly:
  ``sum_c r_c(u) x_c = cap(u, w)``, ``r_c(u)`` the pairs of class ``c`` that start at ``u`` (one
  equation per in-arc orbit), and likewise every out-arc; an arc to or from another switch at
  most (what is left is dropped: the requirement below is what must hold, and a non-blocking
  spine tier has more than the trees need). Costs put first one unit for each NPU pair, those
  the fabric cannot join without this orbit first (a leaf's rail neighbours, a spine's other leaf
  groups) and GPUs of one rail before others, then pairs with another switch, then more units
  for a pair (a surcharge counted over the whole orbit, so a GPU's units through sixteen spines
  reach sixteen GPUs, not one sixteen times). Pairs of NPUs are bounded by ``slack`` times their
  proportional share, and what goes to another switch orbit is evened out over its switches.
  It is a small integer program (HiGHS, ``workbench.kit.solvers``): at most a few thousand classes at
  1,024 GPUs. On a rail fabric at its optimum this gives the star: each GPU's NIC units reach one
  GPU of its rail in every other box, and one tree per root packs with a single max-flow.
* The plan is then applied to every switch of the orbit through the translation taking ``w``
  there, and the requirement that keeps the packing possible (``lambda(s, v) >= demand`` for every
  NPU v) is checked with one max-flow: the graph is invariant and NPUs are all alike, so NPU 0
  stands for all. A failing plan is undone and the next slack tried; when none passes at any of
  ``SCALES`` (budgets doubled where a plan needs amounts that divide evenly),
  ``SymmetricSplitFailed`` hands the fabric back to ``bulk_splitting`` (same guarantee, slower).

The result satisfies what ``splitting`` guarantees, and its capacities are translation-invariant.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from workbench.kit.cluster_translations import NodeTranslations
from workbench.kit.deadline import Deadline
from workbench.util.lazy import lazy_module
from workbench.kit.maxflow import FlowNetwork
from workbench.kit.solvers import solve_lp
from workbench.topology import Topology

from .bulk_splitting import SWITCH_PAIR, hop_distances
from .optimum import TreeUnits, check_clock
from .splitting import SplitResult, starting_arcs

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["split_symmetrically", "split_by_translations", "SymmetricSplitFailed", "SCALES"]

# tree-units per unit tried in turn: an invariant plan needs amounts that divide evenly among a
# stabilizer's pairs (a 2:1 leaf has 63 units per spine link for two GPUs each), so doubling
# every budget, the supply and the demand (k trees per root become 2k: the same optimum) can
# make a plan exist where none did
SCALES = (1, 2, 4)
_FAR = 10  # per unit and hop between a pair's ends without the orbit: far pairs first
_SPREAD = 1_000  # per unit beyond a pair's first (summed over the orbit): above any pair's preference
_SLACKS = (1, 2, None)  # per-pair bounds tried (bulk_splitting's), on pairs of NPUs only
_MAX_HOPS = 32  # the distance given to pairs the fabric cannot join without the orbit
_SOLVE_SECONDS = 30.0  # one plan's integer program at most (measured: well under a second at 1,024 GPUs)


class SymmetricSplitFailed(Exception):
    """No stabilizer-invariant plan of some switch keeps the requirement (the caller splits otherwise)."""


def split_by_translations(topology: Topology, units: TreeUnits, group: NodeTranslations,
                          deadline: Deadline | None = None) -> tuple[TreeUnits, SplitResult]:
    """The first of ``SCALES`` at which every switch splits by translated plans: the units used
    (``k``, ``U``, budgets, supply and demand times the scale) and the split."""
    for scale in SCALES:
        scaled = replace(units, k=units.k * scale, U=units.U * scale, budgets=units.budgets * scale,
                         supply=units.supply * scale, demand=units.demand * scale)
        try:
            return scaled, split_symmetrically(topology, scaled, group, deadline)
        except SymmetricSplitFailed as failure:
            last = failure
    raise last


def split_symmetrically(topology: Topology, units: TreeUnits, group: NodeTranslations,
                        deadline: Deadline | None = None) -> SplitResult:
    """Remove every switch by translated plans (module docstring)."""
    n_npus, s = topology.num_npus, topology.num_nodes
    cap, supply, edge_map, result = starting_arcs(topology, units)
    if len({c for _, c in supply}) != 1 or len(supply) != n_npus:
        raise SymmetricSplitFailed("the supply differs between NPUs")
    nodes = group.nodes
    done: set[int] = set()
    for w in topology.switches:
        if w in done:
            continue
        check_clock(deadline)
        members = group.orbit(w)
        done.update(int(m) for m in members)
        orbit = set(members.tolist())
        if any(x != y and x in orbit and y in orbit for x, y in cap if w in (x, y)):
            raise SymmetricSplitFailed(f"switch {w} is linked to a switch of its own orbit")
        # one translation per member taking w there
        carrier = {int(m): int(np.flatnonzero(nodes[:, w] == m)[0]) for m in members}
        # NPU pairs' hops in the fabric without the orbit, capped
        distance = np.minimum(hop_distances(topology, members, n_npus, _MAX_HOPS)[:, :n_npus], _MAX_HOPS)
        for slack in _SLACKS:
            planned = _orbit_plan(cap, w, group, len(members), distance, slack, deadline)
            if planned is None:
                continue
            plan, arcs = planned
            saved = (dict(cap), {arc: dict(m) for arc, m in edge_map.items()}, result.pairs, result.dropped_spare)
            for member, t in carrier.items():
                _apply(cap, edge_map, member, nodes[t], plan, arcs, n_npus, result)
            if _requirement_holds(cap, supply, units.demand, s, result):
                break
            cap.clear(), cap.update(saved[0])
            edge_map.clear(), edge_map.update(saved[1])
            result.pairs, result.dropped_spare = saved[2], saved[3]
        else:
            raise SymmetricSplitFailed(f"no translation-invariant plan of switch {w} keeps the requirement")
    result.capacity = {arc: c for arc, c in cap.items() if c > 0}
    result.edge_map = {arc: dict(m) for arc, m in edge_map.items()}
    return result


@dataclass
class _Pairs:
    """The (in-arc, out-arc) pairs of one switch and their classes under its stabilizer: pair ``p``
    joins ``tails[i[p]]`` to ``heads[j[p]]`` and lies in class ``c[p]``; ``rows[i, c]`` (``cols[j, c]``)
    counts the pairs of class ``c`` at in-arc ``i`` (out-arc ``j``); ``u``, ``t``: each class's first pair."""

    tails: np.ndarray
    heads: np.ndarray
    a: np.ndarray  # in-arc capacities
    b: np.ndarray  # out-arc capacities
    i: np.ndarray
    j: np.ndarray
    c: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    first: np.ndarray  # per class, the index of its first pair

    @property
    def count(self) -> int:
        return self.rows.shape[1]

    @property
    def size(self) -> np.ndarray:
        return self.rows.sum(axis=0)

    @property
    def u(self) -> np.ndarray:
        return self.tails[self.i[self.first]]

    @property
    def t(self) -> np.ndarray:
        return self.heads[self.j[self.first]]


def _pairs(ins: list[tuple[int, int]], outs: list[tuple[int, int]], stabilizer_rows) -> _Pairs:
    tails = np.array([u for u, _ in ins], dtype=np.int64)
    heads = np.array([t for t, _ in outs], dtype=np.int64)
    classes = _pair_classes(stabilizer_rows, tails, heads)
    count = int(classes.max()) + 1
    i, j = np.nonzero(classes >= 0)
    c = classes[i, j]
    rows = np.zeros((len(ins), count), dtype=np.int64)
    cols = np.zeros((len(outs), count), dtype=np.int64)
    np.add.at(rows, (i, c), 1)
    np.add.at(cols, (j, c), 1)
    first = np.full(count, -1, dtype=np.int64)
    first[c[::-1]] = np.arange(len(c))[::-1]
    return _Pairs(tails, heads, np.array([x for _, x in ins], dtype=np.int64),
                  np.array([x for _, x in outs], dtype=np.int64), i, j, c, rows, cols, first)


def _orbit_plan(cap: dict, w: int, group: NodeTranslations, members: int, distance, slack: int | None,
                deadline: Deadline | None) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]] | None:
    """``(u, t, amount)`` for every split pair of switch ``w``, invariant under its stabilizer, and
    the arcs of ``w`` it splits; None when no integer plan meets the bounds (module docstring)."""
    ins = sorted((x, c) for (x, y), c in cap.items() if y == w and c > 0)
    outs = sorted((y, c) for (x, y), c in cap.items() if x == w and c > 0)
    arcs = [(u, w) for u, _ in ins] + [(w, t) for t, _ in outs]
    if not ins or not outs:
        return ([], arcs) if not ins and not outs else None
    pairs = _pairs(ins, outs, group.nodes[group.stabilizer(w)])
    n, u, t = group.num_npus, pairs.u, pairs.t
    u_switch, t_switch = u >= n, t >= n
    both_npus = ~u_switch & ~t_switch
    orbit_of = group.orbit_ids
    # a pair of NPUs takes at most ``slack`` times its proportional share; an arc to or from another
    # switch is not bounded (the translations spread it over that orbit's switches); no logical arc
    # joins two switches of one orbit (splitting that orbit a switch at a time would meet it half
    # split: spine -> leaf -> spine bounces)
    out_at = dict(zip(pairs.heads.tolist(), pairs.b.tolist()))
    a_rep, b_rep = pairs.a[pairs.i[pairs.first]], pairs.b[pairs.j[pairs.first]]
    rest = int(pairs.b.sum()) - np.array([out_at.get(int(x), 0) for x in u], dtype=np.int64)
    share = np.where(rest > 0, -(-a_rep * b_rep // np.maximum(rest, 1)), 0)
    upper = a_rep if slack is None else np.where(both_npus, np.minimum(a_rep, slack * share), a_rep)
    upper = np.where(u_switch & t_switch & (orbit_of[u] == orbit_of[t]), 0, upper)
    # one row per in-arc orbit and per out-arc orbit (the others repeat it): exact for an NPU's arc,
    # at most the capacity for an arc to or from a switch (the rest is dropped)
    in_keys = np.unique(_orbit_keys(group, pairs.tails, w), return_index=True)[1]
    out_keys = np.unique(_orbit_keys(group, pairs.heads, w), return_index=True)[1]
    matrix = np.vstack([pairs.rows[in_keys], pairs.cols[out_keys]])
    most = np.concatenate([pairs.a[in_keys], pairs.b[out_keys]])
    least = np.where(np.concatenate([pairs.tails[in_keys], pairs.heads[out_keys]]) < n, most, 0)
    solve = _plan_solver(pairs, group, members, distance, matrix, least, most, deadline)
    amount = solve(upper)
    if amount is None:
        return None
    # even out what goes to (or comes from) another switch orbit over that orbit's classes, which
    # cost the same: each at most its equal share of their total, solved again (kept if it fails)
    ends = np.where(t_switch & ~u_switch, orbit_of[t], np.where(u_switch & ~t_switch, orbit_of[u], -1))
    key = ends * (group.nodes.shape[1] + 1) + orbit_of[np.where(t_switch & ~u_switch, u, t)]
    even = upper.copy()
    for value in np.unique(key[ends >= 0]):
        same = np.flatnonzero((key == value) & (ends >= 0))
        even[same] = np.minimum(even[same], -(-amount[same].sum() // len(same)))
    if (even < upper).any():
        evened = solve(even)
        amount = amount if evened is None else evened
    used = matrix @ amount
    if not ((used >= least).all() and (used <= most).all() and (amount >= 0).all()):
        return None
    chosen = amount[pairs.c] > 0
    plan = list(zip(pairs.tails[pairs.i[chosen]].tolist(), pairs.heads[pairs.j[chosen]].tolist(),
                    amount[pairs.c[chosen]].tolist()))
    return plan, arcs


def _plan_solver(pairs: _Pairs, group: NodeTranslations, members: int, distance, matrix, least, most,
                 deadline: Deadline | None):
    """A function of the per-class bounds giving the cheapest integer amounts per class (or None).

    Costs order the units of a plan: first one unit for each NPU pair, the pairs that need this
    orbit most first (the farthest apart in the fabric without it), then pairs with another switch,
    then further units of an NPU pair (the surcharge), switch-to-switch pairs last. Between NPU
    pairs equally far, the fewer coordinates they differ in the better; a GPU's position in its box
    (its rail) counts double, so rails keep to themselves. The surcharge is counted over the whole
    orbit: NPU pairs of one difference (``u -> t`` and its translates) get one unit at the plain
    cost, so an in-arc spreads over many partners rather than giving one partner a unit at every
    spine; a class of ``size`` pairs gives each pair of its difference ``members * size / N``."""
    n, u, t, count, size = group.num_npus, pairs.u, pairs.t, pairs.count, pairs.size
    both_npus = (u < n) & (t < n)
    weights = np.ones(len(group.sizes), dtype=np.int64)
    weights[-1] = 2
    cost = SWITCH_PAIR * ((u >= n) & (t >= n)).astype(np.int64)
    cost[both_npus] = (-_FAR * distance[u[both_npus], t[both_npus]]
                       + (group.coords[u[both_npus]] != group.coords[t[both_npus]]) @ weights)
    kinds, kind_of = np.unique(group.table[group.to_origin[u[both_npus]], t[both_npus]], return_inverse=True)
    spread = np.zeros((len(kinds), count))
    spread[kind_of, np.flatnonzero(both_npus)] = members * size[both_npus] / n
    full = np.block([[matrix, np.zeros((len(matrix), len(kinds)))], [spread, -np.eye(len(kinds))]])
    row_idx, col_idx = np.nonzero(full)
    objective = np.concatenate([cost * size, np.full(len(kinds), _SPREAD * n / members)])
    integral = np.concatenate([np.ones(count, dtype=bool), np.zeros(len(kinds), dtype=bool)])

    def solve(bounds: "np.ndarray") -> "np.ndarray | None":
        """None where no plan exists or the solver stops at its limit (the caller then tries another
        slack, or hands the fabric to the other splitters: a quarter of what is left, at most)."""
        left = _SOLVE_SECONDS if deadline is None or deadline.unlimited else deadline.remaining() / 4
        remaining = max(0.1, min(_SOLVE_SECONDS, left))
        solved = solve_lp(objective, np.zeros(count + len(kinds)), np.concatenate([bounds, np.full(len(kinds), np.inf)]),
                          (row_idx, col_idx, full[row_idx, col_idx]),
                          np.concatenate([least, np.full(len(kinds), -np.inf)]),
                          np.concatenate([most, np.ones(len(kinds))]), remaining, integrality=integral)
        check_clock(deadline)
        if solved.x is None or solved.status != "optimal":
            return None
        return np.rint(solved.x[:count]).astype(np.int64)

    return solve


def _pair_classes(stabilizer_rows, tails, heads):
    """``classes[i, j]``: the orbit of pair ``(tails[i], heads[j])`` under the stabilizer (its rows of
    node images), numbered from 0; -1 where ``tails[i] == heads[j]``.

    A pair's canonical form is its smallest image (tail first): the tail goes to the smallest node
    of its orbit, ``r``, by some ``h``; the translations doing that are ``h`` times the ones fixing
    ``r``, so the head's part is the smallest image of ``h(head)`` under ``r``'s own stabilizer."""
    tail_images = stabilizer_rows[:, tails]
    carrier = tail_images.argmin(axis=0)  # per tail: a translation taking it to its orbit's smallest node
    reps = tail_images[carrier, np.arange(len(tails))].astype(np.int64)
    distinct, rep_index = np.unique(reps, return_inverse=True)
    smallest = np.vstack([stabilizer_rows[stabilizer_rows[:, r] == r].min(axis=0) for r in distinct])
    moved_heads = stabilizer_rows[carrier][:, heads]  # (tails, heads): each head moved with its tail
    head_keys = smallest[rep_index[:, None], moved_heads].astype(np.int64)
    keys = reps[:, None] * int(stabilizer_rows.shape[1]) + head_keys
    keys[tails[:, None] == heads[None, :]] = -1
    _, classes = np.unique(keys, return_inverse=True)
    classes = classes.reshape(keys.shape) - (1 if (keys == -1).any() else 0)
    return classes


def _orbit_keys(group: NodeTranslations, endpoints, w: int):
    """The orbit (smallest image) of each endpoint under ``w``'s stabilizer."""
    return group.nodes[group.stabilizer(w)][:, endpoints].min(axis=0)


def _apply(cap: dict, edge_map: dict, w: int, image, plan: list[tuple[int, int, int]], arcs: list[tuple[int, int]],
           n_npus: int, result: SplitResult) -> None:
    """Split switch ``w`` by ``plan`` (made for the orbit's first switch, whose arcs are ``arcs``)
    moved by the translation whose node images are ``image``; what is left on its arcs to and from
    other switches is dropped (an NPU's arc is used up exactly by construction)."""
    for u, t, amount in plan:
        iu, it = int(image[u]), int(image[t])
        cap[(iu, w)] -= amount
        cap[(w, it)] -= amount
        cap[(iu, it)] = cap.get((iu, it), 0) + amount
        edge_map[(iu, it)][w] = edge_map[(iu, it)].get(w, 0) + amount
        result.pairs += 1
    for x, y in arcs:
        arc = (int(image[x]), int(image[y]))
        left = cap.pop(arc)
        if left < 0 or (left and min(arc) < n_npus):
            raise ValueError(f"forestcoll: the translated plan left arc {arc} of switch {w} with {left}")
        result.dropped_spare += left


def _requirement_holds(cap: dict, supply: list, demand: int, s: int, result: SplitResult) -> bool:
    """``lambda(s, 0) >= demand``: by symmetry the same for every NPU."""
    arcs = list(cap.items())
    network = FlowNetwork(s + 1, [a for (a, _), _ in arcs] + [s] * len(supply),
                          [b for (_, b), _ in arcs] + [v for v, _ in supply])
    value = network.value([c for _, c in arcs] + [c for _, c in supply], s, 0)
    result.flows += 1
    result.checks += 1
    return value >= demand
