"""Translations of a boxes-by-rails cluster, switches included.

A rail-optimized cluster (``workbench.topology.structure``) has L leaf groups of B boxes of G GPUs.
Give GPU ``(group, box in group, position)`` those three coordinates; adding ``(a, b, c)`` to every
GPU's coordinates (each modulo its size) is a candidate *translation*. When it is an automorphism
of the fabric, every switch has an image too (a box's NVSwitch goes to the shifted box's, a rail's
leaf to the shifted rail's, a spine joined to every leaf to itself), and the translations form a
group of order N that acts on the NPUs freely and transitively (exactly one takes any NPU to any
other). Algorithms that build one structure per root, or one plan per switch, can then build it
once per orbit and translate it (``formulations.forestcoll`` splits and packs this way).

Nothing is assumed. For each unit shift, the switches' images are found from their neighbours
(a switch goes to the switch whose neighbours are the images of its own; switches with the same
neighbours, such as spines, keep their order, or rotate along the longest coordinate their number
divides), and the shift must map every link onto a link with
the same bandwidth, alpha and overhead, have the order of its coordinate, and commute with the
other unit shifts. Only then is the whole group (every product of unit shifts) tabulated; any
failed check gives None. A fabric whose boxes differ in shape, or whose groups differ in size,
has no such group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

from workbench.util.lazy import lazy_module
from workbench.topology import Topology
from workbench.topology.structure import boxes_and_rails, recorded_dims

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["NodeTranslations", "cluster_translations", "grid_translations", "MAX_TABLE_ENTRIES"]

MAX_TABLE_ENTRIES = 20_000_000  # N x nodes int32 (80 MB): beyond it no table is built


@dataclass(frozen=True)
class NodeTranslations:
    """``nodes[t, x]``: the image of node ``x`` under translation ``t`` (row 0 the identity,
    ``nodes[t, 0] == t``: translation ``t`` is the one taking NPU 0 to NPU ``t``); ``sizes``: the
    order of each coordinate (leaf groups, boxes per group, GPUs per box)."""

    nodes: np.ndarray
    sizes: tuple[int, ...]
    coords: np.ndarray  # coords[v]: NPU v's (leaf group, box in group, position)

    @property
    def num_npus(self) -> int:
        """N: the number of NPUs, which is also the number of translations."""
        return self.nodes.shape[0]

    @property
    def table(self) -> np.ndarray:
        """The action on the NPUs alone (``workbench.kit.symmetry.translations``' form)."""
        return self.nodes[:, : self.num_npus]

    @cached_property
    def orbit_ids(self) -> np.ndarray:
        """Per node, the smallest node of its orbit (nodes with one id are images of each other)."""
        return self.nodes.min(axis=0)

    @cached_property
    def to_origin(self) -> np.ndarray:
        """Per NPU ``v``, the translation taking ``v`` to NPU 0."""
        return np.argmin(self.table, axis=0)

    def stabilizer(self, node: int) -> np.ndarray:
        """The translations that fix ``node`` (a subgroup; just the identity for an NPU)."""
        return np.flatnonzero(self.nodes[:, node] == node)

    def orbit(self, node: int) -> np.ndarray:
        """The distinct images of ``node``, ascending."""
        return np.unique(self.nodes[:, node])


def cluster_translations(topology: Topology) -> NodeTranslations | None:
    """The verified translation group of a boxes-by-rails cluster (module docstring), or None."""
    n, nodes = topology.num_npus, topology.num_nodes
    if not topology.num_switches or n * nodes > MAX_TABLE_ENTRIES:
        return None
    found = boxes_and_rails(topology)
    if found is None:
        return None
    groups = [list(g) for g in found.groups]
    if len({len(g) for g in groups}) != 1:
        return None
    sizes = (len(groups), len(groups[0]), found.per_box)
    # coordinates: npu_at[group, box in group, position]
    npu_at = np.array([[list(found.boxes[b]) for b in group] for group in groups], dtype=np.int64)
    return _verified(topology, npu_at, sizes)


def grid_translations(topology: Topology) -> NodeTranslations | None:
    """The verified translations of a fabric a builder laid out as a mixed-radix grid
    (``meta["dims"]``, dimension 0 fastest; switches included, as in ``rfs:`` or ``md:``
    fabrics), or None."""
    dims = recorded_dims(topology)
    n, nodes = topology.num_npus, topology.num_nodes
    if dims is None:
        return None
    sizes = tuple(size for _, size in reversed(dims))  # slowest first, as npu_at is indexed
    if math.prod(sizes) != n or n * nodes > MAX_TABLE_ENTRIES:
        return None
    return _verified(topology, np.arange(n, dtype=np.int64).reshape(sizes), sizes)


def _verified(topology: Topology, npu_at: np.ndarray, sizes: tuple[int, ...]) -> NodeTranslations | None:
    """The group generated by unit shifts along each axis of ``npu_at`` (NPU at each coordinate),
    extended to the switches and checked (module docstring), or None."""
    n, nodes = topology.num_npus, topology.num_nodes
    if npu_at.ravel()[0] != 0:
        return None  # NPU 0 must be the origin (translation t takes it to t)
    links = {(l.src, l.dst): (l.bandwidth, l.alpha, l.overhead) for l in topology.links}
    neighbours = _neighbours(topology)
    generators = []
    for axis, size in enumerate(sizes):
        if size == 1:
            continue
        on_npus = np.empty(n, dtype=np.int64)
        on_npus[npu_at.ravel()] = np.roll(npu_at, -1, axis=axis).ravel()  # coordinate + 1 along axis
        image = _extend_to_switches(on_npus, topology, neighbours, lambda count: _twin_axis(sizes, count) == axis)
        if image is None or not _preserves_links(image, links):
            return None
        generators.append((axis, image))
    identity = np.arange(nodes)
    for axis, image in generators:
        if not np.array_equal(_power(image, sizes[axis]), identity):
            return None
    for i, (_, first) in enumerate(generators):
        for _, second in generators[i + 1:]:
            if not np.array_equal(first[second], second[first]):
                return None
    coords = np.empty((n, len(sizes)), dtype=np.int64)
    coords[npu_at.ravel()] = np.array(list(np.ndindex(*sizes)), dtype=np.int64)
    return NodeTranslations(_tabulate(npu_at, sizes, generators, nodes), sizes, coords)


def _neighbours(topology: Topology) -> dict[int, dict[tuple[int, str], tuple]]:
    """node -> {(neighbour, "in" or "out"): the link's (bandwidth, alpha, overhead)}."""
    out: dict[int, dict[tuple[int, str], tuple]] = {x: {} for x in range(topology.num_nodes)}
    for l in topology.links:
        out[l.src][(l.dst, "out")] = (l.bandwidth, l.alpha, l.overhead)
        out[l.dst][(l.src, "in")] = (l.bandwidth, l.alpha, l.overhead)
    return out


def _twin_axis(sizes: tuple[int, ...], count: int) -> int | None:
    """The coordinate along which ``count`` interchangeable switches rotate: the longest one whose
    size ``count`` divides (so the rotation has the coordinate's order), None if there is none."""
    fitting = [(size, axis) for axis, size in enumerate(sizes) if size > 1 and size % count == 0]
    return max(fitting)[1] if fitting and count > 1 else None


def _extend_to_switches(on_npus: np.ndarray, topology: Topology, neighbours: dict,
                        rotates: Callable[[int], bool]) -> np.ndarray | None:
    """A permutation of all nodes that agrees with ``on_npus``: switches in rounds, each mapped by its
    neighbours already mapped (None when some switch has no consistent image).

    Interchangeable switches (the same neighbours, such as the spines of a leaf-spine tier) that the
    shift maps onto themselves are rotated by one where ``rotates(count)`` says so, else kept: any
    permutation of them is an automorphism, and rotating them along one coordinate gives every
    other switch's stabilizer fewer fixed points, so a plan invariant under it is easier to find
    in whole units (``formulations.forestcoll.symmetric_splitting``)."""
    n = topology.num_npus
    image = np.full(topology.num_nodes, -1, dtype=np.int64)
    image[:n] = on_npus
    pending = list(topology.switches)
    while pending:
        known = image >= 0

        def signature(switch: int, mapped: bool) -> frozenset:
            return frozenset((int(image[x]) if mapped else x, side, attrs)
                             for (x, side), attrs in neighbours[switch].items() if known[x])

        by_signature: dict[frozenset, list[int]] = {}
        for w in pending:
            by_signature.setdefault(signature(w, False), []).append(w)
        progressed = False
        for sources in list(by_signature.values()):
            key = signature(sources[0], True)
            if not key:  # no mapped neighbour yet: a later round
                continue
            targets = by_signature.get(key)
            if targets is None or len(targets) != len(sources):
                return None
            if targets == sources and rotates(len(sources)):
                targets = targets[1:] + targets[:1]
            for w, target in zip(sources, targets):  # twins keep their order
                image[w] = target
            progressed = True
        pending = [w for w in pending if image[w] < 0]
        if not progressed:
            return None
    if len(np.unique(image)) != len(image):
        return None
    return image


def _preserves_links(image: np.ndarray, links: dict) -> bool:
    return all(links.get((int(image[u]), int(image[v]))) == attrs for (u, v), attrs in links.items())


def _power(image: np.ndarray, times: int) -> np.ndarray:
    out = np.arange(len(image))
    for _ in range(times):
        out = image[out]
    return out


def _tabulate(npu_at: np.ndarray, sizes: tuple[int, ...], generators: list, nodes: int) -> np.ndarray:
    """Row t: the product of unit-shift powers that takes NPU 0 to NPU t."""
    powers = {axis: [np.arange(nodes)] for axis, _ in generators}
    for axis, image in generators:
        for _ in range(sizes[axis] - 1):
            powers[axis].append(image[powers[axis][-1]])
    n = npu_at.size
    table = np.empty((n, nodes), dtype=np.int32)
    for coords in np.ndindex(*sizes):
        row = np.arange(nodes)
        for axis, _ in generators:
            row = powers[axis][coords[axis]][row]
        table[int(npu_at[coords])] = row
    return table
