"""What a cell's child process is asked to do (``CellRequest``), handed from the runner or
``workbench synth`` to the monitor and, pickled, to the cell.

``kind``: ``schedule`` (synthesize, verify, simulate), ``design`` (a design formulation) or
``evaluate`` (verify and simulate the incumbent of a cell killed at its limit). The cell carries
the experiment's choices; the request adds what only the caller knows: a topology already built
(``workbench synth`` builds it to check the arguments, so the cell does not build it again), a
design-derived topology spec, where to save the algorithm files, the absolute deadline of a
command-line run, the incumbent to evaluate, the folder an import-path formulation's module is
loaded from when it is not on ``sys.path`` (the cell never imports from its current folder), the
run folder that keeps each problem's bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from workbench.config.evaluation import Evaluation

if TYPE_CHECKING:
    from workbench.model.algorithm import Algorithm
    from workbench.config.experiment import Cell, DesignCell
    from workbench.topology import Topology

__all__ = ["CellRequest", "KINDS"]

KINDS = ("schedule", "design", "evaluate")


@dataclass(frozen=True)
class CellRequest:
    kind: str
    cell: "Cell | DesignCell"
    topology: "Topology | None" = None  # built already; else the cell builds ``cell.topology``
    algorithm_path: str | None = None  # where the first algorithm file goes (save_algorithms)
    deadline: float | None = None  # absolute wall-clock time (time.time()) the synthesis must end by
    algorithm: "Algorithm | None" = None  # kind "evaluate": the incumbent
    # where an import-path formulation's module not on sys.path is loaded from by its file location
    # (the experiment config's folder; the current folder of `workbench synth`), as an absolute path
    formulation_dir: str | None = None
    # the run folder whose ``bounds/`` keeps each problem's bounds for its other cells
    # (workbench.run.bounds_cache); None (``workbench synth``): solved, not kept
    run_folder: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a cell request's kind is one of {', '.join(KINDS)}, not {self.kind!r}")

    @property
    def time_limit(self) -> float:
        """The cell's time limit, in seconds."""
        return float(self.cell.time_limit)

    @property
    def evaluation(self) -> Evaluation:
        """The cell's evaluation settings (the defaults for a cell without any, e.g. a design cell)."""
        return getattr(self.cell, "evaluation", None) or Evaluation()

    def to_evaluate(self, incumbent: "Algorithm") -> "CellRequest":
        """The request that verifies and simulates ``incumbent`` of this schedule cell."""
        return replace(self, kind="evaluate", algorithm=incumbent)
