"""TACOS's synthesis: the restarts of the greedy, the chunking by size, the claim (``formulations.tacos``)."""

from __future__ import annotations

import time
from typing import Any, Callable

from formulations.tacos.engines import choose_engine, greedy_all_gather
from formulations.tacos.matching import MatchResult, OutOfTime, deliveries
from formulations.tacos.options import TacosOptions
from formulations.tacos.schedule import to_algorithm
from formulations.tacos.sizing import chunk_choices, fastest_chunking
from workbench.model.algorithm import Algorithm
from workbench.model.collective import Collective
from workbench.kit.deadline import Deadline
from workbench.kit.duality import Phase, by_duality_phases
from workbench.plugin.registry import Problem, SynthesisResult, Unsupported
from workbench.kit.schedule import adapts_to_size, claim_in_model, claim_listing
from workbench.topology import Topology, TopologyError
from workbench.topology.logical import unwind

__all__ = ["synthesize", "greedy_all_gather", "MatchResult", "to_algorithm", "choose_engine"]


def synthesize(problem: Problem, *, time_limit: float, seed: int, options: TacosOptions,
               on_incumbent: Callable[[Algorithm], None] | None = None) -> SynthesisResult:
    """The best of the restarts, at the chunking chosen by size (``formulations.tacos``); a fabric
    TACOS cannot deliver on (a rank no chunk can reach, switches it cannot unwind) is ``Unsupported``."""
    try:
        return _by_chunking(problem, time_limit=time_limit, seed=seed, options=options, on_incumbent=on_incumbent)
    except TopologyError as exc:
        raise Unsupported(f"tacos: {exc}") from None


def _by_chunking(problem: Problem, *, time_limit: float, seed: int, options: TacosOptions,
                 on_incumbent: Callable[[Algorithm], None] | None) -> SynthesisResult:
    """One greedy per chunking tried; the fastest is kept (``sizing.fastest_chunking``)."""
    choices = chunk_choices(problem, options.chunks)
    deadline = Deadline(time_limit)
    if len(choices) == 1:
        return _listed(_synthesize(problem, time_limit=time_limit, seed=seed, on_incumbent=on_incumbent,
                                        options=options), problem, deadline)
    fastest: list[float] = []

    def improving(algorithm: Algorithm) -> None:  # incumbents across chunkings: only the better ones
        if on_incumbent is not None and (not fastest or algorithm.meta["claimed_time"] < fastest[0]):
            fastest[:] = [algorithm.meta["claimed_time"]]
            on_incumbent(algorithm)

    result, timed = fastest_chunking(problem, choices, deadline, lambda p, limit: _synthesize(
        p, time_limit=limit, seed=seed, on_incumbent=improving, options=options))
    if result.algorithms:
        result.algorithms[0].meta.setdefault("time_by_choice", {})["chunks"] = {str(k): t for k, t in timed.items()}
    result = _listed(result, problem, deadline)
    result.wall_seconds = deadline.elapsed()
    result.stats["chunks_tried"] = sorted(timed)
    return result


def _synthesize(problem: Problem, *, time_limit: float | None, seed: int,
                on_incumbent: Callable[[Algorithm], None] | None, options: TacosOptions) -> SynthesisResult:
    """The greedy on the problem's own chunking (the paper's TACOS)."""
    restarts, replacement = options.restarts, options.replacement
    deadline = Deadline(time_limit)
    degree = options.degree
    collective = problem.collective
    if collective.combining and collective.kind not in ("reducescatter", "reduce", "allreduce"):
        raise Unsupported("tacos: a custom combining collective is not supported")
    # one choice for all restarts: loading the compiled engine pays off over their total work
    runs = restarts * (2 if collective.kind == "allreduce" else 1)
    chosen = choose_engine(options.engine, runs * deliveries(problem.collective))
    best: Algorithm | None = None
    stats: dict[str, Any] = {"restarts_done": 0, "events": 0, "wasted_transfers": 0, "claim_seconds": 0.0}
    status = "feasible"
    for attempt in range(restarts):
        if deadline.expired:
            status = "timeout"
            break
        try:
            algorithm, run_stats = _one(problem, seed + attempt, degree, replacement, deadline, chosen)
        except OutOfTime:
            status = "timeout"
            break
        stats["restarts_done"] += 1
        stats["events"] += run_stats["events"]
        stats["wasted_transfers"] += run_stats["wasted"]
        stats["engine"] = run_stats["engine"]
        if best is None or algorithm.meta["greedy_time"] < best.meta["greedy_time"]:
            best = algorithm
            if on_incumbent is not None:
                stats["claim_seconds"] += _claim(best)
                on_incumbent(best)
    if best is not None and "claim_model" not in best.meta:
        stats["claim_seconds"] += _claim(best)
    seconds = deadline.elapsed() - stats["claim_seconds"]  # the search, not the claim's simulation
    if best is None:
        return SynthesisResult([], "timeout", seconds, stats, message="no complete run within the time limit")
    best.meta["engine"] = stats["engine"]
    stats["transfers"] = len(best.transfers)
    return SynthesisResult([best], status, seconds, stats)


def _one(problem: Problem, seed: int, degree: int | None, replacement: str,
         deadline: Deadline, engine: str) -> tuple[Algorithm, dict[str, Any]]:
    """One run: the greedy matching for a gather-like collective; reduce-scatter and reduce
    by duality (the run on the reversed graph, reversed), all-reduce = reduce-scatter +
    all-gather, the all-gather half with its own seed (``workbench.kit.duality``)."""
    topology, collective, chunk_bytes = problem.topology, problem.collective, problem.chunk_bytes
    meta = {"run_seed": seed, "synthesis_view": _view_name(topology, degree)}  # the restart's own seed
    totals = {"events": 0, "wasted": 0, "engine": None}

    def gather(physical: Topology, target: Collective, size: float, phase: Phase) -> Algorithm:
        view = _unwound(physical, degree)
        target.check_reachable(view)
        run_seed = seed + 7919 * phase.index  # the two halves of an all-reduce draw differently
        result = greedy_all_gather(view, target, size, run_seed, replacement, deadline.at, engine=engine)
        algorithm = to_algorithm(physical, target, size, result, dict(meta, run_seed=run_seed))
        algorithm.meta["claimed_time"] = result.claimed_time
        totals["events"] += result.events
        totals["wasted"] += result.wasted
        totals["engine"] = result.engine
        return algorithm

    algorithm = by_duality_phases(topology, collective, chunk_bytes, gather)
    algorithm.meta.update(meta)
    # the greedy's estimates, carried through reversal and summed over an all-reduce's halves
    algorithm.meta["greedy_time"] = algorithm.meta.pop("claimed_time")
    return algorithm, totals


def _listed(result: SynthesisResult, problem: Problem, deadline: Deadline) -> SynthesisResult:
    """Below 256 MB, the schedule in the listing that simulates faster: the greedy's timeline or
    its list-scheduled re-listing (``workbench.kit.schedule.claim_listing``, within what is left of
    the time limit), with that time claimed."""
    if result.algorithms and adapts_to_size(problem.topology, problem.size_bytes):  # else: claimed already
        result.algorithms[0] = claim_listing(result.algorithms[0], problem.size_bytes,
                                             None if deadline.unlimited else deadline.remaining(),
                                             claimed=True)  # _synthesize claimed the result
        result.claimed_times = [a.meta.get("claimed_time") for a in result.algorithms]
    return result


def _claim(algorithm: Algorithm) -> float:
    """Set the schedule's default-model time as its claim (module docstring); returns the seconds spent."""
    started = time.perf_counter()
    claim_in_model(algorithm)
    return time.perf_counter() - started


def _unwound(topology: Topology, degree: int | None) -> Topology:
    """The switchless view: switches unwound, multi-tier ones as logical switches per rail."""
    return unwind(topology, degree)


def _view_name(topology: Topology, degree: int | None) -> str:
    if not topology.num_switches:
        return topology.name
    return f"{topology.name} with switches unwound to degree {'N-1' if degree is None else degree}"
