"""Translation symmetry of grid-like fabrics (tori, rings, fully connected dimensions).

A builder that lays NPUs out in mixed radix (node = sum of coordinate * stride, the first
dimension fastest) records its dimensions in ``topology.meta["dims"]``. When every dimension
wraps (a ring, a one-way ring or a fully connected dimension), shifting every NPU by the same
offset in every coordinate maps the fabric onto itself: the shifts form a group that acts on the
NPUs freely and transitively (exactly one shift takes any NPU to any other). Algorithms that build
one structure per root can then build it for root 0 and translate it.

Nothing here is trusted blindly: ``translations`` checks that each unit shift maps every link onto
a link with the same bandwidth and alpha (the shifts generate the group, so the whole group is
then a group of automorphisms), and returns None when any check fails or the fabric has switches.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .topology import Topology

if TYPE_CHECKING:
    import numpy as np

__all__ = ["translations", "MAX_TRANSLATED_NPUS"]

_WRAPPING = {"ring", "uniring", "fc"}
MAX_TRANSLATED_NPUS = 4096  # the table is N x N int32: 64 MB at this size


def translations(topology: Topology) -> np.ndarray | None:
    """The translation group as an ``N x N`` table (row ``t`` maps NPU ``u`` to ``table[t, u]``,
    row 0 the identity, and ``table[t, 0] == t``), or None when the fabric is not a verified torus-like grid."""
    dims = topology.meta.get("dims") if isinstance(topology.meta, dict) else None
    if not dims or topology.num_switches or topology.num_npus > MAX_TRANSLATED_NPUS:
        return None
    try:
        sizes = [int(d["size"]) for d in dims]
        kinds = [d["kind"] for d in dims]
    except (KeyError, TypeError, ValueError):
        return None
    n = topology.num_npus
    if math.prod(sizes) != n or any(kind not in _WRAPPING for kind in kinds):
        return None
    import numpy as np  # only for fabrics that may be symmetric (keeps start-up lean)

    strides = [math.prod(sizes[:k]) for k in range(len(sizes))]
    nodes = np.arange(n)
    coords = [(nodes // strides[k]) % sizes[k] for k in range(len(sizes))]
    links = {(l.src, l.dst): (l.bandwidth, l.alpha) for l in topology.links}
    for k, size in enumerate(sizes):
        if size == 1:
            continue
        shifted = nodes + ((coords[k] + 1) % size - coords[k]) * strides[k]
        for (u, v), attributes in links.items():
            if links.get((int(shifted[u]), int(shifted[v]))) != attributes:
                return None
    # translation t adds t's coordinates to every node's, per dimension modulo its size
    table = np.zeros((n, n), dtype=np.int32)
    for k, size in enumerate(sizes):
        table += (((coords[k][:, None] + coords[k][None, :]) % size) * strides[k]).astype(np.int32)
    return table
