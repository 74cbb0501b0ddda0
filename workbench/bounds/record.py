"""The ``Bounds`` record of one problem: every bound, the best of them, and what a schedule's time says of it.

``best`` is the largest valid bound; ``exact`` says a simulated schedule meets it (within
``TIGHT``), which alone proves it the optimum in the simulator's model; ``efficiency`` is the
fraction of ``best`` a schedule reaches; ``to_dict`` is the form rows and caches store. The
bounds themselves and what each rests on: ``workbench.bounds``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Bounds", "TIGHT"]

# a schedule within this relative distance of ``best`` proves it the optimum (float sums differ)
TIGHT = 1e-4


@dataclass
class Bounds:
    injection: float
    latency: float
    cut: float | None = None
    flow_lp: float | None = None
    ideal: float | None = None
    optimum: float | None = None
    splitting_cut: float | None = None
    gossip: float | None = None
    group_gossip: float | None = None  # All-Reduce: the gossip bound with boxes as parties
    two_hop: float | None = None  # All-Reduce: raw inputs through each in-link, or two deliveries
    egress: float | None = None  # All-Reduce: each NPU's input leaves it, then reaches the farthest NPU
    # All-Reduce: RS* + AG*, the two throughput optima in sequence; a throughput figure, not a bound
    # and not a time a schedule is known to reach at this size
    rs_ag_throughput: float | None = None
    alpha_beta: float | None = None  # latency and bandwidth together: workbench.bounds.alpha_beta
    optimum_exact: bool = False  # optimum / flow_lp is the proven throughput optimum
    notes: dict[str, str] = field(default_factory=dict)
    # the fastest simulated schedule of this problem the caller knows (s): it decides ``exact``
    schedule_time: float | None = None
    # an LP stopped by its time limit: another solve, with more time or less load, may prove more
    cut_short: bool = False

    @property
    def bandwidth_best(self) -> float:
        """The largest bound that holds no path latency (all but ``latency``, ``alpha_beta``,
        ``two_hop`` and ``egress``): what a caller adds its own latency term to (TE-CCL's hop
        count); 0 where none is set."""
        return max((v for v in (self.injection, self.cut, self.flow_lp, self.optimum, self.splitting_cut,
                                self.gossip, self.group_gossip) if v is not None), default=0.0)

    @property
    def best(self) -> float:
        """The largest valid lower bound (``ideal`` and ``rs_ag_throughput`` are not bounds)."""
        return max(v for v in (self.bandwidth_best, self.latency, self.alpha_beta, self.two_hop, self.egress)
                   if v is not None)

    @property
    def above_schedule(self) -> bool:
        """True when ``best`` is above a verified schedule's simulated time (``schedule_time``) by
        more than ``TIGHT`` relative: a lower bound never is, so one that is proves nothing (a bound
        bug, or a cached bound that is not this problem's)."""
        return self.schedule_time is not None and self.best > self.schedule_time * (1 + TIGHT)

    @property
    def exact(self) -> bool:
        """True when ``best`` is proven to be the optimum in the simulator's model at this size: a
        simulated schedule (``schedule_time``) meets it within ``TIGHT`` relative. The throughput
        optimum (``optimum_exact``) proves the bandwidth term only; what alpha and finite chunks
        add above it is proven by nothing but a schedule. Never where ``best`` is above the
        schedule (``above_schedule``)."""
        return (self.schedule_time is not None and self.schedule_time <= self.best * (1 + TIGHT)
                and not self.above_schedule)

    @property
    def label(self) -> str:
        """``"optimum"`` when ``best`` is proven exact, else ``"bound"``."""
        return "optimum" if self.exact else "bound"

    def efficiency(self, collective_time: float) -> float | None:
        """``best / collective_time``: the fraction of the bound a schedule reaches, at most 1 (a
        schedule within ``TIGHT`` of the bound meets it; float sums differ). None where ``best`` is
        above that time by more (a lower bound never is: ``above_schedule``); NaN for time <= 0."""
        if not collective_time > 0:
            return float("nan")
        ratio = self.best / collective_time
        if ratio > 1 + TIGHT:
            return None
        return min(ratio, 1.0)

    def to_dict(self) -> dict[str, Any]:
        """Every bound (None where not computed) with ``best``, ``exact``, ``label`` and the notes
        (with ``above_schedule`` saying so where ``best`` is above the schedule's time)."""
        notes = dict(self.notes)
        if self.above_schedule:
            notes["above_schedule"] = (f"best bound {self.best:.6g} s is above the verified schedule's simulated "
                                       f"time {self.schedule_time:.6g} s: a lower bound never is (a bug in the "
                                       f"bounds); not used to call the schedule optimal")
        return {"injection": self.injection, "latency": self.latency, "cut": self.cut,
                "flow_lp": self.flow_lp, "optimum": self.optimum, "splitting_cut": self.splitting_cut,
                "gossip": self.gossip, "group_gossip": self.group_gossip, "two_hop": self.two_hop,
                "egress": self.egress, "alpha_beta": self.alpha_beta, "best": self.best, "exact": self.exact,
                "label": self.label,
                "rs_ag_throughput": self.rs_ag_throughput, "ideal": self.ideal, "notes": notes}
