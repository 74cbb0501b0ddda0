"""What the report tables read of a result row, checked by type before a table is built.

A row of ``rows.jsonl`` is written by a run, but a folder may be edited or damaged by hand: a
string where a number belongs would otherwise surface as a TypeError deep inside a table. Each
problem is named as ``field: expected ..., got ...`` (``workbench.run.folder`` adds the file and
the cell).
"""

from __future__ import annotations

from typing import Any, Sequence

from workbench.config.checks import DESIGN_METRICS
from workbench.reports import row_keys as R

__all__ = ["row_problem", "ROW_NUMBERS", "ROW_TEXTS"]

# what the tables read of a row, by type: numbers (or null) they compute with, text they group by
ROW_NUMBERS = ("size_bytes", "synthesis_seconds", "collective_time", "claimed_time", "algbw", "busbw", "efficiency",
               "bound", "ideal", "ideal_dims", "rs_ag_throughput", "ideal_efficiency", "ideal_dims_efficiency",
               "design_time", "cost")
ROW_TEXTS = {"schedule": ("formulation", "collective", "status"), "design": ("design", "status")}


def _is_number(value: Any) -> bool:
    """An int or float a table can compute with (NaN and infinities are written by runs; a boolean
    or an integer beyond a float's range is not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        float(value)
    except OverflowError:
        return False
    return True


def row_problem(row: dict[str, Any], metrics: Sequence[str] = ()) -> str | None:
    """What is wrong with a result row for the tables (``field: expected ..., got ...``), or None.
    ``metrics``: the table's metrics, whose ``stats`` entries a design table computes with."""
    from workbench.util.safe_load import shorten

    kind = row.get(R.KIND, "schedule")
    if kind not in ROW_TEXTS:
        return f"kind: expected 'schedule' or 'design', got {shorten(kind)}"
    for key in ROW_TEXTS[kind]:
        missing = key not in row and key != "status"  # a row without a status reads as "?"
        if missing or (key in row and not isinstance(row[key], str)):
            return f"{key}: expected a string, got {shorten(row.get(key))}"
    for key in ROW_NUMBERS:
        if row.get(key) is not None and not _is_number(row[key]):
            return f"{key}: expected a number, got {shorten(row[key])}"
    if row.get(R.ROOT) is not None and (isinstance(row[R.ROOT], bool) or not isinstance(row[R.ROOT], int)):
        return f"root: expected an integer, got {shorten(row['root'])}"
    if row.get(R.BOUND_EXACT) is not None and not isinstance(row[R.BOUND_EXACT], bool):
        return f"bound_exact: expected true or false, got {shorten(row['bound_exact'])}"
    for key in ("stats", "algorithm_meta"):
        if row.get(key) is not None and not isinstance(row[key], dict):
            return f"{key}: expected a mapping, got {shorten(row[key])}"
    bandwidths = row.get(R.BANDWIDTHS)
    if bandwidths is not None and not (isinstance(bandwidths, list) and all(map(_is_number, bandwidths))):
        return f"bandwidths: expected a list of numbers, got {shorten(bandwidths)}"
    if kind == "design":
        stats = row.get(R.STATS) or {}
        for metric in metrics:
            if metric not in DESIGN_METRICS and stats.get(metric) is not None and not _is_number(stats[metric]):
                return f"stats.{metric}: expected a number, got {shorten(stats[metric])}"
    return None
