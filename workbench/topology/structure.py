"""Boxes and rails: the two-level structure of a scale-up / scale-out fabric, read from its links.

Clusters are built as boxes (servers, or larger scale-up domains) whose GPUs share a fast fabric
(an NVSwitch, or all-to-all links), and a slower scale-out fabric in which GPU ``i`` of every box
sits on rail ``i`` (a rail's leaf switch, or direct links between neighbouring boxes). Above a
few hundred GPUs the boxes form leaf groups (a group's rails share leaf switches, and spines join
the groups). A topology written as a file records none of this; ``boxes_and_rails`` finds it:

1. **Boxes**: the fastest links leaving any NPU form the scale-up tier. Following only links at
   least that fast from each NPU (through switches) gives its box; every box must have the same
   number of NPUs ``G >= 2`` and there must be at least two boxes.
2. **Rails**: the remaining links, without the switches that have no NPU neighbour (spines) and
   without the boxes' own switches, split the NPUs into rail classes. A class may hold at most
   one NPU of a box, and every NPU must be in one.
3. **Leaf groups**: boxes touching the same rail classes. Within a group the classes are ordered
   by their smallest NPU id, and an NPU's *position* in its box is its class's index: NPUs at the
   same position of two boxes of a group share a rail.

The result gives mixed-radix dimensions (position fastest, then box) and the rank at each
position, so dimension-wise algorithms (hierarchical rings, per-dimension bounds) run on a file
exactly as on the builder's twin. A builder that recorded ``meta["dims"]`` of a box tier and a
rail tier (``rails:``) is taken at its word after the same checks. Nothing here claims symmetry:
the structure only says which NPUs belong together.

``candidate_groups`` asks less: partitions of the NPUs into groups, of any sizes, read from the
links alone. For each bandwidth present, the NPUs joined by links at least that fast (on a rail
fabric, the boxes); for each switch tier, the NPUs still joined once the switches at least that many
hops from every NPU are taken away (on a leaf-spine fabric, the leaf groups). The group gossip
bound (``workbench.bounds.group_gossip``) takes every one; a hierarchical schedule picks one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from workbench.topology.graph import Link, Topology
from workbench.util.graphs import bfs, hop_distances

__all__ = ["BoxesAndRails", "arrival_bandwidths", "boxes_and_rails", "candidate_groups", "link_components", "npu_neighbours",
           "recorded_dims", "switch_levels"]

_SAME = 1e-9  # relative tolerance: bandwidths of one tier


def recorded_dims(topology: Topology) -> list[tuple[str, int]] | None:
    """The mixed-radix layout a builder recorded (``meta["dims"]``, dimension 0 fastest) as
    (kind, size) pairs, or None where none is recorded or it cannot be read."""
    dims = topology.meta.get("dims") if isinstance(topology.meta, dict) else None
    if not dims or not isinstance(dims, list):
        return None
    try:
        return [(str(d["kind"]), int(d["size"])) for d in dims]
    except (KeyError, TypeError, ValueError):
        return None

@dataclass(frozen=True)
class BoxesAndRails:
    """``boxes[b][i]`` is the NPU at position ``i`` of box ``b``; ``groups`` lists the box indices
    of each leaf group (boxes whose rails share switches); ``source`` is ``"meta"`` or ``"links"``."""

    boxes: tuple[tuple[int, ...], ...]
    groups: tuple[tuple[int, ...], ...]
    source: str

    @property
    def per_box(self) -> int:
        """NPUs per box (every box has as many)."""
        return len(self.boxes[0])

    @property
    def num_boxes(self) -> int:
        """The number of boxes."""
        return len(self.boxes)

    def order(self) -> list[int]:
        """The NPU at each mixed-radix position ``b * per_box + i`` (position fastest)."""
        return [npu for box in self.boxes for npu in box]

    def dims(self) -> list[dict]:
        """``meta["dims"]``-style dimensions: the box tier, then the rail tier."""
        return [{"kind": "switch", "size": self.per_box}, {"kind": "rail", "size": self.num_boxes}]

    def members(self, group: int) -> list[int]:
        """The NPUs of leaf group ``group``."""
        return [npu for b in self.groups[group] for npu in self.boxes[b]]


def boxes_and_rails(topology: Topology) -> BoxesAndRails | None:
    """The boxes-by-rails structure of ``topology``, or None when it has none (one tier, boxes of
    unequal size, a rail with two NPUs of one box, an NPU on no rail)."""
    recorded = _recorded(topology)
    if recorded is not None:
        return recorded
    n = topology.num_npus
    if n < 4:
        return None
    npu_bw = [l.bandwidth for l in topology.links if l.src < n or l.dst < n]
    fastest = max(npu_bw, default=0.0)
    if fastest <= 0 or min(npu_bw) >= fastest * (1 - _SAME):
        return None  # one tier: no boxes to find
    box_of = link_components(topology, lambda l: l.bandwidth >= fastest * (1 - _SAME))
    boxes = _npu_groups(box_of, n)
    sizes = {len(members) for members in boxes}
    if len(boxes) < 2 or len(sizes) != 1 or sizes == {1}:
        return None
    box_index = {npu: b for b, members in enumerate(boxes) for npu in members}
    box_roots = {box_of[members[0]] for members in boxes}
    box_nodes = {node for node, root in box_of.items() if root in box_roots}
    has_npu = _switches_with_npus(topology, box_nodes)

    def rail_tier(link) -> bool:
        return (link.bandwidth < fastest * (1 - _SAME)
                and all(_keeps(node, n, box_nodes, has_npu) for node in (link.src, link.dst)))

    if len({l.src for l in topology.links if l.src < n and rail_tier(l)}) < n:
        return None  # an NPU on no rail
    rails = _npu_groups(link_components(topology, rail_tier), n)
    rail_index = {npu: r for r, members in enumerate(rails) for npu in members}
    if any(len({box_index[npu] for npu in members}) != len(members) for members in rails):
        return None  # two NPUs of one box on one rail
    touched: dict[tuple[int, ...], list[int]] = {}
    for b, members in enumerate(boxes):
        touched.setdefault(tuple(sorted(rail_index[npu] for npu in members)), []).append(b)
    # boxes group by group (a group's boxes by smallest NPU), each in its rails' order
    ordered_boxes: list[tuple[int, ...]] = []
    groups: list[tuple[int, ...]] = []
    for classes, group in sorted(touched.items(), key=lambda item: item[1][0]):
        position = {rail: i for i, rail in enumerate(sorted(classes, key=lambda r: rails[r][0]))}
        groups.append(tuple(range(len(ordered_boxes), len(ordered_boxes) + len(group))))
        for b in group:
            ordered_boxes.append(tuple(sorted(boxes[b], key=lambda npu: position[rail_index[npu]])))
    return BoxesAndRails(tuple(ordered_boxes), tuple(groups), "links")


def _recorded(topology: Topology) -> BoxesAndRails | None:
    """The structure a ``rails:`` builder recorded (GPU ``b * G + i`` is position ``i`` of box ``b``)."""
    cluster = topology.meta.get("cluster") if isinstance(topology.meta, dict) else None
    if not isinstance(cluster, dict) or cluster.get("family") != "rails":
        return None
    try:
        per_box, count, per_leaf = int(cluster["gpus_per_box"]), int(cluster["boxes"]), int(cluster["boxes_per_leaf"])
    except (KeyError, TypeError, ValueError):
        return None
    if per_box * count != topology.num_npus or per_leaf < 1 or count < 2:
        return None
    boxes = tuple(tuple(b * per_box + i for i in range(per_box)) for b in range(count))
    groups = tuple(tuple(range(start, min(start + per_leaf, count))) for start in range(0, count, per_leaf))
    return BoxesAndRails(boxes, groups, "meta")


def _keeps(node: int, num_npus: int, box_nodes: set[int], has_npu: set[int]) -> bool:
    """A node the rail tier is read through: an NPU, or a switch outside the boxes with an NPU neighbour."""
    return node < num_npus or (node not in box_nodes and node in has_npu)


def _switches_with_npus(topology: Topology, box_nodes: set[int]) -> set[int]:
    """Switches outside the boxes with an NPU neighbour, counting through a NIC modelled as its own
    switch (a switch whose only NPU neighbour is one NPU): the leaf beyond it then counts too, so a
    rail is still found where each GPU reaches its leaf through a NIC node."""
    n = topology.num_npus
    neighbours: dict[int, set[int]] = {}
    for link in topology.links:
        neighbours.setdefault(link.src, set()).add(link.dst)
        neighbours.setdefault(link.dst, set()).add(link.src)
    direct = {s for s in topology.switches if s not in box_nodes and any(v < n for v in neighbours.get(s, ()))}
    nics = {s for s in direct if len(neighbours[s]) == 2 and sum(v < n for v in neighbours[s]) == 1}
    beyond = {v for s in nics for v in neighbours[s] if v >= n and v not in box_nodes}
    return direct | beyond


def link_components(topology: Topology, keep) -> dict[int, int]:
    """Union-find over the kept links (either direction joins): node -> its component's root."""
    parent = list(range(topology.num_nodes))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for link in topology.links:
        if keep(link):
            a, b = root(link.src), root(link.dst)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return {node: root(node) for node in range(topology.num_nodes)}


def _npu_groups(component: dict[int, int], num_npus: int) -> list[list[int]]:
    """The NPUs of each component that holds any, each sorted, ordered by smallest NPU."""
    groups: dict[int, list[int]] = {}
    for npu in range(num_npus):
        groups.setdefault(component[npu], []).append(npu)
    return sorted(groups.values(), key=lambda members: members[0])


def npu_neighbours(topology: Topology) -> list[list[int]]:
    """For each NPU, the NPUs it reaches by a direct link or through switches only, sorted."""
    successors = [topology.out_neighbors(v) for v in range(topology.num_nodes)]
    result = []
    for u in topology.npus:
        reached = bfs(successors, (u,), expand=topology.is_switch).order[1:]  # on through switches only
        result.append(sorted(v for v in reached if not topology.is_switch(v)))
    return result


def candidate_groups(topology: Topology) -> Iterator[list[int]]:
    """Partitions of the NPUs, each a group label per NPU (module docstring), without repeats: by
    bandwidth threshold, fastest first, then by switch tier, the farthest switches removed first."""
    seen: set[tuple[int, ...]] = set()
    for bandwidth in sorted({l.bandwidth for l in topology.links}, reverse=True):
        labels = _group_labels(topology, lambda link, floor=bandwidth: link.bandwidth >= floor)
        if tuple(labels) not in seen:
            seen.add(tuple(labels))
            yield labels
    levels = switch_levels(topology)
    for level in sorted(set(levels.values()), reverse=True):
        removed = {s for s, lv in levels.items() if lv >= level}
        labels = _group_labels(topology, lambda link, gone=removed: link.src not in gone and link.dst not in gone)
        if tuple(labels) not in seen:
            seen.add(tuple(labels))
            yield labels


def _group_labels(topology: Topology, keep: Callable[[Link], bool]) -> list[int]:
    """A group label per NPU: NPUs joined by the kept links, either direction (``link_components``),
    labels numbered in order of each group's smallest NPU."""
    roots = link_components(topology, keep)
    labels: dict[int, int] = {}
    return [labels.setdefault(roots[v], len(labels)) for v in topology.npus]


def switch_levels(topology: Topology) -> dict[int, int]:
    """Each switch's hop distance from the nearest NPU (1: a switch an NPU links to)."""
    successors = [topology.out_neighbors(v) for v in range(topology.num_nodes)]
    hops = hop_distances(successors, topology.npus)
    return {s: hops[s] for s in topology.switches if hops[s] > 0}


def arrival_bandwidths(topology: Topology,
                       neighbours: list[list[int]]) -> tuple[list[list[int]], dict[tuple[int, int], float]]:
    """Each NPU's in-neighbours (of ``neighbours``, out-neighbour lists), and for each neighbour pair
    the bandwidth of the link its route ends on (on a rail fabric the rail, where a relay through the
    box is slower)."""
    incoming: list[list[int]] = [[] for _ in neighbours]
    arrival = {}
    for u, near in enumerate(neighbours):
        for v in near:
            incoming[v].append(u)
            route = topology.route(u, v)
            arrival[(u, v)] = topology.link(route[-2], v).bandwidth
    return incoming, arrival

