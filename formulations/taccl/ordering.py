"""Stage 2: heuristic ordering (note 3.2), greedy list scheduling over the routing trees.

Each chunk's routing is a tree; a tree edge ``(c, l)`` becomes a candidate once the chunk has
arrived at the edge's source (paths that share a prefix advance together, note A7 per branch).
A candidate's time is ``max(chunk arrival, every physical link of l free)``; the chosen one
occupies all its physical links (port serialisation of switch hyperedges and shared NICs) for its
cost. Candidates are picked by the heuristic's key (note 3.2, "Code (exact)"):

* ``h10`` (any switch): (-to_travel, cand_time, (s-d) mod R, d mod G, s mod G, d // G, c)
* ``h14`` (multi-node NVLink): (cand_time, own, -to_travel, (s-d) mod R, d mod G, s mod G, d // G, c)
* ``h15``: (cand_time, -to_travel, ...)
* ``paper``: the paper's two-level priority: longest path still to travel, then shortest path
  travelled so far (-to_travel, has_travelled, cand_time, c)

Orders per physical link: h10 and paper sort primarily by the routing MILP's send time (the
code's behaviour, note A6), the others by the list schedule's time. Every order is a restriction
of one global key that increases along each chunk's path, so stage 3 is always feasible.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Callable

from formulations.taccl import HEURISTICS  # declared with the parameters, in the package
from formulations.taccl.logical import LogicalTopology

__all__ = ["HEURISTICS", "Orders", "order_edges", "pick_heuristic"]


Edge = tuple[int, int]  # (chunk, logical link)


@dataclass
class Orders:
    per_physical: dict[int, list[Edge]]  # physical link -> edges crossing it, in order
    rank: dict[Edge, tuple]  # the global key every order follows
    list_time: dict[Edge, float]  # start time in the list schedule (seconds)
    heuristic: str


def pick_heuristic(name: str, logical: LogicalTopology) -> str:
    """The heuristic to run: ``name``, or for "auto" h10 where a logical link crosses a switch
    inside a node, h14 otherwise; ValueError for an unknown name."""
    if name not in HEURISTICS:
        raise ValueError(f"unknown ordering heuristic {name!r} (choose from {', '.join(HEURISTICS)})")
    if name != "auto":
        return name
    return "h10" if any(l.via_switch and not l.internode for l in logical.links) else "h14"


def order_edges(logical: LogicalTopology, trees: list[dict[int, int]], pre, lat: list[float],
                heuristic: str, routing_send: dict[Edge, float] | None = None) -> Orders:
    """List-schedule every tree edge by ``heuristic``; ``lat[l]`` is link l's per-chunk cost (s)."""
    links = logical.links
    R, G = logical.num_ranks, logical.gpus_per_node
    children = _children(links, trees)
    to_travel = _to_travel(links, trees, children, lat)
    key_of = _key_function(heuristic, logical, pre, to_travel, R, G)
    list_time = _list_schedule(links, trees, children, pre, lat, key_of)
    rank = _edge_ranks(links, list_time, heuristic, routing_send, R)
    per_physical: dict[int, list[Edge]] = {}
    for edge in sorted(rank, key=rank.__getitem__):
        for p in links[edge[1]].physical:
            per_physical.setdefault(p, []).append(edge)
    return Orders(per_physical, rank, list_time, heuristic)


def _children(links, trees: list[dict[int, int]]) -> list[dict[int, list[int]]]:
    """Per chunk: rank -> the tree links leaving it."""
    children: list[dict[int, list[int]]] = []
    for tree in trees:
        kids: dict[int, list[int]] = {}
        for d, l in tree.items():
            kids.setdefault(links[l].src, []).append(l)
        children.append(kids)
    return children


def _to_travel(links, trees: list[dict[int, int]], children: list[dict[int, list[int]]],
               lat: list[float]) -> dict[Edge, float]:
    """(chunk, link) -> the longest path of link costs from that edge down its chunk's tree."""
    to_travel: dict[Edge, float] = {}
    for c, tree in enumerate(trees):
        memo: dict[int, float] = {}

        def height(l: int) -> float:
            if l not in memo:
                below = [height(k) for k in children[c].get(links[l].dst, [])]
                memo[l] = lat[l] + (max(below) if below else 0.0)
            return memo[l]

        for l in tree.values():
            to_travel[(c, l)] = height(l)
    return to_travel


def _list_schedule(links, trees: list[dict[int, int]], children: list[dict[int, list[int]]], pre,
                   lat: list[float], key_of: Callable) -> dict[Edge, float]:
    """(chunk, link) -> its start in the list schedule: the best-keyed ready edge takes its ports next."""
    free: dict[int, float] = {}
    heap: list = []
    travelled: dict[Edge, float] = {}

    def push(c: int, l: int, ready: float, done: float) -> None:
        travelled[(c, l)] = done
        cand = max([ready] + [free.get(p, 0.0) for p in links[l].physical])
        heapq.heappush(heap, (key_of(c, l, cand, done), cand, ready, c, l))

    for c, tree in enumerate(trees):
        for r in sorted(pre[c]):
            for l in sorted(children[c].get(r, [])):
                push(c, l, 0.0, 0.0)
    list_time: dict[Edge, float] = {}
    while heap:
        key, cand, ready, c, l = heapq.heappop(heap)
        current = max([ready] + [free.get(p, 0.0) for p in links[l].physical])
        if current > cand + 1e-15:  # a port got busier since this entry was keyed: re-key lazily
            heapq.heappush(heap, (key_of(c, l, current, travelled[(c, l)]), current, ready, c, l))
            continue
        end = current + lat[l]
        list_time[(c, l)] = current
        for p in links[l].physical:
            free[p] = end
        for k in sorted(children[c].get(links[l].dst, [])):
            push(c, k, end, travelled[(c, l)] + lat[l])
    return list_time


def _edge_ranks(links, list_time: dict[Edge, float], heuristic: str, routing_send: dict[Edge, float] | None,
                R: int) -> dict[Edge, tuple]:
    """(chunk, link) -> its sort key: the list time (after the routing's send time under h10/paper)."""
    rank: dict[Edge, tuple] = {}
    for (c, l), t in list_time.items():
        s, d = links[l].src, links[l].dst
        tail = ((s - d) % R, c, l)
        if heuristic in ("h10", "paper") and routing_send is not None:
            rank[(c, l)] = (round(routing_send.get((c, l), t), 12), t) + tail
        else:
            rank[(c, l)] = (t,) + tail
    return rank


def _key_function(heuristic: str, logical: LogicalTopology, pre, to_travel: dict[Edge, float],
                  R: int, G: int) -> Callable:
    links = logical.links

    def tie(c: int, l: int) -> tuple:
        s, d = links[l].src, links[l].dst
        return ((s - d) % R, d % G, s % G, d // G, c, l)

    def own(c: int, l: int) -> int:
        s, d = links[l].src, links[l].dst
        same = s // G == d // G and any(r // G == s // G for r in pre[c])
        return 0 if same else 1

    if heuristic == "h10":
        return lambda c, l, t, done: (-to_travel[(c, l)], t) + tie(c, l)
    if heuristic == "h14":
        return lambda c, l, t, done: (t, own(c, l), -to_travel[(c, l)]) + tie(c, l)
    if heuristic == "h15":
        return lambda c, l, t, done: (t, -to_travel[(c, l)]) + tie(c, l)
    if heuristic == "paper":
        return lambda c, l, t, done: (-to_travel[(c, l)], done, t) + tie(c, l)
    raise ValueError(f"unknown ordering heuristic {heuristic!r}")
