"""Which earlier values a lowering keeps in scratch, and which input slots an in-place call would overwrite.

A transfer that reads an earlier value of its source (``Transfer.read``, docs/verifier.md "Earlier
values") is lowered by both exporters the same way, decided here once:

* its **input** (``READ_INPUT``): read where the chunk works when nothing ever writes the source's
  chunk (it still holds the input); otherwise a copy of the input slot made into fresh scratch
  before anything else runs (``input_copies``), so neither a later receive nor, in place, a receive
  into the aliased output slot can change it;
* what it held **after transfer k**: read where the chunk works when ``k`` is the last transfer to
  write it; otherwise a copy into fresh scratch made right after ``k`` has landed (``after``), so a
  later write need not wait for the send (the plan's timing);
* what **transfer k brought** it: the same as "after k" when ``k`` is a copy; a reduction ``k``
  lands apart in scratch and is added from there (``landing_apart``), and the send reads the landed
  partial sum.

``overwritten_inputs``: chunks that work in their input slot (read, never written) but whose slot an
in-place call overwrites (All-to-All's piece for rank d sits at i[d*k + j], where the piece from d
lands): both exporters copy them into scratch first, so one file is valid in and out of place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.model.algorithm import Algorithm
from workbench.model.transfer import READ_INPUT, Transfer, read_target, reads_carried
from workbench.msccl.layout import contiguous_runs, in_place_slot

__all__ = ["KeptValues", "ScratchPlaces", "kept_values", "overwritten_inputs", "scratch_copies"]


@dataclass
class KeptValues:
    input_copies: set[tuple[int, int]] = field(default_factory=set)  # (rank, chunk): input copied at the start
    after: dict[int, set[int]] = field(default_factory=dict)  # transfer k -> chunks copied once k has landed
    landing_apart: set[int] = field(default_factory=set)  # reductions whose partial sum is kept where it landed


def kept_values(algorithm: Algorithm) -> KeptValues:
    """The copies and landings the transfers' ``read`` fields need (module docstring)."""
    transfers = algorithm.transfers
    last_writer: dict[tuple[int, int], int] = {}
    for t in transfers:
        for c in t.chunks:
            last_writer[(t.dst, c)] = t.id
    kept = KeptValues()
    for t in transfers:
        if t.read is None:
            continue
        if t.read == READ_INPUT:
            kept.input_copies.update((t.src, c) for c in t.chunks if (t.src, c) in last_writer)
            continue
        k = read_target(t.read)
        if reads_carried(t.read) and transfers[k].op == "reduce":
            kept.landing_apart.add(k)
            continue
        changed = [c for c in t.chunks if last_writer.get((t.src, c)) != k]
        if changed:
            kept.after.setdefault(k, set()).update(changed)
    return kept


def overwritten_inputs(algorithm: Algorithm, location: dict, outputs: dict) -> set[tuple[int, int]]:
    """(rank, chunk) pairs working in an input slot that an in-place call writes into (module docstring)."""
    c = algorithm.collective
    k = c.chunks_per_rank

    def alias(rank: int, place: tuple[str, int]) -> tuple[int, str, int]:
        return (rank, *in_place_slot(c.kind, k, rank, *place))

    written = {alias(t.dst, location[(t.dst, ch)]) for t in algorithm.transfers for ch in t.chunks}
    written |= {alias(rank, ("o", off)) for (rank, _), off in outputs.items()}
    return {key for key, place in location.items() if place[0] == "i" and alias(key[0], place) in written}


def scratch_copies(sources: list[tuple[int, tuple[str, int]]], first: int) -> tuple[dict[int, tuple[str, int]], list]:
    """Keeping (chunk, place) pairs in scratch from slot ``first`` on: where each chunk is kept, and
    the copies as (from place, to place, count), one per run contiguous at both ends."""
    places = [place for _, place in sources]
    kept = [("s", first + i) for i in range(len(sources))]
    copies = [(places[start], kept[start], count) for start, count in contiguous_runs(places, kept)]
    return {chunk: place for (chunk, _), place in zip(sources, kept)}, copies


class ScratchPlaces:
    """Both exporters' scratch: the next free slot per rank (``top``, from ``first_free``), the values
    kept (``kept``) and where each lives (``at``: ``("input", rank, c)``, ``("after" | "carried", k,
    c)``). Building it moves the inputs an in-place call would overwrite into scratch (``location``
    and ``copies_in`` are the lowering's own, changed in place)."""

    def __init__(self, algorithm: Algorithm, location: dict, outputs: dict, copies_in: list,
                 first_free: int) -> None:
        self.top = [first_free] * algorithm.collective.num_ranks
        self.kept = kept_values(algorithm)
        self.at: dict[tuple, tuple[str, int]] = {}
        self.location = location
        for key in sorted(overwritten_inputs(algorithm, location, outputs)):
            location[key] = ("s", self.take(key[0]))
            copies_in.append(key)

    def take(self, rank: int, count: int = 1) -> int:
        """The first of ``count`` fresh scratch slots of ``rank``."""
        first = self.top[rank]
        self.top[rank] += count
        return first

    def keep(self, rank: int, sources: list[tuple[int, tuple[str, int]]], tag: tuple) -> list:
        """Fresh scratch for (chunk, place) pairs, each chunk noted under ``tag + (chunk,)``; the copies
        to make, as (from, to, count) runs (``scratch_copies``)."""
        kept, copies = scratch_copies(sources, self.take(rank, len(sources)))
        self.at.update((tag + (chunk,), place) for chunk, place in kept.items())
        return copies

    def read_place(self, t: Transfer, chunk: int) -> tuple[str, int]:
        """Where the send of ``t`` reads ``chunk``: a kept earlier value, or where the chunk works."""
        here = self.location[(t.src, chunk)]
        if t.read is None:
            return here
        if t.read == READ_INPUT:
            return self.at.get(("input", t.src, chunk), here)
        k = read_target(t.read)
        if reads_carried(t.read) and ("carried", k, chunk) in self.at:
            return self.at[("carried", k, chunk)]
        return self.at.get(("after", k, chunk), here)

