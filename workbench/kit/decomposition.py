"""A cluster cut into dimensions of isomorphic groups, and sub-schedules stitched back into one.

Regular clusters repeat themselves: every box of a rail-optimized fabric is the same NVSwitch
island, every rail the same leaf (or the same leaves under the same spines). A collective on such
a fabric decomposes into sub-demands inside those groups (a rail's GPUs exchange what they hold,
then each box spreads what arrived), and a sub-schedule found for one group serves every group
that is its image under a symmetry of the fabric. This module is the shared part of that idea
(SyCCL's decomposition: J. Cao et al., "SyCCL: Exploiting Symmetry for Efficient Collective
Communication Scheduling", SIGCOMM 2025; method note ``docs/methods/syccl.md``):

* **Dimensions** come from the boxes-by-rails structure (``workbench.topology.structure``: a
  ``rails:`` builder's recorded dimensions, or the structure read from the links), or from a
  builder's mixed-radix grid whose last dimension is switched (``rfs:``, ``md:``: a box is the
  NPUs that share every coordinate but the last): the ``box`` dimension's groups are the boxes
  (GPUs by position), the ``rail`` dimension's the rails (GPU ``i`` of every box, by box). Each
  dimension owns one tier of links: the box tier is every link inside a box (between its NPUs,
  or to and from a switch whose NPU neighbours are all in it), the rail tier everything else
  (NICs, leaves, spines).
* **Isomorphic groups** come from the fabric's verified translations
  (``workbench.kit.cluster_translations``, ``grid_translations`` for grids): groups ``X`` and ``Y`` are one class when a
  translation takes ``X[a]`` to ``Y[a]`` for every local index ``a`` (it then maps ``X``'s
  sub-fabric onto ``Y``'s, links, bandwidths and alphas included). The translations that map a
  group onto itself, restricted to it, act on its nodes freely and transitively on its GPUs:
  ``GroupFabric.translations``, with which a sub-model written for local GPU 0 serves every
  local GPU (collective symmetry). Nothing is assumed: a fabric whose translations do not verify
  has no decomposition (``decompose`` returns None).
* **Stitching** (``stitch``): sends of every sub-schedule, each with its planned start, become one
  ``workbench.algorithm/1`` listing in planned order, each send waiting for the delivery of its
  chunks to its sender (``workbench.kit.schedule.DeliveryChain``), so stages overlap wherever data
  has arrived, as the simulator then times.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from workbench.kit.cluster_translations import NodeTranslations, cluster_translations, grid_translations
from workbench.kit.schedule import DeliveryChain
from workbench.model.algorithm import Algorithm
from workbench.model.collective import Collective
from workbench.topology import Topology
from workbench.topology.graph import Link
from workbench.topology.structure import boxes_and_rails, recorded_dims
from workbench.util.lazy import lazy_module

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["Decomposition", "Dimension", "GroupFabric", "Send", "decompose", "stitch"]



@dataclass(frozen=True)
class GroupFabric:
    """One group's sub-fabric in local ids (its GPUs ``0..g-1`` in the group's order, then its
    switches by global id): ``topology`` holds only the dimension's tier; ``translations[t, x]`` is
    the image of local node ``x`` under the group's translation taking local GPU 0 to ``t``;
    ``nodes[x]`` is local node ``x``'s global id."""

    topology: Topology
    translations: Any  # np.ndarray, g x local nodes
    nodes: tuple[int, ...]

    @property
    def size(self) -> int:
        """g: the group's GPUs."""
        return self.topology.num_npus


@dataclass(frozen=True)
class Dimension:
    """``groups[i][a]``: the global NPU at local index ``a`` of group ``i``; ``classes``: the
    isomorphism classes (group indices; the first of each is its representative, whose sub-fabric
    is ``fabrics[class]``)."""

    name: str
    groups: tuple[tuple[int, ...], ...]
    classes: tuple[tuple[int, ...], ...]
    fabrics: tuple[GroupFabric, ...]
    carriers: tuple[int, ...] = ()  # per group, the translation taking its class representative onto it
    _where: dict[int, tuple[int, int]] = field(default_factory=dict, repr=False, compare=False)

    def locate(self, npu: int) -> tuple[int, int]:
        """(group index, local index) of ``npu`` in this dimension."""
        if not self._where:
            self._where.update({v: (i, a) for i, group in enumerate(self.groups) for a, v in enumerate(group)})
        return self._where[npu]

    def class_of(self, group: int) -> int:
        """The isomorphism class of group ``group``."""
        return next(c for c, members in enumerate(self.classes) if group in members)

    def node_map(self, group: int, table) -> list[int]:
        """The global id of every local node of ``group``'s fabric (its class representative's
        local nodes carried by the group's translation; ``table``: ``Decomposition.translations.nodes``)."""
        fabric = self.fabrics[self.class_of(group)]
        return [int(v) for v in table[self.carriers[group], list(fabric.nodes)]]

    @property
    def group_size(self) -> int:
        """GPUs per group (every group of a dimension has as many)."""
        return len(self.groups[0])


@dataclass(frozen=True)
class Decomposition:
    """The dimensions of a symmetric boxes-by-rails cluster (module docstring); ``source`` says
    where the structure came from (``meta``: the builder's record, ``links``: read from the links)."""

    dimensions: tuple[Dimension, ...]
    source: str
    translations: NodeTranslations

    def dimension(self, name: str) -> Dimension:
        """The dimension called ``name`` (``box`` or ``rail``)."""
        return next(d for d in self.dimensions if d.name == name)

    def summary(self) -> dict[str, Any]:
        """What was found, for a schedule's ``meta``: per dimension its groups, group size and classes."""
        return {"source": self.source, "symmetry": "translations",
                "dimensions": [{"name": d.name, "groups": len(d.groups), "group_size": d.group_size,
                                "classes": len(d.classes)} for d in self.dimensions]}


def decompose(topology: Topology) -> Decomposition | None:
    """The box and rail dimensions of ``topology`` with their isomorphism classes, or None where
    the fabric has no boxes-by-rails structure or its translations do not verify."""
    structure = boxes_and_rails(topology)
    translations = cluster_translations(topology) if structure is not None else None
    if translations is not None:
        boxes, source = tuple(tuple(box) for box in structure.boxes), structure.source
    else:  # a grid whose last dimension is switched: the boxes are the earlier dimensions
        boxes, source = _grid_boxes(topology), "dims"
        translations = grid_translations(topology) if boxes is not None else None
    if translations is None or boxes is None:
        return None
    box_tier = _box_tier(topology, boxes)
    rails = tuple(tuple(box[i] for box in boxes) for i in range(len(boxes[0])))
    dimensions = []
    for name, groups, box_side in (("box", boxes, True), ("rail", rails, False)):
        if len(groups[0]) < 2:
            continue
        dimension = _dimension(topology, translations, name, groups, box_tier, box_side)
        if dimension is None:
            return None
        dimensions.append(dimension)
    if not dimensions:
        return None
    return Decomposition(tuple(dimensions), source, translations)


def _grid_boxes(topology: Topology) -> tuple[tuple[int, ...], ...] | None:
    """Boxes of a builder's mixed-radix grid (``meta["dims"]``, dimension 0 fastest) whose last
    dimension is a switch tier: the NPUs that share every coordinate but the last."""
    dims = recorded_dims(topology)
    if dims is None:
        return None
    last, boxes = dims[-1]
    per_box = topology.num_npus // boxes if boxes else 0
    if len(dims) < 2 or last not in ("switch", "rail") or per_box < 2 or per_box * boxes != topology.num_npus:
        return None
    return tuple(tuple(range(b * per_box, (b + 1) * per_box)) for b in range(boxes))


def _box_tier(topology: Topology, boxes: Sequence[Sequence[int]]) -> set[tuple[int, int]]:
    """The links inside a box: between two NPUs of one box, or to or from a switch whose NPU
    neighbours all lie in one box (its scale-up switch). Everything else (NICs, leaves, spines)
    is the rail tier."""
    box_of = {v: b for b, box in enumerate(boxes) for v in box}
    reach: dict[int, set[int]] = {}
    for l in topology.links:
        for a, b in ((l.src, l.dst), (l.dst, l.src)):
            if topology.is_switch(a) and b in box_of:
                reach.setdefault(a, set()).add(box_of[b])
    home = {w: next(iter(bs)) for w, bs in reach.items() if len(bs) == 1}
    home.update(box_of)
    return {(l.src, l.dst) for l in topology.links
            if l.src in home and l.dst in home and home[l.src] == home[l.dst]}


def _dimension(topology: Topology, translations: NodeTranslations, name: str,
               groups: tuple[tuple[int, ...], ...], box_tier: set, box_side: bool) -> Dimension | None:
    """A dimension's classes and its representatives' fabrics (on ``box_tier``'s links, or with
    ``box_side`` false on every other link)."""
    table = translations.nodes
    classes: list[list[int]] = []
    fabrics: list[GroupFabric] = []
    carriers: list[int] = []
    for i, group in enumerate(groups):
        for members in classes:
            carrier = _maps(table, groups[members[0]], group)
            if carrier is not None:
                members.append(i)
                carriers.append(carrier)
                break
        else:
            fabric = _group_fabric(topology, table, group,
                                   (lambda l: (l.src, l.dst) in box_tier) if box_side
                                   else (lambda l: (l.src, l.dst) not in box_tier))
            if fabric is None:
                return None
            classes.append([i])
            fabrics.append(fabric)
            carriers.append(0)  # the identity (translation 0) carries a representative onto itself
    return Dimension(name, groups, tuple(tuple(c) for c in classes), tuple(fabrics), tuple(carriers))


def _maps(table, source: Sequence[int], target: Sequence[int]) -> int | None:
    """The translation taking ``source[a]`` to ``target[a]`` for every ``a``, or None."""
    candidates = np.flatnonzero(table[:, source[0]] == target[0])
    for t in candidates:
        if np.array_equal(table[t, list(source)], np.asarray(target)):
            return int(t)
    return None


def _group_fabric(topology: Topology, table, group: Sequence[int], in_tier) -> GroupFabric | None:
    """The group's sub-fabric: its GPUs and the switches its tier reaches without passing another
    GPU, dead-end switches pruned; with the group's own translations (None if they do not close)."""
    members = set(group)
    n = topology.num_npus
    tier = [l for l in topology.links if in_tier(l)]
    adjacent: dict[int, set[int]] = {}
    for l in tier:
        adjacent.setdefault(l.src, set()).add(l.dst)
        adjacent.setdefault(l.dst, set()).add(l.src)
    reached = _on_shortest_paths(group, adjacent, n)
    switches = sorted(reached - members)
    nodes = tuple(group) + tuple(switches)
    local = {v: x for x, v in enumerate(nodes)}
    links = [Link(local[l.src], local[l.dst], l.alpha, l.bandwidth, l.overhead)
             for l in tier if l.src in local and l.dst in local]
    g = len(group)
    own = np.empty((g, len(nodes)), dtype=np.int64)
    for a in range(g):
        t = _maps_one(table, group[0], group[a])
        image = table[t, list(nodes)]
        if any(int(v) not in local for v in image):
            return None  # the translation leaves the group's fabric: not a symmetric group
        own[a] = [local[int(v)] for v in image]
        if sorted(own[a, :g]) != list(range(g)):
            return None
    sub = Topology.create(g, links, len(switches), f"group of {g}", {})
    return GroupFabric(sub, own, nodes)


def _on_shortest_paths(group: Sequence[int], adjacent: dict[int, set[int]], num_npus: int) -> set[int]:
    """The group's GPUs and the switches on a shortest tier path between two of them (paths do
    not pass through GPUs; a switch that only leads elsewhere, such as another rail's leaf under a
    shared spine, is left out)."""
    distance: list[dict[int, int]] = []
    for source in group:
        seen, frontier = {source: 0}, [source]
        while frontier:
            following = []
            for node in frontier:
                for other in adjacent.get(node, ()):
                    if other not in seen and other >= num_npus:
                        seen[other] = seen[node] + 1
                        following.append(other)
                    elif other not in seen and other in group:
                        seen[other] = seen[node] + 1
            frontier = following
        distance.append(seen)
    kept = set(group)
    switches = {w for seen in distance for w in seen if w >= num_npus}
    for w in switches:
        for i, u in enumerate(group):
            du = distance[i].get(w)
            if du is None:
                continue
            if any(distance[j].get(w) is not None and v in distance[i] and du + distance[j][w] == distance[i][v]
                   for j, v in enumerate(group) if j != i):
                kept.add(w)
                break
    return kept


def _maps_one(table, u: int, v: int) -> int:
    """The translation taking NPU ``u`` to NPU ``v`` (the group acts freely and transitively)."""
    return int(np.flatnonzero(table[:, u] == v)[0])


@dataclass(frozen=True, order=True)
class Send:
    """One send of a stitched schedule: planned ``start`` (seconds; the listing order), ``stage``
    (breaks ties: a delivery's stage comes before the sends it feeds), and what goes where."""

    start: float
    stage: int
    src: int
    dst: int
    chunks: tuple[int, ...]
    op: str = "copy"


def stitch(topology: Topology, collective: Collective, chunk_bytes: float, sends: Iterable[Send],
           meta: dict[str, Any] | None = None, every: bool = False, spread: bool = False) -> Algorithm:
    """One algorithm from the sub-schedules' ``sends``: listed by planned start (then stage), each
    waiting for the delivery of its chunks to its sender (``every``: for every delivery there, as
    partial sums arriving from several senders need).

    With ``spread``, a copy whose route climbs to a spine tier (two or more switches between its
    GPUs) is sent hop by hop, GPU to leaf, leaf to a spine, spine to the far leaf, leaf to GPU, each
    hop once per chunks (switches copy what they hold onward): a cut-through message holds every
    link of its path at its slowest link's rate, so leaf-spine links would serve one NIC's rate at
    a time, and the simulator's fixed route would take one spine. The spine is taken in turn per
    pair of leaves (round robin over the messages crossing it)."""
    chain = DeliveryChain(every=every)
    sent: set[tuple[int, int, tuple[int, ...]]] = set()
    spines: dict[tuple[int, int], list[int]] = {}
    turns: dict[tuple[int, int], dict[tuple[int, ...], int]] = {}
    for send in sorted(sends, key=lambda s: (s.start, s.stage, s.src, s.dst)):
        path = topology.route(send.src, send.dst) if spread and send.op == "copy" else None
        if path is None or len(path) != 5 or not all(topology.is_switch(x) for x in path[1:4]):
            chain.send(send.chunks, send.src, send.dst, send.op)
            continue
        key = (path[1], path[-2])
        if key not in spines:
            spines[key] = _shared_spines(topology, *key)
        choices = spines[key] or [path[2]]
        turn = turns.setdefault(key, {})
        spine = choices[turn.setdefault(send.chunks, len(turn)) % len(choices)]
        hops = [send.src, path[1], spine, path[-2], send.dst]
        for u, v in zip(hops, hops[1:]):
            if (u, v, send.chunks) not in sent:
                sent.add((u, v, send.chunks))
                chain.send(send.chunks, u, v, send.op)
    return chain.build(topology, collective, chunk_bytes, meta)


def _shared_spines(topology: Topology, leaf: int, other: int) -> list[int]:
    """The switches linked from ``leaf`` and to ``other`` (the spines a path between them may take)."""
    up = {l.dst for l in topology.links if l.src == leaf and topology.is_switch(l.dst)}
    return sorted(v for v in up if topology.has_link(v, other))
