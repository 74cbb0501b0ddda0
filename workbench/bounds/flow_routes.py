"""Routes at the throughput optimum: the multi-commodity-flow LP solved, and its flows cut into paths.

``workbench.bounds.flow_lp`` writes the max-concurrent-flow LP of a collective whose chunks each go to one
rank (All-to-All, scatter, gather, unicast custom demands); its value ``T*`` is the least time in
which the links can carry every demand. Here it is solved twice and its flows are read back as
routes, so a schedule can follow them:

1. minimise ``T``: the throughput optimum ``T*``;
2. with ``T <= (1 + SLACK) T*``, minimise the flows' weighted volume ``sum_k sum_e c_e f_k[e]``
   with ``c_e`` = alpha + per-message overhead + one chunk's serialisation on link e. Among the
   throughput-optimal flows this picks the one on the shortest paths (what a small message
   needs), and positive costs leave no circulation and no flow absorbed beyond a demand;
3. each flow is decomposed into paths (flow decomposition: Ahuja, Magnanti and Orlin, *Network
   Flows*, 1993, section 3.5): from an origin, follow the link with the most flow left until a
   node with demand left, take the smallest amount on the way, subtract, repeat. A cycle met on
   the way (solver round-off) is cancelled, and a walk that ends where nothing is needed (flow a
   node absorbed beyond its demand, which the LP's rows allow) is dropped.

The result is, per (origins, destination), a few paths (node tuples, switches included) and the
fraction of the demand each carries. Basu et al., "Efficient All-to-All Collective Communication
Schedules for Direct-Connect Topologies" (HPDC 2024) build All-to-All schedules on the same route:
the MCF LP, its path decomposition, then a schedule.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from workbench.model.collective import Collective
from workbench.bounds.flow_lp import build_flow_lp, flow_lp_size
from workbench.util.lazy import lazy_module
from workbench.topology import Topology

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["Routes", "RoutesError", "flow_routes", "decompose_flow", "SLACK", "MAX_COLUMNS"]

SLACK = 0.01  # stage 2 may give up this much throughput for shorter paths
MAX_COLUMNS = 2_000_000  # refuse larger LPs before building them
_EPS = 1e-7  # flow below this share of a demand is solver round-off

Path = tuple[int, ...]


class RoutesError(ValueError):
    """The collective has no unicast flow relaxation here (a multicast or reduction), or it is too large."""


@dataclass
class Routes:
    """Per (origins, destination): ``[(path, fraction), ...]`` with fractions summing to 1."""

    paths: dict[tuple[frozenset, int], list[tuple[Path, float]]]
    optimum_seconds: float  # T* for the collective's chunk bytes (link loads only, no alpha)
    status: str  # optimal: both LPs proven; feasible: stage 2 stopped early, stage 1's flows used
    lp_seconds: float
    stats: dict[str, float] = field(default_factory=dict)


def flow_routes(topology: Topology, collective: Collective, chunk_bytes: float, time_limit: float,
                max_columns: int = MAX_COLUMNS) -> Routes:
    """The routes of the module docstring; ``RoutesError`` when the LP does not apply or is over
    ``max_columns``, ``TimeoutError`` when stage 1 is not solved within ``time_limit``."""
    from workbench.kit.solvers import solve_lp

    started = time.perf_counter()
    if collective.combining or any(len(post - pre) > 1 for pre, post, _ in collective.groups()):
        raise RoutesError("routes from the flow LP need chunks that each go to one rank "
                          f"(All-to-All, scatter, gather); {collective.kind} has none")
    size = flow_lp_size(topology, collective)
    if size > max_columns:
        raise RoutesError(f"the flow LP has {size:,} columns, over the {max_columns:,} it is solved with")
    lp = build_flow_lp(topology, collective)
    if lp is None:
        return Routes({}, 0.0, "optimal", 0.0)
    links = topology.links
    cols = lp.num_cols
    options = {"solver": "ipm"} if cols > 20_000 else None
    cost = np.zeros(cols)
    cost[lp.t_col] = 1.0
    lower, upper = np.zeros(cols), np.full(cols, math.inf)
    # stage 1 may take most of the limit; stage 2 only refines it (its failure keeps stage 1's flows)
    first = solve_lp(cost, lower, upper, lp.rows, lp.row_lower, lp.row_upper, max(0.7 * time_limit, 0.05),
                     options=options)
    if first.status != "optimal" or first.x is None:
        raise TimeoutError(f"the flow LP was not solved in {time_limit:.3g} s ({first.status})")
    optimum = float(first.objective)
    per_link = np.array([l.alpha + l.overhead + chunk_bytes / l.bandwidth for l in links])
    per_link /= per_link.max()
    cost = np.zeros(cols)
    for index in range(len(lp.unicast)):
        cost[index * len(links):(index + 1) * len(links)] = per_link
    upper[lp.t_col] = optimum * (1 + SLACK)
    left = max(time_limit - (time.perf_counter() - started), 0.05)
    second = solve_lp(cost, lower, upper, lp.rows, lp.row_lower, lp.row_upper, left, options=options)
    status, x = ("optimal", second.x) if second.status == "optimal" and second.x is not None else ("feasible", first.x)
    paths: dict[tuple[frozenset, int], list[tuple[Path, float]]] = {}
    for index, (origins, demand) in enumerate(lp.unicast):
        flow = np.asarray(x[index * len(links):(index + 1) * len(links)], dtype=float)
        for rank, found in decompose_flow(topology, flow, origins, demand).items():
            paths[(origins, rank)] = found
    return Routes(paths, optimum * chunk_bytes / lp.max_bw, status, time.perf_counter() - started,
                  {"columns": cols, "stage1_seconds": first.seconds, "stage2_seconds": second.seconds})


def decompose_flow(topology: Topology, flow: np.ndarray, origins: frozenset, demand: dict[int, int | float]
                   ) -> dict[int, list[tuple[Path, float]]]:
    """One origin set's flow (per link, in ``topology.links`` order) as paths to each destination
    with the fraction of its demand they carry (module docstring, step 3). Demand the flow cannot
    reach within round-off goes on the simulator's route from the nearest origin."""
    links = topology.links
    left = np.where(flow > _EPS * max(demand.values(), default=1), flow, 0.0)
    leaving: dict[int, list[int]] = {}
    for index, link in enumerate(links):
        leaving.setdefault(link.src, []).append(index)
    remaining = {rank: float(amount) for rank, amount in demand.items() if amount > 0}
    carried: dict[int, dict[Path, float]] = {rank: {} for rank in remaining}
    tolerance = {rank: _EPS * 100 * amount for rank, amount in remaining.items()}

    def outflow(node: int) -> float:
        return sum(left[e] for e in leaving.get(node, ()))

    while any(remaining[r] > tolerance[r] for r in remaining):
        start = max(origins, key=outflow)
        node, nodes, edges = start, [start], []
        while node == start or remaining.get(node, 0.0) <= tolerance.get(node, 0.0):
            out = [e for e in leaving.get(node, ()) if left[e] > 0]
            if not out:
                break
            edge = max(out, key=lambda e: left[e])
            nxt = links[edge].dst
            if nxt in nodes:  # a cycle of round-off: cancel it and go on from where it closed
                at = nodes.index(nxt)
                cycle = edges[at:] + [edge]
                amount = min(left[e] for e in cycle)
                for e in cycle:
                    left[e] -= amount
                nodes, edges, node = nodes[:at + 1], edges[:at], nxt
                continue
            nodes.append(nxt)
            edges.append(edge)
            node = nxt
        if node == start:
            break  # the origins have no flow left before the demand is met (round-off): routed below
        if remaining.get(node, 0.0) <= tolerance.get(node, 0.0):
            # a dead end: flow a node absorbed beyond its demand (the LP's rows allow it); drop it
            amount = min(left[e] for e in edges)
            for e in edges:
                left[e] -= amount
            continue
        amount = min([remaining[node]] + [left[e] for e in edges])
        for e in edges:
            left[e] -= amount
        remaining[node] -= amount
        path = tuple(nodes)
        carried[node][path] = carried[node].get(path, 0.0) + amount
    result: dict[int, list[tuple[Path, float]]] = {}
    for rank, amount in demand.items():
        if amount <= 0:
            continue
        shortfall = max(remaining.get(rank, 0.0), 0.0)
        if shortfall > tolerance[rank]:
            origin = min(origins, key=lambda o: topology.alpha_distances()[o, rank])
            route = topology.route(origin, rank)
            assert route is not None, f"rank {rank} unreachable from {sorted(origins)}"
            carried[rank][route] = carried[rank].get(route, 0.0) + shortfall
        total = sum(carried[rank].values())
        result[rank] = sorted(((p, a / total) for p, a in carried[rank].items()), key=lambda pa: (-pa[1], pa[0]))
    return result
