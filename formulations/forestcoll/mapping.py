"""Logical tree edges back to physical paths through switches (spec forestcoll 2, "Mapping back").

``edge_map[(u, t)][w]`` units of logical arc ``(u, t)`` run through switch ``w``; they expand to
``(u, w)`` then ``(w, t)``, each of which may itself be logical (switch-to-switch links), so the
expansion recurses. Units of ``(u, t)`` not in the map are the physical link ``u -> t``.
Consumption decrements the map, so different trees get disjoint capacity. A tree group of
multiplicity ``C`` whose edges expand to several paths is split into sub-groups (multiplicities
summing to ``C``), each with exactly one physical path per logical edge.
"""

from __future__ import annotations

from dataclasses import dataclass

from .packing import TreeGroup
from .splitting import SplitResult

__all__ = ["PathGroup", "map_to_paths", "check_link_budgets"]

Path = tuple[int, ...]


@dataclass
class PathGroup:
    """``multiplicity`` trees rooted at ``root``; ``paths[i]`` is the physical path of ``edges[i]``."""

    root: int
    edges: list[tuple[int, int]]
    paths: list[Path]
    multiplicity: int


class _Expander:
    def __init__(self, split: SplitResult) -> None:
        self.edge_map = {arc: dict(entries) for arc, entries in split.edge_map.items()}
        self.direct = dict(split.physical)

    def take(self, u: int, t: int, amount: int) -> list[tuple[Path, int]]:
        """``amount`` units of arc ``(u, t)`` as (path, count) runs."""
        runs: list[tuple[Path, int]] = []
        remaining = amount
        entries = self.edge_map.get((u, t), {})
        for w in sorted(entries):
            if remaining == 0:
                break
            share = min(remaining, entries[w])
            if share == 0:
                continue
            entries[w] -= share
            runs += _zip(self.take(u, w, share), self.take(w, t, share))
            remaining -= share
        if remaining:
            left = self.direct.get((u, t), 0)
            if left < remaining:
                raise ValueError(f"forestcoll: mapping needs {remaining} units of link {u}->{t}, {left} left")
            self.direct[(u, t)] = left - remaining
            runs.append(((u, t), remaining))
        return runs


def _zip(left: list[tuple[Path, int]], right: list[tuple[Path, int]]) -> list[tuple[Path, int]]:
    """Pair the units of two run lists of equal total: ``u..w`` with ``w..t`` gives ``u..w..t``."""
    out: list[tuple[Path, int]] = []
    i = j = 0
    a_left = left[0][1] if left else 0
    b_left = right[0][1] if right else 0
    while i < len(left) and j < len(right):
        step = min(a_left, b_left)
        out.append((left[i][0] + right[j][0][1:], step))
        a_left -= step
        b_left -= step
        if a_left == 0:
            i += 1
            a_left = left[i][1] if i < len(left) else 0
        if b_left == 0:
            j += 1
            b_left = right[j][1] if j < len(right) else 0
    return out


def map_to_paths(groups: list[TreeGroup], split: SplitResult) -> list[PathGroup]:
    """Physical path groups for the logical groups (order kept; a group may become several)."""
    if not split.edge_map:  # no switch was split: each logical arc is its link (check_link_budgets checks budgets)
        return [PathGroup(g.root, list(g.edges), list(g.edges), g.multiplicity) for g in groups]
    expander = _Expander(split)
    result: list[PathGroup] = []
    for group in groups:
        runs = [expander.take(x, y, group.multiplicity) for x, y in group.edges]
        cursor = [0] * len(runs)
        left = [r[0][1] for r in runs]
        remaining = group.multiplicity
        while remaining:
            step = min(left) if left else remaining
            paths = [runs[e][cursor[e]][0] for e in range(len(runs))]
            result.append(PathGroup(group.root, list(group.edges), paths, step))
            remaining -= step
            for e in range(len(runs)):
                left[e] -= step
                if left[e] == 0 and cursor[e] + 1 < len(runs[e]):
                    cursor[e] += 1
                    left[e] = runs[e][cursor[e]][1]
    return result


def check_link_budgets(groups: list[PathGroup], physical: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
    """Per physical link, the tree-units the path groups put on it; ValueError over a budget."""
    usage: dict[tuple[int, int], int] = {}
    for group in groups:
        for path in group.paths:
            for link in zip(path, path[1:]):
                usage[link] = usage.get(link, 0) + group.multiplicity
    for link, used in usage.items():
        if used > physical.get(link, 0):
            raise ValueError(f"forestcoll: link {link[0]}->{link[1]} carries {used} tree-units, budget "
                             f"{physical.get(link, 0)}")
    return usage
