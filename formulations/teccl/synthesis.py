"""TE-CCL's synthesis: the epoch graph, the MILP, LP or A* solve and the emitted schedule (``formulations.teccl``)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable

from formulations.teccl.epochs import EpochGraph, EpochSchedule, Flow, base_epoch, epoch_graph
from formulations.teccl.greedy import greedy_schedule
from formulations.teccl.lp import solve_lp_schedule, to_subchunks
from formulations.teccl.milp import solve_milp
from formulations.teccl.options import TecclOptions
from workbench.model.algorithm import Algorithm, Transfer
from workbench.model.collective import Collective, custom_collective, make_collective
from workbench.kit.deadline import Deadline
from workbench.kit.duality import Phase, by_duality_phases
from workbench.util.graphs import dijkstra
from workbench.plugin.registry import Problem, SynthesisResult
from workbench.topology import Topology

__all__ = ["synthesize", "CLAIM_MODEL"]

# the claim's model (meta["claim_model"]): whole epochs of tau, which no simulator model reproduces
CLAIM_MODEL = "teccl-epochs"


class _NoSchedule(Exception):
    """A time limit ended the search before any schedule existed (the status is reported, not an error)."""

    def __init__(self, status: str, message: str, stats: dict) -> None:
        super().__init__(message)
        self.status, self.message, self.stats = status, message, stats


def synthesize(formulation: Any, problem: Problem, *, time_limit: float, seed: int, options: TecclOptions,
               on_incumbent: Callable[[Algorithm], None] | None = None) -> SynthesisResult:
    """The schedule by the chosen method (``formulations.teccl``)."""
    if options.symmetry == "dimensions":  # this model on one rail and one box group, composed
        from workbench.plugin.composition import synthesize_by_dimensions

        return synthesize_by_dimensions(formulation, problem, time_limit=time_limit, seed=seed, options=options,
                                        rounds=options.rounds, on_incumbent=on_incumbent)
    collective = problem.collective
    topology = problem.topology
    chunk_bytes = collective.chunk_bytes(problem.size_bytes)
    deadline = Deadline(time_limit)
    try:
        if collective.combining:
            algorithm, status, stats = _combining(topology, collective, chunk_bytes, options, deadline, seed)
        else:
            method = options.method
            if method == "auto":
                method = "lp" if _copy_free(collective) else "milp"
            algorithm, status, stats = _solve(topology, collective, chunk_bytes, method, options, deadline, seed)
    except _NoSchedule as stop:
        return SynthesisResult([], stop.status, deadline.elapsed(), stop.stats, [], stop.message)
    seconds = deadline.elapsed()
    algorithm.meta["mip_gap"] = options.gap  # the gap the solves used ("auto" resolved)
    if status == "optimal":  # proven in the epoch model; the workbench judges the simulated time
        algorithm.meta["model_optimal"] = "teccl-epochs"
    if on_incumbent is not None:
        on_incumbent(algorithm)
    return SynthesisResult([algorithm], status, seconds, stats, [algorithm.meta.get("claimed_time")],
                           stats.get("message", ""))


def _copy_free(collective: Collective) -> bool:
    return all(len(post - pre) <= 1 for pre, post in zip(collective.pre, collective.post))


def _graph(topology: Topology, chunk_bytes: float, options: TecclOptions, dual: bool = False) -> EpochGraph:
    """The epoch graph by the options; ``dual``: a reduction's dual gather (its switches copy where they reduce)."""
    multiplier = options.epoch_multiplier
    if multiplier == "auto":
        multiplier = _auto_multiplier(topology, chunk_bytes, options.epoch)
    return epoch_graph(topology, chunk_bytes, options.epoch, float(multiplier),
                       float(options.alpha_threshold), options.switch_model, bool(options.single_beta), dual)


def _auto_multiplier(topology: Topology, chunk_bytes: float, epoch: Any) -> float:
    """The authors' experiment multipliers (note 5.1, A21): x4 on the fast epoch for chunks of 256 B or
    less (outputs <= 4 KB on 16 GPUs), x2 on the slow epoch for chunks of 64 B or less; then the
    epoch is raised so the smallest alpha is at most 200 epochs (the code's alpha_check)."""
    multiplier = 1.0
    if epoch == "fastest" and chunk_bytes <= 256:
        multiplier = 4.0
    elif epoch == "slowest" and chunk_bytes <= 64:
        multiplier = 2.0
    tau = base_epoch(topology, chunk_bytes, epoch)
    alphas = [l.alpha for l in topology.links if l.alpha > 0]
    if alphas and min(alphas) / (tau * multiplier) > 200:
        multiplier = min(alphas) / 200 / tau
    return multiplier


def _solve(topology: Topology, collective: Collective, chunk_bytes: float, method: str, options: TecclOptions,
           deadline: Deadline, seed: int, dual: bool = False) -> tuple[Algorithm, str, dict]:
    graph = _graph(topology, chunk_bytes, options, dual)
    if method == "lp":
        return _lp(topology, collective, chunk_bytes, graph, options, deadline)
    if method == "astar":
        from formulations.teccl.astar import solve_astar

        schedule = solve_astar(graph, collective, time_limit=deadline.limit(), seed=seed,
                               round_epochs=options.round_epochs, gamma=float(options.gamma),
                               threads=int(options.threads), mip_gap=options.gap)
    else:
        schedule = _milp(graph, collective, options, deadline, seed)
    algorithm = _emit(topology, collective, chunk_bytes, graph, schedule.flows)
    claimed = schedule.finish * graph.tau
    algorithm.meta.update(claimed_time=claimed, claim_model=CLAIM_MODEL, epochs=schedule.finish,
                          horizon=schedule.horizon, epoch_duration=graph.tau, method=method)
    stats = dict(schedule.stats, method=method, epoch_duration=graph.tau, epochs=schedule.finish,
                 horizon=schedule.horizon, message=schedule.message if schedule.status != "optimal" else "")
    if graph.copying != frozenset(graph.topology.switches) and graph.switch_model == "copy":
        stats["copying_switches"] = sorted(graph.copying)  # the others carry each chunk once
    return algorithm, schedule.status, stats


def _milp(graph: EpochGraph, collective: Collective, options: TecclOptions, deadline: Deadline,
          seed: int) -> EpochSchedule:
    began = time.perf_counter()
    greedy, greedy_finish = greedy_schedule(graph, collective)
    greedy_seconds = time.perf_counter() - began
    horizon = int(options.epochs) if options.epochs else greedy_finish
    probes: list = []
    start: list[Flow] | None = greedy if horizon >= greedy_finish else None
    if options.epochs is None and options.epoch_search == "binary":
        horizon, start = _binary_epochs(graph, collective, greedy, greedy_finish, options, deadline, seed, probes)
    schedule = solve_milp(graph, collective, horizon, time_limit=deadline.limit(floor=0.5),
                          mip_gap=options.gap, threads=int(options.threads), seed=seed,
                          objective=options.objective, buffer_limit=options.buffer_limit, start=start,
                          heuristic_effort=options.heuristic_effort)
    schedule.stats.update(greedy_epochs=greedy_finish, greedy_seconds=greedy_seconds, probes=probes)
    if not schedule.flows:  # no incumbent from the solver: keep the greedy schedule (feasible by construction)
        if start is None:
            raise RuntimeError(f"teccl: the MILP with {horizon} epochs ended {schedule.status} without a schedule")
        schedule = EpochSchedule(greedy, horizon, greedy_finish, schedule.status, schedule.stats,
                                 f"MILP ended {schedule.status} without a solution; the greedy warm start is kept")
    return schedule


def _binary_epochs(graph: EpochGraph, collective: Collective, greedy: list[Flow], greedy_finish: int,
                   options: TecclOptions, deadline: Deadline, seed: int,
                   probes: list) -> tuple[int, list[Flow] | None]:
    """Note 5.2: shrink the horizon with first-feasible solves; the best schedule found starts the final solve."""
    best_flows, best = greedy, greedy_finish
    low = _hop_lower_bound(graph, collective)
    search = deadline.share(0.4)  # the final solve keeps the rest
    while best - low > 1 and not search.expired:
        mid = (low + best) // 2
        trial = solve_milp(graph, collective, mid, time_limit=search.limit(cap=60.0, floor=0.5),
                           mip_gap=0.99, threads=int(options.threads), seed=seed, objective="code")
        probes.append((mid, trial.status))
        if trial.flows:
            best_flows, best = trial.flows, trial.finish
        elif trial.status == "infeasible":
            low = mid
        else:
            break
    return best, best_flows


def _hop_lower_bound(graph: EpochGraph, collective: Collective) -> int:
    """Epochs no schedule can beat: the fastest path (in epochs) to the farthest demand."""
    arcs = [(e.src, e.dst) for e in graph.edges]

    def arrive(epoch: int, index: int) -> int:  # sent in the epoch it is ready, usable after the link's delay
        e = graph.edges[index]
        return epoch + 1 + (e.delay if graph.is_switch(e.dst) else graph.arrival_delay(e))

    worst = 0
    for c in range(collective.num_chunks):
        ready, _ = dijkstra(graph.topology.num_nodes, arcs, collective.pre[c], arrive=arrive, start=0)
        for d in collective.post[c] - collective.pre[c]:
            worst = max(worst, ready.get(d, 0))
    return max(worst - 1, 0)


def _lp(topology: Topology, collective: Collective, chunk_bytes: float, graph: EpochGraph, options: TecclOptions,
        deadline: Deadline) -> tuple[Algorithm, str, dict]:
    if not _copy_free(collective):
        raise ValueError("teccl: the LP needs a copy-free demand (each chunk wanted by one rank, e.g. all-to-all)")
    demand: dict[tuple[int, int], float] = {}
    for c in range(collective.num_chunks):
        for d in collective.post[c] - collective.pre[c]:
            key = (collective.origin(c), d)
            demand[key] = demand.get(key, 0.0) + 1.0
    floor = _lp_lower_bound(topology, collective, chunk_bytes, graph, deadline)  # inside the deadline, before
    result = solve_lp_schedule(graph, demand, time_limit=deadline.limit(),  # what is left of it
                               horizon=int(options.epochs) if options.epochs else None,
                               threads=int(options.threads), solver=options.lp_solver,
                               lower_bound_epochs=floor)
    if not result.pieces:
        if result.status == "timeout":
            raise _NoSchedule("timeout", f"the LP found no schedule within the limit ({result.message}; "
                                         f"{result.horizon} epochs)", result.stats)
        raise RuntimeError(f"teccl LP ended {result.status}: {result.message}")
    q = int(options.lp_subchunks)
    fine, assignment = _finer_collective(collective, q)
    flows: list[tuple[tuple[int, ...], tuple]] = []
    for (s, d), pieces in result.pieces.items():
        ids = iter(assignment[(s, d)])
        for count, path in to_subchunks(pieces, len(assignment[(s, d)])):
            chunks = tuple(next(ids) for _ in range(count))
            flows.append((chunks, path))
    algorithm = _emit_paths(topology, fine, chunk_bytes / q, graph, flows)
    claimed = result.finish * graph.tau
    algorithm.meta.update(claimed_time=claimed, claim_model=CLAIM_MODEL, epochs=result.finish,
                          horizon=result.horizon, epoch_duration=graph.tau, method="lp", subchunks=q)
    stats = dict(result.stats, method="lp", epoch_duration=graph.tau, epochs=result.finish, horizon=result.horizon,
                 subchunks=q, message=result.message if result.status != "optimal" else "")
    return algorithm, result.status, stats


def _lp_lower_bound(topology: Topology, collective: Collective, chunk_bytes: float, graph: EpochGraph,
                    deadline: Deadline) -> int:
    """Epochs below which no schedule exists: the workbench's bandwidth bounds, plus the longest path.
    The bounds' LP runs inside the deadline (``lp_seconds_within``). The bounds that already hold a
    path's latency (``latency``, ``alpha_beta``) are left out: the hop count adds it here."""
    from workbench.bounds import lower_bounds, lp_seconds_within

    bounds = lower_bounds(topology, collective, chunk_bytes, lp_time_limit=lp_seconds_within(deadline),
                          alpha_beta=False)
    bandwidth = int(bounds.bandwidth_best / graph.tau)
    return bandwidth + _hop_lower_bound(graph, collective) + 1


def _finer_collective(collective: Collective, q: int) -> tuple[Collective, dict[tuple[int, int], list[int]]]:
    """The collective with every chunk split into q sub-chunks, and the sub-chunk ids per (source, destination)."""
    if collective.kind == "alltoall":
        n, k = collective.num_ranks, collective.chunks_per_rank
        fine = make_collective("alltoall", n, k * q)
        ids: dict[tuple[int, int], list[int]] = {}
        for c in range(fine.num_chunks):
            d = c % n
            s = (c // n) % n
            if s != d:
                ids.setdefault((s, d), []).append(c)
        return fine, ids
    pre, post, ids = [], [], {}
    for c in range(collective.num_chunks):
        for _ in range(q):
            ids.setdefault((collective.origin(c), min(collective.post[c] - collective.pre[c], default=-1)), []).append(len(pre))
            pre.append(sorted(collective.pre[c]))
            post.append(sorted(collective.post[c]))
    return custom_collective(collective.num_ranks, pre, post), ids


def _emit(topology: Topology, collective: Collective, chunk_bytes: float, graph: EpochGraph,
          flows: list[Flow]) -> Algorithm:
    """One transfer per flow hop in send-epoch order; a hop waits for the hop that brought its chunk.

    Not ``workbench.kit.schedule.DeliveryChain``: a chunk can reach a node several times, and which
    arrival a hop waits for follows the epochs (a switch forwards what arrived in that very epoch, an
    NPU the earliest copy ready by then), not the latest delivery in file order.

    A switch visit that holds no value becomes one transfer from the sender to the receiver ``via``
    the switch, listed at its last hop, timed from its first hop's send to its last hop's arrival
    (``_through``): every visit of a switch that neither copies nor multicasts
    (``EpochGraph.passes_through``), and under ``single_beta`` (one transmission through a switch)
    every visit with one hop in and one out. At a switch a chunk visits one at a time
    (``EpochGraph.one_at_a_time``), a visit's entry also waits for the hops that left on the previous
    visit, so the reversed sums cannot race.
    """
    edges = graph.edges
    through = _through(graph, flows)
    arrived: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (chunk, node) -> [(ready epoch, transfer id)]
    passing: dict[tuple[int, int, int], list[tuple]] = {}  # (chunk, switch, ready) -> [(sender, via, deps, sent)]
    left: dict[tuple[int, int], list[int]] = {}  # (chunk, switch visited one at a time) -> its last visit's exits
    transfers: list[Transfer] = []
    for c, ei, k in sorted(flows, key=_emit_order(graph)):
        e = edges[ei]
        if (c, e.src, k) in through:
            sender, via, deps, sent = passing[(c, e.src, k)].pop(0)
        else:
            sender, via, deps, sent = e.src, (), (), k
            if e.src not in collective.pre[c]:
                options = arrived.get((c, e.src), [])
                if graph.is_switch(e.src):
                    chosen = [tid for ready, tid in options if ready == k]
                else:
                    chosen = [tid for ready, tid in sorted(options) if ready <= k][:1]
                if not chosen:
                    raise RuntimeError(f"teccl: chunk {c} leaves node {e.src} at epoch {k} before it arrives")
                deps = (chosen[0],)
        delay = e.delay if graph.is_switch(e.dst) else graph.arrival_delay(e)
        ready = k + 1 + delay
        if (c, e.dst, ready) in through:
            passing.setdefault((c, e.dst, ready), []).append((sender, via + (e.dst,), deps, sent))
            continue
        if graph.is_switch(e.dst) and graph.one_at_a_time(e.dst):
            deps = tuple(sorted(set(deps).union(left.get((c, e.dst), ()))))
            left[(c, e.dst)] = []
        tid = len(transfers)
        if graph.is_switch(sender) and graph.one_at_a_time(sender):
            left.setdefault((c, sender), []).append(tid)
        transfers.append(Transfer(tid, (c,), sender, e.dst, "copy", deps, sent * graph.tau, ready * graph.tau,
                                  via=via or None))
        arrived.setdefault((c, e.dst), []).append((ready, tid))
    return Algorithm(topology, collective, chunk_bytes, transfers, {})


def _emit_order(graph: EpochGraph) -> Callable[[Flow], tuple]:
    """Flows in send-epoch order (then chunk, edge). Under ``single_beta`` a hop out of a switch with
    no latency epochs is usable in the epoch it is sent (``arrival_delay`` -1), so within an epoch the
    hops out of switches come first: the NPU they reach may send the chunk on in that epoch."""
    if not graph.single_beta:
        return lambda f: (f[2], f[0], f[1])
    return lambda f: (f[2], f[0], not graph.is_switch(graph.edges[f[1]].src), f[1])


def _through(graph: EpochGraph, flows: list[Flow]) -> set[tuple[int, int, int]]:
    """The switch visits (chunk, switch, epoch it forwards) emitted as transfers through the switch
    (``_emit``)."""
    ins: dict[tuple[int, int, int], int] = {}
    outs: dict[tuple[int, int, int], int] = {}
    for c, ei, k in flows:
        e = graph.edges[ei]
        if graph.is_switch(e.dst):
            key = (c, e.dst, k + 1 + e.delay)
            ins[key] = ins.get(key, 0) + 1
        if graph.is_switch(e.src):
            outs[(c, e.src, k)] = outs.get((c, e.src, k), 0) + 1
    return {key for key in ins if graph.passes_through(key[1])
            or (graph.single_beta and ins[key] == 1 and outs.get(key, 0) == 1)}


def _emit_paths(topology: Topology, collective: Collective, chunk_bytes: float, graph: EpochGraph,
                flows: list[tuple[tuple[int, ...], tuple]]) -> Algorithm:
    """LP pieces: each group of sub-chunks follows its path hop by hop, one message per hop."""
    hops = []
    for g, (chunks, path) in enumerate(flows):
        for position, (ei, k) in enumerate(path):
            hops.append((k, g, position, chunks, ei))
    hops.sort()
    last: dict[int, int] = {}
    transfers: list[Transfer] = []
    for k, g, position, chunks, ei in hops:
        e = graph.edges[ei]
        deps = (last[g],) if position > 0 else ()
        tid = len(transfers)
        transfers.append(Transfer(tid, chunks, e.src, e.dst, "copy", deps, k * graph.tau, (k + 1 + e.a) * graph.tau))
        last[g] = tid
    return Algorithm(topology, collective, chunk_bytes, transfers, {})


def _combining(topology: Topology, collective: Collective, chunk_bytes: float, options: TecclOptions,
               deadline: Deadline, seed: int) -> tuple[Algorithm, str, dict]:
    """Reduce-scatter and reduce by duality (the all-gather / broadcast MILP on the reversed
    graph, reversed); all-reduce = reduce-scatter + all-gather, the first half taking half the
    time left (``workbench.kit.duality``). The reversed run's graph is ``dual``: under the copy
    model its switches copy exactly where they reduce, so each copy becomes a sum in that switch
    (note 2.11); every other switch carries a chunk once."""
    if collective.kind not in ("reducescatter", "allreduce", "reduce"):
        raise ValueError(f"teccl does not synthesise {collective.kind}")
    method = "astar" if options.method == "astar" else "milp"
    phase_options = replace(options, method=method)
    phases: list[tuple[str, dict]] = []

    def gather(view: Topology, target: Collective, size: float, phase: Phase) -> Algorithm:
        algorithm, status, stats = _solve(view, target, size, method, phase_options, phase.deadline, seed,
                                          dual=phase.reversed)
        phases.append((status, stats))
        return algorithm

    combined = by_duality_phases(topology, collective, chunk_bytes, gather, deadline=deadline, first_share=0.5)
    if len(phases) == 1:
        status, stats = phases[0]
        return combined, status, dict(stats, phases=[stats])
    (status_rs, stats_rs), (status_ag, stats_ag) = phases
    statuses = {status_rs, status_ag}
    status = "timeout" if "timeout" in statuses else ("feasible" if "feasible" in statuses else status_rs)
    stats = {"phases": [stats_rs, stats_ag], "message": "; ".join(m for m in (stats_rs.get("message"),
                                                                              stats_ag.get("message")) if m)}
    for key in ("variables", "binaries", "constraints"):
        stats[key] = stats_rs.get(key, 0) + stats_ag.get(key, 0)
    return combined, status, stats
