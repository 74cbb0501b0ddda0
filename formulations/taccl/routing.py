"""Stage 1: the routing MILP (note 3.1) with bandwidth relaxed, built on ``workbench.kit.milp``.

Rows are written as the paper's equations (``workbench.kit.milp_expressions``) and tagged with their
numbers (``MilpModel.row_tags``): (1)-(11) are TACCL's, (12)-(14) the note's numbers for the
constraints the paper states in prose, (Cx) code-only constraints of the released tool, (A13)
the note's flow-validity replacement of the code's availability trick (C3).

Paper symbol -> code (one column per symmetry class, note 7 "symmetry by substitution", which is
how (12) holds: symmetric (chunk, link) pairs and (chunk, rank) pairs share one variable):

==========================  ====================================================================
``time``                    ``time`` (``model.var``), in units of the cheapest link's ``lat``
``is_sent[c,s,d]``          ``x(c, l)``: ``is_sent[x class of (c, l)]``, binary
``send[c,s,d]``             ``snd(c, l)``: ``send[x class of (c, l)]``
``start[c,r]``              ``st(c, r)``: ``start[class of (c, r)]``
``is_util[s,d]``            ``is_util[class of l]`` (hyperedge policy links only), binary
``lat(s,d)``                ``lat[l]`` (``LogicalLink.lat`` / the unit)
big-M                       ``T``: the time of a symmetric shortest-path-tree routing of the same
                            model (tight and valid: the optimum is no later); also every bound
==========================  ====================================================================

Rows: (2) ``time >= start`` on Post ranks; (3) ``start = 0`` on Pre ranks (column bounds); (4)
``start[c,s] <= send + T (1 - is_sent)``; (5) ``is_sent => start[c,d] = send + lat`` as two
big-M rows; (6)-(8) ``time >= sum lat * is_sent`` per physical link (a switch port or a NIC shared
by several logical links is one row: (7) a send port into a switch, (8) a receive port out of
one, (6) the rest); (9)/(10) ``is_util`` is 1 iff the link carries a chunk; (C2) receive once
(exactly once on Post ranks); (A13) a rank forwards a chunk only after receiving it; (C5) a port
multicasting one chunk serialises its copies; (13) every remote node receives the chunk straight
from its source node through an allowed relay; (14) relays send their own chunks first
(``enforce_ordering``). Objective (1)/(11): ``time + gamma * sum(is_util)``.
"""

from __future__ import annotations

import time as clock
from dataclasses import dataclass, field
from typing import Any

from workbench.util.lazy import lazy_module

from formulations.taccl.logical import LogicalTopology
from formulations.taccl.sketch import Sketch, SketchError
from formulations.taccl.symmetry import Generator, propagate_labels, symmetry_generators
from formulations.taccl.warm_start import consistent, mip_start, prune, symmetric_trees, warm_values
from workbench.model.collective import Collective
from workbench.kit.milp import LinearExpr, MilpModel, total

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["Routing", "solve_routing", "allowed_links"]

MU = 0.01  # |gamma| = MU x the smallest link cost (note A5)


@dataclass
class Routing:
    parents: list[dict[int, int]]  # per chunk: rank -> logical link that delivers the chunk there
    send_time: dict[tuple[int, int], float]  # (chunk, link) -> stage-1 send time (seconds)
    start_time: dict[tuple[int, int], float]  # (chunk, rank) -> stage-1 availability (seconds)
    status: str
    objective: float | None  # seconds, without the hyperedge-policy term
    bound: float | None  # proven bound on that objective (seconds), None when unknown
    stats: dict[str, Any] = field(default_factory=dict)
    message: str = ""


# --------------------------------------------------------------------------- allowed (chunk, link)
def allowed_links(logical: LogicalTopology, collective: Collective, sketch: Sketch) -> np.ndarray:
    """C x L mask: the links each chunk may use (Pre rule, relay rules, (13), shortest paths C1)."""
    links = logical.links
    G = logical.gpus_per_node
    C, L = collective.num_chunks, len(links)
    src = np.array([l.src for l in links])
    dst = np.array([l.dst for l in links])
    internode = np.array([l.internode for l in links])
    allowed = np.zeros((C, L), dtype=bool)
    distance_cache: dict[bytes, np.ndarray] = {}
    for c in range(C):
        pre, post = collective.pre[c], collective.post[c]
        mask = np.ones(L, dtype=bool)
        mask &= ~np.isin(dst, list(pre))
        if internode.any():
            pre_nodes = {r // G for r in pre}
            post_nodes = {r // G for r in post} - pre_nodes
            senders = _senders(sketch, pre, G)
            ok = np.array([not l.internode or (l.src // G in pre_nodes and l.dst // G in post_nodes
                                               and (senders is None or l.src in senders)) for l in links])
            mask &= ok
        if sketch.shortest_paths:
            key = mask.tobytes()
            if key not in distance_cache:
                distance_cache[key] = logical.hop_distances(mask)
            on_path = _shortest_path_ranks(distance_cache[key], pre, post, c)
            mask &= on_path[src] & on_path[dst]
        allowed[c] = mask
    return allowed


def _senders(sketch: Sketch, pre: frozenset[int], G: int) -> set[int] | None:
    result: set[int] = set()
    for r in pre:
        local = sketch.relay_sender(r % G)
        if local is None:
            return None
        result.update((r // G) * G + s for s in local)
    return result


def _shortest_path_ranks(dist: np.ndarray, pre: frozenset[int], post: frozenset[int], chunk: int) -> np.ndarray:
    n = dist.shape[0]
    targets = sorted(post - pre)
    on_path = np.zeros(n, dtype=bool)
    on_path[list(pre)] = True
    if not targets:
        return on_path
    for p in pre:
        dp = dist[p]
        to_targets = dist[:, targets]  # r -> q
        reach = (dp[:, None] >= 0) & (to_targets >= 0)
        through = reach & (dp[:, None] + to_targets == dp[targets][None, :]) & (dp[targets][None, :] >= 0)
        on_path |= through.any(axis=1)
    for q in targets:
        if not any(dist[p, q] >= 0 for p in pre):
            raise SketchError(f"chunk {chunk} cannot reach rank {q} on the sketch's logical topology")
    return on_path


# --------------------------------------------------------------------------- the model
def _classes(logical: LogicalTopology, collective: Collective, allowed: np.ndarray,
             generators: list[Generator]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    C, L = allowed.shape
    n = logical.num_ranks
    x_pairs, s_pairs, u_pairs = [], [], []
    chunk_ids = np.arange(C)
    for g in generators:
        cc, ll = np.nonzero(allowed)
        image_l = g.links[ll]
        ok = image_l >= 0
        cc, ll, image_l = cc[ok], ll[ok], image_l[ok]
        image_c = g.chunks[cc]
        ok = allowed[image_c, image_l]
        x_pairs.append((cc[ok] * L + ll[ok], image_c[ok] * L + image_l[ok]))
        rr = np.arange(n)
        a = (chunk_ids[:, None] * n + rr[None, :]).ravel()
        b = (g.chunks[chunk_ids][:, None] * n + g.ranks[rr][None, :]).ravel()
        s_pairs.append((a, b))
        lid = np.arange(L)
        ok = g.links >= 0
        u_pairs.append((lid[ok], g.links[ok]))
    return (propagate_labels(C * L, x_pairs), propagate_labels(C * n, s_pairs), propagate_labels(L, u_pairs))


def solve_routing(logical: LogicalTopology, collective: Collective, chunk_bytes: float, sketch: Sketch, *,
                  time_limit: float, seed: int = 0, backend: str = "highs", mip_gap: float = 1e-6,
                  threads: int = 1, warm_start: bool = True) -> Routing:
    """Stage 1: the routing MILP (module docstring) of ``collective`` on ``logical`` under ``sketch``,
    started from symmetric shortest-path trees; each chunk's tree with its times in seconds."""
    built = clock.perf_counter()
    links = logical.links
    n, L, C = logical.num_ranks, len(links), collective.num_chunks
    lat_s = np.array([l.lat(chunk_bytes) for l in links])
    unit = float(lat_s.min())  # the model runs in units of the cheapest link (numerics)
    lat_u = lat_s / unit
    allowed = allowed_links(logical, collective, sketch)
    generators = symmetry_generators(sketch, logical, collective)
    x_lab, s_lab, u_lab = _classes(logical, collective, allowed, generators)
    start_vals = _warm_values(logical, collective, sketch, allowed, generators, lat_u, x_lab, s_lab)
    T = _big_m(start_vals, allowed, lat_u)
    model = MilpModel("taccl-routing")
    time = model.var(0.0, T, name="time")
    # one column per symmetry class (note 7): a family's key is the class label of (c, l) or (c, r)
    is_sent = model.family("is_sent", upper=1.0, integer=True)
    send = model.family("send", upper=T)
    start = model.family("start", upper=T)
    x_key = x_lab.tolist()  # plain ints: the helpers below run a few million times on big models
    s_key = s_lab.tolist()
    lat = lat_u.tolist()
    x, snd, st = _column_accessors(is_sent, send, start, x_key, s_key, L, n)
    _pre_start_bounds(model, collective, start, s_key, n)
    sources = [[l for l in np.nonzero(allowed[c])[0]] for c in range(C)]
    incoming = _incoming_links(links, sources)
    timed: set[tuple] = set()  # (4)-(5) rows written, by (x class, start classes of both ends, lat)
    for c in range(C):
        _chunk_rows(model, c, links, collective, sources[c], incoming[c], lat, x, st, send, x_key, s_key,
                    L, n, T, time, timed)
    _capacity_rows(model, logical, allowed, lat, x, time)
    _multicast_rows(model, logical, allowed, lat, x, st, time)
    _internode_rows(model, logical, collective, allowed, x)
    if sketch.enforce_ordering:
        _ordering_rows(model, logical, collective, allowed, lat, x, snd, T)
    gamma = {"uc-min": MU, "uc-max": -MU}.get(sketch.hyperedge_policy, 0.0)
    is_util = model.family("is_util", upper=1.0, integer=True)  # key: symmetry class of the link
    if gamma and logical.policy_links:
        _utilisation_rows(model, logical, allowed, is_util, u_lab, x)
    model.minimise(time + gamma * total(is_util[key] for key in is_util))  # (1)/(11)
    start_vector = None
    if start_vals is not None:
        start_vector = _start_vector(model, logical, start_vals, u_lab, is_sent, send, start, is_util, time)
    build_seconds = clock.perf_counter() - built
    outcome = model.solve(backend, time_limit=max(time_limit - build_seconds, 0.5), mip_gap=mip_gap,
                          threads=threads, seed=seed, start=start_vector)
    stats = {"build_seconds": build_seconds, "solve_seconds": outcome.seconds, "status": outcome.status,
             "gap": outcome.gap, "solver": backend, "symmetry_classes": len(is_sent),
             "chunk_link_pairs": int(allowed.sum()), "warm_start": start_vector is not None, "big_m": T * unit,
             **{k: v for k, v in model.stats().items()}}
    if not outcome.has_solution:
        return Routing([], {}, {}, outcome.status, None, None, stats, outcome.message)
    xs = outcome.x
    parents, send_time, start_time = _read_trees(logical, collective, sources, xs, x, snd, start, s_key, unit)
    objective = time.value(xs) * unit
    bound = outcome.bound * unit if outcome.bound is not None else None
    if bound is not None and gamma > 0:  # time >= bound - gamma * sum(util); uc-max only raises it
        bound -= gamma * unit * len(is_util)
    return Routing(parents, send_time, start_time, outcome.status, objective, bound, stats, outcome.message)


def _warm_values(logical: LogicalTopology, collective: Collective, sketch: Sketch, allowed: np.ndarray,
                 generators: list[Generator], lat_u: np.ndarray, x_lab: np.ndarray,
                 s_lab: np.ndarray) -> dict | None:
    """The symmetric shortest-path-tree routing's values, or None when there is none the classes admit."""
    trees = symmetric_trees(logical, collective, allowed, generators, lat_u)
    start_vals = warm_values(logical, collective, sketch, trees, lat_u, allowed) if trees is not None else None
    if start_vals is not None and not consistent(start_vals, x_lab, s_lab):
        start_vals = None
    return start_vals


def _big_m(start_vals: dict | None, allowed: np.ndarray, lat_u: np.ndarray) -> float:
    """``T``: the warm start's time (tight), else every allowed hop of every chunk in sequence (loose)."""
    if start_vals is not None:
        return start_vals["time"] * (1 + 1e-6) + 1e-6
    return float((allowed * lat_u[None, :]).sum()) + 1.0


def _column_accessors(is_sent, send, start, x_key: list[int], s_key: list[int], L: int, n: int):
    """``x(c, l)``, ``snd(c, l)`` and ``st(c, r)``: the class columns of a (chunk, link) or (chunk, rank)."""

    def x(c: int, l: int) -> LinearExpr:
        key = x_key[c * L + l]
        if key not in is_sent:  # is_sent and send of a class are created together (column order)
            is_sent[key]
            send[key]
        return is_sent[key]

    def snd(c: int, l: int) -> LinearExpr:
        x(c, l)
        return send[x_key[c * L + l]]

    def st(c: int, r: int) -> LinearExpr:
        return start[s_key[c * n + r]]

    return x, snd, st


def _pre_start_bounds(model: MilpModel, collective: Collective, start, s_key: list[int], n: int) -> None:
    """(3): ``start = 0`` on Pre ranks, as column bounds."""
    for c in range(collective.num_chunks):
        for r in collective.pre[c]:
            model.fix(start.col(s_key[c * n + r]), 0.0)


def _incoming_links(links, sources: list[list[int]]) -> list[dict[int, list[int]]]:
    """Per chunk: rank -> the allowed links into it."""
    incoming: list[dict[int, list[int]]] = []
    for chunk_sources in sources:
        into: dict[int, list[int]] = {}
        for l in chunk_sources:
            into.setdefault(links[l].dst, []).append(int(l))
        incoming.append(into)
    return incoming


def _chunk_rows(model: MilpModel, c: int, links, collective: Collective, sources: list[int],
                incoming: dict[int, list[int]], lat: list[float], x, st, send, x_key: list[int],
                s_key: list[int], L: int, n: int, T: float, time: LinearExpr, timed: set[tuple]) -> None:
    """Chunk ``c``'s rows, in the order the solver has always been given them: per allowed link (4)-(5)
    and (A13), then (C2) per receiving rank, then (2) per Post rank."""
    pre, post = collective.pre[c], collective.post[c]
    received: dict[int, LinearExpr] = {}  # rank -> sum of is_sent[c, l] over the links l into it

    def receives(r: int) -> LinearExpr:
        if r not in received:
            received[r] = total(x(c, f) for f in incoming.get(r, []))
        return received[r]

    for l in sources:
        s, d = links[l].src, links[l].dst
        sent = x(c, l)
        key = x_key[c * L + l]
        pair = (key, s_key[c * n + s], s_key[c * n + d], lat[l])
        if pair not in timed:  # symmetric (chunk, link) pairs give the same rows: build them once
            timed.add(pair)
            _timing_rows(model, sent, send[key], st(c, s), st(c, d), lat[l], T)
        if s not in pre:  # a rank forwards only what it received
            model.add(sent <= receives(s), tag="(A13)", dedupe=True)
    for d in incoming:
        model.add((receives(d) == 1) if d in post else (receives(d) <= 1), tag="(C2)", dedupe=True)
    for r in post - pre:
        model.add(time >= st(c, r), tag="(2)", dedupe=True)


def _timing_rows(model: MilpModel, sent: LinearExpr, sent_at: LinearExpr, start_src: LinearExpr,
                 start_dst: LinearExpr, lat: float, T: float) -> None:
    """(4) ``start[c,s] <= send + T (1 - is_sent)``; (5) ``is_sent => start[c,d] = send + lat``."""
    unused = T * (1 - sent)  # big-M: rows (4) and (5) bind only on links the chunk uses
    late = sent_at + unused
    model.add(start_src <= late, tag="(4)", dedupe=True)
    model.add(start_dst <= late + lat, tag="(5)", dedupe=True)
    model.add(start_dst >= sent_at + lat - unused, tag="(5)", dedupe=True)


def _utilisation_rows(model: MilpModel, logical: LogicalTopology, allowed: np.ndarray, is_util,
                      u_lab: np.ndarray, x) -> None:
    """(9)/(10): ``is_util`` of a hyperedge-policy link is 1 iff the link carries a chunk."""
    for l in sorted(logical.policy_links):
        util = is_util[int(u_lab[l])]
        users = [x(c, l) for c in np.nonzero(allowed[:, l])[0]]
        cols = [sent.col for sent in users]
        by_col = dict(zip(cols, users))
        # one row per class, in a set's order of the columns: the recorded model fingerprints fix
        # this row order, and with it which of several equal optima the solver returns
        for col in set(cols):
            model.add(util >= by_col[col], tag="(9)", dedupe=True)
        model.add(util <= total(users), tag="(10)", dedupe=True)


def _start_vector(model: MilpModel, logical: LogicalTopology, start_vals: dict, u_lab: np.ndarray,
                  is_sent, send, start, is_util, time: LinearExpr):
    """The warm start as the solver's start vector (a policy link's class is used if any link of it is)."""
    used = {}
    for l in logical.policy_links:
        key = int(u_lab[l])
        used[key] = used.get(key, False) or bool(start_vals["x"][:, l].any())
    return mip_start(model, start_vals, is_sent.columns, send.columns, start.columns, is_util.columns, time, used)


def _read_trees(logical: LogicalTopology, collective: Collective, sources: list[list[int]], xs, x, snd, start,
                s_key: list[int], unit: float):
    """Each chunk's tree (rank -> link into it), its send times and its ranks' start times, in seconds."""
    links, n = logical.links, logical.num_ranks
    parents: list[dict[int, int]] = []
    send_time: dict[tuple[int, int], float] = {}
    start_time: dict[tuple[int, int], float] = {}
    for c in range(collective.num_chunks):
        chosen: dict[int, int] = {}
        for l in sources[c]:
            if x(c, l).value(xs) > 0.5:
                chosen[links[l].dst] = int(l)
                send_time[(c, int(l))] = snd(c, l).value(xs) * unit
        parents.append(prune(chosen, logical, collective.pre[c], collective.post[c], c))
        for r in range(n):
            key = s_key[c * n + r]
            if key in start:
                start_time[(c, r)] = start[key].value(xs) * unit
    return parents, send_time, start_time


def _capacity_rows(model: MilpModel, logical: LogicalTopology, allowed: np.ndarray, lat: list[float], x,
                   time: LinearExpr) -> None:
    """(6)-(8): every physical link carries at most ``time`` worth of chunk transfers.

    One rule per physical link: a link between two NPUs is the paper's (6); the link from an NPU
    into a switch is its send port, the out-hyperedge of (7); the link from a switch into an NPU
    its receive port, the in-hyperedge of (8). Links between switches (and NICs shared by several
    logical links) follow (6)."""
    topo = logical.topology
    for physical, group in logical.groups.items():
        load = total(lat[l] * x(int(c), l) for l in group for c in np.nonzero(allowed[:, l])[0])
        if not load.terms:
            continue
        link = topo.links[physical]
        into_switch, from_switch = topo.is_switch(link.dst), topo.is_switch(link.src)
        tag = "(7)" if into_switch and not from_switch else "(8)" if from_switch and not into_switch else "(6)"
        model.add(time >= load, tag=tag, dedupe=True)


def _multicast_rows(model: MilpModel, logical: LogicalTopology, allowed: np.ndarray, lat: list[float],
                    x, st, time: LinearExpr) -> None:
    """(C5): copies of one chunk leaving a port shared by several logical links go one after another."""
    topo = logical.topology
    for physical, group in logical.groups.items():
        if len(group) < 2 or topo.is_switch(topo.links[physical].src):
            continue
        s = topo.links[physical].src
        for c in np.nonzero(allowed[:, group].any(axis=1))[0]:
            c = int(c)
            usable = [l for l in group if allowed[c, l]]
            if len(usable) < 2:
                continue
            model.add(time >= st(c, s) + total(lat[l] * x(c, l) for l in usable), tag="(C5)", dedupe=True)


def _internode_rows(model: MilpModel, logical: LogicalTopology, collective: Collective, allowed: np.ndarray, x) -> None:
    """(13): each destination node gets the chunk over at least one direct inter-node link."""
    G = logical.gpus_per_node
    for c in range(collective.num_chunks):
        pre_nodes = {r // G for r in collective.pre[c]}
        for node in sorted({r // G for r in collective.post[c]} - pre_nodes):
            into_node = [x(c, l.index) for l in logical.links
                         if l.internode and allowed[c, l.index] and l.dst // G == node]
            if not into_node:
                raise SketchError(f"chunk {c} has no allowed inter-node link into node {node} (check the sketch's conn and relay map)")
            model.add(total(into_node) >= 1, tag="(13)", dedupe=True)


def _ordering_rows(model: MilpModel, logical: LogicalTopology, collective: Collective, allowed: np.ndarray,
                   lat: list[float], x, snd, T: float) -> None:
    """(14): a relay sends its own chunks over an inter-node link before the chunks it relays."""
    for l in logical.links:
        if not l.internode:
            continue
        users = np.nonzero(allowed[:, l.index])[0]
        own = [int(c) for c in users if l.src in collective.pre[c]]
        relayed = [int(c) for c in users if l.src not in collective.pre[c]]
        for a in own:
            # big-M: binds only when the own chunk a uses the link
            own_done = snd(a, l.index) + lat[l.index] - T * (1 - x(a, l.index))
            for b in relayed:
                model.add(snd(b, l.index) >= own_done, tag="(14)", dedupe=True)
