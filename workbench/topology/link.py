"""A directed link (alpha, bandwidth, per-message overhead), the default values of a link, and
``TopologyError``, which every topology module raises naming the bad link, node or field."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Link", "TopologyError", "DEFAULT_ALPHA", "DEFAULT_BANDWIDTH"]

DEFAULT_ALPHA = 0.5e-6  # TACOS paper default link latency
DEFAULT_BANDWIDTH = 50e9  # TACOS paper default link bandwidth (B/s)


class TopologyError(ValueError):
    """An invalid topology or spec; the message names the offending link, node or field."""


@dataclass(frozen=True)
class Link:
    """One directed link. ``alpha``: latency (s); ``bandwidth``: B/s; ``overhead``: seconds each
    message occupies the link beyond its bytes (LogGP's gap), 0 by default."""

    src: int
    dst: int
    alpha: float
    bandwidth: float
    overhead: float = 0.0

    def bundled(self, other: "Link") -> "Link":
        """This link and a parallel one (same endpoints) as one bundle: bandwidths add, the
        smaller alpha and overhead (what a direct link and an unwound switch path become)."""
        return Link(self.src, self.dst, min(self.alpha, other.alpha), self.bandwidth + other.bandwidth,
                    min(self.overhead, other.overhead))
