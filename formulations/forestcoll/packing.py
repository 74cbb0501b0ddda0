"""Capacitated arborescence packing on the NPU-only graph (spec forestcoll 3; Edmonds 1973, Lovász 1976).

Start with one *tree group* per root holding all its trees (multiplicity ``C`` = its supply: ``k``
for an All-Gather, ``lambda`` for a broadcast). Groups are grown one at a time, FIFO, by BFS from
their current vertex set. Adding arc ``(x, y)`` to group ``g`` with ``copies`` trees is safe when
the other unfinished groups can still be completed; with residual capacities, a node ``s_h`` per
other unfinished group ``h`` (infinite arcs to its vertices) and a source ``sigma`` with arcs
``sigma -> x`` (infinite) and ``sigma -> s_h`` (capacity ``C_h``):

    copies = min(C_g, cap(x, y), maxflow(sigma -> y) - sum_{h != g} C_h)

(the reference's ``x -> s_h`` arcs, with ``x`` as the source, are the same network). When
``0 < copies < C_g`` the group is cloned: the clone keeps the edges so far with multiplicity
``C_g - copies`` and goes to the back of the queue. A group is done when it spans every NPU.

``validate_forest`` checks the postconditions (arborescences, multiplicities per root, budgets).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from workbench.kit.deadline import Deadline
from workbench.util.lazy import lazy_module
from workbench.kit.maxflow import FlowNetwork
from .optimum import check_clock

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["TreeGroup", "PackingError", "pack_arborescences", "validate_forest"]


class PackingError(RuntimeError):
    """The packing could not complete (the capacity graph did not meet the demand)."""


@dataclass
class TreeGroup:
    """``multiplicity`` identical trees rooted at ``root``; ``edges`` in the order they were added (BFS)."""

    root: int
    edges: list[tuple[int, int]]
    multiplicity: int


class _Packer:
    def __init__(self, num_npus: int, capacity: dict[tuple[int, int], int], seed: int,
                 deadline: Deadline | None) -> None:
        self.n = num_npus
        self.arcs = sorted(capacity)
        self.index = {arc: i for i, arc in enumerate(self.arcs)}
        self.residual = np.array([capacity[a] for a in self.arcs], dtype=np.int64)
        self.successors: list[list[int]] = [[] for _ in range(num_npus)]
        for x, y in self.arcs:
            self.successors[x].append(y)
        self.rng = random.Random(seed) if seed else None
        self.deadline = deadline
        self.flows = 0

    def _network(self, others: list[int], groups: list[TreeGroup], vertex_sets: list[set[int]]):
        """The test network for growing one group while ``others`` stay unfinished."""
        n, L = self.n, len(self.arcs)
        sigma = n + len(others)
        src = [a for a, _ in self.arcs] + [sigma] * n + [sigma] * len(others)
        dst = [b for _, b in self.arcs] + list(range(n)) + [n + i for i in range(len(others))]
        finite = int(self.residual.sum()) + sum(groups[h].multiplicity for h in others)
        inf = finite + 1
        extra_src, extra_dst = [], []
        for i, h in enumerate(others):
            members = sorted(vertex_sets[h])
            extra_src += [n + i] * len(members)
            extra_dst += members
        template = FlowNetwork(sigma + 1, src + extra_src, dst + extra_dst)
        caps = np.zeros(len(src) + len(extra_src), dtype=np.int64)
        caps[L + n:L + n + len(others)] = [groups[h].multiplicity for h in others]
        caps[len(src):] = inf
        return template, caps, sigma, inf, sum(groups[h].multiplicity for h in others)

    def run(self, supply: list[int], levels: bool) -> list[TreeGroup]:
        """Grow every group to a spanning arborescence (module docstring).

        ``levels`` False: FIFO, each group grown completely before the next (the reference's order).
        True: passes over the unfinished groups, each growing by one BFS layer per pass, so early
        groups do not take every short arc and leave long detours (deep trees) to later ones.
        """
        groups = [TreeGroup(r, [], c) for r, c in enumerate(supply) if c > 0]
        self.groups = groups
        self.vertex_sets = [{g.root} for g in groups]
        self.frontier = [deque([g.root]) for g in groups]
        self.unfinished = list(range(len(groups)))
        while self.unfinished:
            progressed = False
            for g in list(self.unfinished):
                progressed |= self._grow(g, levels)
                if len(self.vertex_sets[g]) == self.n:
                    self.unfinished.remove(g)
                elif not self.frontier[g]:
                    # every arc out of the tree was refused; others have changed since, so retry them all
                    self.frontier[g] = deque(sorted(self.vertex_sets[g]))
            if not progressed:
                g = self.unfinished[0]
                missing = sorted(set(range(self.n)) - self.vertex_sets[g])[:8]
                raise PackingError(f"forestcoll: the tree group of root {groups[g].root} cannot reach {missing} "
                                   f"(capacity graph too weak)")
        return groups

    def _grow(self, g: int, one_layer: bool) -> bool:
        """Test arcs out of the group's frontier (one BFS layer, or until it spans); True if it grew."""
        groups, vertex_sets, L = self.groups, self.vertex_sets, len(self.arcs)
        group = groups[g]
        others = [h for h in self.unfinished if h != g]
        template, caps, sigma, inf, others_total = self._network(others, groups, vertex_sets)
        bfs = self.frontier[g]
        budget = len(bfs) if one_layer else None
        grew = False
        while bfs and len(vertex_sets[g]) < self.n and (budget is None or budget > 0):
            x = bfs.popleft()
            if budget is not None:
                budget -= 1
            order = list(self.successors[x])
            if self.rng is not None:
                self.rng.shuffle(order)
            for y in order:
                if y in vertex_sets[g]:
                    continue
                arc = self.index[(x, y)]
                if self.residual[arc] == 0:
                    continue
                check_clock(self.deadline)
                caps[:L] = self.residual
                caps[L + x] = inf
                flow = template.value(caps, sigma, y)
                caps[L + x] = 0
                copies = min(group.multiplicity, int(self.residual[arc]), flow - others_total)
                if copies <= 0:
                    continue
                if copies < group.multiplicity:
                    clone = TreeGroup(group.root, list(group.edges), group.multiplicity - copies)
                    groups.append(clone)
                    vertex_sets.append(set(vertex_sets[g]))
                    self.frontier.append(deque(sorted(vertex_sets[g])))
                    self.unfinished.append(len(groups) - 1)
                    group.multiplicity = copies
                    others.append(len(groups) - 1)
                    self.flows += template.calls
                    template, caps, sigma, inf, others_total = self._network(others, groups, vertex_sets)
                group.edges.append((x, y))
                vertex_sets[g].add(y)
                self.residual[arc] -= copies
                bfs.append(y)
                grew = True
        self.flows += template.calls
        return grew


def pack_arborescences(num_npus: int, capacity: dict[tuple[int, int], int], supply: list[int], seed: int = 0,
                       deadline: Deadline | None = None, levels: bool = False) -> tuple[list[TreeGroup], int]:
    """Tree groups (sorted by root, then creation) and the number of max-flows used."""
    packer = _Packer(num_npus, capacity, seed, deadline)
    groups = packer.run(supply, levels)
    order = sorted(range(len(groups)), key=lambda i: (groups[i].root, i))
    return [groups[i] for i in order], packer.flows


def validate_forest(groups: list[TreeGroup], num_npus: int, supply: list[int],
                    capacity: dict[tuple[int, int], int]) -> None:
    """Raise ``ValueError`` unless the groups are a valid packing (module docstring)."""
    per_root = [0] * num_npus
    usage: dict[tuple[int, int], int] = {}
    for group in groups:
        if group.multiplicity <= 0:
            raise ValueError(f"tree group of root {group.root} has multiplicity {group.multiplicity}")
        reached = {group.root}
        for x, y in group.edges:
            if x not in reached:
                raise ValueError(f"tree of root {group.root}: edge {x}->{y} leaves a node not yet in the tree")
            if y in reached:
                raise ValueError(f"tree of root {group.root}: node {y} entered twice")
            reached.add(y)
            usage[(x, y)] = usage.get((x, y), 0) + group.multiplicity
        if len(reached) != num_npus:
            raise ValueError(f"tree of root {group.root} spans {len(reached)} of {num_npus} NPUs")
        per_root[group.root] += group.multiplicity
    if per_root != list(supply):
        raise ValueError(f"trees per root {per_root} differ from the supply {list(supply)}")
    for arc, used in usage.items():
        if used > capacity.get(arc, 0):
            raise ValueError(f"arc {arc[0]}->{arc[1]} carries {used} tree-units over its budget "
                             f"{capacity.get(arc, 0)}")
