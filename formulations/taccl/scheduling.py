"""Stage 3: contiguity and exact scheduling MILP (spec 3.3), and its reduce variant (spec 4.1).

Routes and per-physical-link orders are fixed. Variables: ``send[e]`` per tree edge,
``start[c,r]``, ``time`` and, on inter-node links only, ``g[i,j]`` = is_together for chunks at
positions i < j (j - i < max_contig) of the link's order whose neighbours in every port order are
each other (S5; is_before = 1 - g). A run of merged chunks pays one alpha:
``lat_c = alpha + beta * chunk_bytes * (1 + sum_o g[c,o])`` (S2). Consecutive edges on a physical
link do not overlap (S7-S9, strict bandwidth): ``send[b] >= send[a] + lat_a - M g[a,b]``; merged
edges leave and arrive together (S6). Runs are closed under transitivity and limited to
``max_contig`` chunks. ``M`` is the makespan of the as-soon-as-possible schedule of the same orders
without merging, which is also the MIP start, so every solve has an incumbent.

Reduce mode (Reduce-Scatter, the inverted All-Gather): edges run from the tree leaves to the
root; a rank sends its partial sum once every child contribution has arrived, and contributions
into one rank are reduced one after another (a binary per pair picks the order). Merging is
allowed only between chunks with the same destination shard (spec 4.1).
"""

from __future__ import annotations

import time as clock
from dataclasses import dataclass, field
from typing import Any, Callable

from formulations.taccl.logical import LogicalTopology
from workbench.milp import MilpModel

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
    t_col = model.add_var(0.0, M, 1.0)
    send = {e: model.add_var(0.0, M) for e in edges}
    start: dict[tuple[int, int], int] = {}

    def st(c: int, r: int) -> int:
        if (c, r) not in start:
            start[(c, r)] = model.add_var(0.0, M)
            if not reduce and r in pre[c]:
                model.fix(start[(c, r)], 0.0)
        return start[(c, r)]

    together = _together_pairs(logical, order, edges, max_contig, merge_ok, src, dst)
    g = {pair: model.add_binary() for pair in together}
    partners: dict[Edge, list[Edge]] = {e: [] for e in edges}
    for a, b in together:
        partners[a].append(b)
        partners[b].append(a)

    def lat_terms(e: Edge) -> tuple[list[int], list[float], float]:
        cols = [g[(a, b)] for (a, b) in (tuple(sorted((e, o), key=rank.__getitem__)) for o in partners[e])]
        return cols, [beta[e[1]]] * len(cols), alpha[e[1]] + beta[e[1]]

    for e in edges:
        c = e[0]
        cols, vals, const = lat_terms(e)
        if reduce:
            model.add_row([send[e], st(c, src(e))], [1, -1], lower=0)  # after every child arrived
            model.add_row([st(c, dst(e)), send[e]] + cols, [1, -1] + [-v for v in vals], lower=const)
        else:
            model.add_row([send[e], st(c, src(e))], [1, -1], lower=0)  # (S4)
            model.add_row([st(c, dst(e)), send[e]] + cols, [1, -1] + [-v for v in vals], const, const)  # (S2)
    for c, targets in enumerate(post):
        if reduce:
            for r in targets:
                model.add_row([t_col, st(c, r)], [1, -1], lower=0)
        else:
            for r in targets - pre[c]:
                model.add_row([t_col, st(c, r)], [1, -1], lower=0)  # (S3)
    for p, sequence in order.items():  # (S7-S9) consecutive edges on every physical link
        for a, b in zip(sequence, sequence[1:]):
            cols, vals, const = lat_terms(a)
            key = (a, b)
            extra_cols, extra_vals = ([g[key]], [M]) if key in g else ([], [])
            model.add_row([send[b], send[a]] + cols + extra_cols, [1, -1] + [-v for v in vals] + extra_vals,
                          lower=const, dedupe=True)
    for (a, b), col in g.items():  # (S6) merged edges leave and arrive together
        model.add_row([send[a], send[b], col], [1, -1, M], upper=M)
        model.add_row([send[a], send[b], col], [1, -1, -M], lower=-M)
    _run_rows(model, g, order, max_contig)
    q_cols = []
    if reduce and serialise_reductions:
        for (c, r), incoming in into.items():
            for i, a in enumerate(incoming):
                for b in incoming[i + 1:]:
                    q = model.add_binary()
                    q_cols.append((q, a, b))
                    ca, va, ka = lat_terms(a)
                    cb, vb, kb = lat_terms(b)
                    # q = 1: a's contribution is reduced first; q = 0: b's
                    model.add_row([send[b], send[a], q] + ca, [1, -1, -M] + [-v for v in va], lower=ka - M)
                    model.add_row([send[a], send[b], q] + cb, [1, -1, M] + [-v for v in vb], lower=kb)
    start_vector = [0.0] * model.num_cols
    start_vector[t_col] = makespan0
    for e, col in send.items():
        start_vector[col] = asap_send[e]
    for key, col in start.items():
        start_vector[col] = asap_start.get(key, 0.0)
    for q, a, b in q_cols:
        start_vector[q] = 1.0 if asap_send[a] <= asap_send[b] else 0.0
    build_seconds = clock.perf_counter() - built
    if not g and not q_cols:
        start_vector = None
    outcome = model.solve(backend, time_limit=max(time_limit - build_seconds, 0.5), mip_gap=mip_gap,
                          threads=threads, seed=seed, start=start_vector)
    stats = {"build_seconds": build_seconds, "solve_seconds": outcome.seconds, "status": outcome.status,
             "gap": outcome.gap, "contiguity_pairs": len(g), "reduction_pairs": len(q_cols),
             "asap_makespan": makespan0 * unit, **model.stats()}
    if not outcome.has_solution:  # keep the as-soon-as-possible schedule: it is feasible by construction
        sends = {e: asap_send[e] * unit for e in edges}
        groups = [[e] for e in sorted(edges, key=lambda e: (sends[e], rank[e]))]
        return Schedule(sends, groups, makespan0 * unit, outcome.status, None, stats,
                        f"stage 3 found no solution ({outcome.message}); the unmerged schedule of the same orders is kept")
    x = outcome.x
    sends = {e: float(x[col]) * unit for e, col in send.items()}
    merged = {pair for pair, col in g.items() if x[col] > 0.5}
    groups = _merge_groups(edges, merged, sends, rank)
    bound = outcome.bound * unit if outcome.bound is not None else None
    return Schedule(sends, groups, float(x[t_col]) * unit, outcome.status, bound, stats, outcome.message)


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


def _run_rows(model: MilpModel, g: dict, order: dict[int, list[Edge]], max_contig: int) -> None:
    """Merged groups are runs: g[i,j] iff every consecutive pair between them is merged; at most max_contig long."""
    by_first: dict[Edge, list[Edge]] = {}
    for a, b in g:
        by_first.setdefault(a, []).append(b)
    for a, partners in by_first.items():  # partners are in sequence order
        for k in range(1, len(partners)):
            prev, cur = partners[k - 1], partners[k]
            if (prev, cur) not in g:
                continue
            # g[a,cur] <= g[a,prev]; g[a,cur] <= g[prev,cur]; g[a,cur] >= g[a,prev] + g[prev,cur] - 1
            model.add_row([g[(a, cur)], g[(a, prev)]], [1, -1], upper=0)
            model.add_row([g[(a, cur)], g[(prev, cur)]], [1, -1], upper=0)
            model.add_row([g[(a, cur)], g[(a, prev)], g[(prev, cur)]], [1, -1, -1], lower=-1)
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
            model.add_row(chain, [1] * len(chain), upper=max_contig - 1)


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
