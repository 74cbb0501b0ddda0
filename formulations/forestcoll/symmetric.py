"""Arborescence packing by translation symmetry (spec forestcoll 3, the reference's symmetric generator).

On a fabric whose translations (``workbench.kit.symmetry``) act freely and transitively on the NPUs
and preserve every capacity (tori, rings), the trees of root ``t`` can be the trees of root 0
shifted by ``t``. So only root 0's tree groups (*base groups*) are grown; every change to a base
group is made to all ``N`` of its images at once, and the packing stays symmetric throughout.

Safety test (Edmonds 1973, as in ``packing``): the partial forest can still be completed iff for
every NPU ``v`` the max-flow from a source with an arc of capacity ``C_h`` to a node ``s_h`` per
unfinished tree group ``h`` (infinite arcs from ``s_h`` to every vertex of ``h``), over the residual
capacities, reaches ``sum_h C_h``. Symmetry makes that flow the same for every ``v``, so one
max-flow (to NPU 0) decides a test, where the general packer needs one per tested arc. Groups
that already contain NPU 0 carry their ``C_h`` straight to it and are left out of the network.

Growth: in passes over the unfinished base groups, each grows by one BFS layer (one candidate arc
into every NPU adjacent to it), tested as one batch with the group's whole multiplicity. A batch
that fails is halved and each half tried in turn; a single arc that fails at the full multiplicity
is tried at the largest multiplicity that passes (binary search); when that is ``0 < c < C`` the
group is cloned, as in the general packer: the clone keeps the old tree with ``C - c``. Arcs that
fail are skipped for that group until a pass makes no progress, then retried once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from workbench.kit.deadline import Deadline
from workbench.util.lazy import lazy_module
from workbench.kit.maxflow import FlowNetwork
from .optimum import check_clock
from .packing import PackingError, TreeGroup

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["pack_symmetric"]


@dataclass
class _BaseGroup:
    vertices: list[int]  # in the order they joined (root 0 first)
    edges: list[tuple[int, int]]
    multiplicity: int
    members: set[int] = field(default_factory=set)
    refused: set[tuple[int, int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.members = set(self.vertices)


class _SymmetricPacker:
    def __init__(self, table: np.ndarray, capacity: dict[tuple[int, int], int], seed: int,
                 deadline: Deadline | None) -> None:
        n = table.shape[0]
        self.n, self.table = n, table
        to_origin = np.argmin(table, axis=0)  # to_origin[x]: the one translation t with table[t, x] == 0
        arcs = sorted(capacity)
        offsets = sorted({int(table[to_origin[x], y]) for x, y in arcs})
        self.orbit_of = {o: i for i, o in enumerate(offsets)}  # an arc's orbit: where y lands when x moves to 0
        self.residual = np.zeros(len(offsets), dtype=np.int64)
        orbit = np.empty(len(arcs), dtype=np.int64)
        for i, (x, y) in enumerate(arcs):
            orbit[i] = self.orbit_of[int(table[to_origin[x], y])]
            value = capacity[(x, y)]
            if self.residual[orbit[i]] not in (0, value):
                raise ValueError("capacities are not translation-symmetric")
            self.residual[orbit[i]] = value
        if len(arcs) != n * len(offsets):
            raise ValueError("capacities are not translation-symmetric")
        self.arc_src = np.array([a for a, _ in arcs], dtype=np.int64)
        self.arc_dst = np.array([b for _, b in arcs], dtype=np.int64)
        self.arc_orbit = orbit
        self.to_origin = to_origin
        self.successors: list[list[int]] = [[] for _ in range(n)]
        for x, y in arcs:
            self.successors[x].append(y)
        self.rng = random.Random(seed) if seed else None
        self.deadline = deadline
        self.flows = 0

    def orbit(self, x: int, y: int) -> int:
        return self.orbit_of[int(self.table[self.to_origin[x], y])]

    # --- the test ------------------------------------------------------------------------------
    def completable(self, groups: list[_BaseGroup], residual: np.ndarray) -> bool:
        """Edmonds' condition for the symmetric partial forest ``groups`` under ``residual`` (per orbit)."""
        check_clock(self.deadline)
        n, table = self.n, self.table
        demand = n * sum(g.multiplicity for g in groups)
        source, next_node = n, n + 1
        src, dst, cap = [self.arc_src], [self.arc_dst], [residual[self.arc_orbit]]
        infinite = demand + 1
        direct = 0
        for group in groups:
            images = table[:, np.asarray(group.vertices)]  # row t: the group's vertices shifted by t
            holds_sink = (images == 0).any(axis=1)
            direct += group.multiplicity * int(holds_sink.sum())
            images = images[~holds_sink]
            count, size = images.shape
            if count == 0:
                continue
            if size == 1:  # a bare root: the source feeds it directly
                src.append(np.full(count, source))
                dst.append(images[:, 0].astype(np.int64))
                cap.append(np.full(count, group.multiplicity))
                continue
            hubs = np.arange(next_node, next_node + count)
            next_node += count
            src += [np.full(count, source), np.repeat(hubs, size)]
            dst += [hubs, images.ravel().astype(np.int64)]
            cap += [np.full(count, group.multiplicity), np.full(count * size, infinite)]
        if direct >= demand:
            return True
        network = FlowNetwork(next_node, np.concatenate(src), np.concatenate(dst))
        self.flows += 1
        return direct + network.value(np.concatenate(cap), source, 0) >= demand

    # --- growth --------------------------------------------------------------------------------
    def run(self, k: int) -> list[_BaseGroup]:
        self.groups = [_BaseGroup([0], [], k)]
        self.unfinished = [0]
        retried = False
        while self.unfinished:
            progressed = False
            for g in list(self.unfinished):
                progressed |= self.grow_layer(g)
                if len(self.groups[g].vertices) == self.n:
                    self.unfinished.remove(g)
            if progressed:
                retried = False
                continue
            if retried:
                group = self.groups[self.unfinished[0]]
                missing = sorted(set(range(self.n)) - group.members)[:8]
                raise PackingError(f"forestcoll: the symmetric tree group of root 0 cannot reach {missing} "
                                   f"(capacity graph too weak)")
            for g in self.unfinished:
                self.groups[g].refused.clear()
            retried = True
        return self.groups

    def grow_layer(self, g: int) -> bool:
        group = self.groups[g]
        chosen: dict[int, tuple[int, int]] = {}
        for x in group.vertices:
            order = list(self.successors[x])
            if self.rng is not None:
                self.rng.shuffle(order)
            for y in order:
                if y in group.members or y in chosen or (x, y) in group.refused:
                    continue
                if self.residual[self.orbit(x, y)] > 0:
                    chosen[y] = (x, y)
        if not chosen:
            return False
        before = len(group.edges)
        self.try_batch(g, list(chosen.values()))
        return len(group.edges) > before

    def try_batch(self, g: int, batch: list[tuple[int, int]]) -> None:
        group = self.groups[g]
        if len(batch) == 1:
            self.try_single(g, batch[0])
            return
        residual = self.residual.copy()
        for x, y in batch:
            residual[self.orbit(x, y)] -= group.multiplicity
        if (residual >= 0).all() and self.completable(self._with(g, batch, group.multiplicity), residual):
            self._commit(g, batch, group.multiplicity, residual)
            return
        half = len(batch) // 2
        self.try_batch(g, batch[:half])
        self.try_batch(g, batch[half:])

    def try_single(self, g: int, arc: tuple[int, int]) -> None:
        group = self.groups[g]
        orbit = self.orbit(*arc)
        best, low, high = 0, 1, min(group.multiplicity, int(self.residual[orbit]))
        first = True
        while low <= high:  # largest multiplicity that passes, trying the largest first
            copies = high if first else (low + high + 1) // 2
            first = False
            residual = self.residual.copy()
            residual[orbit] -= copies
            if self.completable(self._with(g, [arc], copies), residual):
                best, low = copies, copies + 1
            else:
                high = copies - 1
        if best == 0:
            group.refused.add(arc)
            return
        residual = self.residual.copy()
        residual[orbit] -= best
        self._commit(g, [arc], best, residual)

    def _with(self, g: int, batch: list[tuple[int, int]], copies: int) -> list[_BaseGroup]:
        """The unfinished base groups as they would be after group ``g`` takes ``batch`` with ``copies``."""
        out = []
        for h in self.unfinished:
            group = self.groups[h]
            if h != g:
                out.append(group)
                continue
            grown = _BaseGroup(group.vertices + [y for _, y in batch], [], copies)
            out.append(grown)
            if copies < group.multiplicity:
                out.append(_BaseGroup(list(group.vertices), [], group.multiplicity - copies))
        return out

    def _commit(self, g: int, batch: list[tuple[int, int]], copies: int, residual: np.ndarray) -> None:
        group = self.groups[g]
        if copies < group.multiplicity:
            clone = _BaseGroup(list(group.vertices), list(group.edges), group.multiplicity - copies)
            self.groups.append(clone)
            self.unfinished.append(len(self.groups) - 1)
            group.multiplicity = copies
        for x, y in batch:
            group.edges.append((x, y))
            group.vertices.append(y)
            group.members.add(y)
        self.residual = residual


def pack_symmetric(table: np.ndarray, capacity: dict[tuple[int, int], int], k: int, seed: int = 0,
                   deadline: Deadline | None = None) -> tuple[list[TreeGroup], int]:
    """``k`` trees per root on a translation-symmetric capacity graph: tree groups sorted by root,
    then creation (the same form as ``pack_arborescences``) and the number of max-flows used.

    Raises ``ValueError`` when the capacities are not invariant under ``table``'s translations."""
    packer = _SymmetricPacker(table, capacity, seed, deadline)
    base = packer.run(k)
    groups = []
    for t in range(packer.n):
        shift = table[t]
        for group in base:
            edges = [(int(shift[x]), int(shift[y])) for x, y in group.edges]
            groups.append(TreeGroup(int(shift[0]), edges, group.multiplicity))
    return groups, packer.flows
