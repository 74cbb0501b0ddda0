"""Graph searches shared by the workbench and the formulations, in plain Python for the graphs this
project meets (importing scipy's csgraph costs about 0.4 s, more than most searches here), with
scipy beyond a size threshold where a search has a scipy twin.

Nodes are ``0..num_nodes-1``. Two ways to pass a graph:

* ``arcs``: ``(src, dst)`` or ``(src, dst, weight)`` tuples; an arc's index in the list is its id
  (``dijkstra`` reports the arc that reached each node by that id);
* ``successors``: ``successors[u]`` lists the heads of u's arcs in the order a search explores
  them (``successor_lists`` builds it from arcs, keeping arc order). Breadth-first searches take
  this form: callers such as ``Topology`` already hold it, and its order is the tie-breaking
  (which parent a node gets), so it is explicit.

The tests check every search against networkx or scipy on drawn graphs.
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple, Sequence

if TYPE_CHECKING:
    import numpy as np

__all__ = ["successor_lists", "Bfs", "bfs", "hop_distances", "all_pairs_hops", "dijkstra", "all_pairs_dijkstra",
           "all_pairs_shortest", "strong_components", "fastest_parent_tree", "PLAIN_WORK_LIMIT"]

# nodes x arcs up to which all_pairs_shortest stays in plain Python (a few ms to ~0.1 s of work)
PLAIN_WORK_LIMIT = 200_000


def successor_lists(num_nodes: int, arcs: Iterable[Sequence[Any]]) -> list[list[int]]:
    """``successors[u]``: the heads of u's arcs, in arc order."""
    successors: list[list[int]] = [[] for _ in range(num_nodes)]
    for arc in arcs:
        successors[arc[0]].append(arc[1])
    return successors


class Bfs(NamedTuple):
    """A breadth-first search: nodes in visit order (sources first), each node's parent and depth
    (-1 for both when unreached; a source is its own parent at depth 0)."""

    order: list[int]
    parent: list[int]
    depth: list[int]


def bfs(successors: Sequence[Sequence[int]], sources: Iterable[int], *,
        expand: Callable[[int], bool] | None = None,
        shuffle: Callable[[list[int]], None] | None = None) -> Bfs:
    """Breadth-first search from ``sources``; a node keeps the first parent that reaches it.

    ``expand(v)``: whether the search goes on from a reached node ``v`` (sources always do), e.g.
    through switches only. ``shuffle``: reorders a copy of each searched node's successors in place
    before they are explored (``random.Random(seed).shuffle``), called in visit order.
    """
    n = len(successors)
    parent = [-1] * n
    depth = [-1] * n
    order: list[int] = []
    for s in sources:
        if parent[s] < 0:
            parent[s] = s
            depth[s] = 0
            order.append(s)
    for u in order:  # the visit order doubles as the queue: appending while iterating is well defined
        if expand is not None and depth[u] > 0 and not expand(u):
            continue
        heads = successors[u]
        if shuffle is not None:
            heads = list(heads)
            shuffle(heads)
        d = depth[u] + 1
        for v in heads:
            if parent[v] < 0:
                parent[v] = u
                depth[v] = d
                order.append(v)
    return Bfs(order, parent, depth)


def hop_distances(successors: Sequence[Sequence[int]], sources: Iterable[int]) -> list[int]:
    """Fewest arcs from the nearest source to each node (-1 when unreachable)."""
    return bfs(successors, sources).depth


def fastest_parent_tree(incoming: Sequence[Sequence[int]], outgoing: Sequence[Sequence[int]],
                        arrival: dict[tuple[int, int], float], sources: Iterable[int],
                        tie: Callable[[int, int], tuple]) -> tuple[list[int], list[int]]:
    """A breadth-first tree from ``sources``: parent and depth per node (-1 unreached). A node's
    parent is, among its in-neighbours one level up, the one with the largest ``arrival[(u, v)]``
    (the bandwidth its route into the node ends on), then the largest ``tie(u, v)``."""
    depth = hop_distances(outgoing, sources)
    parent = [-1] * len(outgoing)
    for v, d in enumerate(depth):
        if d > 0:
            above = [u for u in incoming[v] if depth[u] == d - 1]
            parent[v] = max(above, key=lambda u, v=v: (arrival[(u, v)], *tie(u, v)))
    return parent, depth


def all_pairs_hops(successors: Sequence[Sequence[int]]) -> list[list[int]]:
    """``result[s][t]``: fewest arcs from s to t (-1 when unreachable)."""
    return [bfs(successors, (s,)).depth for s in range(len(successors))]


def dijkstra(num_nodes: int, arcs: Sequence[Sequence[Any]], sources: Iterable[int], *,
             arrive: Callable[[Any, int], Any] | None = None, start: Any = 0.0) -> tuple[dict[int, Any], dict[int, int]]:
    """Least costs from the nearest source, and the arc (its index) that last improved each node.

    The cost of reaching ``dst`` over arc ``i`` from a node reached at cost ``c`` is
    ``arrive(c, i)`` (default: ``c + arcs[i][2]``), so a search can carry its own arrival rule
    (TE-CCL's epochs, with link delays and switches) or a lexicographic cost such as a
    ``(hops, latency)`` tuple; ``arrive`` must never return less than ``c``. Sources start at
    ``start``. Ties: nodes leave the heap by (cost, node id), arcs are relaxed in list order and only
    a strictly lower cost replaces a node's arc. Unreached nodes are absent from both dicts; sources
    have no arc.
    """
    out: list[list[tuple[int, int]]] = [[] for _ in range(num_nodes)]
    for index, arc in enumerate(arcs):
        out[arc[0]].append((arc[1], index))
    if arrive is None:
        weights = [arc[2] for arc in arcs]

        def arrive(cost: Any, index: int) -> Any:
            return cost + weights[index]

    best: dict[int, Any] = {}
    heap = []
    for s in sorted(set(sources)):
        best[s] = start
        heap.append((start, s))  # sorted, so already a heap
    via: dict[int, int] = {}
    while heap:
        cost, u = heapq.heappop(heap)
        if best[u] < cost:
            continue  # a stale entry: u was reached more cheaply since
        for v, index in out[u]:
            candidate = arrive(cost, index)
            if v not in best or candidate < best[v]:
                best[v] = candidate
                via[v] = index
                heapq.heappush(heap, (candidate, v))
    return best, via


def all_pairs_dijkstra(num_nodes: int, arcs: Sequence[tuple[int, int, float]]) -> "np.ndarray":
    """Shortest-path weight sums between all nodes (inf when unreachable), Dijkstra from each node.

    Sums are formed along each path from its start, as scipy's Dijkstra forms them (the same
    floats); a Floyd-Warshall can differ in the last bit.
    """
    import numpy as np

    out: list[list[tuple[int, float]]] = [[] for _ in range(num_nodes)]
    for src, dst, weight in arcs:
        out[src].append((dst, weight))
    result = np.full((num_nodes, num_nodes), np.inf)
    for source in range(num_nodes):
        row = result[source]
        best = {source: 0.0}
        heap = [(0.0, source)]
        while heap:
            d, u = heapq.heappop(heap)
            if d > best.get(u, math.inf):
                continue
            row[u] = d
            for v, w in out[u]:
                nd = d + w
                if nd < best.get(v, math.inf):
                    best[v] = nd
                    heapq.heappush(heap, (nd, v))
    return result


def all_pairs_shortest(num_nodes: int, arcs: Sequence[tuple[int, int, float]], *,
                       engine: str = "auto") -> "np.ndarray":
    """Shortest-path weight sums between all nodes (inf when unreachable; weights >= 0).

    ``engine``: ``python`` (``all_pairs_dijkstra``), ``scipy`` (csgraph's Dijkstra: the same sums)
    or ``auto``: Python while nodes x arcs <= ``PLAIN_WORK_LIMIT``, scipy beyond. Parallel arcs
    count once, at their lowest weight (a sparse matrix would add them up).
    """
    if engine not in ("auto", "python", "scipy"):
        raise ValueError(f"engine: expected auto, python or scipy, got {engine!r}")
    if engine == "python" or (engine == "auto" and num_nodes * max(len(arcs), 1) <= PLAIN_WORK_LIMIT):
        return all_pairs_dijkstra(num_nodes, arcs)
    import numpy as np
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra as scipy_dijkstra

    lowest: dict[tuple[int, int], float] = {}
    for src, dst, weight in arcs:
        if src != dst and weight < lowest.get((src, dst), math.inf):
            lowest[(src, dst)] = weight
    pairs = list(lowest)
    # explicitly stored zeros are arcs to csgraph, so zero-weight arcs stay arcs
    graph = csr_matrix((np.array([lowest[p] for p in pairs], dtype=float),
                        ([p[0] for p in pairs], [p[1] for p in pairs])), shape=(num_nodes, num_nodes))
    return scipy_dijkstra(graph, directed=True)


def strong_components(num_nodes: int, arcs: Sequence[tuple[int, int]]) -> list[int]:
    """A label per node, equal exactly for nodes that reach each other (Kosaraju, iterative)."""
    successors: list[list[int]] = [[] for _ in range(num_nodes)]
    predecessors: list[list[int]] = [[] for _ in range(num_nodes)]
    for src, dst in arcs:
        successors[src].append(dst)
        predecessors[dst].append(src)
    order: list[int] = []  # nodes by finishing time of a depth-first search
    seen = [False] * num_nodes
    for start in range(num_nodes):
        if seen[start]:
            continue
        seen[start] = True
        stack = [(start, iter(successors[start]))]
        while stack:
            node, pending = stack[-1]
            for nxt in pending:
                if not seen[nxt]:
                    seen[nxt] = True
                    stack.append((nxt, iter(successors[nxt])))
                    break
            else:
                stack.pop()
                order.append(node)
    labels = [-1] * num_nodes
    component = 0
    for start in reversed(order):  # the reversed graph, latest finisher first: one component per sweep
        if labels[start] != -1:
            continue
        labels[start] = component
        stack = [start]
        while stack:
            node = stack.pop()
            for prev in predecessors[node]:
                if labels[prev] == -1:
                    labels[prev] = component
                    stack.append(prev)
        component += 1
    return labels
