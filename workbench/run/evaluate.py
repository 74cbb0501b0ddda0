"""What a cell does inside its child process: build the problem, synthesize, verify and simulate.

Used by ``workbench.run.cell`` (the child) and by ``workbench.run.monitor`` (which evaluates the last
incumbent of a cell it had to kill).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from workbench.config.evaluation import Evaluation
from workbench.config.specs import TopologySpec
from workbench.reports import row_keys as R
from workbench.run.request import CellRequest

if TYPE_CHECKING:
    from workbench.config.experiment import Cell
    from workbench.plugin.registry import Problem
    from workbench.topology import Topology

__all__ = ["solver_time_limit", "build_topology", "build_problem", "resolve_design_topology", "evaluate_algorithms",
           "child_run_schedule", "child_run_design", "child_evaluate", "remaining_limit", "save_algorithms",
           "provenance", "problem_fields", "formulation_facts", "Send"]

Send = Callable[[str, Any], None]


# ============================================================================ limits
# the LP limits every evaluated cell's bounds use (and ``workbench rebound``, which gives the same bounds)
BOUND_OPTIONS = {"lp_time_limit": 60.0, "lp_max_variables": 400_000}


def solver_time_limit(cell_limit: float) -> float:
    """The formulation's own limit: a little below the cell's, so it can stop and report first."""
    return max(0.5 * cell_limit, cell_limit - max(1.0, 0.05 * cell_limit))


# ============================================================================ building a cell's problem
def build_topology(topology: TopologySpec | dict[str, Any]) -> "Topology":
    """Build a cell's topology from its spec (its document, builder spec or file)."""
    from workbench.topology.builders import load_topology
    from workbench.topology import topology_from_dict

    topology = topology if isinstance(topology, TopologySpec) else TopologySpec.from_dict(topology)
    if topology.doc is not None:
        return topology_from_dict(topology.doc, topology.label)
    return load_topology(topology.spec or topology.file, topology.alpha, topology.bandwidth, topology.overhead)


def resolve_design_topology(topology: TopologySpec, design_rows: dict[str, dict[str, Any]]) -> TopologySpec:
    """Turn ``{from: design, builder, expand}`` into a buildable topology with the design's bandwidths."""
    from workbench.topology.builders import expand_per_npu

    row = design_rows.get(topology.design)
    if row is None or row.get(R.STATUS) not in ("optimal", "feasible") or not row.get(R.BANDWIDTHS):
        status = row.get(R.STATUS) if row else "not run"
        raise RuntimeError(f"design cell {topology.design!r} has no bandwidths (status {status})")
    bandwidths = [float(b) for b in row[R.BANDWIDTHS]]
    if topology.expand == "per-npu":
        bandwidths = expand_per_npu(topology.builder, bandwidths)
    return replace(topology, spec=topology.builder, bandwidth=bandwidths)


def build_problem(cell: "Cell", topology: "Topology | None" = None) -> "Problem":
    """The cell's problem; ``topology``: one the caller built already (else ``cell.topology``'s)."""
    from workbench.model.collective import make_collective
    from workbench.plugin.registry import Problem

    topology = topology if topology is not None else build_topology(cell.topology)
    spec = cell.collective
    if spec.kind == "custom":
        from workbench.model.collective import custom_collective

        collective = custom_collective(spec.ranks, spec.pre, spec.post, spec.combining)
    else:
        collective = make_collective(spec.kind, topology.num_npus, cell.chunks, spec.root)
    collective.check_reachable(topology)
    return Problem(topology, collective, cell.size_bytes)


# ============================================================================ evaluation (shared)
def evaluate_algorithms(algorithms: list, problem, evaluation: Evaluation,
                        run_folder: str | None = None, row_facts: Sequence[str] = ()) -> dict[str, Any]:
    """Verify and simulate every algorithm; the headline is the fastest simulated one.

    The bounds are the problem's (``problem_bounds``: topology, collective, size), the same for
    every algorithm whatever its chunking (a Pareto search returns algorithms with different chunk
    sizes). ``default_collective_time`` (the fastest in the default model, which the status rule
    reads) is added when the evaluation's model is another. With a ``run_folder`` the bounds are
    read from (or kept in) its cache (``workbench.run.bounds_cache``; an entry above the fastest
    simulated time is discarded and solved again). A bound still above that time is a bug in the
    bounds: the row's ``efficiency`` is None, its status never ``optimal`` (``settle_status``) and its
    ``bounds.notes.above_schedule`` and ``message`` say so. Raises ``InvalidAlgorithm``
    for an algorithm that does not implement the collective. ``row_facts``: the meta keys of the
    formulation's own facts the rows carry (``formulation_facts``), after the common ones.
    """
    from workbench.bounds import tacos_ideal
    from workbench.bounds.yardstick import bound_above
    from workbench.run.bounds_cache import cached_problem_bounds
    from workbench.checking.simulate import DEFAULT_MODEL, simulate
    from workbench.checking.verify import verify

    options = evaluation.simulation
    own = [k for k in row_facts if k not in R.ENTRY_FACTS + R.OPTIMALITY_FACTS]
    entry_facts = R.ENTRY_FACTS + tuple(own)
    entries = []
    best = None  # (algorithm, entry, its simulation in the evaluation model, in the default model)
    default_best = None  # the fastest time in the default model
    for algorithm in algorithms:
        default = verify(algorithm).simulation  # the default simulation comes with the verdict
        result = default if options == default.options else simulate(algorithm, **options)
        if default_best is None or default.collective_time < default_best:
            default_best = default.collective_time
        entry = {R.CLAIMED_TIME: algorithm.meta.get(R.CLAIMED_TIME), R.CLAIM_MODEL: algorithm.meta.get(R.CLAIM_MODEL),
                 R.COLLECTIVE_TIME: result.collective_time,
                 R.ALGBW: result.algbw / 1e9, R.BUSBW: result.busbw / 1e9, R.TRANSFERS: algorithm.total_transfers,
                 **{k: algorithm.meta.get(k) for k in entry_facts}}
        entries.append(entry)
        if best is None or result.collective_time < best[2].collective_time:
            best = (algorithm, entry, result, default)
    topology, collective = problem.topology, problem.collective
    # a cached bound above a verified schedule's time (in either model) is discarded and solved again
    fastest = min(best[2].collective_time, default_best) if best is not None else None
    bounds = cached_problem_bounds(topology, collective, problem.size_bytes, run_folder, **BOUND_OPTIONS,
                                   lp=bool(evaluation.lp_bound), schedule_time=fastest)
    if best is not None:
        bounds.schedule_time = best[2].collective_time  # meeting the bound proves it the optimum
    ideal_dims = tacos_ideal(topology, collective, problem.size_bytes, "dimensions") if collective.num_ranks > 1 else None
    # still above after a fresh solve: a bug in the bounds, recorded in the row (``settle_status``)
    above = bound_above(bounds.best, fastest)
    fields: dict[str, Any] = {R.BOUND: bounds.best, R.BOUND_EXACT: bounds.exact and not above,
                              R.RS_AG_THROUGHPUT: bounds.rs_ag_throughput, R.IDEAL: bounds.ideal, R.IDEAL_DIMS: ideal_dims,
                              R.BOUNDS: bounds.to_dict()}
    if best is None:
        return fields
    algorithm, entry, result, default = best
    fields.update({k: entry[k] for k in (R.CLAIMED_TIME, R.CLAIM_MODEL, R.COLLECTIVE_TIME, R.ALGBW, R.BUSBW,
                                         R.TRANSFERS)})
    fields[R.CLAIM_SIMULATED] = _claim_simulated(algorithm, entry[R.CLAIM_MODEL], options, result, default)
    fields[R.ALGORITHM_META] = {k: algorithm.meta[k] for k in entry_facts + R.OPTIMALITY_FACTS
                                if k in algorithm.meta}
    if options != DEFAULT_MODEL:
        fields[R.DEFAULT_COLLECTIVE_TIME] = default_best
    fields[R.EFFICIENCY] = bounds.efficiency(result.collective_time)
    if above:
        fields[R.EFFICIENCY] = None
        fields[R.MESSAGE] = (f"bound bug: the best lower bound {bounds.best:.6g} s is above the verified "
                             f"schedule's simulated time {fastest:.6g} s; not used to call it optimal")
    fields[R.IDEAL_EFFICIENCY] = (bounds.ideal / result.collective_time) if bounds.ideal else None
    fields[R.IDEAL_DIMS_EFFICIENCY] = (ideal_dims / result.collective_time) if ideal_dims else None
    if len(entries) > 1:
        fields[R.ALGORITHMS] = entries
    if len(topology.links) <= 20_000:
        fields[R.LINK_UTILISATION] = [[l.src, l.dst, round(float(u), 6)]
                                      for l, u in zip(topology.links, result.link_utilisation())]
    return fields


def problem_fields(problem) -> dict[str, Any]:
    """The row fields that describe the built problem: NPUs, links, bytes per chunk."""
    return {R.NPUS: problem.topology.num_npus, R.LINKS: len(problem.topology.links),
            R.CHUNK_BYTES: problem.chunk_bytes}


def formulation_facts(formulation: Any) -> tuple[str, ...]:
    """The meta keys of a formulation's own algorithm facts the rows carry (its ``row_facts``)."""
    from workbench.plugin.registry import row_facts

    return tuple(row_facts(formulation))


# ============================================================================ child side
def remaining_limit(request: CellRequest) -> float:
    """The cell's time limit, cut to what is left before the request's absolute ``deadline`` when
    it has one (``workbench synth`` counts from process start, so start-up and pre-checks use up
    the limit)."""
    limit = request.time_limit
    if request.deadline is not None:
        limit = min(limit, request.deadline - time.time())
    return max(limit, 0.05)


def child_run_schedule(request: CellRequest, send: Send) -> dict[str, Any]:
    """A schedule cell in its process: build the problem, synthesize, verify and simulate; the row fields."""
    from workbench.plugin.call import build_options, synthesize
    from workbench.plugin.registry import resolve_formulation
    from workbench.bounds.yardstick import model_optimal_of, settle_status

    cell = request.cell
    problem = build_problem(cell, request.topology)
    formulation = resolve_formulation(cell.formulation.name, request.formulation_dir)
    send("ready", None)
    started = time.perf_counter()
    result = synthesize(formulation, problem, time_limit=solver_time_limit(remaining_limit(request)), seed=cell.seed,
                        on_incumbent=lambda algorithm: send("incumbent", algorithm),
                        options=build_options(formulation, cell.formulation.params))
    seconds = time.perf_counter() - started
    summary = {"status": result.status, "synthesis_seconds": seconds, "stats": result.stats,
               "message": result.message, "claimed_times": result.claimed_times}
    send("synthesized", summary)
    fields = {**summary, **problem_fields(problem)}
    fields.pop("claimed_times", None)
    # the formulation's answer and its proof (in its own model) are kept; the row's status is the workbench's
    fields.update(solver_status=result.status, model_optimal=model_optimal_of(result.algorithms, result.stats))
    if result.algorithms:
        from workbench.checking.verify import InvalidAlgorithm

        try:
            evaluated = evaluate_algorithms(result.algorithms, problem, request.evaluation, request.run_folder,
                                            formulation_facts(formulation))
            if evaluated.get(R.MESSAGE) and fields.get(R.MESSAGE):  # the formulation's message first
                evaluated[R.MESSAGE] = f"{fields[R.MESSAGE]}; {evaluated[R.MESSAGE]}"
            fields.update(evaluated)
            settle_status(fields)  # before the files are stamped, so they record the same status
        except InvalidAlgorithm as exc:
            fields.update(status="error", message=f"invalid algorithm: {exc}")
        if request.evaluation.save_algorithms and request.algorithm_path:
            _save_into(fields, result.algorithms, request, fields[R.STATUS], seconds)
    return fields


def child_evaluate(request: CellRequest, send: Send) -> dict[str, Any]:
    """Verify and simulate a timed-out cell's incumbent (in its own process, under the evaluation limit)."""
    from workbench.checking.verify import InvalidAlgorithm

    from workbench.plugin.registry import FormulationError, resolve_formulation

    problem = build_problem(request.cell, request.topology)
    try:  # the formulation's own row facts; an incumbent is still evaluated if it cannot be loaded here
        facts = formulation_facts(resolve_formulation(request.cell.formulation.name, request.formulation_dir))
    except FormulationError:
        facts = ()
    send("ready", None)
    fields = dict(problem_fields(problem))
    try:
        fields.update(evaluate_algorithms([request.algorithm], problem, request.evaluation, request.run_folder,
                                          facts))
    except InvalidAlgorithm as exc:
        return {"status": "error", "message": f"the incumbent is invalid: {exc}"}
    if request.evaluation.save_algorithms and request.algorithm_path:
        _save_into(fields, [request.algorithm], request, "timeout", request.time_limit)
    fields.pop(R.STATUS, None)
    return fields


def provenance(request: CellRequest, status: str, seconds: float) -> dict[str, Any]:
    """What an algorithm file records of the run that made it: the formulation, its effective
    parameters (the declared defaults under the ones given), the seed, the status and the
    synthesis time. Stamped here, for every formulation alike; formulations record only their
    own facts (views, engines, claimed times)."""
    from workbench.plugin.parameters import RUNNER_KEYS, declared_parameters
    from workbench.plugin.registry import resolve_formulation

    name = request.cell.formulation.name
    given = {k: v for k, v in request.cell.formulation.params.items() if k not in RUNNER_KEYS}
    declared = declared_parameters(resolve_formulation(name, request.formulation_dir))
    params = {**{p.name: p.default for p in declared}, **given}
    return {"formulation": name, "params": params, "seed": request.cell.seed, "status": status,
            "synthesis_seconds": seconds}


def _claim_simulated(algorithm, claim_model: str | None, options: dict[str, str], result, default) -> float | None:
    """The algorithm's time in the simulator model its claim names (``meta.claim_model``), set
    beside the claim so a table shows both (``result`` and ``default`` are its simulations in the
    evaluation's model and the default one, reused where the claim names either); None where the claim is in a model of the
    formulation's own (``sccl-steps``, ``teccl-epochs``) or names none."""
    from workbench.checking.simulate import DEFAULT_MODEL, SimulationError, parse_model, simulate

    try:
        model = parse_model(claim_model) if claim_model else None
    except SimulationError:
        return None
    if model is None:
        return None
    if model == options:
        return result.collective_time
    if model == DEFAULT_MODEL:
        return default.collective_time
    return simulate(algorithm, **model).collective_time


def save_algorithms(algorithms: list, request: CellRequest, status: str, seconds: float) -> list[str]:
    """Write each algorithm (one file per Pareto point next to the first) with provenance in meta.

    A character device (``-o /dev/null``) takes the first algorithm only: frontier files beside
    it would be new files in /dev. Raises ``workbench.util.files.OutputError`` for a file that cannot
    be written (a full disk); the files before it are kept."""
    path = Path(request.algorithm_path)
    stamp = provenance(request, status, seconds)
    written = []
    for index, algorithm in enumerate(algorithms[:1] if path.is_char_device() else algorithms):
        algorithm.meta.setdefault("claimed_time", None)
        algorithm.meta.update(stamp)
        target = path if index == 0 else path.with_name(f"{path.stem}.{index}{path.suffix}")
        algorithm.save(target)  # workbench.util.files.write_output: atomic; a device written through
        written.append(str(target))
    return written


def _save_into(fields: dict[str, Any], algorithms: list, request: CellRequest, status: str,
               seconds: float) -> None:
    """``save_algorithms`` into the row fields; a write that fails is ``output_error`` (``synth``
    turns it into exit code 2; a run's row keeps its results and records why no file was written)."""
    from workbench.util.files import OutputError

    try:
        fields[R.ALGORITHM_FILES] = save_algorithms(algorithms, request, status, seconds)
    except OutputError as exc:
        fields[R.OUTPUT_ERROR] = str(exc)


def child_run_design(request: CellRequest, send: Send) -> dict[str, Any]:
    """A design cell in its process: the design formulation's bandwidths, time and cost as row fields."""
    from workbench.plugin.call import build_options, synthesize
    from workbench.plugin.registry import DesignProblem, resolve_formulation

    cell = request.cell
    formulation = resolve_formulation(cell.formulation.name, request.formulation_dir)
    problem_data = dict(cell.problem)
    problem = DesignProblem(dimensions=problem_data.pop("dimensions", []),
                            workloads=problem_data.pop("workloads", []),
                            cost_model=problem_data.pop("cost_model", {}),
                            constraints=problem_data.pop("constraints", {}),
                            objective=problem_data.pop("objective", "performance"))
    send("ready", None)
    started = time.perf_counter()
    result = synthesize(formulation, problem, time_limit=solver_time_limit(request.time_limit), seed=cell.seed,
                        options=build_options(formulation, cell.formulation.params))
    seconds = time.perf_counter() - started
    send("synthesized", {"status": result.status, "synthesis_seconds": seconds})
    return {"status": result.status, "synthesis_seconds": seconds, "bandwidths": list(result.bandwidths),
            "design_time": result.time, "cost": result.cost, "stats": result.stats, "message": result.message}
