"""Multi-tier switching as logical switches, so that switch-unwinding methods (TACOS) run on it.

TACOS (Won et al., MICRO 2024, section IV-G) replaces a switch by point-to-point links among the
NPUs on it. A leaf-spine or fat-tree fabric has no such switch: its switches connect to other
switches. ``unwind`` reads it as logical switches and unwinds those the paper's way:

* **Logical switches.** Switches joined by switch-to-switch links form one switch complex (a
  rail's leaves and the spines above them). Its NPUs are split by rail where the fabric has a
  boxes-by-rails structure (``workbench.topology.structure``): NPU ``i`` of every box is one
  logical switch, so each rail is unwound on its own, as a single-tier rail fabric would be.
  Without that structure the complex is one logical switch holding all its NPUs. A switch with no
  switch neighbour is unwound as ``Topology.unwind_switches`` does.
* **Logical links.** Position ``i`` among a logical switch's NPUs gets links to positions
  ``i+1 .. i+d`` (mod N), as for one switch, and each is routed on a shortest path through
  switches of the complex alone; among equal paths the least loaded so far is taken, so the
  routes spread over the spines. A single switch orders its NPUs by id, as the paper does. The
  rails of a complex are ordered our way (the paper has no multi-tier switch): each rail visits
  its NPUs leaf group by leaf group (so its ring crosses the spines once per group), within a
  group with the rail's own stride (1, -1, 3, -3, ...) from its own starting box. With every
  rail's ring in id order, a chunk of the first box would need N - 1 rail hops to reach the last,
  which at 64 boxes is longer than the whole collective should take.
* **Bandwidth.** A logical link gets the minimum, over the physical links ``e`` of its route, of
  ``bandwidth(e) / (number of logical links routed over e)``: an oversubscribed uplink shared by
  many logical links gives each its share. Alpha is the sum along the route, the overhead the
  largest on it (a message pays it once per segment).

The schedule found on this view is timed on the physical topology, whose routes the simulator
chooses (docs/cost-model.md, "The plan and the routes"): a claim is always the simulator's time, never the view's.
"""

from __future__ import annotations

import math
from collections import deque

from workbench.topology.graph import Link, Topology, TopologyError
from workbench.topology.structure import boxes_and_rails, link_components

__all__ = ["unwind", "switch_complexes"]

MAX_PATHS = 256  # equal shortest paths weighed per logical link


def unwind(topology: Topology, degree: int | None = None) -> Topology:
    """``topology`` with every switch replaced by point-to-point links (module docstring);
    ``degree=None`` means N - 1 per logical switch (fully connected)."""
    if topology.num_switches == 0:
        return topology
    complexes = switch_complexes(topology)
    if all(len(c) == 1 for c in complexes):
        return topology.unwind_switches(degree)
    links: dict[tuple[int, int], Link] = {}
    for link in topology.links:
        if not topology.is_switch(link.src) and not topology.is_switch(link.dst):
            links[(link.src, link.dst)] = link
    found = boxes_and_rails(topology)
    position = {npu: i for box in found.boxes for i, npu in enumerate(box)} if found else {}
    group_of = {npu: g for g, boxes in enumerate(found.groups) for b in boxes for npu in found.boxes[b]} if found else {}
    box_of = {npu: b for b, box in enumerate(found.boxes) for npu in box} if found else {}
    for switches in complexes:
        members = sorted({u for s in switches for u in topology.in_neighbors(s) if not topology.is_switch(u)})
        rails: dict[int, list[int]] = {}
        # one logical switch per rail where the complex joins boxes; one switch, or a complex inside
        # one box (scale-up chips joined by a trunk), is one logical switch
        per_rail = len(switches) > 1 and len({box_of.get(npu, -1) for npu in members}) > 1
        for npu in members:
            rails.setdefault(position.get(npu, 0) if per_rail else 0, []).append(npu)
        pairs = [pair for p, rail in sorted(rails.items())
                 for pair in _ring_pairs(_rail_order(rail, p, len(rails), group_of) if len(rails) > 1 else rail,
                                         degree)]
        for (u, v), candidate in _routed_links(topology, set(switches), pairs).items():
            existing = links.get((u, v))
            links[(u, v)] = candidate if existing is None else existing.bundled(candidate)
    meta = dict(topology.meta)
    meta["unwound_from"] = topology.name
    meta["unwind_degree"] = degree
    meta["logical_switches"] = "per rail" if found else "per switch complex"
    return Topology.create(topology.num_npus, links.values(), 0, f"{topology.name}@unwound(d={degree})", meta)


def switch_complexes(topology: Topology) -> list[list[int]]:
    """Switches joined by switch-to-switch links, each group sorted, ordered by smallest id."""
    root = link_components(topology, lambda l: topology.is_switch(l.src) and topology.is_switch(l.dst))
    groups: dict[int, list[int]] = {}
    for s in topology.switches:
        groups.setdefault(root[s], []).append(s)
    return sorted(groups.values(), key=lambda g: g[0])


def _rail_order(members: list[int], rail: int, rails: int, group_of: dict[int, int]) -> list[int]:
    """A rail's NPUs leaf group by group (so its ring crosses the spines once per group); within a
    group with the rail's stride, starting ``rail / rails`` of the way round, so that the rails
    enter a group at different boxes (all entering at its first box would feed that box only
    from the other group)."""
    groups: dict[int, list[int]] = {}
    for npu in members:
        groups.setdefault(group_of.get(npu, 0), []).append(npu)
    order: list[int] = []
    for g in sorted(groups):
        visited = _strided(groups[g], rail)
        start = (rail * len(visited)) // rails
        order += visited[start:] + visited[:start]
    return order


def _strided(members: list[int], rail: int) -> list[int]:
    """Rail ``rail``'s NPUs (by id) visited with its own stride: 1, -1, 3, -3, 5, ... (those coprime
    with the count), so that the rails' rings run different ways and their union has a short
    diameter (rings that all ran 0, 1, 2, ... would leave a chunk of box 0 N-1 hops from box N-1)."""
    size = len(members)
    strides = [sign * odd for odd in range(1, 2 * size + 1, 2) if math.gcd(odd, size) == 1 for sign in (1, -1)]
    stride = strides[rail % len(strides)] if size > 2 else 1
    return [members[(j * stride) % size] for j in range(size)]


def _ring_pairs(members: list[int], degree: int | None) -> list[tuple[int, int]]:
    size = len(members)
    d = size - 1 if degree is None else min(int(degree), size - 1)
    return [(u, members[(i + step) % size]) for i, u in enumerate(members) for step in range(1, d + 1)]


def _routed_links(topology: Topology, switches: set[int], pairs: list[tuple[int, int]]) -> dict[tuple[int, int], Link]:
    """Each pair routed through ``switches`` alone (least-loaded shortest path), then its
    bandwidth as its share of the most shared link on its route."""
    load: dict[tuple[int, int], int] = {}
    routes: dict[tuple[int, int], tuple[int, ...]] = {}
    for u, v in pairs:
        paths = _shortest_paths(topology, switches, u, v)
        if not paths:
            raise TopologyError(f"topology {topology.name!r}: NPUs {u} and {v} share switches but no route "
                                "through switches alone joins them; cannot unwind")
        route = min(paths, key=lambda p: (max(load.get(e, 0) for e in zip(p, p[1:])),
                                          sum(load.get(e, 0) for e in zip(p, p[1:]))))
        for e in zip(route, route[1:]):
            load[e] = load.get(e, 0) + 1
        routes[(u, v)] = route
    found: dict[tuple[int, int], Link] = {}
    for (u, v), route in routes.items():
        hops = [topology.link(a, b) for a, b in zip(route, route[1:])]
        found[(u, v)] = Link(u, v, sum(h.alpha for h in hops),
                             min(h.bandwidth / load[(h.src, h.dst)] for h in hops), max(h.overhead for h in hops))
    return found


def _shortest_paths(topology: Topology, switches: set[int], u: int, v: int) -> list[tuple[int, ...]]:
    """Up to ``MAX_PATHS`` shortest paths u -> ... -> v whose inner nodes are all in ``switches``."""
    depth = {u: 0}
    queue = deque([u])
    while queue:
        x = queue.popleft()
        if x == v:
            break
        for y in topology.out_neighbors(x):
            if y not in depth and (y in switches or y == v):
                depth[y] = depth[x] + 1
                queue.append(y)
    if v not in depth:
        return []
    on_path = {v}  # nodes on some shortest path to v, found backwards from v layer by layer
    frontier = [v]
    while frontier:
        frontier = [x for y in frontier for x in topology.in_neighbors(y)
                    if depth.get(x) == depth[y] - 1 and x not in on_path]
        on_path.update(frontier)
    paths: list[tuple[int, ...]] = []

    def extend(path: list[int]) -> None:  # forward along the BFS layers, only towards v
        if len(paths) >= MAX_PATHS:
            return
        x = path[-1]
        if x == v:
            paths.append(tuple(path))
            return
        for y in topology.out_neighbors(x):
            if y in on_path and depth[y] == depth[x] + 1:
                extend(path + [y])

    extend([u])
    return paths
