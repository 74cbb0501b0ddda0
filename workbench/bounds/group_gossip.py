"""The group form of All-Reduce's gossip bound: boxes (or leaf groups) as the parties that gossip.

Partition the NPUs into ``g`` groups. Within a group let information move for free: every group is
then one party of a one-way gossip, so every byte position still needs at least ``2(g-1)``
deliveries *between* groups (``workbench.bounds.allreduce.gossip_bound`` with N = g). A delivery is
NPU -> switches -> NPU (a relay through another NPU is two deliveries), and one that brings a byte
into group G from outside ends on an in-link of an NPU of G whose source is an NPU of another
group, or a switch that some NPU of another group reaches through switches only: an *entering*
link. Those links serialise their bytes, so the time is at least ``2(g-1) M`` over the sum of the
entering links' bandwidths, plus the smallest alpha among them. A partition never weakens the
argument (merging two groups only gives their members free exchanges), so the bound holds for
every partition and the largest over the candidates is kept.

The candidates come from the links alone, no recorded dimensions
(``workbench.topology.structure.candidate_groups``): the groups of NPUs joined by the links of at
least each bandwidth present (on a rail fabric, the boxes: the scale-up links are the fast ones),
and the groups of NPUs joined once the switches at least ``k`` hops from every NPU are taken away
(on a leaf-spine fabric, the leaf groups). Proof: docs/bounds.md, "The group gossip bound".

Switches that reduce (``workbench.topology.abilities``): a switch that only one group's NPUs reach
through switches sums nothing that group does not already know, so it is one more member of that
party and the count stands (on ``hgx:K`` the NVSwitch of a box, with the boxes as the groups). A
switch that two groups reach could sum what both know into one delivery, a call from two parties
at once, which the one-way gossip count does not allow: a partition with such a switch gives no
bound (``sums_across``), and where every candidate has one the bound is None.
"""

from __future__ import annotations

from workbench.model.collective import Collective
from workbench.topology import Link, Topology
from workbench.topology.structure import candidate_groups

# candidate_groups: topology.structure
__all__ = ["group_gossip_bound", "candidate_groups", "entering_links", "sums_across"]


def group_gossip_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> float | None:
    """The largest group gossip bound over the candidate partitions (module docstring), in seconds;
    None for another collective, or where no candidate has at least two groups and no switch that
    reduces what two of them send (``sums_across``)."""
    n = collective.num_ranks
    if collective.kind != "allreduce" or n != topology.num_npus or n < 2:
        return None
    size = collective.size_bytes(chunk_bytes)
    best = None
    for groups in candidate_groups(topology):
        count = len(set(groups))
        if count < 2 or sums_across(topology, groups):
            continue
        links = entering_links(topology, groups)
        if not links:  # a group nothing enters: no All-Reduce is possible, so no bound to give
            continue
        bandwidth = sum(l.bandwidth for l in links)
        value = (2 * (count - 1) * size / bandwidth * (1 - 1e-12) + min(l.alpha for l in links)
                 + topology.min_overhead())
        best = value if best is None else max(best, value)
    return best


def entering_links(topology: Topology, groups: list[int]) -> list[Link]:
    """The in-links of NPUs that a delivery from another group can end on (module docstring)."""
    reached_by = _groups_reaching_switches(topology, groups)
    entering = []
    for v in topology.npus:
        for link in topology.in_links(v):
            u = link.src
            if topology.is_switch(u):
                if reached_by.get(u, set()) - {groups[v]}:
                    entering.append(link)
            elif groups[u] != groups[v]:
                entering.append(link)
    return entering


def sums_across(topology: Topology, groups: list[int]) -> bool:
    """True when a switch that reduces is reached, through switches only, by the NPUs of two
    groups (``groups[v]``: NPU v's group): it could sum what two parties know into one delivery."""
    reducing = topology.reducing_switches()
    if not reducing:
        return False
    reached = _groups_reaching_switches(topology, groups)
    return any(len(reached.get(switch, ())) >= 2 for switch in reducing)


def _groups_reaching_switches(topology: Topology, groups: list[int]) -> dict[int, set[int]]:
    """For each switch, up to two of the groups whose NPUs reach it through switches only (two
    tell an NPU's own group from another, which is all ``entering_links`` asks)."""
    reached: dict[int, set[int]] = {}
    frontier = []
    for v in topology.npus:
        for link in topology.out_links(v):
            if topology.is_switch(link.dst):
                frontier.append((link.dst, groups[v]))
    while frontier:
        switch, group = frontier.pop()
        held = reached.setdefault(switch, set())
        if group in held or len(held) >= 2:
            continue
        held.add(group)
        frontier.extend((l.dst, group) for l in topology.out_links(switch) if topology.is_switch(l.dst))
    return reached
