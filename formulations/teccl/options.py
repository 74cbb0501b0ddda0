"""TE-CCL's options: the one declaration of its parameters (``workbench.plugin.parameters``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from formulations.teccl.epochs import SWITCH_MODELS
from workbench.plugin.parameters import Options, option

__all__ = ["TecclOptions", "METHODS"]

METHODS = ("auto", "milp", "lp", "astar")
EARLY_STOP_GAP = 0.3  # the paper's "early stop": Gurobi MIPGap 0.3


@dataclass(frozen=True)
class TecclOptions(Options):
    """TE-CCL's method, epoch model, switch semantics and solver settings."""

    method: str = option("auto", "MILP, LP (All-to-All) or A*", choices=METHODS)
    epoch: str | float = option("fastest", "epoch: a chunk on the fastest / slowest link, or seconds",
                                choices=("fastest", "slowest"), minimum=1e-15)
    epoch_multiplier: float | str = option(1.0, "epoch scale; 'auto' follows the authors' runs", choices=("auto",),
                                           minimum=1e-9)
    epochs: int | None = option(None, "horizon in epochs (default: searched)", minimum=1)
    alpha_threshold: float = option(0.1, "alpha below this share of an epoch is ignored", minimum=0)
    switch_model: str = option("copy", "switch semantics", choices=SWITCH_MODELS)
    single_beta: bool = option(False, "one bandwidth for every link (the paper's simplification)")
    mip_gap: float = option(1e-4, "relative MIP gap", minimum=0, maximum=1)
    early_stop: bool = option(False, "the paper's early stop (gap 0.3)")
    threads: int = option(1, "solver threads", minimum=1)
    objective: str = option("paper", "weights 1/(k+1) (paper) or 1 (code)", choices=("paper", "code"))
    buffer_limit: int | None = option(None, "chunks a node may buffer", minimum=0)
    epoch_search: str = option("greedy", "horizon search", choices=("greedy", "binary"))
    lp_subchunks: int = option(4, "LP: pieces per chunk when rounding", minimum=1)
    round_epochs: int | None = option(None, "A*: epochs per round", minimum=1)
    gamma: float = option(0.002, "A*: weight of the future cost", minimum=0)
    heuristic_effort: float | None = option(None, "HiGHS mip_heuristic_effort", minimum=0, maximum=1)
    lp_solver: str = option("ipm", "HiGHS LP method", choices=("ipm", "simplex", "choose", "pdlp"))
    symmetry: str = option("off", "'dimensions': solve one rail and one box group of a rail cluster with this "
                           "model and compose them (workbench.plugin.composition)", choices=("off", "dimensions"))
    rounds: int = option(16, "with symmetry: rounds the composed schedule pipelines", minimum=1)

    def estimate(self, problem: Any) -> list[tuple[str, float]]:
        """The time-expanded model ``epochs`` (MILP, LP) or ``round_epochs`` (A*) ask for: a column
        with its rows per commodity (the MILP's chunks, the LP's source ranks), link or node and
        epoch (``BYTES_PER_EPOCH_COLUMN``); the finer collective ``lp_subchunks`` writes, the composed
        ``rounds`` of ``symmetry: dimensions`` (``BYTES_PER_LISTED_TRANSFER``) and the solver's
        ``threads`` (``BYTES_PER_THREAD``). Figures in ``workbench.util.size_guard``."""
        from workbench.util import size_guard

        combining = problem.kind in ("reducescatter", "reduce", "allreduce")
        copy_free = problem.kind in ("alltoall", "scatter", "gather")  # each chunk wanted by one rank
        method = self.method
        if combining:
            method = "astar" if method == "astar" else "milp"
        elif method == "auto":
            method = "lp" if copy_free else "milp"
        per_epoch = problem.links + problem.nodes
        if method == "lp":  # commodities are the source ranks, each with its reads at every rank
            columns = problem.npus * (per_epoch + problem.npus)
        else:
            columns = max(problem.num_chunks, problem.npus if problem.kind == "custom" else 0) * per_epoch
        parts = []
        if self.epochs is not None and method in ("milp", "lp"):
            parts.append(("epochs", size_guard.BYTES_PER_EPOCH_COLUMN * columns * float(self.epochs)))
        if self.round_epochs is not None and method == "astar":
            parts.append(("round_epochs", size_guard.BYTES_PER_EPOCH_COLUMN * columns * float(self.round_epochs)))
        if method == "lp":
            parts.append(("lp_subchunks", problem.listed_bytes(problem.chunks_per_rank * float(self.lp_subchunks))))
        if self.symmetry == "dimensions":
            parts.append(("rounds", problem.listed_bytes(float(self.rounds))))
        parts.append(("threads", size_guard.BYTES_PER_THREAD * float(self.threads)))
        return parts

    @property
    def gap(self) -> float:
        """The MIP gap the solves use: ``mip_gap``, or the paper's 0.3 under ``early_stop``."""
        return EARLY_STOP_GAP if self.early_stop else float(self.mip_gap)
