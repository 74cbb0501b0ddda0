"""Switch removal one switch orbit at a time, by the fabric's translations (clusters as built).

On a rail-optimized cluster the translations of ``workbench.cluster_translations`` map the fabric
onto itself: boxes onto boxes, rails onto rails, leaf groups onto leaf groups, NPUs freely and
transitively. If every switch is split the same way as its images (the plan of switch ``g w`` is
the plan of ``w`` moved by ``g``), the logical NPU graph left is translation-invariant too, and
the symmetric packer (``symmetric``) grows root 0's trees only and shifts them to every root.

* Switches are taken orbit by orbit (an orbit's smallest id first). The plan of the orbit's first
  switch ``w`` must be invariant under ``w``'s stabilizer ``H`` (the translations that fix it),
  or its images would not be well defined: it gives one amount ``x_c`` to each orbit ``c`` of
  (in-arc, out-arc) pairs under ``H`` (no ``u -> w -> u`` pair). Every in-arc ``(u, w)`` must be
  used exactly: ``sum_c r_c(u) x_c = cap(u, w)``, ``r_c(u)`` the pairs of class ``c`` that start
  at ``u`` (one equation per in-arc orbit), and likewise every out-arc. Bounds and costs are
  ``bulk_splitting``'s: each pair at most ``slack`` times its proportional share, far pairs first,
  switch-to-switch pairs last. It is a small integer program (HiGHS, ``workbench.solvers``): at most a few thousand classes at 1,024 GPUs.
* The plan is then applied to every switch of the orbit through the translation taking ``w``
  there, and the requirement that keeps the packing possible (``lambda(s, v) >= demand`` for every
  NPU v) is checked with one max-flow: the graph is invariant and NPUs are all alike, so NPU 0
  stands for all. A failing plan is undone and the next slack tried; when none passes,
  ``SymmetricSplitFailed`` hands the fabric back to ``bulk_splitting`` (same guarantee, slower).

The result satisfies what ``splitting`` guarantees, and its capacities are translation-invariant.
"""

from __future__ import annotations

from dataclasses import replace

from workbench.cluster_translations import NodeTranslations
from workbench.deadline import Deadline
from workbench.lazy import lazy_module
from workbench.maxflow import FlowNetwork
from workbench.solvers import solve_lp
from workbench.topology import Topology

from .bulk_splitting import _SWITCH_PAIR
from .optimum import TreeUnits, check_clock
from .splitting import SplitResult, starting_arcs

np = lazy_module("numpy")  # imported on first use (workbench.lazy)

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
        if any((a in done and b in done and a != b) for a, b in cap if w in (a, b) and min(a, b) >= n_npus
               and set((a, b)) <= set(members.tolist())):
            raise SymmetricSplitFailed(f"switch {w} is linked to a switch of its own orbit")
        # one translation per member taking w there
        carrier = {int(m): int(np.flatnonzero(nodes[:, w] == m)[0]) for m in members}
        distance = _hops_without(topology, members)
        for slack in _SLACKS:
            planned = _orbit_plan(cap, w, group, len(members), distance, slack, deadline)
            if planned is None:
                continue
            plan, arcs = planned
            saved = (dict(cap), {arc: dict(m) for arc, m in edge_map.items()})
            for member, t in carrier.items():
                _apply(cap, edge_map, member, nodes[t], plan, arcs, n_npus, result)
            if _requirement_holds(cap, supply, units.demand, s, result):
                break
            cap.clear(), cap.update(saved[0])
            edge_map.clear(), edge_map.update(saved[1])
        else:
            raise SymmetricSplitFailed(f"no translation-invariant plan of switch {w} keeps the requirement")
    result.capacity = {arc: c for arc, c in cap.items() if c > 0}
    result.edge_map = {arc: dict(m) for arc, m in edge_map.items()}
    return result


def _orbit_plan(cap: dict, w: int, group: NodeTranslations, members: int, distance, slack: int | None,
                deadline: Deadline | None) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]] | None:
    """``(u, t, amount)`` for every split pair of switch ``w``, invariant under its stabilizer, and
    the arcs of ``w`` it splits; None when no integer plan meets the bounds."""
    ins = sorted((a, c) for (a, b), c in cap.items() if b == w and c > 0)
    outs = sorted((b, c) for (a, b), c in cap.items() if a == w and c > 0)
    arcs = [(u, w) for u, _ in ins] + [(w, t) for t, _ in outs]
    if not ins or not outs:
        return ([], arcs) if not ins and not outs else None
    tails = np.array([u for u, _ in ins], dtype=np.int64)
    heads = np.array([t for t, _ in outs], dtype=np.int64)
    a = np.array([c for _, c in ins], dtype=np.int64)
    b = np.array([c for _, c in outs], dtype=np.int64)
    classes = _pair_classes(group.nodes[group.stabilizer(w)], tails, heads)
    count = int(classes.max()) + 1
    valid = classes >= 0
    # per class: its pairs, and how many start at each in-arc / end at each out-arc
    rows = np.zeros((len(ins), count), dtype=np.int64)
    cols = np.zeros((len(outs), count), dtype=np.int64)
    i_idx, j_idx = np.nonzero(valid)
    c_idx = classes[i_idx, j_idx]
    np.add.at(rows, (i_idx, c_idx), 1)
    np.add.at(cols, (j_idx, c_idx), 1)
    size = rows.sum(axis=0)
    first = np.full(count, -1, dtype=np.int64)  # a representative pair per class
    first[c_idx[::-1]] = np.arange(len(c_idx))[::-1]
    rep_i, rep_j = i_idx[first], j_idx[first]
    total = int(b.sum())
    out_at = dict(zip(heads.tolist(), b.tolist()))
    rest = total - np.array([out_at.get(int(u), 0) for u in tails[rep_i]], dtype=np.int64)
    share = np.where(rest > 0, -(-a[rep_i] * b[rep_j] // np.maximum(rest, 1)), 0)
    u_rep, t_rep = tails[rep_i], heads[rep_j]
    n = group.num_npus
    u_switch, t_switch = u_rep >= n, t_rep >= n
    # a pair of NPUs takes at most ``slack`` times its proportional share; an arc to or from
    # another switch is not bounded (the translations spread it over that orbit's switches)
    upper = a[rep_i] if slack is None else np.where(u_switch | t_switch, a[rep_i], np.minimum(a[rep_i], slack * share))
    orbit_of = group.nodes.min(axis=0)
    # no logical arc between two switches of one orbit: splitting that orbit a switch at a time
    # would meet it half split (spine -> leaf -> spine bounces are the case)
    upper[(orbit_of[u_rep] == orbit_of[t_rep]) & (u_rep >= group.num_npus) & (t_rep >= group.num_npus)] = 0
    # the costs order the units of a plan: first a unit for each NPU pair, the pairs that need this
    # orbit most first (the farthest apart in the fabric without it), then pairs with another switch,
    # then further units of an NPU pair (a surcharge, below); switch-to-switch pairs last. Between
    # NPU pairs equally far, the fewer coordinates they differ in the better (a rail's GPUs pair
    # with their rail). What is not used of an arc to or from a switch is dropped
    both_npus = ~u_switch & ~t_switch
    differ = np.zeros(count, dtype=np.int64)
    weights = np.ones(len(group.sizes), dtype=np.int64)
    weights[-1] = 2  # a GPU's position in its box (its rail) counts double: rails keep to themselves
    differ[both_npus] = (group.coords[u_rep[both_npus]] != group.coords[t_rep[both_npus]]) @ weights
    far = np.zeros(count, dtype=np.int64)
    far[both_npus] = distance[u_rep[both_npus], t_rep[both_npus]]
    pair_cost = np.where(both_npus, -_FAR * far + differ, 0)
    pair_cost = pair_cost + _SWITCH_PAIR * (u_switch & t_switch)
    # one row per in-arc orbit and per out-arc orbit (the others repeat it): exact for an NPU's arc
    in_keys = np.unique(_orbit_keys(group, tails, w), return_index=True)[1]
    out_keys = np.unique(_orbit_keys(group, heads, w), return_index=True)[1]
    matrix = np.vstack([rows[in_keys], cols[out_keys]])
    upper_rhs = np.concatenate([a[in_keys], b[out_keys]])
    lower_rhs = np.where(np.concatenate([tails[in_keys], heads[out_keys]]) < n, upper_rhs, 0)
    remaining = 60.0 if deadline is None or deadline.unlimited else max(0.1, deadline.remaining())
    # spread: NPU pairs of one difference (u -> t and its translates) get one unit over the whole
    # orbit at the plain cost, more only at a surcharge, so an in-arc spreads over many partners
    # rather than giving one partner a unit at every spine. Summed over the orbit, a class of
    # ``size`` pairs gives each pair of its difference ``members * size / N`` per unit of its amount
    difference = np.full(count, -1, dtype=np.int64)
    to_origin = np.argmin(group.table, axis=0)
    difference[both_npus] = group.table[to_origin[u_rep[both_npus]], t_rep[both_npus]]
    kinds, kind_of = np.unique(difference[both_npus], return_inverse=True)
    spread_rows = np.zeros((len(kinds), count))
    spread_rows[kind_of, np.flatnonzero(both_npus)] = members * size[both_npus] / n
    excess = -np.eye(len(kinds))
    full = np.block([[matrix, np.zeros((len(matrix), len(kinds)))], [spread_rows, excess]])
    row_idx, col_idx = np.nonzero(full)

    def solve(bounds: "np.ndarray") -> "np.ndarray | None":
        solved = solve_lp(np.concatenate([pair_cost * size, np.full(len(kinds), _SPREAD * n / members)]),
                          np.zeros(count + len(kinds)), np.concatenate([bounds, np.full(len(kinds), np.inf)]),
                          (row_idx, col_idx, full[row_idx, col_idx]),
                          np.concatenate([lower_rhs, np.full(len(kinds), -np.inf)]),
                          np.concatenate([upper_rhs, np.ones(len(kinds))]), remaining,
                          integrality=np.concatenate([np.ones(count, dtype=bool), np.zeros(len(kinds), dtype=bool)]))
        check_clock(deadline)
        if solved.x is None or solved.status not in ("optimal", "feasible"):
            return None
        return np.rint(solved.x[:count]).astype(np.int64)

    amount = solve(upper)
    if amount is None:
        return None
    # even out what goes to (or comes from) another switch orbit over that orbit's classes, which
    # cost the same: each at most its equal share of their total, solved again (kept if it fails)
    ends = np.where(t_switch & ~u_switch, orbit_of[t_rep], np.where(u_switch & ~t_switch, orbit_of[u_rep], -1))
    side = np.where(t_switch & ~u_switch, u_rep, t_rep)
    key = ends * (group.nodes.shape[1] + 1) + orbit_of[side]
    even = upper.copy()
    for value in np.unique(key[ends >= 0]):
        members_of = np.flatnonzero((key == value) & (ends >= 0))
        even[members_of] = np.minimum(even[members_of], -(-amount[members_of].sum() // len(members_of)))
    if (even < upper).any():
        evened = solve(even)
        amount = amount if evened is None else evened
    used = matrix @ amount
    if not ((used >= lower_rhs).all() and (used <= upper_rhs).all() and (amount >= 0).all()):
        return None
    chosen = amount[c_idx] > 0
    plan = list(zip(tails[i_idx[chosen]].tolist(), heads[j_idx[chosen]].tolist(), amount[c_idx[chosen]].tolist()))
    return plan, arcs


def _hops_without(topology: Topology, removed) -> "np.ndarray":
    """Hop distances between the NPUs of the fabric without the switches ``removed`` (``_MAX_HOPS``
    where it cannot join them), as an ``N x N`` array."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    gone = set(int(x) for x in removed)
    kept = [(l.src, l.dst) for l in topology.links if l.src not in gone and l.dst not in gone]
    size = topology.num_nodes
    graph = csr_matrix((np.ones(len(kept)), ([a for a, _ in kept], [b for _, b in kept])), shape=(size, size))
    hops = shortest_path(graph, unweighted=True, indices=np.arange(topology.num_npus))[:, : topology.num_npus]
    return np.minimum(np.nan_to_num(hops, posinf=_MAX_HOPS), _MAX_HOPS).astype(np.int64)


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
