"""Building blocks of the topology builders: a link set that keeps the first link per pair, and
the link patterns of one dimension (ring, fully connected, switch, unwound switch), plus the
per-dimension alpha/bandwidth/overhead argument and spec integers."""

from __future__ import annotations

import re
from typing import Sequence

from workbench.topology.graph import Link, TopologyError

__all__ = ["Edges", "per_dim", "ring_edges", "fc_edges", "switch_edges", "unwound_edges", "parse_int",
           "check_spec_numbers", "MAX_SPEC_DIGITS"]


class Edges:
    """Collects links; a link already present is kept (grids and rings of 2 meet the same pair twice)."""

    def __init__(self) -> None:
        self.links: dict[tuple[int, int], Link] = {}

    def add(self, u: int, v: int, alpha: float, bandwidth: float, both: bool = True, overhead: float = 0.0) -> None:
        """Add ``u -> v`` (and ``v -> u`` when ``both``), keeping any link a pair already has."""
        self.links.setdefault((u, v), Link(u, v, alpha, bandwidth, overhead))
        if both:
            self.links.setdefault((v, u), Link(v, u, alpha, bandwidth, overhead))


def per_dim(values: Sequence[float] | float | None, dims: int, default: float, what: str) -> list[float]:
    """One float per dimension: ``default`` for None, a scalar or single value repeated, else exactly
    ``dims`` values (``TopologyError`` names the ``--what`` option otherwise)."""
    if values is None:
        return [default] * dims
    if isinstance(values, (int, float)):
        return [float(values)] * dims
    values = [float(v) for v in values]
    if len(values) == 1:
        return values * dims
    if len(values) != dims:
        raise TopologyError(f"--{what}: expected 1 or {dims} values (one per dimension), got {len(values)}")
    return values


def ring_edges(edges: Edges, members: Sequence[int], alpha: float, bw: float, both: bool = True,
               overhead: float = 0.0) -> None:
    """Links around ``members`` in their order, both ways unless ``both`` is False; two members get one
    link each way, fewer get none."""
    n = len(members)
    if n < 2:
        return
    if n == 2:
        edges.add(members[0], members[1], alpha, bw, both=True, overhead=overhead)
        return
    for i in range(n):
        edges.add(members[i], members[(i + 1) % n], alpha, bw, both=both, overhead=overhead)


def fc_edges(edges: Edges, members: Sequence[int], alpha: float, bw: float, overhead: float = 0.0) -> None:
    """One directed link between every ordered pair of ``members``."""
    for u in members:
        for v in members:
            if u != v:
                edges.add(u, v, alpha, bw, both=False, overhead=overhead)


def switch_edges(edges: Edges, members: Sequence[int], switch: int, alpha: float, bw: float,
                 overhead: float = 0.0) -> None:
    """Each NPU to the switch and back, each link with half the dimension's alpha (NPU to NPU costs
    alpha) and the whole overhead (a message through the switch pays the larger of its two links')."""
    for u in members:
        edges.add(u, switch, alpha / 2, bw, both=False, overhead=overhead)
        edges.add(switch, u, alpha / 2, bw, both=False, overhead=overhead)


def unwound_edges(edges: Edges, members: Sequence[int], degree: int, alpha: float, bw: float,
                  overhead: float = 0.0) -> None:
    """A switch replaced by direct links: each member to the next ``degree`` members around the list
    (at most all others), each with ``bw`` divided by that count, so a member still sends ``bw`` in all."""
    n = len(members)
    d = min(degree, n - 1)
    for i, u in enumerate(members):
        for step in range(1, d + 1):
            edges.add(u, members[(i + step) % n], alpha, bw / d, both=False, overhead=overhead)


MAX_SPEC_DIGITS = 12  # a trillion NPUs; longer numbers are refused before anything converts them


def _short(text: str) -> str:
    """``repr(text)`` cut to 60 characters (a spec may be as long as the command line allows)."""
    return repr(text) if len(text) <= 58 else repr(text[:50]) + "..."


def check_spec_numbers(spec: str) -> None:
    """``TopologyError`` for a number in a builder spec with more than ``MAX_SPEC_DIGITS`` digits:
    Python refuses to convert one of more than 4,300 digits, and no fabric needs even 13."""
    longest = max(re.findall(r"\d+", spec), key=len, default="")
    if len(longest) > MAX_SPEC_DIGITS:
        raise TopologyError(f"topology spec {_short(spec)}: a number of {len(longest):,} digits is too large "
                            f"(at most {MAX_SPEC_DIGITS})")


def parse_int(text: str, spec: str) -> int:
    """A positive integer of a spec (ASCII digits only), or ``TopologyError`` naming it."""
    if not (text.isascii() and text.isdigit()) or len(text) > MAX_SPEC_DIGITS or int(text) < 1:
        raise TopologyError(f"topology spec {_short(spec)}: {_short(text)} is not a positive integer "
                            f"of at most {MAX_SPEC_DIGITS} digits")
    return int(text)
