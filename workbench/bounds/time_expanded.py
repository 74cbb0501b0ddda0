"""The time-expanded flow LP behind the alpha-beta bound (``workbench.bounds.alpha_beta``).

The network is expanded over ``K`` steps of ``tau`` seconds (the time-expanded network of
TE-CCL, Liu et al., "Rethinking Machine Learning Collective Communication as a Multi-Commodity
Flow Problem", SIGCOMM 2024, here as a fluid relaxation rather than a schedule). Data moves over
*arcs* (``Network``), each booking at most one link:

* ``link``: one link as a segment of its own (an NPU-to-NPU hop, a store-and-forward hop, a
  transfer that starts or ends at a switch); it arrives its link's alpha later;
* ``enter``, ``exit``, ``hop``: a cut-through segment ``node -> switch -> ... -> node`` as a walk
  through one *hub* per switch. A hub stores nothing, so every link of the segment is booked in the
  same step, as the simulator books them all at once; the exit arc carries the transit: the exit
  link's alpha plus the smallest alpha into its switch (no segment through it has less).

Each link keeps one clock: time is shifted per node by a potential ``pi[v]`` and per link by
``sigma[e]``, the same for every link that meets a switch of one group (``cluster``); docs/bounds.md
proves any such shift valid and explains these. With ``floor_`` rounding down, an arc from ``v``
to ``w`` over link e with transit ``a`` has

* ``D = floor_((sigma[e] - pi[v]) / tau)``: steps from leaving v to booking e;
* ``G = floor_((a + pi[w] - sigma[e]) / tau)``: steps from booking e to arriving at w.

Columns (``infeasible_within``):

* ``x[c, arc, k] >= 0``: flow of commodity c leaving the arc's tail in node-step k;
* ``h[c, v, k] >= 0``: flow of c kept at node v from step k to k + 1 (not at hubs);
* ``a[c, d] >= 0``: flow of c absorbed by sink d at its deadline step;
* ``y[arc, b] >= 0``: (coupled units only) the shared load of an arc in booking step b;
* ``u >= 0``: the shortfall, the fraction of every demand not delivered.

Rows: (N) per commodity, node v and step k: ``in + h[k-1] + supply - out - h[k] - a >= 0`` (a
node may drop flow, never create it); (C) per link e and booking step b: the arcs over e carry at
most ``bandwidth_e`` times the part of the step inside e's window (``link_windows``; all of ``tau``
but at the ends); (Y) ``x <= y`` for shared commodities of a coupled unit; (S) per sink:
``a[c, d] + demand * u >= demand``. Objective: minimise ``u``; ``u > 0`` proves that no schedule
finishes within ``K * tau``. Flows are in units of the unit's largest demand.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from workbench.util.lazy import lazy_module
from workbench.topology import Topology

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["Network", "network_of", "Commodity", "Unit", "Potentials", "potentials", "infeasible_within"]

# floats: lags and supply steps are rounded down after shaving this relative amount, deadlines
# up after adding it, so float noise in alpha sums never makes the relaxation stricter than proven
_SHAVE = 1e-9
SHORTFALL = 1e-6  # a shortfall above this (in units of the largest demand) proves the horizon too short


@dataclass(frozen=True)
class Network:
    """The arcs of a topology. Nodes: the topology's, then one hub per switch (``hub(w)``); a unit's
    virtual nodes follow (``first_virtual``). ``cluster[e]``: the group of switches link e meets
    (switches joined by links are one group), -1 for a link between two NPUs."""

    num_nodes: int
    num_npus: int
    tail: tuple[int, ...]
    head: tuple[int, ...]
    link: tuple[int, ...]
    transit: tuple[float, ...]
    cluster: tuple[int, ...]
    num_clusters: int

    def hub(self, switch: int) -> int:
        """The hub node of switch ``switch``."""
        return self.num_nodes + switch - self.num_npus

    @property
    def first_virtual(self) -> int:
        """The first node id after the hubs, where a unit's virtual nodes start."""
        return 2 * self.num_nodes - self.num_npus


def network_of(topology: Topology) -> Network:
    """The arcs of ``topology`` (module docstring)."""
    links = topology.links
    group = list(range(topology.num_nodes))  # union-find over switches joined by a link

    def root(v: int) -> int:
        while group[v] != v:
            group[v] = group[group[v]]
            v = group[v]
        return v

    for l in links:
        if topology.is_switch(l.src) and topology.is_switch(l.dst):
            group[root(l.src)] = root(l.dst)
    roots = sorted({root(w) for w in topology.switches})
    number = {r: i for i, r in enumerate(roots)}
    cluster = [number[root(l.src if topology.is_switch(l.src) else l.dst)]
               if topology.is_switch(l.src) or topology.is_switch(l.dst) else -1 for l in links]
    into = {w: min((l.alpha for l in topology.in_links(w)), default=0.0) for w in topology.switches}
    net = Network(topology.num_nodes, topology.num_npus, (), (), (), (), tuple(cluster), len(roots))
    tail, head, link, transit = [], [], [], []

    def arc(u: int, v: int, e: int, a: float) -> None:
        tail.append(u)
        head.append(v)
        link.append(e)
        transit.append(a)

    for e, l in enumerate(links):
        arc(l.src, l.dst, e, l.alpha)  # the link alone
        if topology.is_switch(l.dst):
            arc(l.src, net.hub(l.dst), e, 0.0)  # a cut-through segment starts: e booked on entering
        if topology.is_switch(l.src):
            arc(net.hub(l.src), l.dst, e, into[l.src] + l.alpha)  # ... and ends at l.dst
            if topology.is_switch(l.dst):
                arc(net.hub(l.src), net.hub(l.dst), e, 0.0)  # ... or goes on to the next switch
    return Network(net.num_nodes, net.num_npus, tuple(tail), tuple(head), tuple(link), tuple(transit),
                   net.cluster, net.num_clusters)


@dataclass
class Commodity:
    """Data that moves as one flow: ``supplies`` (node -> bytes held from time 0; a virtual node
    stands for data several nodes hold) and ``demands`` (sink -> bytes). ``shared``: in a coupled
    unit, every shared commodity's flow on an arc fits in one load ``y`` (copies: one byte serves
    them all); the others add up."""

    supplies: dict[int, float]
    demands: dict[int, float]
    shared: bool = False


@dataclass
class Unit:
    """Commodities solved in one LP; ``virtual`` maps a virtual node to the real nodes holding its
    data; ``anchor``: ``"sink"``, ``"source"`` or ``"none"``, the potential used (``potentials``)."""

    commodities: list[Commodity]
    virtual: dict[int, tuple[int, ...]] = field(default_factory=dict)
    anchor: str = "none"

    def largest_demand(self) -> float:
        """The largest demand (bytes) of any commodity at any sink: the unit of ``SHORTFALL``."""
        return max(max(c.demands.values()) for c in self.commodities)


@dataclass(frozen=True)
class Potentials:
    """``pi`` per LP node (real, hubs, virtual) and ``sigma`` per link, in seconds (module
    docstring); per link, the shifted times between which the unit's bytes can book it: from
    ``opens`` to ``T + closes`` for a schedule of ``T`` seconds (``link_windows``)."""

    pi: tuple[float, ...]
    sigma: tuple[float, ...]
    opens: tuple[float, ...]
    closes: tuple[float, ...]


def _dijkstra(num: int, arcs: list[tuple[int, int, float]], starts: dict[int, float]) -> list[float]:
    """Least cost from the cheapest start (start costs given), inf where unreached."""
    out: list[list[tuple[int, float]]] = [[] for _ in range(num)]
    for u, v, w in arcs:
        out[u].append((v, w))
    best = [math.inf] * num
    heap = []
    for s, c in starts.items():
        if c < best[s]:
            best[s] = c
            heap.append((c, s))
    heapq.heapify(heap)
    while heap:
        cost, u = heapq.heappop(heap)
        if cost > best[u]:
            continue
        for v, w in out[u]:
            if cost + w < best[v]:
                best[v] = cost + w
                heapq.heappush(heap, (cost + w, v))
    return best


def potentials(topology: Topology, net: Network, unit: Unit) -> Potentials:
    """The shift of a unit (docs/bounds.md): ``sink``: ``pi`` = alpha distance to the nearest sink,
    ``source``: the farthest sink's distance from the (one) source minus the distance from it,
    ``none``: 0. Distances are taken in a graph where each cluster is one extra node c (a link
    ``x -> y`` of it is ``x -> c`` at cost 0 and ``c -> y`` at its alpha) and ``sigma`` of its links
    is c's potential, so no arc's ``D`` or ``G`` is negative."""
    real, links = topology.num_nodes, topology.links
    nodes = net.first_virtual + len(unit.virtual)
    if unit.anchor == "none":
        pi, sigma = [0.0] * nodes, [0.0] * len(links)
    else:
        cluster_node = nodes  # cluster c is node nodes + c of the distance graph
        arcs: dict[tuple[int, int], float] = {}
        for e, l in enumerate(links):
            c = net.cluster[e]
            pairs = [((l.src, l.dst), l.alpha)] if c < 0 else [((l.src, cluster_node + c), 0.0),
                                                                ((cluster_node + c, l.dst), l.alpha)]
            for key, weight in pairs:
                arcs[key] = min(weight, arcs.get(key, math.inf))
        for node, holders in unit.virtual.items():
            for holder in holders:
                arcs[(node, holder)] = 0.0
        total = nodes + net.num_clusters
        if unit.anchor == "sink":
            sinks = {d for c in unit.commodities for d in c.demands}
            pi = _dijkstra(total, [(v, u, w) for (u, v), w in arcs.items()], {d: 0.0 for d in sinks})
        else:
            sources = {s for c in unit.commodities for s in c.supplies}
            dist = _dijkstra(total, [(u, v, w) for (u, v), w in arcs.items()], {s: 0.0 for s in sources})
            far = max(dist[d] for c in unit.commodities for d in c.demands)
            pi = [far - d for d in dist]  # -inf where the source does not reach: never used
        sigma = [pi[l.src] if net.cluster[e] < 0 else pi[cluster_node + net.cluster[e]] for e, l in enumerate(links)]
        pi = pi[:nodes]
    for w in topology.switches:  # a hub runs on its links' clock
        out = [e for e, l in enumerate(links) if l.src == w]
        pi[net.hub(w)] = sigma[out[0]] if out else math.inf
    return Potentials(tuple(pi), tuple(sigma), *link_windows(topology, unit, sigma))


def link_windows(topology: Topology, unit: Unit, sigma: list[float]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per link e = (x, y), ``(opens, closes)``: a byte of the unit books e no earlier than it can
    be at the segment's first node (the alpha distance from the nearest source; through switches,
    the earliest node upstream), and after e it still needs e's alpha and the alpha distance from
    y to the nearest sink, so e is booked at shifted times in ``[opens, T + closes)`` with
    ``closes = sigma - alpha - dist(y, sink)``. Capacity outside the window is never usable; this
    is what lets the first and last steps count only their usable part."""
    dist = topology.alpha_distances()
    real, links = topology.num_nodes, topology.links
    sources = [h for c in unit.commodities for s in c.supplies for h in unit.virtual.get(s, (s,))]
    sinks = sorted({d for c in unit.commodities for d in c.demands})
    start = dist[sources, :real].min(axis=0).tolist()  # earliest a byte is anywhere
    for _ in topology.switches:  # a segment leaving a switch may have started upstream
        for l in links:
            if topology.is_switch(l.dst) and start[l.src] < start[l.dst]:
                start[l.dst] = start[l.src]
    to_sink = dist[:real, sinks].min(axis=1).tolist()
    opens = [start[l.src] + s for l, s in zip(links, sigma)]
    closes = [s - l.alpha - to_sink[l.dst] for l, s in zip(links, sigma)]
    # alpha_distances adds 1e-30 per link and sums are rounded: widen each window a little
    return (tuple(o - 1e-15 * (1 + abs(o)) for o in opens), tuple(c + 1e-15 * (1 + abs(c)) for c in closes))


def _floor(x: float) -> int:
    """``floor`` of a quantity that is non-negative by construction (a lag, a supply step), after
    shaving float noise: never rounds up, and a value a hair below 0 (two paths of equal alpha
    subtracted in floats) is 0, not -1, which would let flow run back in time."""
    if x > 0:
        return math.floor(x * (1 - _SHAVE))
    if x > -1e-10:
        return 0
    raise ValueError(f"a negative lag ({x!r} steps): the potentials break their triangle inequality")


def _deadline(steps: int, pi_sink: float, tau: float) -> int:
    """The last node-step a sink may receive in: the largest integer below ``steps + pi / tau``
    (rounded up against float noise)."""
    y = pi_sink / tau
    return steps - 1 if y <= 0 else steps - 1 + math.ceil(y * (1 + _SHAVE))


@dataclass
class _Plan:
    """A commodity's reachable node-steps: ``first``/``last`` per node (None: unused)."""

    first: list[int | None]
    last: list[int | None]
    deadline: dict[int, int]
    supply_step: dict[int, int]


def _plan(commodity: Commodity, nodes: int, arcs: list[tuple[int, int, int]], pi: tuple[float, ...],
          steps: int, tau: float) -> _Plan:
    # a source or sink with an infinite potential cannot take part (alpha_beta checks reachability)
    supply_step = {s: _floor(pi[s] / tau) for s in commodity.supplies if math.isfinite(pi[s])}
    deadline = {d: _deadline(steps, pi[d], tau) for d in commodity.demands if math.isfinite(pi[d])}
    first: list[int | None] = [None] * nodes
    last: list[int | None] = [None] * nodes
    if not supply_step or not deadline:
        return _Plan(first, last, deadline, supply_step)
    early = _dijkstra(nodes, [(u, v, float(w)) for u, v, w in arcs], {s: float(k) for s, k in supply_step.items()})
    top = max(deadline.values())
    late = _dijkstra(nodes, [(v, u, float(w)) for u, v, w in arcs], {d: float(top - k) for d, k in deadline.items()})
    for v in range(nodes):
        if early[v] < math.inf and late[v] < math.inf and early[v] <= top - late[v]:
            first[v], last[v] = int(early[v]), int(top - late[v])
    return _Plan(first, last, deadline, supply_step)


def _arcs(net: Network, unit: Unit, pot: Potentials, tau: float) -> list[tuple[int, int, int, int, int]]:
    """(tail, head, lag D + G, booking offset D, link or -1) of every arc with finite potentials."""
    pi, sigma = pot.pi, pot.sigma
    arcs = []
    for v, w, e, a in zip(net.tail, net.head, net.link, net.transit):
        if math.isfinite(pi[v]) and math.isfinite(pi[w]) and math.isfinite(sigma[e]):
            before = _floor((sigma[e] - pi[v]) / tau)
            arcs.append((v, w, before + _floor((a + pi[w] - sigma[e]) / tau), before, e))
    for node, holders in unit.virtual.items():  # virtual node -> holder: no link
        arcs += [(node, h, _floor((pi[h] - pi[node]) / tau), 0, -1) for h in holders
                 if math.isfinite(pi[h]) and math.isfinite(pi[node])]
    return arcs


class _UnitLp:
    """The time-expanded LP of one unit being assembled: sparse (row, column, value) triples, row
    bounds, and what the link capacity and shortfall rows gather (pooled flows per arc and booking
    step, link terms, demands)."""

    def __init__(self, net: Network, unit: Unit, arcs: list[tuple[int, int, int, int, int]], unit_bytes: float) -> None:
        self.net, self.unit, self.arcs, self.unit_bytes = net, unit, arcs, unit_bytes
        self.cols = self.row_count = 0
        self.rows_i: list[np.ndarray] = []
        self.rows_j: list[np.ndarray] = []
        self.rows_v: list[np.ndarray] = []
        self.lower: list[np.ndarray] = []
        self.upper: list[np.ndarray] = []
        self.pooled_cols: dict[tuple[int, int], list[int]] = {}  # (arc, booking step) -> shared x columns
        self.link_terms: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (link, booking step, column)
        self.demand_entries: list[tuple[int, float]] = []  # (absorb column or -1, demand)
        self.pooled = sum(c.shared for c in unit.commodities) > 1  # their load is one y, not their flows' sum

    def add(self, i: np.ndarray, j: np.ndarray, v: float) -> None:
        self.rows_i.append(np.asarray(i, dtype=np.int64))
        self.rows_j.append(np.asarray(j, dtype=np.int64))
        self.rows_v.append(np.full(np.shape(i), v))

    def add_commodity(self, commodity, plan) -> None:
        base = self.node_rows(commodity, plan)
        self.demand_columns(commodity, plan, base)
        self.arc_columns(commodity, plan, base)

    def node_rows(self, commodity, plan) -> dict[int, int]:
        """(N) rows, one per reachable node-step, with the storage columns h between a node's steps;
        each node's row offset by step."""
        net, unit_bytes = self.net, self.unit_bytes
        base: dict[int, int] = {}
        for v in range(len(plan.first)):
            if plan.first[v] is None:
                continue
            base[v] = self.row_count - plan.first[v]
            count = plan.last[v] - plan.first[v] + 1
            rhs = np.zeros(count)
            if v in plan.supply_step and plan.supply_step[v] <= plan.last[v]:  # else it cannot arrive in time
                rhs[plan.supply_step[v] - plan.first[v]] = -commodity.supplies[v] / unit_bytes
            self.lower.append(rhs)
            self.upper.append(np.full(count, math.inf))
            self.row_count += count
            if count > 1 and not net.num_nodes <= v < net.first_virtual:  # storage h, not at hubs
                k = np.arange(plan.first[v], plan.last[v])
                j = self.cols + np.arange(count - 1)
                self.add(base[v] + k, j, -1.0)
                self.add(base[v] + k + 1, j, 1.0)
                self.cols += count - 1
        return base

    def demand_columns(self, commodity, plan, base: dict[int, int]) -> None:
        """An absorb column per demand reachable by its deadline; the others are all shortfall."""
        for d, demand in commodity.demands.items():
            if plan.first[d] is None or d not in plan.deadline or plan.deadline[d] < plan.first[d]:
                self.demand_entries.append((-1, demand / self.unit_bytes))  # unreachable in time: all shortfall
                continue
            self.add(np.array([base[d] + plan.deadline[d]]), np.array([self.cols]), -1.0)
            self.demand_entries.append((self.cols, demand / self.unit_bytes))
            self.cols += 1

    def arc_columns(self, commodity, plan, base: dict[int, int]) -> None:
        """A flow column x per arc and departure step; its link booking noted (pooled when shared)."""
        for index, (tail, head, lag, before, link) in enumerate(self.arcs):
            if plan.first[tail] is None or plan.first[head] is None:
                continue
            k = np.arange(plan.first[tail], plan.last[head] - lag + 1)
            if not len(k):
                continue
            j = self.cols + np.arange(len(k))
            self.add(base[tail] + k, j, -1.0)
            self.add(base[head] + k + lag, j, 1.0)
            self.cols += len(k)
            if link < 0:
                continue
            if commodity.shared and self.pooled:
                for b, col in zip((k + before).tolist(), j.tolist()):
                    self.pooled_cols.setdefault((index, b), []).append(col)
            else:
                self.link_terms.append((np.full(len(k), link), k + before, j))

    def pooled_bookings(self) -> None:
        """(Y) x <= y for the shared flows of an arc and step, and y books the link."""
        for (index, b), members in self.pooled_cols.items():
            y, count = self.cols, len(members)
            self.cols += 1
            self.add(self.row_count + np.arange(count), np.array(members), 1.0)
            self.add(self.row_count + np.arange(count), np.full(count, y), -1.0)
            self.lower.append(np.full(count, -math.inf))
            self.upper.append(np.zeros(count))
            self.row_count += count
            self.link_terms.append((np.array([self.arcs[index][4]]), np.array([b]), np.array([y])))

    def link_capacity(self, bandwidth: np.ndarray, opens: np.ndarray, closes: np.ndarray, tau: float) -> None:
        """(C) capacity per (link, booking step) that something uses."""
        link_terms = self.link_terms
        if not link_terms:
            return
        link = np.concatenate([t[0] for t in link_terms])
        step = np.concatenate([t[1] for t in link_terms])
        low = int(step.min())
        span = int(step.max()) - low + 1
        keys, rows = np.unique(link * span + (step - low), return_inverse=True)
        self.add(self.row_count + rows, np.concatenate([t[2] for t in link_terms]), 1.0)
        key_link, key_step = keys // span, keys % span + low
        # the part of step b, [b tau, (b+1) tau), inside the link's window
        usable = np.minimum((key_step + 1) * tau, closes[key_link]) - np.maximum(key_step * tau, opens[key_link])
        self.lower.append(np.full(len(keys), -math.inf))
        self.upper.append(bandwidth[key_link] * np.clip(usable, 0.0, tau))
        self.row_count += len(keys)

    def shortfall(self) -> int:
        """(S) absorbed + demand * u >= demand; the column of u, the objective."""
        u = self.cols
        self.cols += 1
        for col, demand in self.demand_entries:
            if col >= 0:
                self.add(np.array([self.row_count]), np.array([col]), 1.0)
            self.add(np.array([self.row_count]), np.array([u]), demand)
            self.lower.append(np.array([demand]))
            self.upper.append(np.array([math.inf]))
            self.row_count += 1
        return u


def infeasible_within(topology: Topology, net: Network, unit: Unit, pot: Potentials, steps: int, tau: float,
                      time_limit: float) -> tuple[bool | None, int]:
    """(True when the unit cannot be served within ``steps * tau``, False when the LP delivers every
    demand, None when the LP was not solved to optimality; the LP's column count)."""
    from workbench.kit.solvers import solve_lp

    nodes = net.first_virtual + len(unit.virtual)
    arcs = _arcs(net, unit, pot, tau)
    unit_bytes = unit.largest_demand()
    bandwidth = np.array([l.bandwidth / unit_bytes for l in topology.links])
    opens, closes = np.array(pot.opens), steps * tau + np.array(pot.closes)
    lp = _UnitLp(net, unit, arcs, unit_bytes)
    for commodity in unit.commodities:
        lp.add_commodity(commodity, _plan(commodity, nodes, [(v, w, lag) for v, w, lag, _, _ in arcs], pot.pi,
                                          steps, tau))
    lp.pooled_bookings()
    lp.link_capacity(bandwidth, opens, closes, tau)
    u = lp.shortfall()
    cols = lp.cols
    cost = np.zeros(cols)
    cost[u] = 1.0
    outcome = solve_lp(cost, np.zeros(cols), np.full(cols, math.inf),
                       (np.concatenate(lp.rows_i), np.concatenate(lp.rows_j), np.concatenate(lp.rows_v)),
                       np.concatenate(lp.lower), np.concatenate(lp.upper), time_limit,
                       # one flow: primal simplex, about 3x faster than the default; several flows
                       # sharing the links: interior point (with crossover), 20x faster than simplex
                       options={"solver": "simplex", "simplex_strategy": 4} if len(unit.commodities) == 1
                       else {"solver": "ipm"})
    if outcome.status != "optimal" or outcome.objective is None:
        return None, cols
    return bool(outcome.objective > SHORTFALL), cols

