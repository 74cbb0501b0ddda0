"""A result row as the runner writes it: the cell's identity (typed), then the fields its process
returned, then the environment, as one line of ``rows.jsonl``.

The identity's field names are the row keys (``workbench.reports.row_keys``) and its field order is the
order of the keys in the line; what the cell returned keeps its own order after them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from workbench.reports import row_keys as R

__all__ = ["ScheduleHead", "DesignHead", "Row", "schedule_head", "design_head"]


@dataclass(frozen=True)
class ScheduleHead:
    """What a schedule cell's row says of the cell."""

    cell_id: str
    experiment: str
    kind: str
    topology: str
    topology_source: str | None
    collective: str
    root: int | None
    size_bytes: float
    chunks: int
    formulation: str
    formulation_name: str
    params: dict[str, Any]
    seed: int
    time_limit: float


@dataclass(frozen=True)
class DesignHead:
    """What a design cell's row says of the cell."""

    cell_id: str
    experiment: str
    kind: str
    design: str
    formulation: str
    formulation_name: str
    params: dict[str, Any]
    seed: int
    time_limit: float


@dataclass(frozen=True)
class Row:
    """One row: the cell's identity, the fields its run gave (free-form, a formulation's facts
    among them) and the environment it ran in."""

    head: ScheduleHead | DesignHead
    outcome: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the line: the identity's keys first, later keys winning."""
        row = {f.name: getattr(self.head, f.name) for f in fields(self.head)}
        row.update(self.outcome)
        row.update(self.environment)
        return row


def schedule_head(cell: Any) -> ScheduleHead:
    """The identity of a schedule cell (``config.experiment.Cell``) as its row states it."""
    return ScheduleHead(cell.cell_id, cell.experiment, "schedule", cell.topology.label, cell.topology.source,
                        cell.collective.kind, cell.collective.root, cell.size_bytes, cell.chunks,
                        cell.formulation.label, cell.formulation.name, cell.formulation.params, cell.seed,
                        cell.time_limit)


def design_head(cell: Any) -> DesignHead:
    """The identity of a design cell (``config.experiment.DesignCell``) as its row states it."""
    return DesignHead(cell.cell_id, cell.experiment, "design", cell.name, cell.formulation.label,
                      cell.formulation.name, cell.formulation.params, cell.seed, cell.time_limit)


# the identity's field names are row keys: a renamed constant must rename the field too
assert {f.name for f in fields(ScheduleHead)} | {f.name for f in fields(DesignHead)} <= {
    getattr(R, name) for name in dir(R) if name.isupper() and isinstance(getattr(R, name), str)}
