"""The checks behind an experiment config: each part of the YAML parsed with messages that name the
file, the key path and what was expected (``workbench.config.experiment`` puts the parts together).

Beyond the schema, checks that need the registry or a build: formulations exist and are of the
right kind, their parameters match their declarations (``workbench.plugin.parameters``), topologies build
and have two or more ranks, roots are ranks of every topology they meet, the largest schedule of
the grid fits the memory budget (``workbench.util.size_guard``), and data files exist (read relative
to the config's folder).
"""

from __future__ import annotations

import copy
import math
import os
from pathlib import Path
from typing import Any, Sequence

from workbench.model.collective import KINDS
from workbench.util.units import UnitError, parse_bandwidth, parse_size, parse_time

__all__ = ["ConfigError", "Checker", "TABLE_VALUES", "EXTRA_COLUMNS", "DESIGN_METRICS", "ROW_METRICS"]

EXTRA_COLUMNS = ("ideal", "bound", "ideal_efficiency", "efficiency", "ideal_dims", "ideal_dims_efficiency", "claimed",
                 "rs_ag_throughput")
# every design row has these; a design formulation names its own statistics in ``metrics``
DESIGN_METRICS = ("status", "bandwidth", "time", "cost", "synthesis_seconds")
ROW_METRICS = ("status", "label", "optimality", "synthesis_seconds", "collective_time", "claimed_time", "algbw",
               "busbw", "efficiency", "bound")
TABLE_VALUES = ("collective_time", "synthesis_seconds", "algbw", "busbw", "efficiency", "claimed_time")
TOP_KEYS = {"name", "description", "time_limit", "seeds", "repeats", "grid", "evaluation", "paper", "table",
             "quick", "notes"}
GRID_KEYS = {"topologies", "collectives", "sizes", "chunks", "formulations", "designs"}
EVAL_KEYS = {"link_model", "order", "switch_model", "save_algorithms", "lp_bound", "memory_limit",
              "evaluation_time_limit"}


class ConfigError(ValueError):
    """A malformed experiment config; the message is one line naming file, key path and expectation."""


class Checker:
    def __init__(self, source: str, read_files: bool = True) -> None:
        self.source = source
        self.read_files = read_files  # False: files the config names are not read (a report on an old run)

    def fail(self, path: str, expected: str) -> ConfigError:
        """The ``ConfigError`` to raise for ``path``: file, key path and what was expected."""
        return ConfigError(f"{self.source}: {path}: {expected}")

    def mapping(self, value: Any, path: str, allowed: set[str] | None = None) -> dict:
        """``value`` when it is a mapping whose keys are all in ``allowed`` (if given)."""
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {kind_of(value)}")
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    raise self.fail(f"{path}.{key}" if path else str(key),
                                    f"unknown key (expected one of: {', '.join(sorted(allowed))})")
        return value

    def optional_mapping(self, value: Any, path: str, allowed: set[str] | None = None) -> dict:
        """A mapping, or {} when the key is absent or null (``params: 0`` or ``[]`` is an error, not
        "no params")."""
        return {} if value is None else self.mapping(value, path, allowed)

    def seq(self, value: Any, path: str, non_empty: bool = True) -> list:
        """``value`` as a list (one item becomes a list of one); empty is an error when ``non_empty``."""
        if not isinstance(value, list):
            value = [value]
        if non_empty and not value:
            raise self.fail(path, "expected a non-empty list")
        return value

    def required(self, mapping: dict, key: str, path: str) -> Any:
        """``mapping[key]``; a missing key is an error at ``path.key``."""
        if key not in mapping:
            raise self.fail(f"{path}.{key}" if path else key, "missing required key")
        return mapping[key]

    def duration(self, value: Any, path: str) -> float:
        """A positive duration such as '30s', in seconds."""
        try:
            seconds = parse_time(value)
        except UnitError as exc:
            raise self.fail(path, f"expected a duration like '30s', got {value!r}; {exc}") from None
        if seconds <= 0:
            raise self.fail(path, f"expected a positive duration like '30s', got {value!r}")
        return seconds

    def size(self, value: Any, path: str) -> float:
        """A positive size such as '1GiB' or '64KB', in bytes."""
        try:
            nbytes = parse_size(value)
        except UnitError as exc:
            raise self.fail(path, f"expected a size like '1GiB' or '64KB', got {value!r}; {exc}") from None
        if nbytes <= 0:
            raise self.fail(path, f"expected a positive size, got {value!r}")
        return nbytes

    def integer(self, value: Any, path: str, minimum: int = 0) -> int:
        """An integer (not a boolean) of at least ``minimum``."""
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self.fail(path, f"expected an integer >= {minimum}, got {value!r}")
        return value

    def string(self, value: Any, path: str) -> str:
        """A string that is not blank."""
        if not isinstance(value, str) or not value.strip():
            raise self.fail(path, f"expected a non-empty string, got {value!r}")
        return value

    def flag(self, value: Any, path: str) -> bool:
        """A true/false field read by type: the string "no" (or 0, or a list) is not a truth value."""
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {value!r}")
        return value

    def number(self, value: Any, path: str) -> float | int:
        """A finite number (a boolean is not one, nor NaN, an infinity or an integer beyond a float)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(path, f"expected a finite number, got {value!r}")
        try:
            finite = math.isfinite(value)
        except OverflowError:
            finite = False
        if not finite:
            shown = "an integer beyond a float's range" if isinstance(value, int) else repr(value)
            raise self.fail(path, f"expected a finite number, got {shown}")
        return value


def kind_of(value: Any) -> str:
    """What ``value`` is, for messages: 'a mapping', 'a list', 'a string', 'nothing' or its type name."""
    return {dict: "a mapping", list: "a list", str: "a string", type(None): "nothing"}.get(type(value),
                                                                                        type(value).__name__)


def per_dim(check: Checker, value: Any, path: str, parse, what: str) -> list[float] | None:
    """A per-dimension value (one item or a list), each item read by ``parse``; None when absent."""
    if value is None:
        return None
    values = value if isinstance(value, list) else [value]
    result = []
    for i, item in enumerate(values):
        try:
            result.append(parse(item))
        except UnitError as exc:  # the units module's reason (bits or bytes, the range) with the field's path
            where = f"{path}[{i}]" if isinstance(value, list) else path
            raise check.fail(where, f"expected a {what}, got {item!r}; {exc}") from None
    return result


def parse_topology(check: Checker, entry: Any, path: str, base_dir: Path | None, designs: set[str]) -> dict:
    """One ``grid.topologies`` entry (exactly one of spec, file, from) as a dict with its label and link
    values; a relative file is looked up in ``base_dir`` first, ``from`` must name one of ``designs``."""
    if isinstance(entry, str):
        entry = {"spec": entry}
    check.mapping(entry, path, {"spec", "file", "alpha", "bandwidth", "overhead", "label", "from", "builder",
                                "expand"})
    sources = [k for k in ("spec", "file", "from") if k in entry]
    if len(sources) != 1:
        raise check.fail(path, "expected exactly one of 'spec', 'file' or 'from'")
    topo: dict[str, Any] = {}
    if "spec" in entry:
        topo["spec"] = check.string(entry["spec"], f"{path}.spec")
    elif "file" in entry:
        file = Path(check.string(entry["file"], f"{path}.file"))
        # relative to the config's folder (as every data path); the working directory only as a fallback
        if not file.is_absolute() and base_dir is not None and ((base_dir / file).exists() or not file.exists()):
            file = base_dir / file
        topo["file"] = str(file)
    else:
        design = check.string(entry["from"], f"{path}.from")
        if design not in designs:
            raise check.fail(f"{path}.from", f"no design cell named {design!r} in grid.designs")
        topo["from"] = design
        topo["builder"] = check.string(check.required(entry, "builder", path), f"{path}.builder")
        expand = entry.get("expand", "per-npu")
        if expand not in ("per-npu", "per-link"):
            raise check.fail(f"{path}.expand", f"expected 'per-npu' or 'per-link', got {expand!r}")
        topo["expand"] = expand
    topo["alpha"] = per_dim(check, entry.get("alpha"), f"{path}.alpha", parse_time, "duration like '0.5us'")
    topo["bandwidth"] = per_dim(check, entry.get("bandwidth"), f"{path}.bandwidth", parse_bandwidth,
                                 "bandwidth like '50GB/s'")
    if topo["bandwidth"] is not None and any(b <= 0 for b in topo["bandwidth"]):
        raise check.fail(f"{path}.bandwidth", "expected positive bandwidths")
    if entry.get("overhead") is not None:  # only where given, so the cells of older configs keep their keys
        topo["overhead"] = per_dim(check, entry["overhead"], f"{path}.overhead", parse_time, "duration like '1us'")
    label = entry.get("label") or topo.get("spec") or topo.get("file") or f"from {topo.get('from')}"
    topo["label"] = str(label)
    return topo  # a spec or file is built by check_builds, which gives its size


def check_builds(check: Checker, topo: dict, path: str) -> tuple[int, int, int]:
    """Build the topology once now, so a bad spec fails at load time, not in a worker; its size
    (NPUs, nodes, links)."""
    from workbench.topology.builders import load_topology
    from workbench.topology import TopologyError

    try:
        topology = load_topology(topo.get("spec") or topo["file"], topo["alpha"], topo["bandwidth"],
                                 topo.get("overhead"))
    except TopologyError as exc:
        raise check.fail(path, str(exc)) from None
    if topology.num_npus < 2:
        raise check.fail(path, f"a collective needs at least 2 ranks, {topo['label']} has {topology.num_npus}")
    return (topology.num_npus, topology.num_nodes, len(topology.links))


def check_sizes(check: Checker, topologies: list[dict], sizes: dict[str, tuple], collectives: list[dict],
                 chunks: list[int], memory_limit: float | None) -> None:
    """Refuse a grid whose largest schedule could not fit (workbench.util.size_guard), before any cell."""
    from workbench.util import size_guard

    kinds = [c["kind"] for c in collectives] or ["allreduce"]
    for i, topo in enumerate(topologies):
        if topo["label"] not in sizes:
            continue
        needed = size_guard.schedule_bytes(*sizes[topo["label"]], kinds, max(chunks))
        limit = memory_limit if memory_limit is not None else size_guard.budget()
        if needed > limit:
            raise check.fail(f"grid.topologies[{i}]",
                             f"{topo['label']} with {max(chunks)} chunks per rank needs an estimated "
                             f"{size_guard.readable(needed)}, over the {size_guard.readable(limit)} budget "
                             f"(evaluation.memory_limit or --max-memory)")


def check_repeats(check: Checker, value: Any) -> int:
    """``repeats``: a count of seeds, refused past the size guard's cell cap before the seeds are listed."""
    from workbench.util import size_guard

    repeats = check.integer(value, "repeats", 1)
    if repeats > size_guard.MAX_CELLS:
        raise check.fail("repeats", f"{repeats:,} repeats make at least {repeats:,} cells, over the cap of "
                                    f"{size_guard.MAX_CELLS:,} cells a grid may have")
    return repeats


def check_cells(check: Checker, seeds_key: str, seeds: list[int], topologies: list[dict], collectives: list[dict],
                sizes: list[float], chunks: list[int], formulations: list[dict], designs: list[dict]) -> None:
    """Refuse a grid of more cells than the size guard allows (``MAX_CELLS``, or a cell list over the
    budget of the process that lists them; ``evaluation.memory_limit`` is each cell's own), counted
    the way ``Experiment.cells`` makes them, before any cell is listed; the error names the key with
    the most entries (``repeats``/``seeds`` for a typo like ``repeats: 10000000``)."""
    from workbench.util import size_guard

    total = len(designs)
    for f in formulations:
        mine = [t for t in topologies if "topologies" not in f or t["label"] in f["topologies"]]
        own_seeds = set(f["seeds"]) if "seeds" in f else None
        runs = len(seeds) if own_seeds is None else sum(1 for seed in seeds if seed in own_seeds)
        total += (len(mine) * len(f.get("collectives") or collectives) * len(f.get("sizes") or sizes)
                  * len(f.get("chunks") or chunks) * runs)
    why = size_guard.check_cells(total)
    if why is None:
        return
    factors = [("grid.topologies", len(topologies), "topologies"),
               ("grid.collectives", len(collectives), "collectives"), ("grid.sizes", len(sizes), "sizes"),
               ("grid.chunks", len(chunks), "chunk counts"),
               ("grid.formulations", len(formulations), "formulations"), (seeds_key, len(seeds), "seeds")]
    key = max(factors, key=lambda factor: (factor[1], factor[0] == seeds_key))[0]  # a tie names the seeds
    shown = " x ".join(f"{count:,} {what}" for _, count, what in factors)
    raise check.fail(key, f"{why} ({shown})")


def check_roots(check: Checker, collectives: list[dict], path: str, topologies: list[dict],
                 npus: dict[str, int]) -> None:
    """A root must be a rank of every topology the collective meets (designs' topologies are checked later)."""
    for i, collective in enumerate(collectives):
        root = collective.get("root")
        if root is None:
            continue
        for topo in topologies:
            n = npus.get(topo["label"])
            if n is not None and root >= n:
                raise check.fail(f"{path}[{i}].root", f"{root} is not a rank of {topo['label']} (0..{n - 1})")


def parse_collective(check: Checker, entry: Any, path: str) -> dict:
    """One ``grid.collectives`` entry as {kind, root}; the kind lower-cased without '-' or '_' (custom is refused)."""
    if isinstance(entry, str):
        entry = {"kind": entry}
    check.mapping(entry, path, {"kind", "root"})
    kind = str(check.required(entry, "kind", path)).lower().replace("-", "").replace("_", "")
    if kind not in KINDS or kind == "custom":
        raise check.fail(f"{path}.kind", f"expected one of {', '.join(KINDS[:-1])}, got {entry['kind']!r}")
    root = entry.get("root")
    if root is not None:
        check.integer(root, f"{path}.root")
    return {"kind": kind, "root": root}


def parse_formulation(check: Checker, entry: Any, path: str, base_dir: Path | None = None) -> dict:
    """One ``grid.formulations`` entry, its formulation resolved (an import path's module beside the
    config, in ``base_dir``, is loaded by its file location; see ``workbench.plugin.registry``)."""
    from workbench.plugin.registry import FormulationError, resolve_formulation

    if isinstance(entry, str):
        entry = {"name": entry}
    check.mapping(entry, path, {"name", "label", "params", "chunks", "collectives", "seeds", "topologies", "sizes"})
    name = check.string(check.required(entry, "name", path), f"{path}.name")
    try:
        formulation = resolve_formulation(name, base_dir)
    except FormulationError as exc:
        raise check.fail(f"{path}.name", str(exc)) from None
    params = dict(check.optional_mapping(entry.get("params"), f"{path}.params"))
    if "time_limit" in params:
        params["time_limit"] = check.duration(params["time_limit"], f"{path}.params.time_limit")
    if formulation.kind != "schedule":
        raise check.fail(f"{path}.name", f"{name!r} is a {formulation.kind} formulation; put it under grid.designs")
    check_params(check, formulation, params, f"{path}.params")
    result = {"name": name, "label": str(entry.get("label") or name), "params": params}
    if "collectives" in entry:  # this formulation's own collectives (tables with one row per instance)
        result["collectives"] = [parse_collective(check, c, f"{path}.collectives[{i}]")
                                 for i, c in enumerate(check.seq(entry["collectives"], f"{path}.collectives"))]
    if "chunks" in entry:  # this formulation's own chunks per rank (e.g. a bidirectional ring needs 2)
        result["chunks"] = [check.integer(c, f"{path}.chunks[{i}]", 1)
                            for i, c in enumerate(check.seq(entry["chunks"], f"{path}.chunks"))]
    if "seeds" in entry:  # this formulation runs only these of the grid's seeds (slow solvers)
        result["seeds"] = [check.integer(v, f"{path}.seeds[{i}]", 0)
                           for i, v in enumerate(check.seq(entry["seeds"], f"{path}.seeds"))]
    if "sizes" in entry:  # this formulation's own sizes (e.g. a fixed chunk size per instance)
        result["sizes"] = [check.size(v, f"{path}.sizes[{i}]")
                           for i, v in enumerate(check.seq(entry["sizes"], f"{path}.sizes"))]
    if "topologies" in entry:  # this formulation runs only on these topology labels (e.g. a sketch per machine)
        result["topologies"] = [check.string(v, f"{path}.topologies[{i}]")
                                for i, v in enumerate(check.seq(entry["topologies"], f"{path}.topologies"))]
    return result


DATA_PATH_KEYS = ("file", "workload", "communicator")  # string values under these keys name data files


def data_paths(check: Checker, problem: Any, path: str, base_dir: Path, check_files: bool) -> tuple[Any, Any]:
    """(problem with relative data paths resolved against the config's folder, problem as the cell id
    names it). The id spells each path relative to the project folder (the config folder's parent,
    e.g. the repository for ``experiments/x.yaml``), so it does not depend on where a run starts
    and ids written when paths were relative to the working directory stay the same."""
    folder = base_dir.resolve()
    project = folder.parent

    def walk(value: Any, where: str, key: str | None) -> tuple[Any, Any]:
        if isinstance(value, dict):
            pairs = {k: walk(v, f"{where}.{k}", k) for k, v in value.items()}
            return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
        if isinstance(value, list):
            pairs = [walk(v, f"{where}[{i}]", key) for i, v in enumerate(value)]
            return [p[0] for p in pairs], [p[1] for p in pairs]
        if key in DATA_PATH_KEYS and isinstance(value, str):
            written = Path(value).expanduser()
            resolved = written if written.is_absolute() else Path(os.path.normpath(folder / written))
            if check_files and not resolved.is_file():
                raise check.fail(where, f"no such file {value!r} (relative paths are read from {folder})")
            named = value if written.is_absolute() else os.path.relpath(resolved, project)
            return str(resolved), Path(named).as_posix()
        return value, value

    return walk(problem, path, None)


def check_params(check: Checker, formulation: Any, params: dict, path: str) -> None:
    """Declared parameters checked now, before any cell runs (workbench.plugin.parameters)."""
    from workbench.plugin.parameters import ParameterError, check_parameters

    try:
        check_parameters(formulation, params, f"{check.source}: {path}", read_files=check.read_files)
    except ParameterError as exc:
        raise ConfigError(str(exc)) from None


def parse_paper(check: Checker, value: Any) -> dict:
    """The ``paper`` section: the published values to compare with, their unit and whether they are
    normalised; empty defaults when absent."""
    if value is None:
        return {"values": [], "normalised": False, "unit": "s", "source": ""}
    check.mapping(value, "paper", {"values", "normalised", "source", "unit", "notes"})
    unit = value.get("unit", "s")
    if unit not in ("s", "ms", "us", "GB/s"):
        raise check.fail("paper.unit", f"expected one of s, ms, us, GB/s, got {unit!r}")
    values = []
    for i, item in enumerate(check.seq(value.get("values", []), "paper.values", non_empty=False)):
        path = f"paper.values[{i}]"
        check.mapping(item, path, {"row", "column", "value", "synthesis_ms", "note"})
        check.required(item, "row", path)
        check.required(item, "column", path)
        for key in ("value", "synthesis_ms"):
            if item.get(key) is not None:
                check.number(item[key], f"{path}.{key}")
        values.append({**item, "row": str(item["row"]), "column": str(item["column"])})
    return {"values": values, "normalised": check.flag(value.get("normalised", False), "paper.normalised"),
            "source": value.get("source", ""), "unit": unit}


def _design_metrics(check: Checker, table: dict, design_metrics: Sequence[str]) -> list[str]:
    """A design table's metrics: the common ones and those its formulations declare (all by default)."""
    known = [*DESIGN_METRICS[:-1], *dict.fromkeys(design_metrics), DESIGN_METRICS[-1]]
    metrics = [str(m) for m in check.seq(table.get("metrics") or known, "table.metrics")]
    for i, metric in enumerate(metrics):
        if metric not in known:
            raise check.fail(f"table.metrics[{i}]", f"expected one of {', '.join(known)}, got {metric!r}")
    return metrics


def _formulation_row_metrics(check: Checker, table: dict) -> list[str]:
    """A formulation-rows table's metrics: row fields or ``stats.<key>`` (status, synthesis seconds
    and collective time by default)."""
    metrics = [str(m) for m in check.seq(table.get("metrics") or ["status", "synthesis_seconds",
                                                                  "collective_time"], "table.metrics")]
    for i, metric in enumerate(metrics):
        if metric not in ROW_METRICS and not (metric.startswith("stats.") and len(metric) > 6):
            raise check.fail(f"table.metrics[{i}]", f"expected one of {', '.join(ROW_METRICS)} or "
                             f"stats.<key> (a formulation's own statistic), got {metric!r}")
    return metrics


def parse_table(check: Checker, value: Any, formulations: list[dict], design_metrics: Sequence[str] = ()) -> dict:
    """``design_metrics``: the statistics the design cells' formulations declare (their ``metrics``)."""
    table = {"rows": "topology", "columns": "formulation", "value": "collective_time", "normalise_by": None,
             "geomean": True, "extra_columns": [], "show_synthesis": False}
    if value is None:
        return table
    check.mapping(value, "table", set(table) | {"column_order", "metrics"})
    table.update(value)
    for key in ("geomean", "show_synthesis"):
        check.flag(table[key], f"table.{key}")
    if table["normalise_by"] is not None and not isinstance(table["normalise_by"], str):
        raise check.fail("table.normalise_by", f"expected a formulation label, got {table['normalise_by']!r}")
    if "column_order" in value:
        table["column_order"] = [str(c) for c in check.seq(value["column_order"], "table.column_order")]
    if table["rows"] not in ("topology", "collective", "size", "chunks", "seed", "formulation", "design"):
        raise check.fail("table.rows", "expected one of topology, collective, size, chunks, seed, formulation, design")
    if table["rows"] == "design":
        table["metrics"] = _design_metrics(check, table, design_metrics)
        return table
    if table["rows"] == "formulation":
        table["metrics"] = _formulation_row_metrics(check, table)
    if table["value"] not in TABLE_VALUES:
        raise check.fail("table.value", f"expected one of {', '.join(TABLE_VALUES)}")
    labels = [f["label"] for f in formulations]
    if table["rows"] == "formulation" or not labels:
        return table
    if table["normalise_by"] is not None and table["normalise_by"] not in labels:
        raise check.fail("table.normalise_by", f"expected a formulation label ({', '.join(labels)})")
    for i, extra in enumerate(check.seq(table["extra_columns"], "table.extra_columns", non_empty=False)):
        if extra not in EXTRA_COLUMNS:
            raise check.fail(f"table.extra_columns[{i}]", f"expected one of {', '.join(EXTRA_COLUMNS)}, got {extra!r}")
    return table


def apply_quick(check: Checker, data: dict) -> dict:
    """A copy of the config ``data`` with ``quick`` applied: its sizes, chunks, time limit, seeds and
    repeats replace the grid's, and its topology, formulation and collective labels select grid entries."""
    quick = check.optional_mapping(data.get("quick"), "quick",
                          {"sizes", "chunks", "time_limit", "topologies", "formulations", "collectives", "seeds",
                           "repeats"})
    data = copy.deepcopy(data)
    grid = data.setdefault("grid", {})
    for key in ("sizes", "chunks"):
        if key in quick:
            grid[key] = quick[key]
    for key in ("time_limit", "seeds", "repeats"):
        if key in quick:
            data[key] = quick[key]
    for key in ("topologies", "formulations", "collectives"):
        if key not in quick:
            continue
        keep = [str(x) for x in check.seq(quick[key], f"quick.{key}")]
        entries = check.seq(grid.get(key, []), f"grid.{key}")

        def label(entry: Any) -> str:
            if isinstance(entry, str):
                return entry
            return str(entry.get("label") or entry.get("spec") or entry.get("name") or entry.get("kind")
                       or entry.get("file"))

        chosen = [e for e in entries if label(e) in keep]
        if not chosen:
            raise check.fail(f"quick.{key}", f"matches none of grid.{key} (labels: {[label(e) for e in entries]})")
        grid[key] = chosen
        if key == "topologies":  # a formulation's own topology list keeps only what the quick grid has
            kept = {label(e) for e in chosen}
            for entry in grid.get("formulations", []):
                if isinstance(entry, dict) and isinstance(entry.get("topologies"), list):
                    entry["topologies"] = [t for t in entry["topologies"] if str(t) in kept]
    return data
