"""Switch removal a whole switch at a time, checked afterwards (large fabrics).

``splitting`` splits one pair ``(u, w, t)`` at a time at its exact safe amount: some sixty max-flows
a pair, which on a 512-GPU rail fabric (64 NVSwitches, 16 leaves, 16 spines; about 43,000 pairs)
is over half an hour. Here a switch is split in one step by a *plan*, and the requirement is
checked once for the switches of a batch:

* the plan of switch ``w`` is an integer transportation from its in-arcs to its out-arcs (no
  ``u -> w -> u``) that meets every row and column sum exactly, so the switch is removed
  completely: each pair at most twice its proportional share ``a_u b_t / (B - b_u)`` (so an
  in-arc is spread, not poured onto one partner), and among those the plan of least cost, far
  pairs first and switch-to-switch pairs last (a min-cost flow, ``_transport``);
* the requirement that makes the packing possible is the one ``splitting`` keeps: every NPU ``v``
  receives ``demand`` from the super-source (``lambda(s, v) >= demand``). After a batch of
  switches (consecutive switches of the same shape: the NVSwitches, then the leaves, then the
  spines of a rail fabric) it is checked with one max-flow per NPU; a batch that fails is undone
  and its switches are planned and checked one by one, and a switch that still fails is split
  pair by pair as in ``splitting`` (exact, so nothing is lost but time).

So the result satisfies exactly what ``splitting``'s does, and the split graph is still a valid
input to the packers; only the logical arcs differ. On balanced fabrics where each switch sits
far from the bottleneck or feeds it evenly (rail fabrics at T*) no batch fails: measured on the
512-GPU rail fabric, 3 batches, ~1,500 max-flows instead of ~2.6 million.

A plan is solved by OR-Tools' min-cost flow where OR-Tools is installed (the optional ``cpsat``
extra); without it, by NetworkX's network simplex on the same flow (the same arcs, bounds, costs
and supplies, in integers; on the 512-GPU rail fabric's spines, 229,000 arcs, 0.7 s a plan
against OR-Tools' 0.2 s, where a HiGHS MILP of it took 8-16 s). Both give a plan of least cost,
but among plans of equal cost they may pick different ones, so the trees can differ; the
guarantee does not (it is checked afterwards either way). ``SplitResult.plan_solver`` names the
one used (``PLAN_SOLVERS``) and the algorithm's ``meta["bulk_plans"]`` the NetworkX one.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache

from workbench.kit.deadline import Deadline
from workbench.util.lazy import lazy_module
from workbench.kit.maxflow import FlowNetwork
from workbench.topology import Topology

from .optimum import TreeUnits, check_clock
from .splitting import SplitResult, split_one_switch, starting_arcs

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["split_in_bulk", "switch_batches", "switch_pairs", "hop_distances", "plan_solver", "SWITCH_PAIR",
           "PLAN_SOLVERS"]

PLAN_SOLVERS = ("or-tools", "networkx")  # the min-cost flow of a plan: OR-Tools', else NetworkX's


@cache
def plan_solver() -> str:
    """"or-tools" where OR-Tools' min-cost flow imports (the optional ``cpsat`` extra), else "networkx"."""
    try:
        from ortools.graph.python.min_cost_flow import SimpleMinCostFlow  # noqa: F401
    except ImportError:
        return "networkx"
    return "or-tools"


def switch_batches(topology: Topology) -> list[list[int]]:
    """Switches in increasing id, cut into runs of the same shape (how many NPU and switch
    neighbours, and the bandwidths of their links)."""
    shape: dict[int, tuple] = {}
    links_of: dict[int, list] = defaultdict(list)
    for link in topology.links:
        links_of[link.src].append(("out", topology.is_switch(link.dst), link.bandwidth))
        links_of[link.dst].append(("in", topology.is_switch(link.src), link.bandwidth))
    for w in topology.switches:
        shape[w] = tuple(sorted(links_of[w]))
    batches: list[list[int]] = []
    for w in topology.switches:
        if batches and shape[batches[-1][-1]] == shape[w]:
            batches[-1].append(w)
        else:
            batches.append([w])
    return batches


def switch_pairs(topology: Topology) -> int:
    """In-arc x out-arc pairs summed over the switches: the pairs ``splitting`` splits one by one."""
    degree_in: dict[int, int] = {}
    degree_out: dict[int, int] = {}
    for link in topology.links:
        degree_out[link.src] = degree_out.get(link.src, 0) + 1
        degree_in[link.dst] = degree_in.get(link.dst, 0) + 1
    return sum(degree_in.get(w, 0) * degree_out.get(w, 0) for w in topology.switches)


def split_in_bulk(topology: Topology, units: TreeUnits, deadline: Deadline | None = None) -> SplitResult:
    """Remove every switch (module docstring); the same guarantee as ``splitting.split_switches``."""
    n_npus, s = topology.num_npus, topology.num_nodes  # s: the super-source
    cap, supply, edge_map, result = starting_arcs(topology, units)
    checker = _Requirement(n_npus, s, supply, units.demand, result)
    distance = hop_distances(topology)
    is_switch = topology.is_switch
    result.plan_solver = solver = plan_solver()
    def attempt(switches: list[int], slack: int | None) -> bool:
        """Plan every switch of ``switches`` at ``slack`` and check; undone (False) if it fails."""
        saved = (dict(cap), {arc: dict(m) for arc, m in edge_map.items()})
        if all(_apply_plan(cap, edge_map, w, result, distance, is_switch, slack, solver) for w in switches) \
                and checker.holds(cap, deadline):
            return True
        cap.clear(), cap.update(saved[0])
        edge_map.clear(), edge_map.update(saved[1])
        return False

    for batch in switch_batches(topology):
        check_clock(deadline)
        if any(attempt(batch, slack) for slack in SLACKS):
            continue
        for w in batch:  # one at a time, else pair by pair (exact)
            check_clock(deadline)
            if any(attempt([w], slack) for slack in SLACKS):
                continue
            result.exact_switches += 1
            split_one_switch(cap, edge_map, w, supply, units.demand, n_npus, s, result, deadline,
                             granule=max(1, int(units.k)), spread=True)
    result.capacity = {arc: c for arc, c in cap.items() if c > 0}
    result.edge_map = {arc: dict(m) for arc, m in edge_map.items()}
    return result


def _apply_plan(cap: dict, edge_map: dict, w: int, result: SplitResult, distance: "np.ndarray",
                is_switch, slack: int | None, solver: str = "or-tools") -> bool:
    """Split switch ``w`` completely by the transportation plan; False (nothing changed) when no
    complete plan exists (an unbalanced switch: the exact splitter names it)."""
    ins = sorted((a, c) for (a, b), c in cap.items() if b == w and c > 0)
    outs = sorted((b, c) for (a, b), c in cap.items() if a == w and c > 0)
    total_in, total_out = sum(c for _, c in ins), sum(c for _, c in outs)
    if not ins or total_in != total_out:
        return not ins and not outs
    plan = _transport(ins, outs, distance, is_switch, slack, solver)
    if plan is None:
        return False
    for (u, a), row in zip(ins, plan):
        for t, gamma in row:
            cap[(u, t)] = cap.get((u, t), 0) + gamma
            edge_map[(u, t)][w] = edge_map[(u, t)].get(w, 0) + gamma
            result.pairs += 1
        del cap[(u, w)]
    for t, _ in outs:
        del cap[(w, t)]
    return True


SLACKS = (1, 2, None)  # the plans tried for a batch, spread first (see _transport)
SWITCH_PAIR = 1_000  # a pair of two switches (a bounce, e.g. spine -> leaf -> spine) costs this much more


def _transport(ins: list[tuple[int, int]], outs: list[tuple[int, int]], distance: "np.ndarray",
               is_switch, slack: int | None, solver: str = "or-tools") -> list[list[tuple[int, int]]] | None:
    """Integer amounts per (in-arc, out-arc) pair, no pair with the same node at both ends, every
    row and column exact. Each pair is bounded by ``slack`` times its proportional share (None: by
    its in-arc), and among such plans the cheapest: far pairs first (cost: minus their hop
    distance in the physical fabric) and switch-to-switch pairs last. With slack 1 the plan is
    the proportional spread (shallow trees); with more, capacity through a spine goes to the pairs
    that need the spine (other leaf groups) rather than to pairs a leaf already joins. None when
    no plan meets the bounds. ``solver``: one of ``PLAN_SOLVERS`` (module docstring)."""
    total = sum(c for _, c in outs)
    out_of = dict(outs)
    n_in = len(ins)
    tails, heads, costs, pair_of = [], [], [], []
    for i, (u, _) in enumerate(ins):
        for j, (t, _) in enumerate(outs):
            if t != u:
                tails.append(i)
                heads.append(n_in + j)
                costs.append(SWITCH_PAIR * (is_switch(u) and is_switch(t)) - int(distance[u, t]))
                pair_of.append((i, t))
    bounds = []
    for i, j in zip(tails, heads):
        u, a = ins[i]
        rest = total - out_of.get(u, 0)
        share = -(-a * outs[j - n_in][1] // rest) if rest > 0 else 0
        bounds.append(a if slack is None else min(a, slack * share))
    supplies = [c for _, c in ins] + [-c for _, c in outs]
    if solver == "networkx":
        flows = _min_cost_flow_networkx(tails, heads, bounds, costs, supplies)
    else:
        flows = _min_cost_flow_ortools(tails, heads, bounds, costs, supplies)
    if flows is None:
        return None
    plan: list[list[tuple[int, int]]] = [[] for _ in range(n_in)]
    for (i, t), amount in zip(pair_of, flows):
        if amount:
            plan[i].append((t, int(amount)))
    return plan


def _min_cost_flow_ortools(tails: list[int], heads: list[int], bounds: list[int], costs: list[int],
                           supplies: list[int]) -> list[int] | None:
    """The amount on each arc of a least-cost flow meeting every node's supply (OR-Tools); None when none does."""
    from ortools.graph.python.min_cost_flow import SimpleMinCostFlow

    solver = SimpleMinCostFlow()
    arcs = solver.add_arcs_with_capacity_and_unit_cost(np.asarray(tails, dtype=np.int64),
                                                       np.asarray(heads, dtype=np.int64),
                                                       np.asarray(bounds, dtype=np.int64),
                                                       np.asarray(costs, dtype=np.int64))
    solver.set_nodes_supplies(np.arange(len(supplies), dtype=np.int64), np.asarray(supplies, dtype=np.int64))
    if solver.solve() != solver.OPTIMAL:
        return None
    return solver.flows(arcs).tolist()


def _min_cost_flow_networkx(tails: list[int], heads: list[int], bounds: list[int], costs: list[int],
                            supplies: list[int]) -> list[int] | None:
    """The same as ``_min_cost_flow_ortools`` by NetworkX's network simplex (a base dependency): the
    same arcs, bounds, costs and supplies, solved in integers, so the amounts are whole and every
    sum exact; None when no flow meets the supplies."""
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from((v, {"demand": -supply}) for v, supply in enumerate(supplies))
    graph.add_edges_from((tail, head, {"capacity": bound, "weight": cost})
                         for tail, head, bound, cost in zip(tails, heads, bounds, costs))
    try:
        _, flow = nx.network_simplex(graph)
    except nx.NetworkXUnfeasible:
        return None
    return [flow[tail][head] for tail, head in zip(tails, heads)]


def hop_distances(topology: Topology, without=(), sources: int | None = None, unreachable: int | None = None
                  ) -> "np.ndarray":
    """Hop distances in the physical fabric (unweighted shortest paths) from the first ``sources``
    nodes (all by default) to every node, the nodes ``without`` taken out; ``unreachable`` (default:
    the node count) where no path is left."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    n = topology.num_nodes
    gone = {int(x) for x in without}
    kept = [(l.src, l.dst) for l in topology.links if l.src not in gone and l.dst not in gone]
    graph = csr_matrix((np.ones(len(kept)), ([a for a, _ in kept], [b for _, b in kept])), shape=(n, n))
    hops = shortest_path(graph, unweighted=True, indices=np.arange(n if sources is None else sources))
    hops[~np.isfinite(hops)] = n if unreachable is None else unreachable
    return hops.astype(np.int64)


class _Requirement:
    """``lambda(s, v) >= demand`` for every NPU ``v`` on the current arcs: one max-flow per NPU."""

    def __init__(self, n_npus: int, s: int, supply: list[tuple[int, int]], demand: int, result: SplitResult) -> None:
        self.n_npus, self.s, self.supply, self.demand, self.result = n_npus, s, supply, demand, result

    def holds(self, cap: dict, deadline: Deadline | None) -> bool:
        arcs = list(cap.items())
        src = [a for (a, _), _ in arcs] + [self.s] * len(self.supply)
        dst = [b for (_, b), _ in arcs] + [v for v, _ in self.supply]
        capacities = [c for _, c in arcs] + [c for _, c in self.supply]
        network = FlowNetwork(self.s + 1, src, dst)
        try:
            for v in range(self.n_npus):
                check_clock(deadline)
                if network.value(capacities, self.s, v) < self.demand:
                    return False
            return True
        finally:
            self.result.flows += network.calls
            self.result.checks += 1
