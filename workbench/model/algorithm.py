"""The algorithm IR: an ``Algorithm`` lists transfers in planned order on the physical topology it is timed on.

A ``Transfer`` (``workbench.model.transfer``) moves one chunk (or several contiguous chunks, paying
alpha once) from ``src`` to ``dst`` as a ``copy`` or a ``reduce``, after the transfers named in
``deps`` have arrived. An ``Algorithm`` is built from steps, reversed (all-gather into
reduce-scatter) and concatenated (reduce-scatter then all-gather); a periodic one is one period
repeated (``workbench.model.periodic``).

Its file, ``workbench.algorithm/1`` to ``/4`` (docs/algorithm-format.md), is
``workbench.model.algorithm_format`` (the document) and ``workbench.model.algorithm_io`` (reading
and writing); this module offers their names beside the IR's.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from workbench.model.algorithm_format import (FORMAT, FORMAT_2, FORMAT_3, FORMAT_4, FORMATS, AlgorithmFormatError,
                                              algorithm_document, read_document)
from workbench.model.algorithm_io import no_cyclic_gc, read_file, write_file
from workbench.model.collective import Collective, make_collective
from workbench.model.periodic import Period, expanded, reversed_lags, second_phase_shift
from workbench.model.transfer import READ_INPUT, Transfer, read_target, with_read_target
from workbench.topology import Topology

__all__ = ["FORMAT", "FORMAT_2", "FORMAT_3", "FORMAT_4", "FORMATS", "Transfer", "Algorithm", "AlgorithmFormatError", "load_algorithm",
           "no_cyclic_gc"]


@dataclass
class Algorithm:
    topology: Topology
    collective: Collective
    chunk_bytes: float
    transfers: list[Transfer]
    meta: dict[str, Any] = field(default_factory=dict)
    # a periodic schedule: ``transfers`` is one period, repeated as this says (workbench.model.periodic)
    period: Period | None = None

    @property
    def size_bytes(self) -> float:
        """The collective's nccl-tests size (bytes) at this chunk size."""
        return self.collective.size_bytes(self.chunk_bytes)

    def __len__(self) -> int:
        return len(self.transfers)

    @property
    def total_transfers(self) -> int:
        """Transfers in the whole schedule: the period's times its repeat count when periodic."""
        return len(self.transfers) * (self.period.repeat if self.period is not None else 1)

    def expanded(self) -> "Algorithm":
        """A periodic algorithm written out transfer by transfer (itself when not periodic)."""
        return expanded(self)

    # ------------------------------------------------------------ building helpers
    @classmethod
    def from_steps(
        cls,
        topology: Topology,
        collective: Collective,
        chunk_bytes: float,
        steps: Iterable[tuple],
        meta: dict[str, Any] | None = None,
    ) -> "Algorithm":
        """From ``(chunks, src, dst, op, deps[, t_start, t_end])`` tuples; ids are assigned by position."""
        transfers = []
        for i, step in enumerate(steps):
            chunks, src, dst, op, deps = step[:5]
            chunks = (chunks,) if isinstance(chunks, int) else tuple(chunks)
            t_start, t_end = (step[5], step[6]) if len(step) >= 7 else (None, None)
            transfers.append(Transfer(i, chunks, src, dst, op, tuple(deps), t_start, t_end))
        return cls(topology, collective, chunk_bytes, transfers, dict(meta or {}))

    # ------------------------------------------------------------ transforms
    def reverse(self, reversed_topology: Topology | None = None) -> "Algorithm":
        """An all-gather / broadcast on the reversed graph turned into reduce-scatter / reduce.

        Each transfer ``u -> v`` becomes ``v -> u``, listed in reverse order; a transfer that
        waited for ``t`` becomes one that ``t`` waits for. Writes into an NPU become ``reduce``;
        writes into a switch stay ``copy`` (it only forwards), except where the switch sent the same
        value on several links (a multicast): there the writes become ``reduce``, which only a switch
        that reduces accepts (``Topology.reduces``); a multicast at any other switch cannot be
        reversed.

        A periodic algorithm is reversed without being expanded: its template as above, each lag
        ``l`` turned into ``L - l`` (``periodic.reversed_lags``). Its expansion is then the reversed
        expansion with piece ``k`` renamed ``R - 1 - k`` (``periodic.mirrored``; the exact statement
        is in the module docstring of ``workbench.model.periodic``): the same plan for the simulator
        and the verifier. A template's claimed times are dropped (they are piece 0's; reversed,
        piece 0 runs where the last piece ran).
        """
        if any(t.read is not None for t in self.transfers):
            raise ValueError("reverse() does not apply to transfers that read an earlier value")
        target_kind = {"allgather": "reducescatter", "broadcast": "reduce"}.get(self.collective.kind)
        if target_kind is None:
            raise ValueError(f"reverse() applies to allgather or broadcast, not {self.collective.kind}")
        topology = reversed_topology or self.topology.reversed()
        summed = self._switch_multicasts()  # pieces move disjoint chunks: the template's check is every piece's
        transfers = _reversed_transfers(self.transfers, topology, keep_times=self.period is None, summed=summed)
        if self.period is not None:
            for t, lag in zip(transfers, reversed_lags([t.lag for t in self.transfers])):
                t.lag = lag
        c = self.collective
        collective = make_collective(target_kind, c.num_ranks, c.chunks_per_rank, c.root)
        meta = dict(self.meta)
        meta["reversed_from"] = c.kind
        return Algorithm(topology, collective, self.chunk_bytes, transfers, meta, self.period)

    def _switch_multicasts(self) -> set[int]:
        """The transfers that send a value a switch that reduces sends more than once (reversed,
        the switch adds what they bring); ValueError naming a switch that does not reduce and sends
        one chunk twice anywhere in the file (reversed, it would have to add, or keep two values of
        the chunk apart: ``forestcoll`` then reverses with serialised switch buffers)."""
        readers: dict[tuple[int, int], list[int]] = {}
        groups: list[list[int]] = []
        sent: dict[tuple[int, int], int] = {}
        for t in self.transfers:
            if self.topology.is_switch(t.src):
                for c in t.chunks:
                    if not self.topology.reduces(t.src):
                        if (t.src, c) in sent:
                            raise ValueError(f"transfer {t.id}: switch {t.src} multicasts chunk {c} (also in "
                                             f"transfer {sent[(t.src, c)]}); that switch does not reduce, so this "
                                             f"cannot be reversed")
                        sent[(t.src, c)] = t.id
                    elif (t.src, c) in readers:
                        readers[(t.src, c)].append(t.id)
                    else:
                        readers[(t.src, c)] = [t.id]
                        groups.append(readers[(t.src, c)])
            if self.topology.is_switch(t.dst):
                for c in t.chunks:
                    readers.pop((t.dst, c), None)  # a new value: its readers are counted afresh
        return {tid for group in groups if len(group) > 1 for tid in group}

    def concat(self, second: "Algorithm", collective: Collective | None = None) -> "Algorithm":
        """Run ``second`` after ``self`` on the same topology (reduce-scatter then all-gather = all-reduce).

        Every phase-2 transfer waits for the phase-1 transfers that touch the buffers it reads or
        writes, so no phase-2 send starts before its data is final and no phase-2 write overtakes
        a phase-1 access.

        Two periodic algorithms with the same period are joined piece by piece, without being
        expanded: the template is ``self``'s followed by ``second``'s, the dependencies are the
        rule above within a piece (pieces move disjoint chunks, so no other piece is touched), and
        ``second``'s lags grow by the least shift that lists each transfer a period after the
        first-phase transfers it waits for (``periodic.second_phase_shift``): piece ``k`` of phase 2
        follows piece ``k`` of phase 1, not the whole of it. The expansion has exactly the transfers and dependencies of
        the plain concatenation of the two expansions, listed interleaved instead of one phase after
        the other (``workbench.model.periodic``).
        """
        self._check_concat(second)
        if collective is None:
            a, b = self.collective, second.collective
            if (a.kind, b.kind) == ("reducescatter", "allgather") and (a.num_ranks, a.chunks_per_rank) == (
                b.num_ranks, b.chunks_per_rank):
                collective = make_collective("allreduce", a.num_ranks, a.chunks_per_rank)
            else:
                raise ValueError(f"concat: give the combined collective for {a.kind} then {b.kind}")
        touched: dict[tuple[int, int], list[int]] = defaultdict(list)
        for t in self.transfers:
            for c in t.chunks:
                touched[(t.dst, c)].append(t.id)
                touched[(t.src, c)].append(t.id)
        offset = len(self.transfers)
        transfers = list(self.transfers)
        for t in second.transfers:
            deps = {d + offset for d in t.deps}
            for c in t.chunks:
                deps.update(touched.get((t.src, c), ()))
                deps.update(touched.get((t.dst, c), ()))
            target = read_target(t.read)
            read = t.read if target is None else with_read_target(t.read, target + offset)
            transfers.append(Transfer(t.id + offset, t.chunks, t.src, t.dst, t.op, tuple(sorted(deps)),
                                      t.t_start, t.t_end, t.lag, read=read, via=t.via))
        if self.period is not None:  # claimed times are dropped: a template's are piece 0's of its phase alone
            shift = second_phase_shift(transfers, offset)
            for t in transfers[offset:]:
                t.lag += shift
                t.t_start = t.t_end = None
        else:
            _after_phase_one(transfers, offset)
        meta = {"phases": [self.meta, second.meta]}
        for key in ("formulation", "params", "seed"):
            if key in self.meta:
                meta[key] = self.meta[key]
        return Algorithm(self.topology, collective, self.chunk_bytes, transfers, meta, self.period)

    def _check_concat(self, second: "Algorithm") -> None:
        """ValueError unless ``second`` can run after ``self`` (``concat``)."""
        if self.period != second.period:
            raise ValueError(f"concat: both phases must be plain or periodic with the same period, got "
                             f"{self.period} and {second.period}")
        if self.period is not None and any(t.read is not None for t in self.transfers + second.transfers):
            raise ValueError("concat: a periodic schedule cannot read earlier values")
        if any(t.read == READ_INPUT for t in second.transfers):  # its input is the first phase's output
            raise ValueError("concat: the second phase reads its input, which concatenation would make the "
                             "first phase's input")
        if second.topology != self.topology:
            raise ValueError("concat: the two phases are on different topologies")
        if not math.isclose(second.chunk_bytes, self.chunk_bytes, rel_tol=1e-12):
            raise ValueError("concat: the two phases use different chunk sizes")

    # ------------------------------------------------------------ the file (algorithm_format, algorithm_io)
    def to_dict(self) -> dict[str, Any]:
        """The file's document, in the lowest version that holds its fields
        (``algorithm_format.lowest_format``)."""
        return algorithm_document(self)

    def save(self, path: str | Path) -> None:
        """Write atomically, so a reader never sees half a file (a character device such as
        /dev/null is written through; ``workbench.util.files.OutputError`` names a path that cannot
        take the file)."""
        write_file(self, path)

    @classmethod
    def from_dict(cls, data: Any, source: str = "algorithm") -> "Algorithm":
        """Parse a decoded algorithm document; ``AlgorithmFormatError`` names what is wrong in ``source``."""
        return cls(*read_document(data, source))


def load_algorithm(path: str | Path) -> Algorithm:
    """Read a ``workbench.algorithm/1`` to ``/5`` JSON file; ``AlgorithmFormatError`` names what is wrong."""
    return Algorithm(*read_file(path))



def _reversed_transfers(transfers: list[Transfer], topology: Topology, keep_times: bool = True,
                        summed: set[int] = frozenset()) -> list[Transfer]:
    """``Algorithm.reverse``'s list: transfer ``count-1-i`` turned around at position ``i``, waiting
    for the reverses of the transfers that waited for it; claimed times mirrored in the last
    arrival (``keep_times``) or dropped. ``summed``: the transfers out of a multicast, whose
    reverses reduce into the (reducing) switch."""
    count = len(transfers)
    dependants: list[list[int]] = [[] for _ in range(count)]
    for t in transfers:
        for d in t.deps:
            dependants[d].append(t.id)
    horizon = max((t.t_end for t in transfers if t.t_end is not None), default=None) if keep_times else None
    out = []
    for new_id in range(count):
        old = transfers[count - 1 - new_id]
        op = "copy" if topology.is_switch(old.src) and old.id not in summed else "reduce"
        deps = tuple(sorted(count - 1 - s for s in dependants[old.id]))
        t_start = horizon - old.t_end if (horizon is not None and old.t_end is not None) else None
        t_end = horizon - old.t_start if (horizon is not None and old.t_start is not None) else None
        via = None if old.via is None else tuple(reversed(old.via))  # the same switches, the other way
        out.append(Transfer(new_id, old.chunks, old.dst, old.src, op, deps, t_start, t_end, via=via))
    return out


def _after_phase_one(transfers: list[Transfer], offset: int) -> None:
    """Shift the claimed times of a plain concatenation's second phase (from ``offset``) past the first's end."""
    phase_one_end = max((t.t_end for t in transfers[:offset] if t.t_end is not None), default=None)
    if phase_one_end is not None:
        for t in transfers[offset:]:
            t.t_start = None if t.t_start is None else t.t_start + phase_one_end
            t.t_end = None if t.t_end is None else t.t_end + phase_one_end
