"""Names shared by the MSCCL export, interpreter and import: the error, the runtime limits, step types."""

from __future__ import annotations

from typing import Callable

__all__ = ["MscclError", "MscclFormatError", "raise_race", "LIMITS", "COLL_NAMES", "REDUCING", "RECEIVING",
           "SENDING", "KNOWN_STEPS"]

LIMITS = {
    "MSCCL_MAX_NUM_STEPS": 256,  # steps per threadblock
    "MSCCL_MAX_NUM_THREAD_BLOCKS": 64,  # threadblocks per gpu
    "MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL": 32,  # send peers (and receive peers) per channel
    "MSCCL_MAX_COUNT": 72,  # cnt < 72
}
COLL_NAMES = {"allgather": "allgather", "reducescatter": "reducescatter", "allreduce": "allreduce",
               "broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall", "gather": "gather",
               "scatter": "scatter"}
REDUCING = ("rrc", "rrs", "rrcs")
RECEIVING = ("r", "rcs", "rrc", "rrs", "rrcs")
SENDING = ("s", "rcs", "rrs", "rrcs")
KNOWN_STEPS = frozenset(RECEIVING + SENDING + ("cpy", "re", "nop"))


class MscclError(ValueError):
    """An algorithm that cannot be lowered, or an XML that does not run; names rank, threadblock, step."""


class MscclFormatError(MscclError):
    """A file that is not a runtime file at all: XML that is not well-formed, a plan that is not valid
    JSON, the wrong root element, an attribute or field of the wrong type. Bad input (exit 2) in every
    command, where a well-formed file that fails when run stays an ``MscclError`` (exit 1)."""


def raise_race(search: Callable[[], str | None], source: str) -> None:
    """Run a race search; MscclError with its sentence (or with why it could not run) for ``source``."""
    try:
        race = search()
    except ValueError as exc:  # too large to analyse
        raise MscclError(f"{source}: {exc}") from None
    if race is not None:
        raise MscclError(f"{source}: {race}")
