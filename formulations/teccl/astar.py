"""TE-CCL's A* technique (note 4): the horizon split into rounds solved one after another.

Each round is the copy MILP over ``K`` epochs without the completion constraint. Buffers run
``A`` epochs past the round (the look-ahead Q of note 4.4: ``Q[f] = b[K + f]``, A = the largest
link delay), so chunks sent late in a round arrive in the next; the next round starts from those
holdings (4.5: holdings, late arrivals, switch inflows and busy slow links carried as constants).
Objective per round (4.7, the authors' constants): reward deliveries within the round with
``eps / (k + 1)`` (eps = 0.1) and, for every remaining demand of d, where its chunks will sit after
the round: ``P[loc, d, f] <= sum_c Q[c, loc, f]``, ``sum_loc P[loc, d, f] = remaining(d)``,
weight ``1 / (f + 1)`` at loc = d and ``gamma / ((f + 1)(1 + FW[loc, d]))`` elsewhere (FW:
Floyd-Warshall in epochs, 1/(T tau) + a per edge). A demand retires once ``Q[A] = 1`` at its
destination (4.6). A source sends a chunk on an edge at most once per round (the code's rule).
Copy and no-copy switches only (the hyperedge model is the full MILP's).

The paper's Appendix D numbers none of its equations; rows are tagged with the note section that
states them and a short name (``MilpModel.row_tags``), those kept from the MILP with the MILP's tags:

==========================  ====================================================================
``F_{s,c,i,j,k,r}``         ``f[c, e, k]`` (k relative to the round; none into a holder)
``B_{s,c,i,k,r}``           ``b[c, n, k]``, k = 0..K + A, NPUs only
``Q_{s,c,i,k',r}``          ``b[c, n, K + k']`` (the buffer continued A epochs past the round, 4.4)
``P_{s,d,k',r}``            ``P[loc, d, k']`` (continuous, <= remaining(d); only finite weights)
``D_{s,d,c,r}``             ``remaining`` (pairs (c, d) not yet retired)
``Q_{.,r-1}`` carried       ``held_at`` (holdings, late arrivals), ``switch_in``, ``busy``
``FW_{s,d}``                ``distances`` (``_floyd_warshall``)
==========================  ====================================================================

Rows: ``(4.5 buffer)`` ``b[k] = b[k-1] + sum_in f[k - 1 - L] + (1 if a late arrival lands at k)``,
with ``b[0]`` fixed to what the last round left (column bounds); ``(2.2 flow)`` ``f <= b`` at an NPU;
``(4.5 switch)`` copy ``f_out <= sum_in f + carried`` (no-copy: ``sum_out f <=``), per switch as in
the MILP (``EpochGraph.copies_at``, note 2.11), ``(2.10 cross once)`` (0 once crossed in an earlier
round); a dual graph's summing switches: ``(2.11 one at a time)`` (less the epochs a visit of an
earlier round still holds) and the tree rows of ``milp.tree_rows`` (inflows carried from the
previous round count for their senders); ``(2.6 capacity)`` the window less the
carried busy slots; ``(4.7 once)`` a chunk crosses an edge at most once per round (note 4.7's [Code]
source constraint); ``(4.7 P)`` and ``(4.7 P total)`` the distance reward's two rows.
"""

from __future__ import annotations

import time as clock
from collections import defaultdict

from workbench.util.lazy import lazy_module

from formulations.teccl.epochs import EpochGraph, EpochSchedule, Flow, finish_epoch, prune_flows
from formulations.teccl.greedy import greedy_schedule
from formulations.teccl.milp import one_at_a_time_rows, tree_rows
from workbench.model.algorithm import no_cyclic_gc
from workbench.model.collective import Collective
from workbench.kit.deadline import Deadline
from workbench.kit.milp import MilpModel, VarFamily, total

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["solve_astar"]

EPS = 0.1


def solve_astar(graph: EpochGraph, collective: Collective, *, time_limit: float, seed: int = 0,
                round_epochs: int | None = None, gamma: float = 0.002, threads: int = 1, mip_gap: float = 1e-4,
                max_rounds: int = 200) -> EpochSchedule:
    """TE-CCL's A* (module docstring): rounds of ``round_epochs`` epochs solved in turn until every
    demand has arrived; what is left at the time limit or after ``max_rounds`` is completed greedily."""
    if graph.switch_model == "hyperedge":
        raise ValueError("teccl A*: use the copy or no-copy switch model (hyper-edges are the full MILP's)")
    deadline = Deadline(time_limit)
    edges = graph.edges
    A = max(max((e.delay for e in edges), default=0), 0)
    K = int(round_epochs) if round_epochs else max(15, A + max(e.kappa for e in edges))
    if K <= A:
        raise ValueError(f"teccl A*: a round ({K} epochs) must be longer than the largest link delay ({A} epochs)")
    distances = _floyd_warshall(graph)
    remaining = {(c, d) for c in range(collective.num_chunks) for d in collective.post[c] - collective.pre[c]}
    flows: list[Flow] = []
    rounds: list[dict] = []
    status = "optimal"
    for r in range(max_rounds):
        if not remaining:
            break
        left = deadline.remaining()
        if left <= 0.5:
            status = "timeout"
            break
        round_limit = max(left / max(2, min(8, len(remaining))), min(left, 5.0))
        new_flows, info, arrived = _round(graph, collective, flows, remaining, r * K, K, A, distances, gamma,
                                          round_limit, seed, threads, mip_gap)
        rounds.append(info)
        if info["status"] == "timeout":
            status = "timeout"
        elif info["status"] == "feasible" and status == "optimal":
            status = "feasible"
        if new_flows is None:
            raise RuntimeError(f"teccl A*: round {r} ended {info['status']} without a solution")
        flows.extend(new_flows)
        remaining -= arrived
    message = ""
    if remaining:  # out of time: the greedy list scheduler completes what the rounds started
        message = f"{len(remaining)} demands left after {len(rounds)} rounds were completed greedily"
        flows, _ = greedy_schedule(graph, collective, initial=flows)
        status = "timeout"
    kept = prune_flows(graph, collective, flows)
    finish = finish_epoch(graph, collective, kept)
    stats = {"rounds": len(rounds), "round_epochs": K, "look_ahead": A,
             "solve_seconds": sum(i["solve_seconds"] for i in rounds),
             "build_seconds": sum(i["build_seconds"] for i in rounds),
             "variables": max((i["variables"] for i in rounds), default=0),
             "binaries": max((i["binaries"] for i in rounds), default=0),
             "constraints": max((i["constraints"] for i in rounds), default=0),
             "round_status": [i["status"] for i in rounds]}
    return EpochSchedule(kept, len(rounds) * K, finish, "feasible" if status == "optimal" else status, stats, message)


def _floyd_warshall(graph: EpochGraph) -> np.ndarray:
    # scipy's shortest_path on purpose, not workbench.util.graphs: its default method is Floyd-Warshall on
    # dense graphs and Dijkstra on sparse ones, and the two sum a path in different orders, which
    # differ in the last bit on ndv2:2 and dgx2:2 (experiments/teccl_astar.yaml). These distances are
    # objective coefficients, so a one-bit change can change the solver's path and the schedule.
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    n = graph.topology.num_nodes
    weights = [1.0 / (e.bandwidth * graph.tau / graph.chunk_bytes) + e.a for e in graph.edges]
    matrix = csr_matrix((weights, ([e.src for e in graph.edges], [e.dst for e in graph.edges])), shape=(n, n))
    return shortest_path(matrix, directed=True)


def _ready(graph: EpochGraph, flow: Flow) -> int:
    c, ei, k = flow
    e = graph.edges[ei]
    return k + 1 + (e.delay if graph.is_switch(e.dst) else graph.arrival_delay(e))


def _round(graph: EpochGraph, collective: Collective, history: list[Flow], remaining: set, G: int, K: int, A: int,
           distances: np.ndarray, gamma: float, time_limit: float, seed: int, threads: int, mip_gap: float):
    built = clock.perf_counter()
    edges = graph.edges
    H = K + A  # buffer epochs 0..H relative to the round
    wanted = sorted({c for c, _ in remaining})
    npus = [n for n in graph.nodes if not graph.is_switch(n)]
    held_at: dict[tuple[int, int], int] = {}  # (c, npu) -> relative epoch it is in the buffer (<= 0: already)
    # (c, switch, rel epoch) -> sender -> carried inflows
    switch_in: dict[tuple[int, int, int], dict[int, int]] = defaultdict(dict)
    busy: dict[tuple[int, int], int] = defaultdict(int)  # (edge, rel epoch) -> carried sends still on the link
    visiting: dict[tuple[int, int], set[int]] = defaultdict(set)  # (c, switch) -> rel epochs carried visits hold
    for c in range(collective.num_chunks):
        for p in collective.pre[c]:
            held_at[(c, p)] = -1
    for flow in history:
        c, ei, k = flow
        e = edges[ei]
        ready = _ready(graph, flow) - G
        if graph.is_switch(e.dst):
            if ready >= 0:
                carried = switch_in[(c, e.dst, ready)]
                carried[e.src] = carried.get(e.src, 0) + 1
        else:
            key = (c, e.dst)
            held_at[key] = min(held_at.get(key, 1 << 30), ready)
        for t in range(k, k + e.kappa):
            if t >= G:
                busy[(ei, t - G)] += 1
        if graph.one_at_a_time(e.dst):  # the round epochs an earlier round's visit still occupies the switch
            visiting[(c, e.dst)].update(t - G for t in graph.visit(e, k) if t >= G)
    with no_cyclic_gc():  # many small expressions, none in a cycle
        model, f, b, start = _round_model(graph, collective, history, remaining, wanted, npus, held_at, switch_in,
                                          busy, visiting, K, A, distances, gamma)
    build_seconds = clock.perf_counter() - built
    outcome = model.solve("highs", time_limit=max(time_limit - build_seconds, 0.5), mip_gap=mip_gap, threads=threads,
                          seed=seed, start=start)
    info = {"status": outcome.status, "build_seconds": build_seconds, "solve_seconds": outcome.seconds,
            "gap": outcome.gap, **model.stats()}
    if not outcome.has_solution:
        return None, info, set()
    x = outcome.x
    new_flows = [(c, ei, k + G) for (c, ei, k), col in f.columns.items() if x[col] > 0.5]
    arrived = {(c, d) for c, d in remaining if x[b.col((c, d, H))] > 0.5}
    return new_flows, info, arrived


def _round_model(graph: EpochGraph, collective: Collective, history: list[Flow], remaining: set, wanted: list[int],
                 npus: list[int], held_at: dict, switch_in: dict, busy: dict, visiting: dict, K: int, A: int,
                 distances: np.ndarray, gamma: float) -> tuple[MilpModel, VarFamily, VarFamily, list[float]]:
    """One round's MILP and its MIP start (nothing sent, every chunk stays where it is)."""
    edges = graph.edges
    H = K + A
    far = 1 << 30
    model = MilpModel("teccl-astar-round")
    f = model.family("f", ((c, e.index, k) for c in wanted for e in edges
                           if e.dst not in collective.pre[c] and held_at.get((c, e.dst), far) > 0 for k in range(K)),
                     upper=1.0, integer=True)
    b = model.family("b", ((c, n, k) for c in wanted for n in npus for k in range(H + 1)), upper=1.0, integer=True)
    _buffer_rows(model, graph, f, b, wanted, npus, held_at, H, far)
    for (c, ei, k), send in f.items():  # (2.2 flow) an NPU sends only what it holds
        src = edges[ei].src
        if not graph.is_switch(src):
            model.add(send <= b[c, src, k], tag="(2.2 flow)")
    crossed = {(c, edges[ei].src) for c, ei, _ in history if graph.is_switch(edges[ei].src)}
    fan = model.family("y", upper=1.0, integer=True) if graph.tree_limited else None  # (2.11 tree) fan-outs
    for w in graph.topology.switches:
        for c in wanted:
            if graph.crosses_once(w):  # a chunk crosses a switch once (so the schedule reverses)
                _cross_once_row(model, graph, f, c, w, K, crossed)
            elif graph.one_at_a_time(w):
                one_at_a_time_rows(model, graph, f, w, c, K, visiting.get((c, w), set()))
            _switch_rows(model, graph, f, c, w, K, switch_in, fan)
    for e in edges:
        _capacity_rows(model, f, e, wanted, K, busy)
        _once_rows(model, f, e, wanted, K)
    objective = [-total(EPS / (k + 1) * total(b[c, d, k + 1] for c, d in remaining) for k in range(K))]
    start = [0.0] * model.num_cols  # MIP start: nothing sent, every chunk stays where it is
    for (c, n, k), col in b.columns.items():
        start[col] = 1.0 if held_at.get((c, n), far) <= k else 0.0
    _placement_rows(model, b, remaining, npus, K, A, distances, gamma, objective, start)
    model.minimise(total(objective))
    return model, f, b, start


def _buffer_rows(model: MilpModel, graph: EpochGraph, f: VarFamily, b: VarFamily, wanted: list[int],
                 npus: list[int], held_at: dict, H: int, far: int) -> None:
    """(4.5 buffer): ``b[k] = b[k-1] + sum_in f[k - 1 - L] + (1 if a late arrival lands at k)``,
    ``b[0]`` fixed to what the last round left."""
    edges = graph.edges
    arrivals_at = {n: [(ei, 1 + graph.arrival_delay(edges[ei])) for ei in graph.in_edges.get(n, [])] for n in npus}
    for c in wanted:
        for n in npus:
            at = held_at.get((c, n), far)
            model.fix(b.col((c, n, 0)), 1.0 if at <= 0 else 0.0)  # 4.5: B[0] = what the last round left
            arrivals = arrivals_at[n]
            for k in range(1, H + 1):
                arriving = total(f[key] for ei, late in arrivals if (key := (c, ei, k - late)) in f)
                carried = 1.0 if at == k else 0.0  # a late arrival from the previous round
                model.add(b[c, n, k] == b[c, n, k - 1] + arriving + carried, tag="(4.5 buffer)")


def _cross_once_row(model: MilpModel, graph: EpochGraph, f: VarFamily, c: int, w: int, K: int, crossed: set) -> None:
    """(2.10 cross once), no-copy switches: chunk c leaves switch w at most once (never again once crossed)."""
    sends = [f[c, eo, k] for eo in graph.out_edges.get(w, []) for k in range(K) if (c, eo, k) in f]
    if sends:
        model.add(total(sends) <= (0 if (c, w) in crossed else 1), tag="(2.10 cross once)")


def _switch_rows(model: MilpModel, graph: EpochGraph, f: VarFamily, c: int, w: int, K: int, switch_in: dict,
                 fan: VarFamily | None) -> None:
    """(4.5 switch): what leaves switch w in epoch k arrived then (or was carried); a copying switch:
    per out-edge, with the (2.11 tree) rows where its copies must reach every port."""
    edges = graph.edges
    copies = graph.copies_at(w)
    for k in range(K):
        arriving = {ei: f[key] for ei in graph.in_edges.get(w, []) if (key := (c, ei, k - 1 - edges[ei].delay)) in f}
        inflow = total(arriving.values())
        senders = switch_in.get((c, w, k), {})
        carried = sum(senders.values())
        outflow = {eo: f[c, eo, k] for eo in graph.out_edges.get(w, []) if (c, eo, k) in f}
        if not outflow:
            continue
        if copies:
            for send in outflow.values():
                model.add(send <= inflow + carried, tag="(4.5 switch)")
            if graph.fans_out_fully(w) and len(outflow) > 1:
                tree_rows(model, graph, w, (c, w, k), arriving, outflow, inflow + carried, fan, senders)
        else:
            model.add(total(outflow.values()) <= inflow + carried, tag="(4.5 switch)")


def _capacity_rows(model: MilpModel, f: VarFamily, e, wanted: list[int], K: int, busy: dict) -> None:
    """(2.6 capacity) on edge e: every window of kappa epochs, less the slots carried busy."""
    for end in range(K):
        window = range(max(0, end - e.kappa + 1), end + 1)
        sends = [f[key] for k in window for c in wanted if (key := (c, e.index, k)) in f]
        room = e.per_window - sum(busy.get((e.index, t), 0) for t in window)
        if sends and len(sends) > room:
            model.add(total(sends) <= max(room, 0), tag="(2.6 capacity)")


def _once_rows(model: MilpModel, f: VarFamily, e, wanted: list[int], K: int) -> None:
    """(4.7 once): each chunk crosses edge e at most once per round."""
    for c in wanted:
        sends = [f[key] for k in range(K) if (key := (c, e.index, k)) in f]
        if len(sends) > 1:
            model.add(total(sends) <= 1, tag="(4.7 once)")


def _placement_rows(model: MilpModel, b: VarFamily, remaining: set, npus: list[int], K: int, A: int,
                    distances: np.ndarray, gamma: float, objective: list, start: list[float]) -> None:
    """(4.7 P) ``P[loc, d, f] <= sum_c Q[c, loc, f]`` and (4.7 P total) ``sum_loc P[loc, d, f] = remaining(d)``;
    each P's reward joins ``objective`` and its start value ``start``."""
    by_dest: dict[int, list[int]] = defaultdict(list)
    for c, d in remaining:
        by_dest[d].append(c)
    b_col = b.columns
    P = model.family("P")  # P[loc, d, f']: chunks d wants that sit at loc in look-ahead epoch f'
    for d, chunks in by_dest.items():
        for fa in range(A + 1):
            placed = []
            unplaced = len(chunks)
            for loc in npus:
                weight = 1.0 / (fa + 1) if loc == d else gamma / ((fa + 1) * (1 + distances[loc, d]))
                if not np.isfinite(weight) or weight <= 0:
                    continue
                p = P[loc, d, fa]
                model.upper[P.col((loc, d, fa))] = float(len(chunks))
                placed.append(p)
                objective.append(-weight * p)
                q = [(c, loc, K + fa) for c in chunks]  # Q[c, loc, f'] = b[c, loc, K + f']
                model.add(p <= total(map(b.__getitem__, q)), tag="(4.7 P)")
                here = min(unplaced, sum(start[b_col[key]] for key in q))
                start.append(float(here))
                unplaced -= here
            model.add(total(placed) == len(chunks), tag="(4.7 P total)")
