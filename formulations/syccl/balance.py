"""Bandwidth-balanced sketch combinations (SyCCL section 4.2), as one small LP on HiGHS.

Sketches load the dimensions differently: sending a chunk along its rail first costs NIC time,
spreading it in the box first costs scale-up time and then more NIC time. Giving each sketch a
share ``x_s`` of the data so that no dimension is busier than it must be is a linear program
(our formulation of the balancing the paper describes; its exact rule is not public):

    minimise Z   subject to   sum_s x_s * load_s(d) <= Z   for every dimension d,
                              sum_s x_s = 1,   x_s >= 0,

where ``load_s(d)`` is sketch ``s``'s sends in dimension ``d`` per source chunk over a GPU's
bandwidth in that tier (``Sketch.sends``). ``Z`` is the balanced bandwidth time per byte of
chunk; the shares become whole chunk counts in ``chunk_split``.
"""

from __future__ import annotations

from formulations.syccl.sketches import Sketch
from workbench.kit.milp import MilpModel

__all__ = ["balance", "chunk_split"]


def balance(sketches: list[Sketch], bandwidth: dict[str, float], time_limit: float) -> tuple[list[float], float, str]:
    """(share per sketch, balanced seconds per byte, LP status) for ``sketches``."""
    model = MilpModel("syccl-balance")
    shares = [model.add_var(0.0, 1.0) for _ in sketches]
    z = model.add_var(0.0, cost=1.0)
    dims = sorted({d for s in sketches for d in s.sends})
    unit = min(s.seconds_per_byte for s in sketches)  # loads in units of the best sketch's: well-scaled rows
    for d in dims:
        model.add_row(shares + [z], [s.sends.get(d, 0) / bandwidth[d] / unit for s in sketches] + [-1.0], upper=0.0)
    model.add_row(shares, [1.0] * len(shares), 1.0, 1.0)
    outcome = model.solve(time_limit=max(time_limit, 1.0))
    if not outcome.has_solution:
        best = min(range(len(sketches)), key=lambda i: sketches[i].seconds_per_byte)
        return [1.0 if i == best else 0.0 for i in range(len(sketches))], sketches[best].seconds_per_byte, outcome.status
    values = [max(0.0, outcome.value(c)) for c in shares]
    return values, outcome.value(z) * unit, outcome.status


def chunk_split(shares: list[float], chunks: int) -> list[int]:
    """Whole chunk counts per sketch summing to ``chunks``, by largest remainder."""
    total = sum(shares) or 1.0
    exact = [chunks * s / total for s in shares]
    counts = [int(e) for e in exact]
    order = sorted(range(len(shares)), key=lambda i: exact[i] - counts[i], reverse=True)
    for i in order[: chunks - sum(counts)]:
        counts[i] += 1
    return counts
