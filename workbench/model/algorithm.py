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
from workbench.model.periodic import Period, expanded
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

    def _plain(self, operation: str) -> None:
        if self.period is not None:
            raise ValueError(f"{operation} applies to a plain algorithm; expand the periodic one first "
                             f"(Algorithm.expanded) or build it per period")

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
        writes into a switch stay ``copy`` (a switch only forwards), so a switch that sent the
        same chunk on several links (a multicast) cannot be reversed.
        """
        self._plain("reverse()")
        if any(t.read is not None for t in self.transfers):
            raise ValueError("reverse() does not apply to transfers that read an earlier value")
        target_kind = {"allgather": "reducescatter", "broadcast": "reduce"}.get(self.collective.kind)
        if target_kind is None:
            raise ValueError(f"reverse() applies to allgather or broadcast, not {self.collective.kind}")
        topology = reversed_topology or self.topology.reversed()
        sent: dict[tuple[int, int], int] = {}
        for t in self.transfers:
            if self.topology.is_switch(t.src):
                for c in t.chunks:
                    if (t.src, c) in sent:
                        raise ValueError(
                            f"transfer {t.id}: switch {t.src} multicasts chunk {c} (also in transfer "
                            f"{sent[(t.src, c)]}); a switch cannot reduce, so this cannot be reversed"
                        )
                    sent[(t.src, c)] = t.id
        count = len(self.transfers)
        dependants: list[list[int]] = [[] for _ in range(count)]
        for t in self.transfers:
            for d in t.deps:
                dependants[d].append(t.id)
        horizon = max((t.t_end for t in self.transfers if t.t_end is not None), default=None)
        transfers = []
        for new_id in range(count):
            old = self.transfers[count - 1 - new_id]
            op = "copy" if topology.is_switch(old.src) else "reduce"
            deps = tuple(sorted(count - 1 - s for s in dependants[old.id]))
            t_start = horizon - old.t_end if (horizon is not None and old.t_end is not None) else None
            t_end = horizon - old.t_start if (horizon is not None and old.t_start is not None) else None
            transfers.append(Transfer(new_id, old.chunks, old.dst, old.src, op, deps, t_start, t_end))
        c = self.collective
        collective = make_collective(target_kind, c.num_ranks, c.chunks_per_rank, c.root)
        meta = dict(self.meta)
        meta["reversed_from"] = c.kind
        return Algorithm(topology, collective, self.chunk_bytes, transfers, meta)

    def concat(self, second: "Algorithm", collective: Collective | None = None) -> "Algorithm":
        """Run ``second`` after ``self`` on the same topology (reduce-scatter then all-gather = all-reduce).

        Every phase-2 transfer waits for the phase-1 transfers that touch the buffers it reads or
        writes, so no phase-2 send starts before its data is final and no phase-2 write overtakes
        a phase-1 access.
        """
        self._plain("concat()")
        second._plain("concat()")
        if any(t.read == READ_INPUT for t in second.transfers):  # its input is the first phase's output
            raise ValueError("concat: the second phase reads its input, which concatenation would make the "
                             "first phase's input")
        if second.topology != self.topology:
            raise ValueError("concat: the two phases are on different topologies")
        if not math.isclose(second.chunk_bytes, self.chunk_bytes, rel_tol=1e-12):
            raise ValueError("concat: the two phases use different chunk sizes")
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
                                      t.t_start, t.t_end, read=read))
        phase_one_end = max((t.t_end for t in self.transfers if t.t_end is not None), default=None)
        if phase_one_end is not None:
            for t in transfers[offset:]:
                t.t_start = None if t.t_start is None else t.t_start + phase_one_end
                t.t_end = None if t.t_end is None else t.t_end + phase_one_end
        meta = {"phases": [self.meta, second.meta]}
        for key in ("formulation", "params", "seed"):
            if key in self.meta:
                meta[key] = self.meta[key]
        return Algorithm(self.topology, collective, self.chunk_bytes, transfers, meta)

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
    """Read a ``workbench.algorithm/1`` to ``/4`` JSON file; ``AlgorithmFormatError`` names what is wrong."""
    return Algorithm(*read_file(path))

