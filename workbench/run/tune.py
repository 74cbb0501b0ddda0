"""Per-size bundles: for one topology and collective, the fastest schedule of each size bucket,
lowered to the files a runtime picks by message size (``workbench tune``).

Buckets. A range ``LO..HI`` (bytes, nccl-tests sizes) is cut at ``LO * 4^i``: bucket ``i`` holds
the sizes ``[LO * 4^i, LO * 4^(i+1) - 1]``, the last one ends at ``HI``. Ends are inclusive on both
sides, as the MSCCL executor (NCCL's and RCCL's, which load every XML of ``MSCCL_ALGO_DIR``) reads
``minBytes``/``maxBytes``: it takes an algorithm for ``minBytes <= nbytes <= maxBytes``; MSCCL++
plans carry the same pair as ``min_message_size``/``max_message_size``. The next bucket starts one
byte above the last one's end, so the files tile ``LO..HI`` with no gap and no overlap (the
research runtime, microsoft/msccl, reads ``maxBytes`` as exclusive: there a size equal to an end
falls to the next file, still one file for every size).

Winner. Each bucket is synthesized at its representative size (the geometric middle of its ends)
by every candidate formulation, each in its own cell under the time limit (``workbench.run``), and
verified and simulated there; the winner is the fastest simulated schedule among those that lower
to the runtime (a schedule through switch nodes does not: MSCCL addresses GPUs only). Ring is
always timed as the reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from workbench.reports import row_keys as R

__all__ = ["Bucket", "buckets", "parse_range", "RangeError", "fast_formulations"]

STEP = 4  # each bucket spans a factor of four in size
MAX_BUCKETS = 32  # 4^32 bytes is far beyond any message; a range needing more is refused


class RangeError(ValueError):
    """A size range that is not ``LO..HI`` with 1 <= LO <= HI."""


@dataclass(frozen=True)
class Bucket:
    """Sizes ``low..high`` (bytes, both inclusive), synthesized at ``size``."""

    index: int
    low: int
    high: int

    @property
    def size(self) -> int:
        """The representative size: the geometric middle of the ends, a whole number of bytes."""
        return max(self.low, min(self.high, round(math.sqrt(self.low * self.high))))

    def label(self, last: bool = False) -> str:
        """``[low, next low)``, or ``[low, high]`` for the range's last bucket."""
        from workbench.util.units import format_size

        if last:
            return f"[{format_size(self.low)}, {format_size(self.high)}]"
        return f"[{format_size(self.low)}, {format_size(self.high + 1)})"


def parse_range(text: str) -> tuple[int, int]:
    """``LO..HI`` with nccl-tests sizes (``64KB..256MB``) -> bytes; RangeError naming what is wrong."""
    from workbench.util.units import UnitError, parse_size

    low_text, sep, high_text = str(text).partition("..")
    if not sep or not low_text.strip() or not high_text.strip():
        raise RangeError(f"{text!r}: expected LO..HI, e.g. 64KB..256MB")
    try:
        low, high = parse_size(low_text.strip()), parse_size(high_text.strip())
    except UnitError as exc:
        raise RangeError(f"{text!r}: {exc}") from None
    if not (math.isfinite(low) and math.isfinite(high)) or low < 1 or high < low:
        raise RangeError(f"{text!r}: needs 1 B <= LO <= HI")
    if low != int(low) or high != int(high):
        raise RangeError(f"{text!r}: sizes are whole bytes")
    return int(low), int(high)


def buckets(low: int, high: int) -> list[Bucket]:
    """The buckets of ``low..high`` (module docstring): consecutive, inclusive, covering it."""
    if low < 1 or high < low:
        raise RangeError(f"{low}..{high}: needs 1 <= LO <= HI")
    found: list[Bucket] = []
    start = low
    while start <= high:
        if len(found) == MAX_BUCKETS:
            raise RangeError(f"{low}..{high}: more than {MAX_BUCKETS} buckets of {STEP}x")
        end = min(high, low * STEP ** (len(found) + 1) - 1)
        found.append(Bucket(len(found), start, end))
        start = end + 1
    return found


def fast_formulations() -> list[str]:
    """Every registered schedule formulation but those that say they take minutes per size (a class
    attribute ``tune_candidate = False``: the solver methods), by name."""
    from workbench.plugin.registry import available_formulations, get_formulation

    return [name for name in available_formulations()
            if get_formulation(name).kind == "schedule" and getattr(get_formulation(name), "tune_candidate", True)]


def summary_row(bucket: Bucket, winner: str | None, fields: dict[str, Any] | None, ring: float | None,
                files: list[str], note: str = "") -> dict[str, Any]:
    """One line of the bundle's summary (``summary.json`` / ``summary.md``)."""
    fields = fields or {}
    time = fields.get(R.COLLECTIVE_TIME)
    return {"bucket": bucket.index, "min_bytes": bucket.low, "max_bytes": bucket.high, "size": bucket.size,
            "winner": winner, "collective_time": time, "bound": fields.get(R.BOUND),
            "efficiency": fields.get(R.EFFICIENCY), "ring_time": ring,
            "vs_ring": (ring / time) if (ring and time) else None, "files": files, "note": note}
