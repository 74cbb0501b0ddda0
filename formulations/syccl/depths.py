"""Which pipeline depths (chunks per rank) SyCCL's candidate search tries, and when it stops."""

from __future__ import annotations

from workbench.plugin.registry import Problem

__all__ = ["GAIN", "PATIENCE", "worth_cutting", "depths"]

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


def depths(given: str, problem: Problem, most: int) -> list[int]:
    """The given comma-separated depths, or (``auto``) the powers of two up to ``2 ** most`` that are
    worth cutting."""
    if given != "auto":
        return [int(x) for x in str(given).split(",") if x.strip()]
    return [k for k in (2 ** i for i in range(0, most + 1)) if k == 1 or worth_cutting(problem, k)]
