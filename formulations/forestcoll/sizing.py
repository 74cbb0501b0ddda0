"""Pieces per tree-unit by message size: the pipeline depth the alpha-beta-overhead timeline and
the simulator agree on.

ForestColl's paper pipelines each tree-unit in many pieces, which is right for large messages (the
fill, (H - 1) rounds of one piece, vanishes against P rounds) and wrong for small ones, where each
extra piece pays the links' per-message overhead (ring:8, 1 us a message, 1 MB All-Gather: 1,034
us at the default 256 pieces, 14.8 us at one) and the alphas stay put. Below ``SIZED_BELOW``
bytes, and only where a config does not pin ``pieces``:

1. every power of two up to the default depth is planned (``schedule.plan_times``: the schedule's
   own timeline, alpha, bandwidth and overhead per piece; milliseconds, no schedule written);
2. the schedule of the depth planned fastest is written and timed in the simulator's default model
   (its claim), then half that depth, and so on while the time improves. The plan counts whole
   rounds, so it overestimates shallow pipelines (up to 3.5x at one piece) and never the deep
   ones; the true best is at or below its choice.

From ``SIZED_BELOW`` up the default stands, so large-message results do not move, except on a
fabric whose links pay a per-message overhead (``workbench.kit.schedule.adapts_to_size``), where the
depth is chosen at every size.
"""

from __future__ import annotations

from typing import Callable

from workbench.model.algorithm import Algorithm
from workbench.kit.deadline import Deadline
from workbench.kit.schedule import SIZED_BELOW, claim_in_model

__all__ = ["SIZED_BELOW", "candidate_pieces", "fastest_depth"]

# from SIZED_BELOW (256 MB) up, the default depth (64 pieces per tree level)


def candidate_pieces(default: int) -> list[int]:
    """1, 2, 4, ... below ``default``, and ``default`` itself."""
    found, p = [], 1
    while p < default:
        found.append(p)
        p *= 2
    return found + [default]


def fastest_depth(default: int, plan_for: Callable[[int], float], schedule_for: Callable[[int], Algorithm],
                  deadline: Deadline) -> tuple[Algorithm, dict[int, float], dict[int, float]]:
    """The schedule of the fastest depth up to ``default`` with its claim recorded, the claimed time
    of every depth written, and the planned time of every candidate (module docstring, steps 1-2).
    Past half of what was left of the time limit, or with less left than 1.5 times what the last
    depth took to write and time, no further depth is written."""
    planned = {pieces: plan_for(pieces) for pieces in candidate_pieces(default)}
    start = min(planned, key=lambda pieces: (planned[pieces], pieces))
    budget = None if deadline.unlimited else deadline.elapsed() + deadline.remaining() / 2
    timed: dict[int, float] = {}
    best: Algorithm | None = None
    last = 0.0  # seconds the previous depth took to write and time
    for pieces in sorted((p for p in planned if p <= start), reverse=True):
        out_of_time = budget is not None and (deadline.elapsed() > budget or deadline.remaining() < 1.5 * last)
        if best is not None and out_of_time:
            break  # a next depth that would not finish in time would lose the one in hand
        began = deadline.elapsed()
        algorithm = schedule_for(pieces)
        timed[pieces] = claim_in_model(algorithm)
        last = deadline.elapsed() - began
        if best is not None and timed[pieces] >= best.meta["claimed_time"]:
            break
        best = algorithm
    assert best is not None
    return best, timed, planned
