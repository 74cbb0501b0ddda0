"""Sketch exploration (SyCCL section 4.1): the ways one GPU's chunk can reach every GPU, stage by stage.

By collective symmetry every source's chunk travels the same way (translated), so a sketch is
written for one source. A *stage* is a sub-demand in one dimension (``box`` or ``rail``): every
GPU that holds the chunk sends it inside its group of that dimension, either to every group
member (``all``: the sub-demand a group broadcast, solved by the sub-model) or to one member
(``one``: a relay, so that a later stage leaves from two GPUs). What a stage's GPUs hold is a
sub-grid: ``p`` positions of ``b`` boxes; a sketch starts at (1, 1) and must end at (G, B).

Enumeration walks every sequence of up to ``max_stages`` stages over the dimensions, and every
destination set a stage could take inside a group. Three rules prune (our reading of the
paper's rules, whose text is not public: ``docs/methods/syccl.md``):

1. ``symmetry``: destination sets of one size are images of each other under the group's
   translations (the group fabric is a verified symmetric island or rail), so one canonical set
   per size is kept, and of the sizes only a relay (1) and the whole group; the others are
   counted as pruned (``2^(g-1) - 1`` sets per group stage, less the two kept);
2. ``progress``: a stage must give the chunk to GPUs that lack it, and must not follow a stage of
   the same dimension (two stages in one group are one sub-demand);
3. ``bandwidth``: a complete sketch whose bandwidth time (its busiest dimension's per-GPU bytes
   over that dimension's per-GPU bandwidth, ``Sketch.seconds_per_byte``) is above
   ``prune_ratio`` times the best sketch's is dropped.

Sequences that are valid but do not reach every GPU within ``max_stages`` are counted as
``incomplete``. The counts go into the schedule's ``meta.syccl.sketches``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

from workbench.kit.decomposition import Decomposition

__all__ = ["Stage", "Sketch", "Exploration", "explore", "DIMENSIONS_ORDER"]

DIMENSIONS_ORDER = ("rail", "box")
FANOUTS = ("all", "one")


@dataclass(frozen=True)
class Stage:
    """A sub-demand: every holder sends in its ``dimension`` group to all members or to ``one``."""

    dimension: str
    fanout: str

    def __str__(self) -> str:
        return f"{self.dimension}-{self.fanout}"


@dataclass(frozen=True)
class Sketch:
    """A complete sequence of stages with its sends per source chunk in each dimension
    (``sends[d]``) and its bandwidth time per byte of chunk (``seconds_per_byte``)."""

    stages: tuple[Stage, ...]
    sends: dict[str, int] = field(compare=False)
    seconds_per_byte: float = field(compare=False)

    @property
    def name(self) -> str:
        """The stages joined, e.g. ``rail-all>box-all``."""
        return ">".join(str(s) for s in self.stages)


@dataclass
class Exploration:
    """The sketches kept and the counts of what was enumerated and pruned per rule."""

    kept: list[Sketch]
    counts: dict[str, int]


def explore(decomposition: Decomposition, bandwidth: dict[str, float], max_stages: int,
            prune_ratio: float) -> Exploration:
    """Every sketch of up to ``max_stages`` stages, pruned by the three rules (module docstring).
    ``bandwidth[d]``: a GPU's egress bandwidth in dimension ``d``'s tier."""
    sizes = {d.name: d.group_size for d in decomposition.dimensions}
    full = (sizes.get("box", 1), sizes.get("rail", 1))
    names = [d for d in DIMENSIONS_ORDER if d in sizes]
    counts = {"stage_sequences": 0, "destination_sets": 0, "pruned_symmetry": 0, "pruned_progress": 0,
              "incomplete": 0, "complete": 0, "pruned_bandwidth": 0, "kept": 0}
    complete: list[Sketch] = []
    for length in range(1, max_stages + 1):
        for stages in product([Stage(d, f) for d in names for f in FANOUTS], repeat=length):
            counts["stage_sequences"] += 1
            for stage in stages:  # every destination subset of a group stage, before rule 1
                sets = 2 ** (sizes[stage.dimension] - 1) - 1
                counts["destination_sets"] += sets
                counts["pruned_symmetry"] += max(0, sets - 2)
            sends = _walk(stages, sizes, full)
            if sends is None:
                counts["pruned_progress"] += 1
                continue
            if sends is False:
                counts["incomplete"] += 1
                continue
            seconds = max(sends[d] / bandwidth[d] for d in sends if sends[d])
            complete.append(Sketch(tuple(stages), sends, seconds))
    counts["complete"] = len(complete)
    best = min((s.seconds_per_byte for s in complete), default=None)
    kept = [s for s in complete if best is not None and s.seconds_per_byte <= prune_ratio * best * (1 + 1e-9)]
    counts["pruned_bandwidth"] = len(complete) - len(kept)
    counts["kept"] = len(kept)
    kept.sort(key=lambda s: (s.seconds_per_byte, len(s.stages), s.name))
    return Exploration(kept, counts)


def _walk(stages, sizes: dict[str, int], full: tuple[int, int]):
    """The sends per dimension of one source chunk along ``stages``; None where rule 2 prunes the
    sequence, False where it is valid but leaves GPUs without the chunk."""
    positions, boxes = 1, 1
    sends = {d: 0 for d in sizes}
    previous = None
    for stage in stages:
        if stage.dimension == previous:
            return None
        previous = stage.dimension
        holders = positions * boxes
        if stage.dimension == "box":
            have, size = positions, full[0]
        else:
            have, size = boxes, full[1]
        if have >= size:
            return None  # nothing new to give in this dimension
        if stage.fanout == "one":
            if have != 1:
                return None  # a relay leaves from a lone holder; from several it is not one set
            gained = 2
        else:
            gained = size
        sends[stage.dimension] += holders // have * (gained - have)
        if stage.dimension == "box":
            positions = gained
        else:
            boxes = gained
    return sends if (positions, boxes) == full else False
