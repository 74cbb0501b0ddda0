"""Stage 1: the routing MILP (spec 3.1) with bandwidth relaxed, built on ``workbench.milp``.

Variables (one column per symmetry class, spec 7 "symmetry by substitution"):
``x[c,l]`` = is_sent (binary), ``send[c,l]``, ``start[c,r]``, ``util[l]`` (hyperedge policy),
``time``. Rows: (2) time >= start on Post ranks; (3) start = 0 on Pre ranks (column bounds);
(4)/(5) with big-M = ``T_ub``, the time of a symmetric shortest-path-tree routing of the same
model (tight and valid: the optimum is no later); (6)-(8) per physical link (a switch port or a
NIC shared by several logical links is one row); (9)/(10) utilisation; (C2) receive once;
availability by flow validity (A13: a rank forwards a chunk only after receiving it);
(C5) a port multicasting one chunk serialises its copies; (13) every remote node receives the
chunk straight from its source node through an allowed relay; (14) relays send their own chunks
first (``enforce_ordering``). Objective (1)/(11): ``time + gamma * sum(util)``.
"""

from __future__ import annotations

import time as clock
from dataclasses import dataclass, field
from typing import Any

from workbench.lazy import lazy_module

from formulations.taccl.logical import LogicalTopology
from formulations.taccl.sketch import Sketch, SketchError
from formulations.taccl.symmetry import Generator, propagate_labels, symmetry_generators
from workbench.collective import Collective
from workbench.milp import MilpModel

np = lazy_module("numpy")  # imported on first use (workbench.lazy)

__all__ = ["Routing", "solve_routing", "allowed_links"]

MU = 0.01  # |gamma| = MU x the smallest link cost (spec A5)


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
    built = clock.perf_counter()
    links = logical.links
    n, L, C = logical.num_ranks, len(links), collective.num_chunks
    lat = np.array([l.lat(chunk_bytes) for l in links])
    unit = float(lat.min())  # the model runs in units of the cheapest link (numerics)
    lat_u = lat / unit
    allowed = allowed_links(logical, collective, sketch)
    generators = symmetry_generators(sketch, logical, collective)
    x_lab, s_lab, u_lab = _classes(logical, collective, allowed, generators)
    pre = collective.pre
    post = collective.post
    trees = _symmetric_trees(logical, collective, allowed, generators, lat_u)
    start_vals = _warm_values(logical, collective, sketch, trees, lat_u, allowed) if trees is not None else None
    if start_vals is not None and not _consistent(start_vals, x_lab, s_lab, L, n):
        start_vals = None
    if start_vals is not None:
        T = start_vals["time"] * (1 + 1e-6) + 1e-6
    else:  # a valid but loose bound: every allowed hop of every chunk in sequence
        T = float((allowed * lat_u[None, :]).sum()) + 1.0
    model = MilpModel("taccl-routing")
    t_col = model.add_var(0.0, T, 1.0)
    x_col: dict[int, int] = {}
    snd_col: dict[int, int] = {}
    st_col: dict[int, int] = {}

    def x(c: int, l: int) -> int:
        key = int(x_lab[c * L + l])
        if key not in x_col:
            x_col[key] = model.add_binary()
            snd_col[key] = model.add_var(0.0, T)
        return x_col[key]

    def snd(c: int, l: int) -> int:
        x(c, l)
        return snd_col[int(x_lab[c * L + l])]

    def st(c: int, r: int) -> int:
        key = int(s_lab[c * n + r])
        if key not in st_col:
            st_col[key] = model.add_var(0.0, T)
        return st_col[key]

    for c in range(C):
        for r in pre[c]:
            model.fix(st(c, r), 0.0)
    sources = [[l for l in np.nonzero(allowed[c])[0]] for c in range(C)]
    incoming: list[dict[int, list[int]]] = []
    for c in range(C):
        into: dict[int, list[int]] = {}
        for l in sources[c]:
            into.setdefault(links[l].dst, []).append(int(l))
        incoming.append(into)
    for c in range(C):
        for l in sources[c]:
            link = links[l]
            s, d = link.src, link.dst
            xc, sc = x(c, l), snd(c, l)
            model.add_row([st(c, s), sc, xc], [1, -1, T], upper=T, dedupe=True)  # (4)
            model.add_row([st(c, d), sc, xc], [1, -1, T], upper=T + lat_u[l], dedupe=True)  # (5) <=
            model.add_row([st(c, d), sc, xc], [1, -1, -T], lower=lat_u[l] - T, dedupe=True)  # (5) >=
            if s not in pre[c]:  # flow validity (A13)
                feeders = incoming[c].get(s, [])
                model.add_row([xc] + [x(c, f) for f in feeders], [1] + [-1] * len(feeders), upper=0, dedupe=True)
        for d, feeders in incoming[c].items():  # (C2)
            cols = [x(c, f) for f in feeders]
            if d in post[c]:
                model.add_row(cols, [1] * len(cols), 1, 1, dedupe=True)
            else:
                model.add_row(cols, [1] * len(cols), upper=1, dedupe=True)
        for r in post[c] - pre[c]:  # (2)
            model.add_row([t_col, st(c, r)], [1, -1], lower=0, dedupe=True)
    _capacity_rows(model, logical, allowed, lat_u, x, t_col)
    _multicast_rows(model, logical, allowed, lat_u, x, st, t_col)
    _internode_rows(model, logical, collective, allowed, x)
    if sketch.enforce_ordering:
        _ordering_rows(model, logical, collective, allowed, lat_u, x, snd, T)
    gamma = {"uc-min": MU, "uc-max": -MU}.get(sketch.hyperedge_policy, 0.0)
    u_col: dict[int, int] = {}
    if gamma and logical.policy_links:
        for l in sorted(logical.policy_links):
            key = int(u_lab[l])
            if key not in u_col:
                u_col[key] = model.add_binary(gamma)
            users = [x(c, l) for c in np.nonzero(allowed[:, l])[0]]
            for col in set(users):  # (9)
                model.add_row([u_col[key], col], [1, -1], lower=0, dedupe=True)
            model.add_row([u_col[key]] + users, [1] + [-1] * len(users), upper=0, dedupe=True)  # (10)
    start_vector = None
    if start_vals is not None:
        used = {}
        for l in logical.policy_links:
            key = int(u_lab[l])
            used[key] = used.get(key, False) or bool(start_vals["x"][:, l].any())
        start_vector = _start_vector(model, start_vals, x_col, snd_col, st_col, u_col, t_col, used)
    build_seconds = clock.perf_counter() - built
    outcome = model.solve(backend, time_limit=max(time_limit - build_seconds, 0.5), mip_gap=mip_gap,
                          threads=threads, seed=seed, start=start_vector)
    stats = {"build_seconds": build_seconds, "solve_seconds": outcome.seconds, "status": outcome.status,
             "gap": outcome.gap, "solver": backend, "symmetry_classes": len(x_col),
             "chunk_link_pairs": int(allowed.sum()), "warm_start": start_vector is not None, "big_m": T * unit,
             **{k: v for k, v in model.stats().items()}}
    if not outcome.has_solution:
        return Routing([], {}, {}, outcome.status, None, None, stats, outcome.message)
    xs = outcome.x
    parents: list[dict[int, int]] = []
    send_time: dict[tuple[int, int], float] = {}
    start_time: dict[tuple[int, int], float] = {}
    for c in range(C):
        chosen: dict[int, int] = {}
        for l in sources[c]:
            if xs[x(c, l)] > 0.5:
                chosen[links[l].dst] = int(l)
                send_time[(c, int(l))] = float(xs[snd(c, l)]) * unit
        parents.append(_prune(chosen, logical, pre[c], post[c], c))
        for r in range(n):
            key = int(s_lab[c * n + r])
            if key in st_col:
                start_time[(c, r)] = float(xs[st_col[key]]) * unit
    objective = float(xs[t_col]) * unit
    bound = outcome.bound * unit if outcome.bound is not None else None
    if bound is not None and gamma > 0:  # time >= bound - gamma * sum(util); uc-max only raises it
        bound -= gamma * unit * len(u_col)
    return Routing(parents, send_time, start_time, outcome.status, objective, bound, stats, outcome.message)


def _capacity_rows(model: MilpModel, logical: LogicalTopology, allowed: np.ndarray, lat_u: np.ndarray, x, t_col: int) -> None:
    """(6)-(8): every physical link carries at most ``time`` worth of chunk transfers."""
    for physical, group in logical.groups.items():
        cols, vals = [t_col], [1.0]
        for l in group:
            for c in np.nonzero(allowed[:, l])[0]:
                cols.append(x(int(c), l))
                vals.append(-lat_u[l])
        if len(cols) > 1:
            model.add_row(cols, vals, lower=0, dedupe=True)


def _multicast_rows(model: MilpModel, logical: LogicalTopology, allowed: np.ndarray, lat_u: np.ndarray,
                    x, st, t_col: int) -> None:
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
            model.add_row([t_col, st(c, s)] + [x(c, l) for l in usable], [1, -1] + [-lat_u[l] for l in usable],
                          lower=0, dedupe=True)


def _internode_rows(model: MilpModel, logical: LogicalTopology, collective: Collective, allowed: np.ndarray, x) -> None:
    """(13): each destination node gets the chunk over at least one direct inter-node link."""
    G = logical.gpus_per_node
    for c in range(collective.num_chunks):
        pre_nodes = {r // G for r in collective.pre[c]}
        for node in sorted({r // G for r in collective.post[c]} - pre_nodes):
            cols = [x(c, l.index) for l in logical.links
                    if l.internode and allowed[c, l.index] and l.dst // G == node]
            if not cols:
                raise SketchError(f"chunk {c} has no allowed inter-node link into node {node} (check the sketch's conn and relay map)")
            model.add_row(cols, [1] * len(cols), lower=1, dedupe=True)


def _ordering_rows(model: MilpModel, logical: LogicalTopology, collective: Collective, allowed: np.ndarray,
                   lat_u: np.ndarray, x, snd, T: float) -> None:
    """(14): a relay sends its own chunks over an inter-node link before the chunks it relays."""
    for l in logical.links:
        if not l.internode:
            continue
        users = np.nonzero(allowed[:, l.index])[0]
        own = [int(c) for c in users if l.src in collective.pre[c]]
        relayed = [int(c) for c in users if l.src not in collective.pre[c]]
        for a in own:
            for b in relayed:
                model.add_row([snd(b, l.index), snd(a, l.index), x(a, l.index)], [1, -1, -T],
                              lower=lat_u[l.index] - T, dedupe=True)


def _prune(chosen: dict[int, int], logical: LogicalTopology, pre: frozenset[int], post: frozenset[int], chunk: int) -> dict[int, int]:
    """Drop branches that end at a rank that does not need the chunk (useless sends)."""
    links = logical.links
    children: dict[int, int] = {}
    for d, l in chosen.items():
        children[links[l].src] = children.get(links[l].src, 0) + 1
    leaves = [d for d in chosen if children.get(d, 0) == 0 and d not in post]
    while leaves:
        d = leaves.pop()
        l = chosen.pop(d)
        s = links[l].src
        children[s] -= 1
        if children[s] == 0 and s in chosen and s not in post:
            leaves.append(s)
    for r in post - pre:
        if r not in chosen:
            raise RuntimeError(f"routing left chunk {chunk} without a path to rank {r}")
    return chosen


# --------------------------------------------------------------------------- warm start
def _symmetric_trees(logical: LogicalTopology, collective: Collective, allowed: np.ndarray,
                     generators: list[Generator], lat_u: np.ndarray) -> list[dict[int, int]] | None:
    """A shortest-path tree per chunk, copied along the symmetry so the start respects the ties."""
    C = collective.num_chunks
    trees: list[dict[int, int] | None] = [None] * C
    for c0 in range(C):
        if trees[c0] is not None:
            continue
        tree = _bfs_tree(logical, collective, allowed[c0], c0, lat_u)
        if tree is None:
            return None
        trees[c0] = tree
        frontier = [(c0, tree)]
        while frontier:
            c, t = frontier.pop()
            for g in generators:
                image = g.chunks[c]
                if trees[image] is not None:
                    continue
                mapped = {}
                for d, l in t.items():
                    j = int(g.links[l])
                    if j < 0:
                        return None
                    mapped[int(g.ranks[d])] = j
                trees[image] = mapped
                frontier.append((int(image), mapped))
    return trees  # type: ignore[return-value]


def _bfs_tree(logical: LogicalTopology, collective: Collective, mask: np.ndarray, chunk: int,
              lat_u: np.ndarray) -> dict[int, int] | None:
    import heapq

    pre, post = collective.pre[chunk], collective.post[chunk]
    best: dict[int, tuple[int, float]] = {r: (0, 0.0) for r in pre}
    parent: dict[int, int] = {}
    heap = [(0, 0.0, r) for r in sorted(pre)]
    while heap:
        hops, dist, u = heapq.heappop(heap)
        if best.get(u) != (hops, dist):
            continue
        for l in logical.out_links[u]:
            if not mask[l]:
                continue
            v = logical.links[l].dst
            cand = (hops + 1, dist + lat_u[l])
            if v not in best or cand < best[v]:
                best[v] = cand
                parent[v] = l
                heapq.heappush(heap, (cand[0], cand[1], v))
    if any(r not in best for r in post):
        return None
    return _prune(dict(parent), logical, pre, post, chunk)


def _warm_values(logical: LogicalTopology, collective: Collective, sketch: Sketch, trees: list[dict[int, int]],
                 lat_u: np.ndarray, allowed: np.ndarray) -> dict[str, Any] | None:
    links = logical.links
    n = logical.num_ranks
    C = collective.num_chunks
    x = np.zeros((C, len(links)))
    send = np.zeros((C, len(links)))
    start = np.zeros((C, n))
    own_on_link: dict[int, float] = {}
    if sketch.enforce_ordering:
        for c, tree in enumerate(trees):
            for d, l in tree.items():
                if links[l].internode and links[l].src in collective.pre[c]:
                    own_on_link[l] = lat_u[l]
    for c, tree in enumerate(trees):
        order = _topological(tree, links, collective.pre[c])
        for l in order:
            s, d = links[l].src, links[l].dst
            t = start[c, s]
            if sketch.enforce_ordering and l in own_on_link and s not in collective.pre[c]:
                t = max(t, own_on_link[l])
            x[c, l] = 1
            send[c, l] = t
            start[c, d] = t + lat_u[l]
    finish = max((start[c, r] for c in range(C) for r in collective.post[c]), default=0.0)
    load = max((sum(lat_u[l] * x[:, l].sum() for l in group) for group in logical.groups.values()), default=0.0)
    topo = logical.topology
    multicast = 0.0
    for physical, group in logical.groups.items():
        if len(group) >= 2 and not topo.is_switch(topo.links[physical].src):
            s = topo.links[physical].src
            multicast = max(multicast, float((start[:, s] + (x[:, group] * lat_u[group][None, :]).sum(axis=1)).max()))
    return {"x": x, "send": send, "start": start, "time": max(finish, load, multicast, 1e-9)}


def _topological(tree: dict[int, int], links, pre) -> list[int]:
    children: dict[int, list[int]] = {}
    for d, l in tree.items():
        children.setdefault(links[l].src, []).append(l)
    order, stack = [], sorted(pre)
    while stack:
        u = stack.pop()
        for l in sorted(children.get(u, [])):
            order.append(l)
            stack.append(links[l].dst)
    return order


def _consistent(values: dict[str, Any], x_lab: np.ndarray, s_lab: np.ndarray, L: int, n: int) -> bool:
    for name, labels, flat in (("x", x_lab, values["x"].ravel()), ("send", x_lab, values["send"].ravel()),
                               ("start", s_lab, values["start"].ravel())):
        reference = np.full(len(labels), np.nan)
        reference[labels] = flat  # last writer wins; compare everyone with their class's value
        if not np.allclose(reference[labels], flat, atol=1e-7):
            return False
    return True


def _start_vector(model: MilpModel, values: dict[str, Any], x_col, snd_col, st_col, u_col, t_col: int,
                  used: dict[int, bool]) -> list[float]:
    vector = [0.0] * model.num_cols
    vector[t_col] = values["time"]
    flat_x, flat_send, flat_start = values["x"].ravel(), values["send"].ravel(), values["start"].ravel()
    for key, col in x_col.items():
        vector[col] = flat_x[key]
        vector[snd_col[key]] = flat_send[key]
    for key, col in st_col.items():
        vector[col] = flat_start[key]
    for key, col in u_col.items():
        vector[col] = 1.0 if used.get(key) else 0.0
    return vector
