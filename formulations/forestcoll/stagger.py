"""Rounds that keep a switch buffer to one partial sum at a time once a gather is reversed.

A tree edge sent hop by hop through a switch ``w`` puts its chunk in the buffer ``(w, chunk)`` for
two rounds: the round of the hop into ``w`` and the round of the hop out of it. In an All-Gather
two visits of one chunk to one switch (two tree edges of one tree crossing ``w``) are harmless:
both copies hold the same data. Reversed into a Reduce-Scatter, each visit carries a different
partial sum, and a switch cannot add them, so the second must enter only after the first has left.
If the two visits start in rounds ``t`` and ``t'`` with ``|t - t'| >= 2`` that is already true of
the plan; otherwise the reversal has to make one wait for the other on the links, which, repeated
over every batch, costs up to half of a link's throughput (``reverse.reverse_serialised``).

``stagger_switch_visits`` gives every shared edge the smallest extra delay (in rounds, after its
parent's arrival) that keeps all visits of one chunk to one switch two rounds apart. A delay only
lengthens the pipeline by a few rounds (the fill ``(H - 1) / P``); each link still carries one
batch of every tree-unit per round, so the steady-state rate, and T*, are unchanged.
"""

from __future__ import annotations

from collections import defaultdict

from workbench.topology import Topology

from .schedule import SharedEdge, switch_visit_clashes  # the check lives with the round plan it reads

__all__ = ["stagger_switch_visits", "switch_visit_clashes"]


def stagger_switch_visits(topology: Topology, shared: list[SharedEdge]) -> int:
    """Delay shared edges (in place, parents first) until no two visits of a group's chunk to a switch are
    less than two rounds apart; returns the total delay added (in rounds, summed over edges)."""
    rounds: dict[tuple[int, int], set[int]] = defaultdict(set)  # (group, switch) -> rounds of its visits
    end: list[int] = []
    added = 0
    for edge in shared:
        earliest = end[edge.parent] if edge.parent is not None else 0
        visits = [(h, dst) for h, (_, dst) in enumerate(edge.hops) if topology.is_switch(dst)]
        start = earliest
        while not _free(rounds, edge.members, visits, start):
            start += 1
        added += start - earliest
        edge.depth = start
        for h, switch in visits:
            for g in edge.members:
                rounds[(g, switch)].add(start + h)
        end.append(start + len(edge.hops))
    return added


def _free(rounds: dict[tuple[int, int], set[int]], members: list[int], visits: list[tuple[int, int]],
          start: int) -> bool:
    for h, switch in visits:
        t = start + h
        for g in members:
            taken = rounds.get((g, switch))
            if taken and (t in taken or t - 1 in taken or t + 1 in taken):
                return False
    return True
