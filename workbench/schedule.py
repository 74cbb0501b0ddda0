"""Building schedules whose dependencies are derived from buffer accesses.

Formulations that think in steps (ring, recursive halving-doubling, trees) add transfers in
planned order; ``ScheduleBuilder`` fills ``deps`` so that every execution agrees with the file
order (the verifier's timeline rule):

* a transfer reading (src, c) waits for every earlier write to (src, c) (read after write);
* a ``copy`` into (dst, c) waits for earlier writes and reads of (dst, c) (write after write/read);
* a ``reduce`` into (dst, c) waits for earlier reads of (dst, c) and earlier copies into it;
  reduces into the same buffer may overlap each other, since their contributions are disjoint.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from workbench.algorithm import Algorithm, Transfer
from workbench.collective import Collective
from workbench.topology import Topology

__all__ = ["ScheduleBuilder"]


class ScheduleBuilder:
    def __init__(self, topology: Topology, collective: Collective, chunk_bytes: float) -> None:
        self.topology = topology
        self.collective = collective
        self.chunk_bytes = chunk_bytes
        self.transfers: list[Transfer] = []
        self._writes: dict[tuple[int, int], list[int]] = defaultdict(list)  # since the last copy
        self._reads: dict[tuple[int, int], list[int]] = defaultdict(list)  # since the last copy

    def add(self, chunks: int | Iterable[int], src: int, dst: int, op: str = "copy",
            extra_deps: Iterable[int] = ()) -> int:
        """Append a transfer (planned after every transfer added before it); returns its id."""
        chunks = (chunks,) if isinstance(chunks, int) else tuple(chunks)
        deps: set[int] = set(extra_deps)
        for c in chunks:
            deps.update(self._writes[(src, c)])
            key = (dst, c)
            deps.update(self._reads[key])
            if op == "copy":
                deps.update(self._writes[key])
        tid = len(self.transfers)
        self.transfers.append(Transfer(tid, chunks, src, dst, op, tuple(sorted(deps))))
        for c in chunks:
            self._reads[(src, c)].append(tid)
            key = (dst, c)
            if op == "copy":  # later accesses wait for this copy, which waited for everything before
                self._writes[key] = [tid]
                self._reads[key] = []
            else:  # reduces may overlap each other, so each keeps waiting for the reads before it
                self._writes[key].append(tid)
        return tid

    def build(self, meta: dict[str, Any] | None = None) -> Algorithm:
        return Algorithm(self.topology, self.collective, self.chunk_bytes, self.transfers, dict(meta or {}))
