"""One transfer of the algorithm IR: chunks moved from ``src`` to ``dst`` as a copy or a reduce, after its dependencies.

A ``Transfer`` moves one chunk (or several contiguous chunks, paying alpha once) from ``src`` to
``dst`` as a ``copy`` or a ``reduce``, after the transfers named in ``deps`` have arrived;
``t_start`` and ``t_end`` are the times a formulation claims for it, and ``lag`` places a
periodic schedule's copy (``workbench.model.periodic``). ``read`` names the value of the source it
sends: its current one (None), its input (``READ_INPUT``), what it held right after an earlier
transfer ``k`` into it (``k``), or what transfer ``k`` brought it (``read_carried(k)``): values a
runtime keeps in scratch (docs/verifier.md). ``via`` names the switches it crosses, in order, where
the topology's own route (the breadth-first one, ties to low ids) is not the one meant: a fabric
with several spines spreads its traffic over them (docs/cost-model.md, "Routes"). ``to_dict`` is its
entry in an algorithm file (docs/algorithm-format.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Transfer", "READ_INPUT", "read_carried", "read_target", "reads_carried", "with_read_target"]

READ_INPUT = -1  # ``Transfer.read``: the source's input, as it was before any transfer


def read_carried(k: int) -> int:
    """``Transfer.read`` for "what transfer ``k`` brought the source" (kept apart from ``k``, "after k")."""
    return -2 - k


def reads_carried(read: int | None) -> bool:
    """Whether ``read`` names what an earlier transfer brought (``read_carried``)."""
    return read is not None and read <= -2


def read_target(read: int | None) -> int | None:
    """The earlier transfer a ``read`` names (after it, or what it brought); None for the current
    value or the input."""
    if read is None or read == READ_INPUT:
        return None
    return read if read >= 0 else -2 - read


def with_read_target(read: int | None, target: int) -> int | None:
    """``read`` naming ``target`` instead, of the same kind (a relisting renumbers its transfers)."""
    if read_target(read) is None:
        return read
    return read_carried(target) if reads_carried(read) else target


@dataclass(slots=True)
class Transfer:
    id: int
    chunks: tuple[int, ...]
    src: int
    dst: int
    op: str = "copy"
    deps: tuple[int, ...] = ()
    t_start: float | None = None
    t_end: float | None = None
    lag: int = 0  # periodic schedules only: piece k's copy is listed in period k + lag (workbench.model.periodic)
    # None: the source's current value; READ_INPUT: its input; k >= 0: its value after transfer k;
    # read_carried(k): what transfer k brought it
    read: int | None = None
    # the switches the transfer crosses, in order (src -> via... -> dst); None: the topology's route
    via: tuple[int, ...] | None = None

    @property
    def chunk(self) -> int:
        """The chunk of a single-chunk transfer (the first chunk of a message)."""
        return self.chunks[0]

    def to_dict(self) -> dict[str, Any]:
        """The transfer's JSON entry: ``chunk`` for a single chunk, else ``chunks``; ``lag`` only when non-zero."""
        entry: dict[str, Any] = {"id": self.id}
        if len(self.chunks) == 1:
            entry["chunk"] = self.chunks[0]
        else:
            entry["chunks"] = list(self.chunks)
        entry.update(src=self.src, dst=self.dst, op=self.op, deps=list(self.deps),
                     t_start=self.t_start, t_end=self.t_end)
        if self.lag:
            entry["lag"] = self.lag
        if self.read is not None:
            entry["read"] = ("input" if self.read == READ_INPUT else
                             {"carried": read_target(self.read)} if reads_carried(self.read) else self.read)
        if self.via is not None:
            entry["via"] = list(self.via)
        return entry

