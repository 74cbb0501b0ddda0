"""SyCCL's simulator-based selection (section 5.2): which pipeline depths (chunks per rank) the
candidate search tries, how a candidate is timed, which is kept, and when the search stops."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from formulations.syccl.options import parse_depths
from workbench.checking.simulate import simulate
from workbench.kit.schedule import adapts_to_size, claim_in_model, claim_listing
from workbench.model.algorithm import Algorithm
from workbench.plugin.registry import Problem, SynthesisResult

__all__ = ["GAIN", "PATIENCE", "worth_cutting", "depths", "Selection"]

GAIN = 0.002  # a deeper pipeline must beat the best so far by this fraction, or the search
PATIENCE = 3  # ... stops after this many depths in a row without such a gain


def worth_cutting(problem: Problem, k: int) -> bool:
    """Whether ``k`` chunks per rank can still pay: a chunk's serialisation on the slowest NPU link
    must be at least a sixteenth of the smallest alpha (finer pieces only add latency and messages)."""
    n = problem.topology.num_npus
    npu_links = [l for l in problem.topology.links if l.src < n]
    slowest = min(l.bandwidth for l in npu_links)
    alpha = min((l.alpha for l in npu_links if l.alpha > 0), default=0.0)
    return problem.with_chunks(k).chunk_bytes / slowest >= alpha / 16


def depths(given: str | int, problem: Problem, most: int) -> list[int]:
    """The given depths (``parse_depths``: comma-separated, or one integer), or (``auto``) the
    powers of two up to ``2 ** most`` that are worth cutting."""
    listed = parse_depths(given)
    if listed is not None:
        return listed
    return [k for k in (2 ** i for i in range(0, most + 1)) if k == 1 or worth_cutting(problem, k)]


@dataclass
class Selection:
    """The candidates timed so far (``tried``), the fastest (``best``: time, algorithm, entry), and
    whether the current depth improved on the depths before it by ``GAIN``."""

    problem: Problem
    on_incumbent: Callable[[Algorithm], None] | None = None
    tried: list[dict[str, Any]] = field(default_factory=list)
    best: tuple[float, Algorithm, dict] | None = None
    improved: bool = False
    stale: int = 0
    stopped: str | None = None  # why the search stopped before any candidate, other than the time limit

    def consider(self, algorithm: Algorithm, seconds_left: float, **entry: Any) -> None:
        """Time ``algorithm`` in the default model (below 256 MB the better of its planned and
        list-scheduled listings) and keep it if it is the fastest so far."""
        if adapts_to_size(self.problem.topology, self.problem.size_bytes):
            algorithm = claim_listing(algorithm, self.problem.size_bytes, seconds_left)
            seconds = algorithm.meta["claimed_time"]
        else:
            seconds = simulate(algorithm).collective_time
        entry = {**entry, "time": seconds, "transfers": len(algorithm.transfers)}
        self.tried.append(entry)
        if self.best is None or seconds < self.best[0] * (1 - 1e-9):
            self.improved = self.improved or self.best is None or seconds < self.best[0] * (1 - GAIN)
            self.best = (seconds, algorithm, entry)
            if self.on_incumbent is not None:
                self.on_incumbent(algorithm)

    def depth_done(self, auto: bool) -> bool:
        """Close a depth: True when the search should stop (``PATIENCE`` depths in a row without a
        gain, where the depths are chosen automatically)."""
        self.stale = 0 if self.improved else self.stale + 1
        self.improved = False
        return auto and self.stale >= PATIENCE

    def result(self, started: float, expired: bool, meta: dict[str, Any], stats: dict[str, Any]) -> SynthesisResult:
        """The fastest candidate as the synthesis result: ``meta`` (with the candidates timed) under
        ``meta.syccl``, its time claimed in the default model; ``timeout`` without any candidate or
        when the deadline ended the search, else ``feasible``; ``error`` naming why (``stopped``)
        when the search ended without a candidate before the time limit."""
        if self.best is None and not expired:
            return SynthesisResult([], "error", time.perf_counter() - started,
                                   message=f"no candidate was built: {self.stopped or 'no depth was tried'}")
        if self.best is None:
            return SynthesisResult([], "timeout", time.perf_counter() - started,
                                   message="the time limit passed before any candidate was built")
        _, algorithm, entry = self.best
        algorithm.meta.update({"syccl": {
            **meta, "candidates_simulated": len(self.tried), "chosen": entry, "tried": self.tried}})
        seconds = time.perf_counter() - started
        if "claimed_time" not in algorithm.meta:
            claim_in_model(algorithm)
        return SynthesisResult([algorithm], "timeout" if expired else "feasible", seconds,
                               stats={**stats, "candidates": len(self.tried)})
