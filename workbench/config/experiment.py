"""Experiment configs: schema, validation with precise messages, and grid expansion.

A config is YAML::

    name: tiny                         # results go to results/<name>/
    description: what it shows
    time_limit: 60s                    # per cell (the runner kills the cell a little after)
    seeds: [0]                         # or repeats: 3 (seeds 0..2)
    grid:
      topologies:
        - {spec: "rfs:2x4x2", bandwidth: [200GiB/s, 100GiB/s, 50GiB/s], alpha: 0.5us, label: "16 (2)"}
        - {file: my_topology.yaml}
        - {from: my_design, builder: "md:R4,F8,S4", expand: per-npu}   # a design cell's bandwidths
      collectives: [{kind: allreduce}, {kind: broadcast, root: 0}]   # or plain strings
      sizes: [1MB, 1GiB]
      chunks: [1]
      formulations:
        - {name: bfs-trees, label: Trees, params: {}}
        - {name: my_package.module:MyFormulation}                    # import path works too
        - {name: taccl, seeds: [0], topologies: ["16 (2)"], params: {time_limit: 20min}}  # own seeds, topologies, limit
        - {name: teccl, collectives: [alltoall], chunks: [3], sizes: [600KB]}  # own collectives, chunks, sizes
      designs:                                                       # design (LIBRA-like) cells
        - {name: my_design, formulation: libra, problem: {...}, params: {}}
    evaluation: {link_model: pipelined, order: in-order, switch_model: cut-through, save_algorithms: false}
    paper:                             # reference values, matched by row and column labels
      values:
        - {row: "16 (2)", column: Trees, value: 1.0, synthesis_ms: 0.63}
      normalised: true                 # paper values are already normalised like the table
    table: {rows: topology, columns: formulation, value: collective_time, normalise_by: Trees, geomean: true}
    quick: {sizes: [1MB], time_limit: 5s, topologies: ["16 (2)"]}   # what --quick shrinks

Every error names the file, the key path and what was expected, e.g.
``experiments/x.yaml: grid.formulations[2].params.time_limit: expected a duration like '30s'``.
A formulation's params that ask for more work than a cell's memory budget holds on a problem of
the grid are refused the same way, naming the parameter as given
(``x.yaml: grid.formulations[0].params.chunks=1000000000: needs an estimated ...``; the size guard,
``workbench.plugin.parameters.price_parameters``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.config.checks import (EVAL_KEYS, GRID_KEYS, TABLE_VALUES, TOP_KEYS, Checker, ConfigError,
                                     apply_quick, check_builds, check_cells, check_params, check_repeats, check_roots,
                                     check_sizes,
                                     data_paths, kind_of, parse_collective, parse_formulation, parse_paper, parse_table,
                                     parse_topology)
from workbench.config.evaluation import Evaluation
from workbench.config.specs import CollectiveSpec, DesignSpec, FormulationSpec, TopologySpec
from workbench.checking.simulate import LINK_MODELS, ORDERS, SWITCH_MODELS

__all__ = ["ConfigError", "Experiment", "Cell", "DesignCell", "load_experiment", "parse_experiment",
           "TABLE_VALUES"]

@dataclass(frozen=True)
class Cell:
    """One schedule run: everything a worker needs (pickled to the cell with its request).

    Mappings given for ``topology``, ``collective`` or ``formulation`` (``workbench synth``,
    ``workbench tune``) are turned into their specs."""

    experiment: str
    topology: TopologySpec
    collective: CollectiveSpec
    size_bytes: float
    chunks: int
    formulation: FormulationSpec
    seed: int
    time_limit: float
    evaluation: Evaluation

    def __post_init__(self) -> None:
        if not isinstance(self.topology, TopologySpec):
            object.__setattr__(self, "topology", TopologySpec.from_dict(self.topology))
        object.__setattr__(self, "collective", CollectiveSpec.from_dict(self.collective))
        object.__setattr__(self, "formulation", FormulationSpec.from_dict(self.formulation))

    @property
    def key(self) -> dict[str, Any]:
        """What the cell id hashes: the grid point as the config wrote it."""
        return {"topology": self.topology.label, "collective": self.collective.to_dict(),
                "size_bytes": self.size_bytes, "chunks": self.chunks, "formulation": self.formulation.label,
                "params": self.formulation.params, "seed": self.seed}

    @property
    def cell_id(self) -> str:
        """``label:hash`` of the cell's key (stable across runs: a run resumes by it)."""
        digest = hashlib.sha1(json.dumps(self.key, sort_keys=True, default=str).encode()).hexdigest()[:12]
        return f"{self.formulation.label}:{digest}"

    def describe(self) -> str:
        """One line naming the cell, for progress output."""
        from workbench.util.units import format_size

        root = self.collective.root
        coll = self.collective.kind + (f"(root {root})" if root is not None else "")
        return (f"{self.topology.label} {coll} {format_size(self.size_bytes)} k={self.chunks} "
                f"{self.formulation.label} seed {self.seed}")


@dataclass(frozen=True)
class DesignCell:
    """One design run (LIBRA-like); its result can become a topology for schedule cells."""

    experiment: str
    name: str
    formulation: FormulationSpec
    problem: dict[str, Any]
    seed: int
    time_limit: float
    key_problem: dict[str, Any] | None = None  # the problem as the id names it (data paths canonical)

    def __post_init__(self) -> None:
        object.__setattr__(self, "formulation", FormulationSpec.from_dict(self.formulation))

    @property
    def cell_id(self) -> str:
        """``design:name:hash`` of the design, its formulation, problem (as the id names it) and seed."""
        problem = self.problem if self.key_problem is None else self.key_problem
        key = {"design": self.name, "formulation": self.formulation.to_dict(), "problem": problem,
               "seed": self.seed}
        digest = hashlib.sha1(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:12]
        return f"design:{self.name}:{digest}"


@dataclass
class Experiment:
    """A checked experiment config: its grid as typed specs, its evaluation, paper values and table."""
    name: str
    description: str
    path: Path | None
    time_limit: float
    seeds: list[int]
    topologies: list[TopologySpec]
    collectives: list[CollectiveSpec]
    sizes: list[float]
    chunks: list[int]
    formulations: list[FormulationSpec]
    designs: list[DesignSpec]
    evaluation: Evaluation
    paper: dict[str, Any]
    table: dict[str, Any]
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    # the config's folder: relative data paths, and import-path formulation modules beside the config
    base_dir: Path | None = None

    def cells(self) -> list[Cell]:
        """The schedule cells in a stable order (topology, collective, size, chunks, formulation, seed).

        A formulation entry with its own ``collectives`` or ``chunks`` runs once per remaining grid
        point with those instead of the grid's.
        """
        result = []
        for topology, collective, size, chunks, formulation, seed in itertools.product(
                self.topologies, self.collectives, self.sizes, self.chunks, self.formulations, self.seeds):
            own_collectives = formulation.collectives
            own_chunks = formulation.chunks
            if own_collectives is not None and collective != self.collectives[0]:
                continue
            if own_chunks is not None and chunks != self.chunks[0]:
                continue
            if formulation.seeds is not None and seed not in formulation.seeds:
                continue
            if formulation.topologies is not None and topology.label not in formulation.topologies:
                continue
            own_sizes = formulation.sizes
            if own_sizes is not None and size != self.sizes[0]:
                continue
            limit = formulation.params.get("time_limit", self.time_limit)
            for this_collective in own_collectives or [collective]:
                for this_chunks in own_chunks or [chunks]:
                    for this_size in own_sizes or [size]:
                        result.append(Cell(self.name, topology, this_collective, this_size, this_chunks, formulation,
                                           seed, limit, self.evaluation))
        return result

    def cell_ids(self) -> set[str]:
        """Ids of every cell, schedule and design, of the grid."""
        return {c.cell_id for c in self.cells()} | {d.cell_id for d in self.design_cells()}

    def design_cells(self) -> list[DesignCell]:
        """Design cells run on the problem with data paths resolved against the config's folder;
        their ids name the paths relative to the project folder (see ``workbench.config.checks.data_paths``)."""
        return [DesignCell(self.name, d.name, FormulationSpec(d.formulation, d.formulation, d.params),
                           d.problem if d.run_problem is None else d.run_problem, self.seeds[0],
                           self.time_limit if d.time_limit is None else d.time_limit, d.key_problem)
                for d in self.designs]


def _parse_design(check: Checker, entry: Any, path: str, base_dir: Path | None,
                  check_files: bool) -> tuple[DesignSpec, list[str]]:
    """One ``grid.designs`` entry, its formulation a design one with checked parameters; with the
    statistics that formulation reports (its ``metrics``)."""
    check.mapping(entry, path, {"name", "formulation", "problem", "params", "time_limit"})
    design = {"name": check.string(check.required(entry, "name", path), f"{path}.name"),
              "formulation": check.string(check.required(entry, "formulation", path), f"{path}.formulation"),
              "problem": check.optional_mapping(entry.get("problem"), f"{path}.problem"),
              "params": check.optional_mapping(entry.get("params"), f"{path}.params")}
    if "time_limit" in entry:
        design["time_limit"] = check.duration(entry["time_limit"], f"{path}.time_limit")
    from workbench.plugin.registry import FormulationError, resolve_formulation

    try:
        formulation = resolve_formulation(design["formulation"], base_dir)
    except FormulationError as exc:
        raise check.fail(f"{path}.formulation", str(exc)) from None
    if formulation.kind != "design":
        raise check.fail(f"{path}.formulation", f"{design['formulation']!r} is a {formulation.kind} "
                                                f"formulation; a design cell needs a design one (libra)")
    check_params(check, formulation, design["params"], f"{path}.params")
    metrics = [str(m) for m in getattr(formulation, "metrics", ())]
    run_problem = key_problem = None
    if base_dir is not None:
        run_problem, key_problem = data_paths(check, design["problem"], f"{path}.problem", Path(base_dir),
                                              check_files)
    return DesignSpec(design["name"], design["formulation"], design["problem"], design["params"],
                      design.get("time_limit"), run_problem, key_problem), metrics


def _parse_schedule_grid(check: Checker, grid: dict, base_dir: Path | None, design_names: set[str]) -> tuple:
    """The schedule cells' axes: topologies (with each spec or file topology's size, by label),
    collectives, sizes, chunks and formulations."""
    topologies, built = [], {}  # built: each spec or file topology's size, by label
    for i, e in enumerate(check.seq(check.required(grid, "topologies", "grid"), "grid.topologies")):
        topologies.append(parse_topology(check, e, f"grid.topologies[{i}]", base_dir, design_names))
        if "spec" in topologies[-1] or "file" in topologies[-1]:  # built now, so a bad one fails at load
            built[topologies[-1]["label"]] = check_builds(check, topologies[-1], f"grid.topologies[{i}]")
    collectives = [parse_collective(check, e, f"grid.collectives[{i}]")
                   for i, e in enumerate(check.seq(check.required(grid, "collectives", "grid"),
                                                   "grid.collectives"))]
    sizes = [check.size(s, f"grid.sizes[{i}]")
             for i, s in enumerate(check.seq(check.required(grid, "sizes", "grid"), "grid.sizes"))]
    chunks = [check.integer(c, f"grid.chunks[{i}]", 1)
              for i, c in enumerate(check.seq(grid.get("chunks", [1]), "grid.chunks"))]
    formulations = [parse_formulation(check, e, f"grid.formulations[{i}]", base_dir)
                    for i, e in enumerate(check.seq(check.required(grid, "formulations", "grid"),
                                                    "grid.formulations"))]
    return topologies, built, collectives, sizes, chunks, formulations


def _check_formulation_entries(check: Checker, collectives: list, topologies: list, formulations: list,
                               npus: dict[str, int]) -> None:
    """Roots within each topology (the grid's collectives and each formulation's own), every
    topology a formulation names in the grid, formulation labels unique."""
    check_roots(check, collectives, "grid.collectives", topologies, npus)
    for i, f in enumerate(formulations):
        mine = [t for t in topologies if t["label"] in f.get("topologies", [t["label"]])]
        check_roots(check, f.get("collectives", []), f"grid.formulations[{i}].collectives", mine, npus)
    topology_labels = {t.get("label") for t in topologies}
    for i, f in enumerate(formulations):
        for j, label in enumerate(f.get("topologies", [])):
            if label not in topology_labels:
                raise check.fail(f"grid.formulations[{i}].topologies[{j}]",
                                 f"no topology labelled {label!r} in grid.topologies")
    labels = [f["label"] for f in formulations]
    if len(set(labels)) != len(labels):
        raise check.fail("grid.formulations", "labels must be unique (give each entry a 'label')")


def _parse_evaluation(check: Checker, data: Any) -> Evaluation:
    """The ``evaluation:`` section: models among their choices, flags, the memory limit a size and the
    evaluation time limit a duration."""
    given = dict(check.optional_mapping(data, "evaluation", EVAL_KEYS))
    for key, choices in (("link_model", LINK_MODELS), ("order", ORDERS), ("switch_model", SWITCH_MODELS)):
        if key in given and given[key] not in choices:
            raise check.fail(f"evaluation.{key}", f"expected one of {', '.join(choices)}, got {given[key]!r}")
    for key in ("save_algorithms", "lp_bound"):
        if key in given:
            check.flag(given[key], f"evaluation.{key}")
    if given.get("memory_limit") is not None:
        given["memory_limit"] = check.size(given["memory_limit"], "evaluation.memory_limit")
    if "evaluation_time_limit" in given:
        given["evaluation_time_limit"] = check.duration(given["evaluation_time_limit"],
                                                        "evaluation.evaluation_time_limit")
    return Evaluation(**given)


def parse_experiment(data: Any, source: str = "experiment", quick: bool = False,
                     base_dir: Path | None = None, check_files: bool = True) -> Experiment:
    """Check a loaded config (``source`` names it in errors) and return its ``Experiment``; raises ``ConfigError``."""
    check = Checker(source, read_files=check_files)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {kind_of(data)}")
    check.mapping(data, "", TOP_KEYS)
    if quick:
        data = apply_quick(check, data)
    name = check.string(check.required(data, "name", ""), "name")
    if any(c in name for c in "/\\ ") or name.startswith("."):
        raise check.fail("name", f"expected a plain name without spaces or slashes, got {name!r}")
    grid = check.mapping(check.required(data, "grid", ""), "grid", GRID_KEYS)
    time_limit = check.duration(data.get("time_limit", "60s"), "time_limit")
    if "seeds" in data:
        seeds = [check.integer(s, f"seeds[{i}]") for i, s in enumerate(check.seq(data["seeds"], "seeds"))]
    else:
        seeds = list(range(check_repeats(check, data.get("repeats", 1))))  # capped before it is listed
    designs: list[DesignSpec] = []
    design_metrics: list[str] = []  # the statistics the design formulations report (their ``metrics``)
    for i, entry in enumerate(check.seq(grid.get("designs", []), "grid.designs", non_empty=False)):
        design, metrics = _parse_design(check, entry, f"grid.designs[{i}]", base_dir, check_files)
        designs.append(design)
        design_metrics += metrics
    if bool(designs) and "formulations" not in grid:  # a design study: no schedule cells
        topologies, collectives, sizes, chunks, formulations = [], [], [], [1], []
        built: dict[str, Any] = {}
    else:
        topologies, built, collectives, sizes, chunks, formulations = _parse_schedule_grid(
            check, grid, base_dir, {d.name for d in designs})
    _check_formulation_entries(check, collectives, topologies, formulations,
                               {label: size[0] for label, size in built.items()})
    evaluation = _parse_evaluation(check, data.get("evaluation"))
    check_cells(check, "seeds" if "seeds" in data else "repeats", seeds, topologies, collectives, sizes, chunks,
                formulations, designs)
    check_sizes(check, topologies, built, collectives, chunks, evaluation.memory_limit)
    _price_params(check, formulations, topologies, built, collectives, chunks, sizes, evaluation.memory_limit,
                  base_dir)
    paper = parse_paper(check, data.get("paper"))
    table = parse_table(check, data.get("table"), formulations, design_metrics)
    return Experiment(name, str(data.get("description", "")), Path(source) if source else None, time_limit, seeds,
                      [TopologySpec.from_dict(t, built.get(t["label"])) for t in topologies],
                      [CollectiveSpec.from_dict(c) for c in collectives], sizes, chunks,
                      [FormulationSpec.from_dict(f) for f in formulations], designs,
                      evaluation, paper, table, data, None if base_dir is None else Path(base_dir))



def _price_params(check: Checker, formulations: list[dict], topologies: list[dict], built: dict[str, tuple],
                  collectives: list[dict], chunks: list[int], sizes: list[float], memory_limit: float | None,
                  base_dir: Path | None) -> None:
    """Refuse a formulation's params whose work could not fit a cell's budget on a problem of the grid
    it meets (``workbench.plugin.parameters.price_parameters``: ``chunks: 1000000000``), before any
    cell, naming the parameter as given; priced at the grid's most chunks, at its smallest and
    largest sizes, on each built topology. Skipped when the config's files are not read (a report
    on an old run)."""
    from workbench.plugin.parameters import price_parameters
    from workbench.plugin.registry import FormulationError, resolve_formulation
    from workbench.util import size_guard

    if not check.read_files:
        return
    limit = memory_limit if memory_limit is not None else size_guard.budget()
    for i, f in enumerate(formulations):
        if not any(key != "time_limit" for key in f["params"]):
            continue
        try:
            formulation = resolve_formulation(f["name"], base_dir)
        except FormulationError:  # named when the entry was read
            continue
        most = max(f.get("chunks") or chunks or [1])
        own_sizes = f.get("sizes") or sizes or [0.0]
        problems = [size_guard.ProblemSize(*built[t["label"]], c["kind"], most, 0.0, size)
                    for t in topologies if t["label"] in built and t["label"] in f.get("topologies", [t["label"]])
                    for c in f.get("collectives") or collectives
                    for size in sorted({min(own_sizes), max(own_sizes)})]
        try:
            price_parameters(formulation, f["params"], f"grid.formulations[{i}].params", problems, limit=limit)
        except size_guard.SizeError as exc:
            raise ConfigError(f"{check.source}: {exc}") from None


def load_experiment(path: str | Path, quick: bool = False) -> Experiment:
    """Read and validate a YAML experiment; ``ConfigError`` is one line naming file and key (a FIFO
    or folder, a binary file, a duplicate key, an alias bomb included: ``workbench.util.safe_load``)."""
    from workbench.util.safe_load import load_file

    path = Path(path)
    data = load_file(path, "experiment file", ConfigError, syntax="yaml")
    return parse_experiment(data, str(path), quick=quick, base_dir=path.parent)
