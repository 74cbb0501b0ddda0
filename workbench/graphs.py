"""Plain-Python graph searches over arc lists, for graphs small enough that importing scipy's
csgraph (about 0.4 s) would cost more than the search itself.

Nodes are ``0..num_nodes-1``; arcs are ``(src, dst)`` or ``(src, dst, weight)`` tuples. Each
function has a scipy twin that ``workbench.topology`` uses beyond its size threshold, and the
tests check every one against that twin.
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import numpy as np

__all__ = ["strong_components", "all_pairs_dijkstra"]


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


def all_pairs_dijkstra(num_nodes: int, arcs: Sequence[tuple[int, int, float]]) -> "np.ndarray":
    """Shortest-path weight sums between all nodes (inf when unreachable), Dijkstra from each node."""
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
