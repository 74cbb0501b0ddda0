"""Stage 3: contiguity and exact scheduling MILP (note 3.3), and its reduce variant (note 4.1).

Routes and per-physical-link orders are fixed. Rows are written as equations
(``workbench.kit.milp_expressions``) and tagged with the note's numbers (``MilpModel.row_tags``).

Symbol -> code:

==========================  ====================================================================
``time``                    ``time`` (``model.var``), in units of the cheapest used link's ``lat``
``send[c,s,d]``             ``send[e]`` per tree edge ``e = (c, l)``
``start[c,r]``              ``start[(c, r)]`` (``st(c, r)``), created on first use
``is_together[{c,o},d]``    ``g[(a, b)]`` (family ``is_together``), edges a before b on one
                            inter-node link, adjacent in every port order; ``is_before = 1 - g``
``lat_c(s,d)``              ``lat_c(e) = alpha + beta * (1 + sum of e's g)``
``is_reduce_before``        ``reduce_before[(a, b)]``: a's contribution is reduced before b's
big-M ``M``                 the makespan of the as-soon-as-possible schedule of the same orders
                            without merging, which is also the MIP start (every solve has an
                            incumbent) and every column's upper bound
==========================  ====================================================================

Rows: (S1) ``start = 0`` on Pre ranks (column bounds); (S2) ``start[c,d] = send + lat_c``; (S3)
``time >= start`` on Post ranks; (S4) ``send >= start`` at the sender; (S5) merged groups are runs
of consecutive edges (``g[a,c] <= g[a,b]``, ``g[a,c] <= g[b,c]``, ``g[a,c] >= g[a,b] + g[b,c] - 1``),
at most ``max_contig`` long; (S6) merged edges leave and arrive together; (S7)-(S9) strict
bandwidth, consecutive edges of a physical link's order do not overlap,
``send[b] >= send[a] + lat_c(a) - M g[a,b]``: (S7) a link between NPUs, (S9) a send port into a
switch, (S8) a receive port out of one. Objective: ``time``.

Reduce mode (Reduce-Scatter, the inverted All-Gather; note 4.1): edges run from the tree leaves to
the root; a rank sends its partial sum once every child contribution has arrived, (S2r)
``start[c,d] >= send + lat_c`` (several children), and (4.1) contributions into one rank are
reduced one after another, a binary per pair picking the order. Merging is allowed only between
chunks with the same destination shard.
"""

from __future__ import annotations

import time as clock
from dataclasses import dataclass, field
from typing import Any, Callable

from formulations.taccl.logical import LogicalTopology
from workbench.kit.milp import LinearExpr, MilpModel, VarFamily, total

__all__ = ["Schedule", "solve_schedule"]

Edge = tuple[int, int]


@dataclass
class Schedule:
    send: dict[Edge, float]  # seconds
    groups: list[list[Edge]]  # merged messages (single edges are groups of one), in file order
    makespan: float
    status: str
    bound: float | None
    stats: dict[str, Any] = field(default_factory=dict)
    message: str = ""


def solve_schedule(logical: LogicalTopology, edges: list[Edge], order: dict[int, list[Edge]], rank: dict[Edge, tuple],
                   pre, post, chunk_bytes: float, *, reduce: bool = False, max_contig: int = 6,
                   merge_ok: Callable[[int, int], bool] | None = None, serialise_reductions: bool = True,
                   time_limit: float, seed: int = 0, backend: str = "highs", mip_gap: float = 1e-6,
                   threads: int = 1) -> Schedule:
    """Stage 3: the contiguity and scheduling MILP (module docstring) for fixed tree ``edges`` and
    per-link ``order``; ``reduce`` for the reduce variant. Send times in seconds, merged groups in order."""
    built = clock.perf_counter()
    links = logical.links
    lat_s = {l.index: l.lat(chunk_bytes) for l in links}
    unit = min(lat_s[l] for _, l in edges)
    alpha = {l.index: l.alpha / unit for l in links}
    beta = {l.index: l.beta * chunk_bytes / unit for l in links}
    src = lambda e: links[e[1]].src  # noqa: E731
    dst = lambda e: links[e[1]].dst  # noqa: E731
    into: dict[tuple[int, int], list[Edge]] = {}
    for e in edges:
        into.setdefault((e[0], dst(e)), []).append(e)
    asap_send, asap_start, makespan0 = _asap(edges, order, rank, links, alpha, beta, into, pre, post, reduce, serialise_reductions)
    M = makespan0 * (1 + 1e-6) + 1e-6
    model = MilpModel("taccl-schedule")
    time = model.var(0.0, M, name="time")
    send = model.family("send", edges, upper=M)
    start = model.family("start", upper=M)  # key (c, r), created on first use
    st = _start_accessor(model, start, pre, reduce)
    together = _together_pairs(logical, order, edges, max_contig, merge_ok, src, dst)
    g = model.family("is_together", together, upper=1.0, integer=True)
    lat = _merged_latencies(edges, together, g, rank, alpha, beta)  # each edge's (S2) latency, once
    _arrival_rows(model, edges, send, lat, st, src, dst, reduce)
    _makespan_rows(model, time, post, pre, st, reduce)
    _bandwidth_rows(model, logical, order, send, lat, g, M)
    _together_rows(model, together, send, g, M)
    _run_rows(model, g, order, max_contig)
    reduce_before = model.family("is_reduce_before", upper=1.0, integer=True)  # key (a, b): a's first
    if reduce and serialise_reductions:
        _reduction_order_rows(model, into, send, lat, reduce_before, M)
    start_vector = _start_vector(model, time, makespan0, send, start, reduce_before, asap_send, asap_start)
    model.minimise(time)
    build_seconds = clock.perf_counter() - built
    if not g and not reduce_before:
        start_vector = None
    outcome = model.solve(backend, time_limit=max(time_limit - build_seconds, 0.5), mip_gap=mip_gap,
                          threads=threads, seed=seed, start=start_vector)
    stats = {"build_seconds": build_seconds, "solve_seconds": outcome.seconds, "status": outcome.status,
             "gap": outcome.gap, "contiguity_pairs": len(g), "reduction_pairs": len(reduce_before),
             "asap_makespan": makespan0 * unit, **model.stats()}
    if not outcome.has_solution:  # keep the as-soon-as-possible schedule: it is feasible by construction
        sends = {e: asap_send[e] * unit for e in edges}
        groups = [[e] for e in sorted(edges, key=lambda e: (sends[e], rank[e]))]
        return Schedule(sends, groups, makespan0 * unit, outcome.status, None, stats,
                        f"stage 3 found no solution ({outcome.message}); the unmerged schedule of the same orders is kept")
    x = outcome.x
    sends = {e: value * unit for e, value in send.solution(x).items()}
    merged = {pair for pair, value in g.solution(x).items() if value > 0.5}
    groups = _merge_groups(edges, merged, sends, rank)
    bound = outcome.bound * unit if outcome.bound is not None else None
    return Schedule(sends, groups, time.value(x) * unit, outcome.status, bound, stats, outcome.message)


def _start_accessor(model: MilpModel, start: VarFamily, pre, reduce: bool) -> Callable[[int, int], LinearExpr]:
    """``st(c, r)``: the ``start`` column of (chunk, rank), created on first use (S1 fixed on Pre ranks)."""

    def st(c: int, r: int) -> LinearExpr:
        if (c, r) not in start and not reduce and r in pre[c]:
            model.fix(start.col((c, r)), 0.0)  # (S1) start = 0 on Pre ranks, as column bounds
        return start[(c, r)]

    return st


def _merged_latencies(edges: list[Edge], together: list[tuple[Edge, Edge]], g: VarFamily, rank: dict[Edge, tuple],
                      alpha: dict[int, float], beta: dict[int, float]) -> dict[Edge, LinearExpr]:
    """(S2) ``lat_c(e)``: one alpha per merged run, a beta per chunk in it: alpha + beta * (1 + sum of e's g)."""
    partners: dict[Edge, list[Edge]] = {e: [] for e in edges}
    for a, b in together:
        partners[a].append(b)
        partners[b].append(a)

    def lat_c(e: Edge) -> LinearExpr:
        pairs = (tuple(sorted((e, o), key=rank.__getitem__)) for o in partners[e])
        return total(beta[e[1]] * g[pair] for pair in pairs) + (alpha[e[1]] + beta[e[1]])

    return {e: lat_c(e) for e in edges}


def _arrival_rows(model: MilpModel, edges: list[Edge], send: VarFamily, lat: dict[Edge, LinearExpr], st, src, dst,
                  reduce: bool) -> None:
    """Per edge: (S4) ``send >= start`` at the sender, then (S2) ``start[c,d] = send + lat_c`` ((S2r) ``>=``)."""
    for e in edges:
        c = e[0]
        model.add(send[e] >= st(c, src(e)), tag="(S4)")  # reduce: once every child contribution arrived
        if reduce:  # contributions of several children: arrival bounds the partial sum's start from below
            model.add(st(c, dst(e)) >= send[e] + lat[e], tag="(S2r)")
        else:
            model.add(st(c, dst(e)) == send[e] + lat[e], tag="(S2)")


def _makespan_rows(model: MilpModel, time: LinearExpr, post, pre, st, reduce: bool) -> None:
    """(S3) ``time >= start`` on Post ranks (every one in reduce mode, the roots included)."""
    for c, targets in enumerate(post):
        for r in (targets if reduce else targets - pre[c]):
            model.add(time >= st(c, r), tag="(S3)")


def _bandwidth_rows(model: MilpModel, logical: LogicalTopology, order: dict[int, list[Edge]], send: VarFamily,
                    lat: dict[Edge, LinearExpr], g: VarFamily, M: float) -> None:
    """(S7)-(S9): consecutive edges of every physical link's and port's order do not overlap."""
    for p, sequence in order.items():
        tag = _port_tag(logical, p)
        for a, b in zip(sequence, sequence[1:]):
            ready = send[a] + lat[a]
            if (a, b) in g:  # merged edges leave together: the row binds only when they are not
                ready = ready - M * g[(a, b)]
            model.add(send[b] >= ready, tag=tag, dedupe=True)


def _together_rows(model: MilpModel, together: list[tuple[Edge, Edge]], send: VarFamily, g: VarFamily,
                   M: float) -> None:
    """(S6): merged edges leave and arrive together."""
    for pair in together:
        a, b = pair
        apart = M * (1 - g[pair])
        model.add(send[a] <= send[b] + apart, tag="(S6)")
        model.add(send[a] >= send[b] - apart, tag="(S6)")


def _reduction_order_rows(model: MilpModel, into: dict[tuple[int, int], list[Edge]], send: VarFamily,
                          lat: dict[Edge, LinearExpr], reduce_before: VarFamily, M: float) -> None:
    """(4.1): contributions into one rank are reduced one after another, a binary per pair picking the order."""
    for (c, r), incoming in into.items():
        for i, a in enumerate(incoming):
            for b in incoming[i + 1:]:
                q = reduce_before[(a, b)]
                # q = 1: a's contribution is reduced first; q = 0: b's
                model.add(send[b] >= send[a] - M * (1 - q) + lat[a], tag="(4.1)")
                model.add(send[a] >= send[b] - M * q + lat[b], tag="(4.1)")


def _start_vector(model: MilpModel, time: LinearExpr, makespan0: float, send: VarFamily, start: VarFamily,
                  reduce_before: VarFamily, asap_send: dict[Edge, float],
                  asap_start: dict[tuple[int, int], float]) -> list[float]:
    """The as-soon-as-possible schedule as the MIP start (reductions in its order)."""
    start_vector = [0.0] * model.num_cols
    start_vector[time.col] = makespan0
    for e, col in send.columns.items():
        start_vector[col] = asap_send[e]
    for key, col in start.columns.items():
        start_vector[col] = asap_start.get(key, 0.0)
    for (a, b), col in reduce_before.columns.items():
        start_vector[col] = 1.0 if asap_send[a] <= asap_send[b] else 0.0
    return start_vector


def _together_pairs(logical: LogicalTopology, order: dict[int, list[Edge]], edges: list[Edge], max_contig: int,
                    merge_ok, src, dst) -> list[tuple[Edge, Edge]]:
    """(S5) candidate pairs: runs of consecutive edges on one inter-node link, adjacent on all its ports."""
    links = logical.links
    position: dict[int, dict[Edge, int]] = {p: {e: i for i, e in enumerate(seq)} for p, seq in order.items()}
    by_link: dict[int, list[Edge]] = {}
    for e in edges:
        by_link.setdefault(e[1], []).append(e)
    pairs = []
    if max_contig < 2:
        return pairs
    for l, own in by_link.items():
        link = links[l]
        if not link.internode or len(own) < 2:
            continue
        first = link.physical[0]
        sequence = [e for e in order[first] if e[1] == l]

        def adjacent(a: Edge, b: Edge) -> bool:
            return all(position[p][b] == position[p][a] + 1 for p in link.physical)

        ok = [adjacent(a, b) and (merge_ok is None or merge_ok(a[0], b[0])) for a, b in zip(sequence, sequence[1:])]
        for i in range(len(sequence)):
            for j in range(i + 1, min(i + max_contig, len(sequence))):
                if not ok[j - 1]:
                    break
                pairs.append((sequence[i], sequence[j]))
    return pairs


def _run_rows(model: MilpModel, g: VarFamily, order: dict[int, list[Edge]], max_contig: int) -> None:
    """(S5) merged groups are runs: g[i,j] iff every consecutive pair between them is merged; at most max_contig long."""
    by_first: dict[Edge, list[Edge]] = {}
    for a, b in g:
        by_first.setdefault(a, []).append(b)
    for a, partners in by_first.items():  # partners are in sequence order
        for k in range(1, len(partners)):
            prev, cur = partners[k - 1], partners[k]
            if (prev, cur) not in g:
                continue
            model.add(g[(a, cur)] <= g[(a, prev)], tag="(S5)")
            model.add(g[(a, cur)] <= g[(prev, cur)], tag="(S5)")
            model.add(g[(a, cur)] >= g[(a, prev)] + g[(prev, cur)] - 1, tag="(S5)")
    consecutive: dict[Edge, Edge] = {}
    for a, b in g:
        consecutive.setdefault(a, b)  # the first partner is the next edge in sequence
    for a in consecutive:
        chain, cur = [], a
        while cur in consecutive and len(chain) < max_contig:
            nxt = consecutive[cur]
            chain.append(g[(cur, nxt)])
            cur = nxt
        if len(chain) == max_contig:
            model.add(total(chain) <= max_contig - 1, tag="(S5)")


def _port_tag(logical: LogicalTopology, physical: int) -> str:
    """(S7) a link between two NPUs, (S9) a send port into a switch, (S8) a receive port out of one."""
    topo = logical.topology
    link = topo.links[physical]
    into_switch, from_switch = topo.is_switch(link.dst), topo.is_switch(link.src)
    return "(S9)" if into_switch and not from_switch else "(S8)" if from_switch and not into_switch else "(S7)"


def _asap(edges, order, rank, links, alpha, beta, into, pre, post, reduce: bool, serialise: bool):
    """The earliest schedule that keeps every order, without merging (units of the model)."""
    ready_at: dict[tuple[int, int], float] = {}
    link_free: dict[int, float] = {}
    last_reduce: dict[tuple[int, int], float] = {}
    send: dict[Edge, float] = {}
    pending_children: dict[tuple[int, int], int] = {}
    if reduce:
        for (c, r), incoming in into.items():
            pending_children[(c, r)] = len(incoming)
    makespan = 0.0
    for e in sorted(edges, key=rank.__getitem__):
        c, l = e
        s, d = links[l].src, links[l].dst
        cost = alpha[l] + beta[l]
        t = ready_at.get((c, s), 0.0)
        for p in links[l].physical:
            t = max(t, link_free.get(p, 0.0))
        if reduce and serialise:
            t = max(t, last_reduce.get((c, d), 0.0))
        send[e] = t
        for p in links[l].physical:
            link_free[p] = t + cost
        if reduce:
            last_reduce[(c, d)] = t + cost
            ready_at[(c, d)] = max(ready_at.get((c, d), 0.0), t + cost)
        else:
            ready_at[(c, d)] = t + cost
        makespan = max(makespan, t + cost)
    return send, ready_at, max(makespan, 1e-9)


def _merge_groups(edges: list[Edge], merged: set, sends: dict[Edge, float], rank) -> list[list[Edge]]:
    parent = {e: e for e in edges}

    def find(e: Edge) -> Edge:
        while parent[e] != e:
            parent[e] = parent[parent[e]]
            e = parent[e]
        return e

    for a, b in merged:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[rb] = ra
    groups: dict[Edge, list[Edge]] = {}
    for e in sorted(edges, key=rank.__getitem__):
        groups.setdefault(find(e), []).append(e)
    return sorted(groups.values(), key=lambda grp: (min(sends[e] for e in grp), rank[grp[0]]))
