"""Where the two levels are: boxes, each NPU's position in its box, the leaf groups of boxes, and
the way a rail message takes through a spine.

Boxes come from what the topology recorded when it has it (a ``rails:`` build's cluster, or
``meta["dims"]`` whose first dimension is a switch or fully connected box), otherwise from its links
(``workbench.topology.structure``: boxes by the fastest tier and rails by the slower one, else the
leaf groups left when the top switch tier is taken away). The same fabric with or without its
recorded dimensions gives the same layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from workbench.topology import Topology
from workbench.topology.structure import BoxesAndRails, boxes_and_rails, candidate_groups, recorded_dims

__all__ = ["Layout", "find_layout", "rail_path"]

# recorded first dimensions that make a box: every pair one hop apart (through a switch, or a link)
BOX_KINDS = ("switch", "fc")


@dataclass(frozen=True)
class Layout(BoxesAndRails):
    """``boxes[b][i]``: the NPU at position ``i`` of box ``b`` (G = ``per_box`` positions, B =
    ``num_boxes`` boxes); ``groups``: the box indices of each leaf group, all of one size Q (a fabric
    whose groups differ is one group); ``source``: where the boxes came from."""

    @property
    def per_group(self) -> int:
        """Q: boxes per leaf group."""
        return len(self.groups[0])

    @property
    def num_groups(self) -> int:
        """g: leaf groups."""
        return len(self.groups)

    def describe(self) -> dict:
        """The layout for ``meta``: B, G, g, Q and the source."""
        return {"boxes": self.num_boxes, "per_box": self.per_box, "groups": self.num_groups,
                "per_group": self.per_group, "source": self.source}


def find_layout(topology: Topology, num_ranks: int) -> Layout | None:
    """The two-level layout of ``topology`` (module docstring), or None where it has no boxes."""
    if num_ranks != topology.num_npus or num_ranks < 4:
        return None
    found = boxes_and_rails(topology)
    if found is not None and found.source == "meta":
        return _with_groups(found.boxes, found.groups, "recorded")
    from_dims = _from_dims(topology, num_ranks)
    if from_dims is not None:
        return from_dims
    if found is not None:
        return _with_groups(found.boxes, found.groups, "links")
    return _from_leaf_groups(topology)


def _with_groups(boxes: tuple[tuple[int, ...], ...], groups: tuple[tuple[int, ...], ...], source: str) -> Layout:
    """A layout whose leaf groups are kept only where they all have one size (else one group)."""
    if len({len(g) for g in groups}) != 1:
        groups = (tuple(range(len(boxes))),)
    return Layout(tuple(boxes), tuple(groups), source)


def _from_dims(topology: Topology, n: int) -> Layout | None:
    """Boxes from recorded dimensions: the first (a switch or fully connected box) is the box, the
    others together the rail; consecutive ranks share a box."""
    dims = recorded_dims(topology)
    if not dims or len(dims) < 2 or dims[0][0] not in BOX_KINDS or math.prod(s for _, s in dims) != n:
        return None
    per_box = dims[0][1]
    if per_box < 2 or n // per_box < 2:
        return None
    boxes = tuple(tuple(range(b * per_box, (b + 1) * per_box)) for b in range(n // per_box))
    return Layout(boxes, (tuple(range(len(boxes))),), "recorded")


def _from_leaf_groups(topology: Topology) -> Layout | None:
    """Boxes as the finest partition the links give (``candidate_groups``) into at least two groups
    of one size of at least two NPUs; positions by NPU id."""
    best: list[int] | None = None
    for labels in candidate_groups(topology):
        count = max(labels) + 1
        sizes = {labels.count(g) for g in range(count)}
        if count >= 2 and len(sizes) == 1 and min(sizes) >= 2 and (best is None or count > max(best) + 1):
            best = labels
    if best is None:
        return None
    members: dict[int, list[int]] = {}
    for npu, label in enumerate(best):
        members.setdefault(label, []).append(npu)
    boxes = tuple(tuple(m) for m in sorted(members.values()))
    return Layout(boxes, (tuple(range(len(boxes))),), "links")


def rail_path(topology: Topology, src: int, dst: int, salt: int) -> list[int]:
    """The nodes a rail message is stored at on its way: ``[src, dst]`` (the simulator's route, cut
    through any switches), or, where that route climbs to a spine (``src -> leaf -> spine -> leaf ->
    dst``), every node of it with the spine ``salt`` picks among those joining the two leaves. The
    breadth-first route takes the lowest-id spine for every pair, which would pile a whole group's
    traffic onto one up-link; naming the spine spreads it."""
    route = topology.route(src, dst)
    if route is None or len(route) != 5 or not all(topology.is_switch(v) for v in route[1:4]):
        return [src, dst]
    up, down = route[1], route[3]
    spines = sorted(w for w in topology.out_neighbors(up) if topology.is_switch(w) and topology.has_link(w, down))
    return [src, up, spines[salt % len(spines)], down, dst]
