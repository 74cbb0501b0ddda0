"""The routing MILP's start (stage 1): a shortest-path tree per chunk, copied along the symmetry.

Its makespan is the big-M ``T`` of every time row in ``formulations.taccl.routing`` and the
MIP start of the solve, so every solve has an incumbent; ``prune`` is shared with the reading of
the MILP's solution (branches that end at a rank not needing the chunk are useless sends).
"""

from __future__ import annotations

from typing import Any

from workbench.util.lazy import lazy_module

from formulations.taccl.logical import LogicalTopology
from formulations.taccl.sketch import Sketch
from formulations.taccl.symmetry import Generator
from workbench.model.collective import Collective
from workbench.util.graphs import dijkstra
from workbench.kit.milp import LinearExpr, MilpModel

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["prune", "symmetric_trees", "warm_values", "consistent", "mip_start"]


def prune(chosen: dict[int, int], logical: LogicalTopology, pre: frozenset[int], post: frozenset[int], chunk: int) -> dict[int, int]:
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


def symmetric_trees(logical: LogicalTopology, collective: Collective, allowed: np.ndarray,
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
    """Fewest hops, then least latency, from the chunk's holders over the allowed links
    (``workbench.util.graphs.dijkstra``); the tree pruned to the ranks that want it."""
    pre, post = collective.pre[chunk], collective.post[chunk]
    # arcs in each node's out-link order (a sketch's logical links are not listed by source), so
    # equal (hops, latency) ties resolve as the links are listed there
    kept = [l for u in range(len(logical.out_links)) for l in logical.out_links[u] if mask[l]]
    arcs = [(logical.links[l].src, logical.links[l].dst) for l in kept]
    best, via = dijkstra(len(logical.out_links), arcs, pre, start=(0, 0.0),
                         arrive=lambda cost, i: (cost[0] + 1, cost[1] + lat_u[kept[i]]))
    if any(r not in best for r in post):
        return None
    return prune({v: kept[i] for v, i in via.items()}, logical, pre, post, chunk)


def warm_values(logical: LogicalTopology, collective: Collective, sketch: Sketch, trees: list[dict[int, int]],
                 lat_u: np.ndarray, allowed: np.ndarray) -> dict[str, Any] | None:
    """The routing columns of ``trees`` (per chunk, rank -> link) sent as early as possible: ``x``,
    ``send``, ``start`` and ``time``, the latest arrival, busiest physical link or multicast port
    (in units of the cheapest link, as ``lat_u``)."""
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


def consistent(values: dict[str, Any], x_lab: np.ndarray, s_lab: np.ndarray) -> bool:
    """The warm values agree within every symmetry class (``x_lab``/``s_lab`` label each variable's)."""
    for labels, flat in ((x_lab, values["x"].ravel()), (x_lab, values["send"].ravel()),
                         (s_lab, values["start"].ravel())):
        reference = np.full(len(labels), np.nan)
        reference[labels] = flat  # last writer wins; compare everyone with their class's value
        if not np.allclose(reference[labels], flat, atol=1e-7):
            return False
    return True


def mip_start(model: MilpModel, values: dict[str, Any], x_col: dict[int, int], snd_col: dict[int, int],
              st_col: dict[int, int], u_col: dict[int, int], time: LinearExpr, used: dict[int, bool]) -> list[float]:
    """The warm values in the model's columns (each family's columns by class key)."""
    vector = [0.0] * model.num_cols
    vector[time.col] = values["time"]
    flat_x, flat_send, flat_start = values["x"].ravel(), values["send"].ravel(), values["start"].ravel()
    for key, col in x_col.items():
        vector[col] = flat_x[key]
        vector[snd_col[key]] = flat_send[key]
    for key, col in st_col.items():
        vector[col] = flat_start[key]
    for key, col in u_col.items():
        vector[col] = 1.0 if used.get(key) else 0.0
    return vector
