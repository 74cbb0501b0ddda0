"""TE-CCL's general MILP with copy (note 2.10), its rows written as the paper's equations.

The paper numbers none of its equations (it names them: "Capacity Constraint", "Buffer
constraints", ...), so each row is tagged with the note section that states it and a short name
(``MilpModel.row_tags``; ``describe_row`` prints one), as TACCL's models use the note's numbers
where the paper has none.

Paper symbol -> code (a commodity (s, c) of the paper is one chunk ``c`` of the collective; its
holders are ``pre[c]``, its demands ``post[c] - pre[c]``):

==========================  ====================================================================
``F_{s,i,j,k,c}``           ``f[c, e, k]``, binary, edge ``e = (i, j)``, send epoch k; only sends
                            whose arrival fits the horizon (``_flow_epochs``), none into a holder
``B_{s,n,k,c}``             ``b[c, n, k]``, binary, NPUs n only (switches hold nothing), k = 0..n_e;
                            ``b[c, n, 0] = 0`` (App. A; holders have no ``b``: they hold c always)
``X_{s,n,k,c}`` (App. B)    ``x[c, n, k]``, binary, only with ``buffer_limit``
``R_{s,d,k,c}``             ``b[c, d, k + 1]`` (the code's R_k = B_{k+1}, note 2.8 item 2)
``ceil(delta_jn) + 1``      ``1 + graph.arrival_delay(e)``: a send at k is in the buffer at
                            k + 1 + L (L = a + kappa - 1, App. F; note 1.7)
``kappa T_ij tau``          ``Edge.per_window`` (floor(kappa T tau), chunks per kappa epochs)
``Omega(s)``                ``graph.hyperedges[s]`` (App. C)
``L`` (App. B)              ``buffer_limit``
==========================  ====================================================================

Rows (tags):

* ``(2.2 buffer)`` "Buffer constraints": ``b[k] = b[k-1] + sum_in f[k - 1 - L_e]`` (b binary, so a
  chunk arrives once); with a buffer limit ``(2.4 buffer)``, App. B's ``b[k] = b[k-1] - x[k-1] +
  sum_in f``, with ``(2.4 remove)`` ``x[k-1] <= b[k-1]`` (the domain B >= 0 implies, note A36) and
  ``(2.4 limit)`` ``sum_c b[c,n,k] <= L`` over relayed chunks (a rank's own and wanted chunks are its
  input and output buffers)
* ``(2.2 flow)`` "Flow conservation constraints" with copy: the max over out-edges linearised to one
  row per edge, which with the buffer rows is ``f[c,e,k] <= b[c,src,k]`` (note 2.2, 2.10)
* switches (note 2.2 "Switches", 2.10, 2.8 item 4), each by its own semantics
  (``EpochGraph.copies_at``, note 2.11): ``(2.10 copy switch)`` ``f[c,out,k] <= sum_in
  f[c,in,k-1-L]``; ``(2.10 no-copy switch)`` ``sum_out f <= sum_in f``, and ``(2.10 cross once)`` a
  chunk crosses a no-copy switch once under the no-copy model and in a reduction's dual graph (this
  workbench's rule, so the schedule reverses; not at a switch that holds no value,
  ``EpochGraph.passes_through``)
* a dual graph's summing switches (note 2.11, our extension): ``(2.11 one at a time)`` per chunk
  and epoch t, the visits ``f[c,in,k]`` with k <= t <= k + 1 + L sum to at most 1; at a switch with
  ``reduce_trees``, per chunk and forwarding epoch, with a binary ``y[c, w, k]``: ``(2.11 tree
  fan-out)`` ``sum_out f <= sum_in f + (m - 1) y`` and ``(2.11 tree port)`` ``out_j + in_j >= y``
  for every neighbour j (``tree_rows``)
* ``(2.6 capacity)`` App. F's capacity over a window of kappa epochs: ``sum f <= floor(kappa T tau)``
* hyper-edges (the TACCL-style legacy switch, App. C, note 2.5): ``(2.5 switch)`` per switch and
  epoch at most min(#in, #out) hyper-edges busy; ``(2.5 port)`` each GPU one out and one in
* "Destination constraints" ``R_{s,d,K,c} = D``: the column bound ``b[c,d,n_e] >= 1`` (omitted in
  A* rounds, ``complete=False``); no row
* objective (note 2.3): ``max sum_demands sum_k w_k b[c,d,k+1]`` with w_k = 1/(k+1) (paper) or 1
  (code), set by ``minimise`` as its negative

The chosen flows go through the silly-flow removal of note 2.7 (``epochs.prune_flows``). The MIP
start is a schedule by the same rules (``greedy.greedy_schedule``, or an unfinished A* run
completed by it), set on ``f``, ``b`` and ``x`` (``_start_vector``).
"""

from __future__ import annotations

import time as clock
from collections import defaultdict

from formulations.teccl.epochs import Edge, EpochGraph, EpochSchedule, Flow, finish_epoch, prune_flows
from workbench.model.algorithm import no_cyclic_gc
from workbench.model.collective import Collective
from workbench.kit.milp import MilpModel, VarFamily, total

__all__ = ["solve_milp"]


def solve_milp(graph: EpochGraph, collective: Collective, horizon: int, *, time_limit: float, mip_gap: float = 1e-4,
               threads: int = 1, seed: int = 0, objective: str = "paper", buffer_limit: int | None = None,
               start: list[Flow] | None = None, complete: bool = True, heuristic_effort: float | None = None,
               backend: str = "highs") -> EpochSchedule:
    """The MILP (module docstring) over ``horizon`` epochs, solved from the ``start`` flows if given
    (``complete``: every demand by the horizon); the pruned flows and their finish epoch (-1 without a solution)."""
    built = clock.perf_counter()
    model, f, b = _build(graph, collective, horizon, objective, buffer_limit, complete)
    vector = _start_vector(model, graph, f, b, start, horizon) if start is not None else None
    build_seconds = clock.perf_counter() - built
    options = {"mip_heuristic_effort": float(heuristic_effort)} if heuristic_effort is not None else None
    outcome = model.solve(backend, time_limit=max(time_limit - build_seconds, 0.5), mip_gap=mip_gap, threads=threads,
                          seed=seed, start=vector, options=options)
    stats = {"build_seconds": build_seconds, "solve_seconds": outcome.seconds, "gap": outcome.gap,
             "horizon": horizon, "objective": outcome.objective, "bound": outcome.bound, **model.stats()}
    if not outcome.has_solution:
        return EpochSchedule([], horizon, -1, outcome.status, stats, outcome.message)
    flows = [key for key, col in f.columns.items() if outcome.x[col] > 0.5]
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
           complete: bool) -> tuple[MilpModel, VarFamily, VarFamily]:
    if objective not in ("paper", "code"):
        raise ValueError(f"objective must be 'paper' (1/(k+1)) or 'code' (constant weight), got {objective!r}")
    with no_cyclic_gc():  # millions of small expressions, none in a cycle: collection passes free nothing
        return _rows(graph, collective, horizon, objective, buffer_limit, complete)


def _rows(graph: EpochGraph, collective: Collective, horizon: int, objective: str, buffer_limit: int | None,
          complete: bool) -> tuple[MilpModel, VarFamily, VarFamily]:
    model = MilpModel("teccl-milp")
    edges = graph.edges
    C = collective.num_chunks
    pre = collective.pre
    f = model.family("f", ((c, e.index, k) for c in range(C) for e in edges if e.dst not in pre[c]
                           for k in _flow_epochs(graph, e, horizon)), upper=1.0, integer=True)
    npus = [n for n in graph.nodes if not graph.is_switch(n)]
    b = model.family("b", ((c, n, k) for c in range(C) for n in npus if n not in pre[c]
                           for k in range(horizon + 1)), upper=1.0, integer=True)
    x = model.family("x", upper=1.0, integer=True)  # App. B's removals, created by the buffer rows
    for (c, n, k), held in b.items():
        if k == 0:
            model.fix(held.col, 0.0)  # App. A: B_{s,n,0} = 0 away from the holders
    demands = [(c, d) for c in range(C) for d in sorted(collective.post[c] - pre[c])]
    if complete:  # "Destination constraints": R_{s,d,K,c} = D_{s,d,c}, as a column bound
        for c, d in demands:
            model.lower[b.col((c, d, horizon))] = 1.0
    _buffer_rows(model, graph, collective, f, b, x, npus, horizon, buffer_limit)
    for (c, ei, k), send in f.items():  # (2.2 flow) send only what is held
        src = edges[ei].src
        if not graph.is_switch(src) and src not in pre[c]:
            model.add(send <= b[c, src, k], tag="(2.2 flow)")
    _switch_rows(model, graph, collective, f, horizon)
    _capacity_rows(model, graph, f, horizon, C)
    if graph.switch_model == "hyperedge":
        _hyperedge_rows(model, graph, f, horizon, C)
    if buffer_limit is not None:
        _buffer_limit_rows(model, collective, b, npus, horizon, buffer_limit)
    weight = (lambda k: 1.0 / (k + 1)) if objective == "paper" else (lambda k: 1.0)
    model.minimise(-total(weight(k) * total(b[c, d, k + 1] for c, d in demands) for k in range(horizon)))
    return model, f, b


def _buffer_rows(model: MilpModel, graph: EpochGraph, collective: Collective, f: VarFamily, b: VarFamily,
                 x: VarFamily, npus: list[int], horizon: int, buffer_limit: int | None) -> None:
    """(2.2 buffer) ``b[k] = b[k-1] + arrivals``; with a buffer limit (2.4 remove) ``x[k-1] <= b[k-1]``
    and (2.4 buffer) ``b[k] = b[k-1] - x[k-1] + arrivals``."""
    edges = graph.edges
    pre = collective.pre
    # per node, its in-edges with the epochs a chunk takes to become usable there
    arrivals_at = {n: [(ei, 1 + graph.arrival_delay(edges[ei])) for ei in graph.in_edges.get(n, [])] for n in npus}
    for c in range(collective.num_chunks):
        for n in npus:
            if n in pre[c]:
                continue
            arrivals = arrivals_at[n]
            for k in range(1, horizon + 1):
                arriving = total(f[key] for ei, late in arrivals if (key := (c, ei, k - late)) in f)
                if buffer_limit is None:
                    model.add(b[c, n, k] == b[c, n, k - 1] + arriving, tag="(2.2 buffer)")
                else:
                    removed = x[c, n, k - 1]
                    model.add(removed <= b[c, n, k - 1], tag="(2.4 remove)")
                    model.add(b[c, n, k] == b[c, n, k - 1] - removed + arriving, tag="(2.4 buffer)")


def _buffer_limit_rows(model: MilpModel, collective: Collective, b: VarFamily, npus: list[int], horizon: int,
                       buffer_limit: int) -> None:
    """(2.4 limit): relayed chunks only: a rank's own and wanted chunks are its input/output."""
    C = collective.num_chunks
    for n in npus:
        for k in range(horizon + 1):
            held = [b[c, n, k] for c in range(C) if (c, n, k) in b and n not in collective.post[c]]
            if held:
                model.add(total(held) <= buffer_limit, tag="(2.4 limit)")


def _switch_rows(model: MilpModel, graph: EpochGraph, collective: Collective, f: VarFamily, horizon: int) -> None:
    """The switch rows of note 2.10, each switch by its own semantics (``EpochGraph.copies_at``)."""
    if graph.switch_model == "hyperedge":
        return
    fan = model.family("y", upper=1.0, integer=True) if graph.tree_limited else None  # (2.11 tree) fan-outs
    for w in graph.topology.switches:
        for c in range(collective.num_chunks):
            for k in range(horizon):
                _forwarding_rows(model, graph, f, w, c, k, fan)
            if graph.crosses_once(w):  # a chunk crosses a switch once (so the schedule reverses)
                sends = [f[c, eo, k] for eo in graph.out_edges.get(w, []) for k in range(horizon) if (c, eo, k) in f]
                if len(sends) > 1:
                    model.add(total(sends) <= 1, tag="(2.10 cross once)")
            elif graph.one_at_a_time(w):  # one sum at a time per chunk in the reversed schedule
                one_at_a_time_rows(model, graph, f, w, c, horizon)


def _forwarding_rows(model: MilpModel, graph: EpochGraph, f: VarFamily, w: int, c: int, k: int,
                     fan: VarFamily | None) -> None:
    """What switch ``w`` sends of chunk ``c`` in epoch ``k`` against what arrived the epoch before:
    each out-edge at most the inflow where it copies (and the tree rows where it fans out fully),
    their sum at most the inflow where it does not."""
    edges = graph.edges
    arriving = {ei: key for ei in graph.in_edges.get(w, []) if (key := (c, ei, k - 1 - edges[ei].delay)) in f}
    inflow = total(f[key] for key in arriving.values())
    outflow = {eo: f[c, eo, k] for eo in graph.out_edges.get(w, []) if (c, eo, k) in f}
    if not outflow:
        return
    if not graph.copies_at(w):
        model.add(total(outflow.values()) <= inflow, tag="(2.10 no-copy switch)")
        return
    for send in outflow.values():
        model.add(send <= inflow, tag="(2.10 copy switch)")
    if graph.fans_out_fully(w) and len(outflow) > 1:
        tree_rows(model, graph, w, (c, w, k), {ei: f[key] for ei, key in arriving.items()}, outflow, inflow, fan)


def one_at_a_time_rows(model: MilpModel, graph: EpochGraph, f: VarFamily, w: int, c: int, horizon: int,
                       busy: set = frozenset()) -> None:
    """(2.11 one at a time): chunk ``c``'s visits to the summing switch ``w`` do not overlap, nor
    overlap a visit an earlier A* round started (``busy``: the epochs it occupies)."""
    visits = defaultdict(list)  # epoch -> the entries visiting w then
    for ei in graph.in_edges.get(w, []):
        for k in range(horizon):
            if (c, ei, k) in f:
                for t in graph.visit(graph.edges[ei], k):
                    visits[t].append(f[c, ei, k])
    for t in sorted(visits):
        room = 0 if t in busy else 1
        if len(visits[t]) > room:
            model.add(total(visits[t]) <= room, tag="(2.11 one at a time)")


def tree_rows(model: MilpModel, graph: EpochGraph, w: int, key: tuple, arriving: dict, outflow: dict, inflow,
              fan: VarFamily, carried: dict | None = None) -> None:
    """(2.11 tree) at a switch with ``reduce_trees`` of a dual graph, one chunk and forwarding epoch:
    either one out-edge (``sum_out <= in``) or, with the fan-out ``y = fan[key]``, every neighbour
    port in or out: ``sum_out <= in + (m - 1) y`` and ``out_j + in_j >= y`` per neighbour j.
    ``arriving`` / ``outflow``: edge index -> the flow entering / leaving w; ``carried``: neighbour ->
    inflow already decided (A* rounds). Without a way to cover some neighbour, or with a switch among
    them (whose copy the silly-flow removal could drop, leaving a smaller tree), no fan-out at all."""
    edges = graph.edges
    ports: dict[int, list] = {}
    for ei, flow in arriving.items():
        ports.setdefault(edges[ei].src, []).append(flow)
    for eo, flow in outflow.items():
        ports.setdefault(edges[eo].dst, []).append(flow)
    carried = carried or {}
    neighbours = ({edges[ei].src for ei in graph.in_edges.get(w, [])}
                  | {edges[eo].dst for eo in graph.out_edges.get(w, [])})
    if any((not ports.get(j) and not carried.get(j)) or graph.is_switch(j) for j in neighbours):
        model.add(total(outflow.values()) <= inflow, tag="(2.11 tree fan-out)")
        return
    y = fan[key]
    model.add(total(outflow.values()) <= inflow + (len(outflow) - 1) * y, tag="(2.11 tree fan-out)")
    for j in sorted(neighbours):
        if not carried.get(j):
            model.add(total(ports.get(j, [])) >= y, tag="(2.11 tree port)")


def _capacity_rows(model: MilpModel, graph: EpochGraph, f: VarFamily, horizon: int, C: int) -> None:
    for e in graph.edges:
        for end in range(horizon):
            window = [f[key] for k in range(max(0, end - e.kappa + 1), end + 1) for c in range(C)
                      if (key := (c, e.index, k)) in f]
            if len(window) > e.per_window:
                model.add(total(window) <= e.per_window, tag="(2.6 capacity)")


def _hyperedge_rows(model: MilpModel, graph: EpochGraph, f: VarFamily, horizon: int, C: int) -> None:
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
                return [f[key] for ei in group for k in range(max(0, t - edges[ei].kappa + 1), t + 1)
                        for c in range(C) if (key := (c, ei, k)) in f]
            on_switch = busy(members)
            if len(on_switch) > cap:
                model.add(total(on_switch) <= cap, tag="(2.5 switch)")
            for group in list(senders.values()) + list(receivers.values()):
                sends = busy(group)
                if len(sends) > 1:
                    model.add(total(sends) <= 1, tag="(2.5 port)")


def _start_vector(model: MilpModel, graph: EpochGraph, f: VarFamily, b: VarFamily, flows: list[Flow],
                  horizon: int) -> list[float] | None:
    vector = [0.0] * model.num_cols
    for key in flows:
        if key not in f:
            return None  # the start does not fit this horizon
        vector[f.col(key)] = 1.0
    for c, ei, k in flows:
        e = graph.edges[ei]
        if graph.is_switch(e.dst):
            continue
        ready = k + 1 + graph.arrival_delay(e)
        for t in range(ready, horizon + 1):
            if (c, e.dst, t) in b:
                vector[b.col((c, e.dst, t))] = 1.0
    return vector
