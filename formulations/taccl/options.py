"""TACCL's options: the one declaration of its parameters (``workbench.plugin.parameters``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.plugin.parameters import Options, option

__all__ = ["TacclOptions", "HEURISTICS"]

HEURISTICS = ("auto", "h10", "h14", "h15", "paper")  # contiguity/ordering heuristics (ordering.py)


def _check_sketch(value: Any) -> None:
    """Read the sketch a parameter names (``SketchError``, a ValueError, naming the file and field),
    so a path that is not a sketch is refused with the parameters, before a cell runs."""
    from formulations.taccl.sketch import load_sketch

    load_sketch(value)


@dataclass(frozen=True)
class TacclOptions(Options):
    """TACCL's sketch, its solver settings and the per-stage limit."""

    sketch: str | dict | None = option(None, "a shipped sketch name, a sketch file or a mapping", check=_check_sketch)
    stage_time_limit: Any = option(None, "limit per MILP stage (default: a share of the total)",
                                   types=("duration", "none"))
    backend: str = option("highs", "MILP solver", choices=("highs", "cbc"))
    heuristic: str = option("auto", "contiguity/ordering heuristic", choices=HEURISTICS)
    max_contig: int = option(6, "largest number of chunks sent as one contiguous transfer", minimum=1)
    mip_gap: float = option(1e-6, "relative MIP gap", minimum=0, maximum=1)
    threads: int = option(1, "solver threads", minimum=1)
    serialise_reductions: bool = option(True, "order reductions into one buffer (runtime-safe)")
    symmetry: str = option("off", "'dimensions': solve one rail and one box group of a rail cluster with this "
                           "model and compose them (workbench.plugin.composition)", choices=("off", "dimensions"))
    rounds: int = option(16, "with symmetry: rounds the composed schedule pipelines", minimum=1)

    def estimate(self, problem: Any) -> list[tuple[str, float]]:
        """The composed ``rounds`` of ``symmetry: dimensions`` (a schedule of that many chunks per
        rank, ``BYTES_PER_LISTED_TRANSFER``) and the solver's ``threads`` (``BYTES_PER_THREAD``);
        ``max_contig`` is bounded by the problem's own chunks. Figures in ``workbench.util.size_guard``."""
        from workbench.util import size_guard

        parts = [("threads", size_guard.BYTES_PER_THREAD * float(self.threads))]
        if self.symmetry == "dimensions":
            parts.append(("rounds", problem.listed_bytes(float(self.rounds))))
        return parts

    @property
    def stage_seconds(self) -> float | None:
        """``stage_time_limit`` in seconds (given as a number or a duration like "20s"), or None."""
        value = self.stage_time_limit
        if value is None:
            return None
        if isinstance(value, (int, float)):
            return float(value)
        from workbench.util.units import parse_time

        return parse_time(str(value))
