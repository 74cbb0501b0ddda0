"""What a formulation is handed and what it hands back.

A schedule formulation gets a ``Problem`` (topology, collective, nccl-tests size) and returns a
``SynthesisResult`` (algorithms, status, seconds, stats, claimed times, message); a design
formulation (LIBRA) gets a ``DesignProblem`` and returns a ``DesignResult``. A status is one of
``workbench.kit.solvers.STATUSES``. How a formulation is called: ``workbench.plugin.formulation``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.model.algorithm import Algorithm
from workbench.model.collective import Collective, make_collective
from workbench.kit.solvers import STATUSES
from workbench.topology import Topology

__all__ = ["Problem", "DesignProblem", "SynthesisResult", "DesignResult"]


@dataclass
class Problem:
    """A schedule synthesis problem: topology, collective and the nccl-tests size in bytes."""

    topology: Topology
    collective: Collective
    size_bytes: float

    @property
    def chunk_bytes(self) -> float:
        """Bytes per chunk: the size cut as the collective's chunking says."""
        return self.collective.chunk_bytes(self.size_bytes)

    def describe(self) -> str:
        """One line naming the collective, the size and the topology."""
        return f"{self.collective.describe()} of {self.size_bytes:g} B on {self.topology.name}"

    def with_chunks(self, k: int) -> "Problem":
        """The same problem (topology, kind, root, size) cut into ``k`` chunks per rank (per pair
        for All-to-All); a custom collective keeps its own chunks."""
        collective = self.collective
        if k == collective.chunks_per_rank or collective.kind == "custom":
            return self
        return Problem(self.topology, make_collective(collective.kind, collective.num_ranks, k, collective.root),
                       self.size_bytes)


@dataclass
class DesignProblem:
    """A network design problem (LIBRA): dimensions, workloads, cost model, constraints, objective."""

    dimensions: list[dict[str, Any]]
    workloads: list[dict[str, Any]] = field(default_factory=list)
    cost_model: dict[str, Any] = field(default_factory=dict)
    constraints: dict[str, Any] = field(default_factory=dict)
    objective: str = "performance"


@dataclass
class SynthesisResult:
    """What a schedule formulation returns: zero or more algorithms (one per Pareto point)."""

    algorithms: list[Algorithm]
    status: str
    wall_seconds: float
    stats: dict[str, Any] = field(default_factory=dict)  # variables, constraints, gap, bound, nodes
    claimed_times: list[float | None] = field(default_factory=list)
    message: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if not self.claimed_times:
            self.claimed_times = [a.meta.get("claimed_time") for a in self.algorithms]


@dataclass
class DesignResult:
    """What a design formulation returns: per-dimension bandwidths and the modelled time and cost."""

    bandwidths: list[float]
    time: float | None
    cost: float | None
    status: str
    wall_seconds: float
    stats: dict[str, Any] = field(default_factory=dict)
    message: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

