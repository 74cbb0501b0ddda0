"""TE-CCL's general MILP with copy (spec 2.10), its greedy warm start and silly-flow removal (2.7).

Variables (binaries): ``f[c, e, k]`` chunk c starts on edge e in epoch k; ``b[c, n, k]`` chunk c
is in NPU n's buffer at the start of epoch k (k = 0..n_e; holders are constants 1). Rows:

* buffer: ``b[k] = b[k-1] + sum_in f[k - 1 - L_e]`` (with b binary: a chunk arrives once);
  with a buffer limit, ``- x[k-1]`` removes a chunk and ``sum_c b[c,n,k] <= limit`` (Appendix B)
* send from buffer (the copy rule, max linearised): ``f[c,e,k] <= b[c,src,k]``
* switches hold nothing: copy switch ``f[c,out,k] <= sum_in f[c,in,k-1-L]``; no-copy switch
  ``sum_out f <= sum_in f``; hyper-edges (the TACCL-style legacy switch, Appendix C): per switch
  and epoch at most min(#in, #out) hyper-edges busy, each GPU one out and one in
* capacity over a window of kappa epochs: ``sum f <= floor(kappa T tau)``
* completion ``b[c,d,n_e] = 1`` for every demand (omitted in A* rounds)
* objective: ``max sum_demands sum_k w_k b[c,d,k+1]`` with w_k = 1/(k+1) (paper) or 1 (code)

The greedy warm start list-schedules shortest-arrival trees epoch by epoch under the same rules,
so every solve has an incumbent and the horizon n_e comes from a feasible schedule.
"""

from __future__ import annotations

import time as clock
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from formulations.teccl.epochs import Edge, EpochGraph
from workbench.collective import Collective
from workbench.milp import MilpModel

__all__ = ["EpochSchedule", "greedy_schedule", "solve_milp", "prune_flows", "finish_epoch"]

Flow = tuple[int, int, int]  # (chunk, edge index, send epoch)


@dataclass
class EpochSchedule:
    flows: list[Flow]
    horizon: int  # n_e the model used
    finish: int  # epoch by which every demand is in its buffer (claimed time = finish * tau)
    status: str
    stats: dict[str, Any] = field(default_factory=dict)
    message: str = ""


# ------------------------------------------------------------------------------------ shared rules
class _Usage:
    """Window capacity bookkeeping for the greedy scheduler."""

    def __init__(self, graph: EpochGraph) -> None:
        self.graph = graph
        self.starts: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.port_out: dict[tuple[int, int], dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.port_in: dict[tuple[int, int], dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.switch_busy: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        topo = graph.topology
        self.switch_cap = {w: min(len(topo.in_links(w)), len(topo.out_links(w))) for w in topo.switches}

    def fits(self, e: Edge, k: int) -> bool:
        starts = self.starts[e.index]
        for end in range(k, k + e.kappa):
            if sum(starts.get(t, 0) for t in range(end - e.kappa + 1, end + 1)) + 1 > e.per_window:
                return False
        if e.switch is not None:  # a GPU uses one out and one in hyper-edge of a switch at a time
            w = e.switch
            for t in range(k, k + e.kappa):
                if self.port_out[(w, e.src)].get(t, 0) or self.port_in[(w, e.dst)].get(t, 0):
                    return False
                if self.switch_busy[w].get(t, 0) + 1 > self.switch_cap[w]:
                    return False
        return True

    def take(self, e: Edge, k: int) -> None:
        self.starts[e.index][k] += 1
        if e.switch is not None:
            for t in range(k, k + e.kappa):
                self.port_out[(e.switch, e.src)][t] += 1
                self.port_in[(e.switch, e.dst)][t] += 1
                self.switch_busy[e.switch][t] += 1


def greedy_schedule(graph: EpochGraph, collective: Collective, horizon_cap: int = 100000,
                    initial: list[Flow] | None = None) -> tuple[list[Flow], int]:
    """Earliest-arrival trees, one hop (or one switch crossing) at a time, round-robin over chunks.

    ``initial``: flows already decided (an unfinished A* run); the greedy completes them.
    """
    usage = _Usage(graph)
    edges = graph.edges
    C = collective.num_chunks
    npus = list(graph.topology.npus)
    avail: list[dict[int, int]] = [{r: 0 for r in collective.pre[c]} for c in range(C)]
    inbound_used: set[tuple[int, int, int]] = set()  # (c, edge into a switch, k) already sent
    flows: list[Flow] = list(initial or [])
    crossed: set[tuple[int, int]] = set()  # (chunk, switch): no-copy switches carry a chunk once
    for c, ei, k in flows:
        e = edges[ei]
        if graph.is_switch(e.src):
            crossed.add((c, e.src))
        usage.take(e, k)
        if graph.is_switch(e.dst):
            inbound_used.add((c, ei, k))
        else:
            ready = k + 1 + graph.arrival_delay(e)
            avail[c][e.dst] = min(avail[c].get(e.dst, ready), ready)
    pending = [set(npus) - set(avail[c]) for c in range(C)]
    while any(pending):
        progressed = False
        for c in range(C):
            if not pending[c]:
                continue
            move = _best_move(graph, usage, c, avail[c], pending[c], inbound_used, horizon_cap,
                              crossed if graph.switch_model == "no-copy" else None)
            if move is None:
                pending[c] = set()  # unreachable rest: the demands are checked below
                continue
            arrival, target, hops = move
            for e, k in hops:
                if graph.is_switch(e.src):
                    crossed.add((c, e.src))
                key = (c, e.index, k)
                if graph.is_switch(e.dst) and key in inbound_used and graph.switch_model == "copy":
                    continue  # the switch copies a chunk it already receives in this epoch
                usage.take(e, k)
                flows.append(key)
                if graph.is_switch(e.dst):
                    inbound_used.add(key)
            avail[c][target] = arrival
            pending[c].discard(target)
            progressed = True
        if not progressed:
            break
    for c in range(C):
        for d in collective.post[c]:
            if d not in avail[c]:
                raise ValueError(f"chunk {c} cannot reach rank {d} in the epoch model")
    flows = prune_flows(graph, collective, flows)
    return flows, finish_epoch(graph, collective, flows)


def _best_move(graph: EpochGraph, usage: _Usage, c: int, holders: dict[int, int], targets: set[int],
               inbound_used: set, cap: int, crossed: set | None = None):
    best = None
    edges = graph.edges
    for i, ready in holders.items():
        for ei in graph.out_edges.get(i, []):
            e = edges[ei]
            if graph.is_switch(e.dst):
                if crossed is not None and (c, e.dst) in crossed:
                    continue
                for eo in graph.out_edges.get(e.dst, []):
                    out = edges[eo]
                    if out.dst not in targets:
                        continue
                    k = _earliest_pair(graph, usage, c, e, out, ready, inbound_used, cap)
                    if k is None:
                        continue
                    arrival = k + 1 + e.delay + 1 + graph.arrival_delay(out)
                    cand = (arrival, out.dst, [(e, k), (out, k + 1 + e.delay)])
                    if best is None or cand[:2] < best[:2]:
                        best = cand
            elif e.dst in targets:
                k = ready
                while not usage.fits(e, k):
                    k += 1
                    if k > cap:
                        break
                else:
                    arrival = k + 1 + graph.arrival_delay(e)
                    cand = (arrival, e.dst, [(e, k)])
                    if best is None or cand[:2] < best[:2]:
                        best = cand
    return best


def _earliest_pair(graph: EpochGraph, usage: _Usage, c: int, up: Edge, down: Edge, ready: int, inbound_used: set,
                   cap: int) -> int | None:
    k = ready
    while k <= cap:
        shared = (c, up.index, k) in inbound_used
        up_ok = (shared and graph.switch_model == "copy") or (not shared and usage.fits(up, k))
        if up_ok and usage.fits(down, k + 1 + up.delay):
            return k
        k += 1
    return None


def prune_flows(graph: EpochGraph, collective: Collective, flows: list[Flow]) -> list[Flow]:
    """Keep only flows on a backward path from each demand's first arrival to a holder (spec 2.7)."""
    edges = graph.edges
    arrivals: dict[tuple[int, int], list[tuple[int, Flow]]] = defaultdict(list)  # (c, node) -> (ready epoch, flow)
    for flow in flows:
        c, ei, k = flow
        e = edges[ei]
        ready = k + 1 + (graph.arrival_delay(e) if not graph.is_switch(e.dst) else e.delay)
        arrivals[(c, e.dst)].append((ready, flow))
    keep: set[Flow] = set()

    def explain(c: int, node: int, by: int) -> None:
        """Keep the flows that put chunk c on ``node`` no later than epoch ``by``."""
        if node in collective.pre[c]:
            return
        options = sorted(a for a in arrivals.get((c, node), []) if a[0] <= by)
        if graph.is_switch(node):  # a switch forwards at exactly the epoch the chunk arrives
            options = [a for a in options if a[0] == by]
        if not options:
            raise RuntimeError(f"flow bookkeeping: chunk {c} has no arrival at node {node} by epoch {by}")
        ready, flow = options[0]
        if flow in keep:
            return
        keep.add(flow)
        explain(c, edges[flow[1]].src, flow[2])

    for c in range(collective.num_chunks):
        for d in collective.post[c] - collective.pre[c]:
            first = min((a[0] for a in arrivals.get((c, d), [])), default=None)
            if first is None:
                raise RuntimeError(f"chunk {c} never reaches rank {d}")
            explain(c, d, first)
    return sorted(keep, key=lambda f: (f[2], f[0], f[1]))


def finish_epoch(graph: EpochGraph, collective: Collective, flows: list[Flow]) -> int:
    first: dict[tuple[int, int], int] = {}
    for c, ei, k in flows:
        e = graph.edges[ei]
        if graph.is_switch(e.dst):
            continue
        ready = k + 1 + graph.arrival_delay(e)
        key = (c, e.dst)
        first[key] = min(first.get(key, ready), ready)
    return max((first[(c, d)] for c in range(collective.num_chunks) for d in collective.post[c] - collective.pre[c]),
               default=0)


# ------------------------------------------------------------------------------------ the MILP
def solve_milp(graph: EpochGraph, collective: Collective, horizon: int, *, time_limit: float, mip_gap: float = 1e-4,
               threads: int = 1, seed: int = 0, objective: str = "paper", buffer_limit: int | None = None,
               start: list[Flow] | None = None, complete: bool = True, heuristic_effort: float | None = None,
               backend: str = "highs") -> EpochSchedule:
    built = clock.perf_counter()
    model, f, b, x = _build(graph, collective, horizon, objective, buffer_limit, complete)
    vector = _start_vector(model, graph, collective, f, b, x, start, horizon) if start is not None else None
    build_seconds = clock.perf_counter() - built
    options = {"mip_heuristic_effort": float(heuristic_effort)} if heuristic_effort is not None else None
    outcome = model.solve(backend, time_limit=max(time_limit - build_seconds, 0.5), mip_gap=mip_gap, threads=threads,
                          seed=seed, start=vector, options=options)
    stats = {"build_seconds": build_seconds, "solve_seconds": outcome.seconds, "gap": outcome.gap,
             "horizon": horizon, "objective": outcome.objective, "bound": outcome.bound, **model.stats()}
    if not outcome.has_solution:
        return EpochSchedule([], horizon, -1, outcome.status, stats, outcome.message)
    flows = [key for key, col in f.items() if outcome.x[col] > 0.5]
    flows = prune_flows(graph, collective, flows)
    return EpochSchedule(flows, horizon, finish_epoch(graph, collective, flows), outcome.status, stats,
                         outcome.message)


def _flow_epochs(graph: EpochGraph, e: Edge, horizon: int) -> range:
    """Send epochs whose arrival fits the horizon (into a switch: the switch must still forward)."""
    if graph.is_switch(e.dst):
        last = horizon - 2 - e.delay
    else:
        last = min(horizon - 1, horizon - 1 - graph.arrival_delay(e))
    return range(0, max(last + 1, 0))


def _build(graph: EpochGraph, collective: Collective, horizon: int, objective: str, buffer_limit: int | None,
           complete: bool):
    if objective not in ("paper", "code"):
        raise ValueError(f"objective must be 'paper' (1/(k+1)) or 'code' (constant weight), got {objective!r}")
    model = MilpModel("teccl-milp")
    edges = graph.edges
    C = collective.num_chunks
    f: dict[Flow, int] = {}
    for c in range(C):
        for e in edges:
            if e.dst in collective.pre[c]:
                continue
            for k in _flow_epochs(graph, e, horizon):
                f[(c, e.index, k)] = model.add_binary()
    b: dict[tuple[int, int, int], int] = {}
    x: dict[tuple[int, int, int], int] = {}
    npus = [n for n in graph.nodes if not graph.is_switch(n)]
    for c in range(C):
        for n in npus:
            if n in collective.pre[c]:
                continue
            for k in range(horizon + 1):
                b[(c, n, k)] = model.add_binary()
            model.fix(b[(c, n, 0)], 0.0)
    demands = [(c, d) for c in range(C) for d in sorted(collective.post[c] - collective.pre[c])]
    for c, d in demands:
        if complete:
            model.lower[b[(c, d, horizon)]] = 1.0
        for k in range(horizon):
            weight = 1.0 / (k + 1) if objective == "paper" else 1.0
            model.cost[b[(c, d, k + 1)]] -= weight
    for c in range(C):
        for n in npus:
            if n in collective.pre[c]:
                continue
            for k in range(1, horizon + 1):
                cols, vals = [b[(c, n, k)], b[(c, n, k - 1)]], [1.0, -1.0]
                for ei in graph.in_edges.get(n, []):
                    e = edges[ei]
                    col = f.get((c, ei, k - 1 - graph.arrival_delay(e)))
                    if col is not None:
                        cols.append(col)
                        vals.append(-1.0)
                if buffer_limit is not None:
                    x[(c, n, k - 1)] = model.add_binary()
                    cols.append(x[(c, n, k - 1)])
                    vals.append(1.0)
                    model.add_row([x[(c, n, k - 1)], b[(c, n, k - 1)]], [1, -1], upper=0)
                model.add_row(cols, vals, 0.0, 0.0)
    for (c, ei, k), col in f.items():  # send only what is held
        e = edges[ei]
        if graph.is_switch(e.src):
            continue
        if e.src in collective.pre[c]:
            continue
        model.add_row([col, b[(c, e.src, k)]], [1, -1], upper=0)
    _switch_rows(model, graph, collective, f, horizon)
    _capacity_rows(model, graph, f, horizon, C)
    if graph.switch_model == "hyperedge":
        _hyperedge_rows(model, graph, f, horizon, C)
    if buffer_limit is not None:  # relayed chunks only: a rank's own and wanted chunks are its input/output
        for n in npus:
            for k in range(horizon + 1):
                cols = [b[(c, n, k)] for c in range(C) if (c, n, k) in b and n not in collective.post[c]]
                if cols:
                    model.add_row(cols, [1] * len(cols), upper=buffer_limit)
    return model, f, b, x


def _switch_rows(model: MilpModel, graph: EpochGraph, collective: Collective, f: dict, horizon: int) -> None:
    if graph.switch_model == "hyperedge":
        return
    edges = graph.edges
    for w in graph.topology.switches:
        for c in range(collective.num_chunks):
            for k in range(horizon):
                inflow = [f[(c, ei, k - 1 - edges[ei].delay)] for ei in graph.in_edges.get(w, [])
                          if (c, ei, k - 1 - edges[ei].delay) in f]
                outflow = [f[(c, eo, k)] for eo in graph.out_edges.get(w, []) if (c, eo, k) in f]
                if not outflow:
                    continue
                if graph.switch_model == "copy":
                    for col in outflow:
                        model.add_row([col] + inflow, [1] + [-1] * len(inflow), upper=0)
                else:
                    model.add_row(outflow + inflow, [1] * len(outflow) + [-1] * len(inflow), upper=0)
            if graph.switch_model == "no-copy":  # a chunk crosses a switch once (so the schedule reverses)
                cols = [f[(c, eo, k)] for eo in graph.out_edges.get(w, []) for k in range(horizon) if (c, eo, k) in f]
                if len(cols) > 1:
                    model.add_row(cols, [1] * len(cols), upper=1)


def _capacity_rows(model: MilpModel, graph: EpochGraph, f: dict, horizon: int, C: int) -> None:
    for e in graph.edges:
        for end in range(horizon):
            cols = [f[(c, e.index, k)] for k in range(max(0, end - e.kappa + 1), end + 1) for c in range(C)
                    if (c, e.index, k) in f]
            if len(cols) > e.per_window:
                model.add_row(cols, [1] * len(cols), upper=e.per_window)


def _hyperedge_rows(model: MilpModel, graph: EpochGraph, f: dict, horizon: int, C: int) -> None:
    """Appendix C: per switch and epoch, at most min(#in, #out) hyper-edges busy; one out and one in per GPU."""
    edges = graph.edges
    topo = graph.topology
    for w, members in graph.hyperedges.items():
        cap = min(len(topo.in_links(w)), len(topo.out_links(w)))
        senders = defaultdict(list)
        receivers = defaultdict(list)
        for ei in members:
            senders[edges[ei].src].append(ei)
            receivers[edges[ei].dst].append(ei)
        for t in range(horizon):
            def busy(group):
                return [f[(c, ei, k)] for ei in group for k in range(max(0, t - edges[ei].kappa + 1), t + 1)
                        for c in range(C) if (c, ei, k) in f]
            total = busy(members)
            if len(total) > cap:
                model.add_row(total, [1] * len(total), upper=cap)
            for group in list(senders.values()) + list(receivers.values()):
                cols = busy(group)
                if len(cols) > 1:
                    model.add_row(cols, [1] * len(cols), upper=1)


def _start_vector(model: MilpModel, graph: EpochGraph, collective: Collective, f: dict, b: dict, x: dict,
                  flows: list[Flow], horizon: int) -> list[float] | None:
    vector = [0.0] * model.num_cols
    for key in flows:
        if key not in f:
            return None  # the start does not fit this horizon
        vector[f[key]] = 1.0
    for c, ei, k in flows:
        e = graph.edges[ei]
        if graph.is_switch(e.dst):
            continue
        ready = k + 1 + graph.arrival_delay(e)
        for t in range(ready, horizon + 1):
            if (c, e.dst, t) in b:
                vector[b[(c, e.dst, t)]] = 1.0
    return vector
