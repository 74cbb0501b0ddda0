"""Translation symmetry of grid-like fabrics (tori, rings, fully connected dimensions).

A builder that lays NPUs out in mixed radix (node = sum of coordinate * stride, the first
dimension fastest) records its dimensions in ``topology.meta["dims"]``. When every dimension
wraps (a ring, a one-way ring or a fully connected dimension), shifting every NPU by the same
offset in every coordinate maps the fabric onto itself: the shifts form a group that acts on the
NPUs freely and transitively (exactly one shift takes any NPU to any other). Algorithms that build
one structure per root can then build it for root 0 and translate it. A topology without recorded
dimensions (read from a file) is tried as a grid of every shape with N NPUs.

Nothing here is trusted blindly: ``translations`` checks that each unit shift maps every link onto
a link with the same bandwidth and alpha (the shifts generate the group, so the whole group is
then a group of automorphisms), and returns None when any check fails or the fabric has switches.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from workbench.topology import Topology
from workbench.topology.structure import recorded_dims

if TYPE_CHECKING:
    import numpy as np

__all__ = ["translations", "is_vertex_transitive", "MAX_TRANSLATED_NPUS"]

_WRAPPING = {"ring", "uniring", "fc"}
MAX_TRANSLATED_NPUS = 4096  # the table is N x N int32: 64 MB at this size


def translations(topology: Topology) -> np.ndarray | None:
    """The translation group as an ``N x N`` table (row ``t`` maps NPU ``u`` to ``table[t, u]``,
    row 0 the identity, and ``table[t, 0] == t``), or None when the fabric is not a verified torus-like grid."""
    grid = _verified_grid(topology) if topology.num_npus <= MAX_TRANSLATED_NPUS else None
    if grid is None:
        return None
    import numpy as np  # only for fabrics that are symmetric (keeps start-up lean)

    sizes, strides = grid
    n = topology.num_npus
    nodes = np.arange(n)
    # translation t adds t's coordinates to every node's, per dimension modulo its size
    table = np.zeros((n, n), dtype=np.int32)
    for k, size in enumerate(sizes):
        coords = (nodes // strides[k]) % size
        table += (((coords[:, None] + coords[None, :]) % size) * strides[k]).astype(np.int32)
    return table


def is_vertex_transitive(topology: Topology) -> bool:
    """True when verified translations take any NPU to any other (every NPU looks the same: a
    quantity per NPU, such as a max-flow to it from a symmetric source, is the same for all)."""
    return _verified_grid(topology) is not None


def _verified_grid(topology: Topology) -> tuple[list[int], list[int]] | None:
    """(sizes, strides) of a wrapping grid whose unit shifts are automorphisms, else None.

    The builder's recorded dimensions are tried first; a topology read from a file (which records
    none) is tried as a grid of every shape whose sizes multiply to N, at most three dimensions:
    a wrong shape fails its check at the first link that does not map, so this stays cheap."""
    if topology.num_switches or topology.num_npus < 2:
        return None
    n = topology.num_npus
    links = {(l.src, l.dst): (l.bandwidth, l.alpha, l.overhead) for l in topology.links}
    recorded = _recorded_sizes(topology)
    candidates = [recorded] if recorded is not None else _shapes(n)
    for sizes in candidates:
        strides = [math.prod(sizes[:k]) for k in range(len(sizes))]
        if math.prod(sizes) == n and _shifts_are_automorphisms(links, sizes, strides):
            return sizes, strides
    return None


def _recorded_sizes(topology: Topology) -> list[int] | None:
    dims = recorded_dims(topology)
    if dims is None:
        return None
    if any(kind not in _WRAPPING for kind, _ in dims):
        return []  # a recorded grid that does not wrap (a mesh): no shape to try
    return [size for _, size in dims]


def _shapes(n: int) -> list[list[int]]:
    """Every (A), (A, B), (A, B, C) with product n and sizes >= 2, one dimension first."""
    shapes = [[n]]
    divisors = [d for d in range(2, int(math.isqrt(n)) + 1) if n % d == 0]
    divisors += [n // d for d in reversed(divisors) if d * d != n]
    for a in divisors:
        shapes.append([a, n // a])
        rest = n // a
        for b in divisors:
            if b < rest and rest % b == 0:
                shapes.append([a, b, rest // b])
    return shapes


def _shifts_are_automorphisms(links: dict, sizes: list[int], strides: list[int]) -> bool:
    for k, size in enumerate(sizes):
        if size == 1:
            continue
        stride = strides[k]
        for (u, v), attributes in links.items():
            cu, cv = (u // stride) % size, (v // stride) % size
            image = (u + ((cu + 1) % size - cu) * stride, v + ((cv + 1) % size - cv) * stride)
            if links.get(image) != attributes:
                return False
    return True
