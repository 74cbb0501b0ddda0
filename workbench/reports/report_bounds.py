"""The bound columns of the result tables and what each formulation proved in its own model.

A table row is one problem (topology, collective, size, ...). Its optimum in the simulator's model
lies in [best valid lower bound, fastest simulated schedule of any formulation in the row]. The
bound column shows that interval where the two differ and the bound marked "(optimum)" where a
schedule meets it (within ``workbench.bounds.TIGHT``), which proves it; only when every row is
proven so is the column called "Optimum". Nothing else earns the word: the max-flow optimum is
exact in the bandwidth term alone.

A formulation's own proof (``model_optimal``: SCCL's steps, TE-CCL's epochs, ForestColl's
throughput) is shown beside the row status the workbench gave (``workbench.bounds.yardstick``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from workbench.bounds import TIGHT
from workbench.bounds.yardstick import OPTIMAL_WITHIN, SIMULATED
from workbench.reports import row_keys as R

__all__ = ["status_text", "label_bound_columns", "model_notes"]

# ``workbench.reports.report`` builds the tables and calls in here (this module does not import it back):
# its ``Table`` (rows, columns, cells, text, notes, rename_column) and its way of printing a value
Grouped = dict[tuple[str, str], list[dict[str, Any]]]  # (row label, formulation column) -> result rows
Format = Callable[[float, str], str]  # (value, column) -> the text a table prints


def status_text(row: dict[str, Any]) -> str:
    """A row's status with the formulation's own word beside it where that says more:
    ``feasible (optimal in forestcoll-throughput)``, ``feasible (solver: optimal)``."""
    status = str(row.get(R.STATUS, "?"))
    model, solver = row.get(R.MODEL_OPTIMAL), row.get(R.SOLVER_STATUS)
    if model:
        return f"{status} (optimal in {model})"
    if solver and solver != status:
        return f"{status} (solver: {solver})"
    return status


def _fastest(grouped: Grouped, row_label: str) -> float | None:
    """The fastest simulated schedule of one problem, over every formulation of the row."""
    times = [g[R.COLLECTIVE_TIME] for (label, _), group in grouped.items() if label == row_label for g in group
             if g.get(R.STATUS) in SIMULATED and g.get(R.COLLECTIVE_TIME) is not None]
    return min(times) if times else None


def label_bound_columns(table: Any, spec: dict[str, Any], grouped: Grouped, source: str | None, *, column: str,
                        renames: Mapping[str, str], fmt: Format) -> None:
    """Per row: "[bound, fastest schedule]" in the bound ``column`` where they differ, "bound
    (optimum)" where a schedule meets it; the columns are renamed by ``renames`` ("Bound" to
    "Optimum", ...) only when every row is proven."""
    extras = spec.get("extra_columns", [])
    if not any(k in extras for k in ("bound", "efficiency")):
        return
    proven, open_rows, stale = [], [], []
    for row_label in table.rows:
        bound = next((g[R.BOUND] for g in grouped.get((row_label, source), []) if g.get(R.BOUND) is not None), None)
        fastest = _fastest(grouped, row_label)
        if bound is None or fastest is None:
            continue
        if fastest < bound * (1 - TIGHT):  # only a row bounded by an older, chunk-dependent rule
            stale.append(row_label)
        elif fastest <= bound * (1 + TIGHT):
            proven.append(row_label)
        else:
            open_rows.append((row_label, bound, fastest))
    whose = f" (the problems of the {source} column)" if source and len(grouped) > 1 else ""
    if proven and not open_rows and not stale:
        for old, new in renames.items():
            table.rename_column(old, new)
        table.notes.append(f"Optimum{whose}: the best valid lower bound, met by a simulated schedule (within "
                           f"{TIGHT:.2%}) on every row, which proves it the optimum in the simulator's model")
    else:
        if "bound" in extras:
            _write_intervals(table, column, proven, open_rows, fmt)
        table.notes.append(f"Bound{whose}: the best valid lower bound of each problem (it depends on the topology, "
                           "collective and size, not on a schedule's chunking); \"[a, b]\": the optimum in the "
                           "simulator's model lies between the bound a and the fastest simulated schedule b of the "
                           "row (\"(fastest x% above)\" where both ends print alike); \"(optimum)\": a schedule "
                           "meets the bound, which proves it")
    if stale:
        table.notes.append("Rows " + ", ".join(stale) + ": a schedule beats the recorded bound, an older rule that "
                           "depended on a schedule's chunk size (`workbench rebound` recomputes it)")
    _kind_notes(table, grouped, source, extras)


def _write_intervals(table: Any, column: str, proven: list[str], open_rows: list[tuple[str, float, float]],
                     fmt: Format) -> None:
    """The interval text of each open row and the mark of each proven one, in the column's own units
    (a normalised table divides both ends by the row's normaliser, as it did the bound)."""
    for row_label, bound, fastest in open_rows:
        cell = table.cells.get((row_label, column))
        if cell is None or cell.ours is None:
            continue
        scale = cell.ours / bound if bound else 1.0
        low, high = fmt(cell.ours, column), fmt(fastest * scale, column)
        # ends that print alike (a gap below the printed digits) say how far apart they are instead
        table.text[(row_label, column)] = (f"[{low}, {high}]" if low != high
                                           else f"{low} (fastest {fastest / bound - 1:.2%} above)")
    for row_label in proven:
        cell = table.cells.get((row_label, column))
        if cell is not None and cell.ours is not None:
            table.text[(row_label, column)] = f"{fmt(cell.ours, column)} (optimum)"


def _kind_notes(table: Any, grouped: Grouped, source: str | None, extras: list[str]) -> None:
    """What the bounds of these problems are made of (from the rows' ``bounds``)."""
    parts = [g.get(R.BOUNDS) or {} for (row, column), group in grouped.items() if column == source for g in group[:1]]
    if any(p.get("optimum") is not None for p in parts):
        table.notes.append("The bound's bandwidth term is the exact throughput optimum (max-flow over all cuts), "
                           "plus its cut's alpha; what alpha and finite chunks add above it only a schedule shows")
    if any(p.get("splitting_cut") is not None or p.get("gossip") is not None for p in parts):
        table.notes.append("All-Reduce bound: the weakest NPU-splitting cut, each NPU's whole input leaving it "
                           "(egress), 2(N-1)M over the bandwidth into the NPUs or 2(g-1)M over the bandwidth into g "
                           "groups of them (one-way gossip; off where switches reduce), or raw inputs through each "
                           "NPU's in-links against two deliveries in a row; no exact All-Reduce optimum is known")
    if "rs_ag_throughput" in extras:
        table.notes.append("RS*+AG* throughput: the Reduce-Scatter and All-Gather throughput optima in sequence, "
                           "each with its cut's alpha; neither a lower bound nor a time known to be reached (at "
                           "small sizes it lies below the bound)")


def model_notes(table: Any, grouped: Grouped) -> None:
    """Per formulation column whose rows carry a proof in the formulation's own model (or an old row's
    ``optimal`` from the formulation): on how many problems, beside how many have the row status
    ``optimal`` (within 1% of the bound)."""
    by_column: dict[str, list[dict[str, Any]]] = {}
    for (_, column), group in grouped.items():
        by_column.setdefault(column, []).extend(group)
    for column in table.columns:
        rows = by_column.get(column, [])
        claimed = [r for r in rows if r.get(R.MODEL_OPTIMAL) or r.get(R.SOLVER_STATUS) == "optimal"]
        if not claimed:
            continue
        models = sorted({str(r[R.MODEL_OPTIMAL]) for r in claimed if r.get(R.MODEL_OPTIMAL)})
        where = f" in its own model ({', '.join(models)})" if models else ""
        met = sum(1 for r in rows if r.get(R.STATUS) == "optimal")
        table.notes.append(f"{column}: the formulation proved optimality{where} on {len(claimed)} of {len(rows)} "
                           f"runs; {met} are within {OPTIMAL_WITHIN:.0%} of the bound (status optimal)")
