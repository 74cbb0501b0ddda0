"""Switches unwound into point-to-point links among their NPUs (TACOS section IV-G).

The NPUs on a switch, in increasing id, are positions ``0..N-1``; position i gets links to
positions ``i+1 .. i+d (mod N)`` with the NPU-to-NPU alpha through the switch unchanged and
bandwidth divided by ``d``; its overhead is the larger of the two switch links' (what a message
through the switch pays). ``degree=None`` means ``N - 1`` (fully connected). A direct link beside
a switch path becomes one bundle with it. ``Topology.unwind_switches`` builds the topology.
"""

from __future__ import annotations

from typing import Any

from workbench.topology.link import Link, TopologyError

__all__ = ["unwound_links"]


def unwound_links(topology: Any, degree: int | None = None) -> list[Link]:
    """The links of ``topology`` (a ``Topology``) with every switch unwound (the module docstring):
    its NPU-to-NPU links, then each switch's; ``TopologyError`` for a switch wired to another
    switch or not symmetric."""
    links: dict[tuple[int, int], Link] = {}
    for link in topology.links:
        if not topology.is_switch(link.src) and not topology.is_switch(link.dst):
            links[(link.src, link.dst)] = link
    for switch in topology.switches:
        members = _members(topology, switch)
        size = len(members)
        d = size - 1 if degree is None else min(int(degree), size - 1)
        if d < 1:
            continue
        for i, u in enumerate(members):
            up = topology.link(u, switch)
            for step in range(1, d + 1):
                v = members[(i + step) % size]
                down = topology.link(switch, v)
                bandwidth = min(up.bandwidth, down.bandwidth) / d
                candidate = Link(u, v, up.alpha + down.alpha, bandwidth, max(up.overhead, down.overhead))
                existing = links.get((u, v))  # a direct link and a switch path: one bundle
                links[(u, v)] = candidate if existing is None else existing.bundled(candidate)
    return list(links.values())


def _members(topology: Any, switch: int) -> list[int]:
    """The NPUs on ``switch`` by increasing id; ``TopologyError`` unless it links only NPUs, the
    same ones both ways."""
    into, out_of = topology.in_neighbors(switch), topology.out_neighbors(switch)
    members = sorted(set(u for u in into if not topology.is_switch(u)))
    if any(topology.is_switch(v) for v in out_of) or any(topology.is_switch(u) for u in into):
        raise TopologyError(f"topology {topology.name!r}: switch {switch} connects to another switch; cannot unwind")
    if set(members) != set(out_of):
        raise TopologyError(f"topology {topology.name!r}: switch {switch} is not symmetric; cannot unwind")
    return members
