"""Spreading a schedule's transfers over a fabric's equally short routes (``Transfer.via``).

The topology's own route for a pair of NPUs joined through switches is the breadth-first one with
ties to low ids (docs/cost-model.md, "Routes"): on a leaf-spine fabric every leaf's traffic to
other leaves climbs to the lowest-numbered spine, and the others carry nothing. Real fabrics hash
flows over all equal-cost paths (ECMP); a schedule that spreads its own traffic does better still,
since it knows every message. ``spread_routes`` walks the transfers in file order and names, for
each one with a choice, the route whose busiest link would be least busy once it is added: the
same rule a greedy list scheduler uses for machines (Graham, 1966), on the links' bytes over their
bandwidth. Routes are the shortest in hops through switches only, and among those the smallest in
alpha, so a named route is never slower alone than the default one.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

from workbench.model.transfer import Transfer
from workbench.topology import Topology

__all__ = ["spread_routes", "equal_routes", "MAX_ROUTES"]

MAX_ROUTES = 64  # routes considered per pair of endpoints (a three-tier fabric has spines x cores)


def equal_routes(topology: Topology, src: int, dst: int) -> list[tuple[int, ...]]:
    """The switches crossed by each shortest route ``src -> dst`` through switches only (fewest
    hops, then least alpha), up to ``MAX_ROUTES``, the default route's first when it is one of them;
    empty when the two are joined by a link or by no such route."""
    if topology.has_link(src, dst):
        return []
    hops = _hops_to(topology, dst)
    if src not in hops:
        return []
    routes: list[tuple[int, ...]] = []
    stack = [(src, ())]
    while stack and len(routes) < MAX_ROUTES:
        node, crossed = stack.pop()
        for link in topology.out_links(node):
            nxt = link.dst
            if nxt == dst and hops[node] == 1:
                routes.append(crossed)
            elif topology.is_switch(nxt) and hops.get(nxt) == hops[node] - 1:
                stack.append((nxt, crossed + (nxt,)))
    alpha = {r: _alpha(topology, (src, *r, dst)) for r in routes}
    fastest = min(alpha.values(), default=0.0)
    routes = [r for r in routes if alpha[r] <= fastest * (1 + 1e-9)]
    default = tuple(topology.route(src, dst)[1:-1])
    return sorted(routes, key=lambda r: r != default)


def spread_routes(topology: Topology, transfers: Sequence[Transfer], chunk_bytes: float) -> int:
    """Name a route (``via``) for every transfer that has a choice of equally short ones, in file
    order, the one whose busiest link is least loaded once the transfer is added (ties: the default
    route, which is then left unnamed). Returns how many transfers were given a route."""
    load: dict[tuple[int, int], float] = {}
    choices: dict[tuple[int, int], list[tuple[int, ...]]] = {}
    named = 0
    for t in transfers:
        key = (t.src, t.dst)
        if key not in choices:
            choices[key] = equal_routes(topology, t.src, t.dst)
        routes = choices[key]
        if len(routes) < 2:
            continue
        size = len(t.chunks) * chunk_bytes
        best = min(routes, key=lambda r: _busiest_after(topology, load, (t.src, *r, t.dst), size))
        for u, v in zip((t.src, *best), (*best, t.dst)):
            load[(u, v)] = load.get((u, v), 0.0) + size / topology.link(u, v).bandwidth
        if best != routes[0]:
            t.via = best
            named += 1
    return named


def _hops_to(topology: Topology, dst: int) -> dict[int, int]:
    """Hops from each node to ``dst`` over paths whose inner nodes are switches."""
    hops = {dst: 0}
    queue = deque([dst])
    while queue:
        node = queue.popleft()
        for link in topology.in_links(node):
            prev = link.src
            if prev not in hops:
                hops[prev] = hops[node] + 1
                if topology.is_switch(prev):  # only switches relay within one transfer
                    queue.append(prev)
    return hops


def _alpha(topology: Topology, path: tuple[int, ...]) -> float:
    return sum(topology.link(u, v).alpha for u, v in zip(path, path[1:]))


def _busiest_after(topology: Topology, load: dict, path: tuple[int, ...], size: float) -> float:
    return max(load.get((u, v), 0.0) + size / topology.link(u, v).bandwidth for u, v in zip(path, path[1:]))
