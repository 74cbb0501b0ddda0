"""The taccl formulation's implementation (the package docstring maps the paper to it): ``synthesize``
and what it uses, loaded when a synthesis runs, not when the formulation is listed."""

from __future__ import annotations

import time
from typing import Any, Callable

from formulations.taccl.logical import LogicalTopology, build_logical
from formulations.taccl.options import TacclOptions
from formulations.taccl.ordering import order_edges, pick_heuristic
from formulations.taccl.routing import solve_routing
from formulations.taccl.scheduling import Schedule, solve_schedule
from formulations.taccl.sketch import Sketch, SketchError, available_sketches, load_sketch
from workbench.model.algorithm import Algorithm
from workbench.model.collective import Collective, make_collective
from workbench.kit.deadline import Deadline
from workbench.plugin.registry import Problem, SynthesisResult, Unsupported
from workbench.kit.schedule import DeliveryChain
from workbench.topology import Topology

__all__ = ["synthesize", "Sketch", "SketchError", "load_sketch", "available_sketches"]

_FORWARD = ("allgather", "alltoall", "broadcast", "gather", "scatter", "custom")
_COMBINING = {"reducescatter": "allgather", "allreduce": "allgather", "reduce": "broadcast"}


def _stage_seconds(deadline: Deadline, share: float, options: dict) -> float:
    """A stage's solver limit: ``share`` of what is left (at least 0.5 s, so a late stage still
    returns its incumbent inside the cell's grace), capped by ``stage_time_limit``."""
    wanted = deadline.limit(floor=0.5) * share
    cap = options["stage_time_limit"]
    return min(wanted, cap) if cap else wanted


def synthesize(formulation: Any, problem: Problem, *, time_limit: float, seed: int,
               on_incumbent: Callable[[Algorithm], None] | None, options: TacclOptions) -> SynthesisResult:
    """TACCL for ``problem`` under its sketch: routing, ordering and contiguity stages, each with a share
    of the time limit (a combining collective through its dual gather)."""
    deadline = Deadline(time_limit)
    sk = load_sketch(options.sketch)
    topology = problem.topology
    collective = _sketch_collective(problem.collective, sk)
    chunk_bytes = collective.chunk_bytes(problem.size_bytes)
    # what the stages read: the solver settings, the seed and the stage cap in seconds
    settings = dict(backend=options.backend, heuristic=options.heuristic, max_contig=options.max_contig,
                    mip_gap=options.mip_gap, threads=options.threads, seed=seed,
                    serialise_reductions=options.serialise_reductions, stage_time_limit=options.stage_seconds)
    stages: list[dict[str, Any]] = []
    if collective.kind in _FORWARD:
        algorithm, info = _forward(topology, collective, chunk_bytes, sk, deadline, stages, settings, share=1.0)
        claimed = info["makespan"]
    elif collective.kind in _COMBINING:
        algorithm, claimed, info = _combining(topology, collective, chunk_bytes, sk, deadline, stages, settings)
    else:
        raise Unsupported(f"taccl does not synthesise {collective.kind}")
    seconds = deadline.elapsed()
    statuses = [s["status"] for s in stages]
    status = "timeout" if "timeout" in statuses else "feasible"
    stats = {"stages": stages, "sketch": sk.name, "routing_time": info.get("routing_time"),
             "routing_bound": info.get("routing_bound"), "chunks_per_rank": collective.chunks_per_rank,
             "heuristic": info.get("heuristic")}
    for key in ("binaries", "constraints", "variables"):
        stats[key] = sum(s.get(key, 0) for s in stages)
    for stage in ("routing", "ordering", "contiguity", "reduce-contiguity"):  # build + solve, summed over phases
        spent = [s.get("build_seconds", 0.0) + s.get("solve_seconds", 0.0) for s in stages if s["stage"] == stage]
        stats[f"{stage.replace('-', '_')}_seconds"] = sum(spent) if spent else None
        stats[f"{stage.replace('-', '_')}_status"] = ",".join(s["status"] for s in stages if s["stage"] == stage) or None
    algorithm.meta.update(sketch=sk.name, claimed_time=claimed, claim_model="taccl-milp", stages=stages,
                          routing_bound=info.get("routing_bound"),
                          routing_time=info.get("routing_time"))
    if info.get("lower_bound") is not None:
        algorithm.meta["lower_bound"] = info["lower_bound"]
    if on_incumbent is not None:
        on_incumbent(algorithm)
    message = "; ".join(f"{s['stage']}: {s['message']}" for s in stages if s.get("message"))
    return SynthesisResult([algorithm], status, seconds, stats, [claimed], message)


def _sketch_collective(collective: Collective, sketch: Sketch) -> Collective:
    k = sketch.chunkup or collective.chunks_per_rank
    if k == collective.chunks_per_rank:
        return collective
    if collective.kind == "custom":
        raise SketchError(f"sketch {sketch.source}: field hyperparameters.input_chunkup: cannot re-chunk a custom collective")
    return make_collective(collective.kind, collective.num_ranks, k, collective.root)


# --------------------------------------------------------------------------- pipelines
def _record(stages: list, name: str, stats: dict[str, Any], message: str = "") -> None:
    entry = {"stage": name, **stats}
    if message and stats.get("status") != "optimal":
        entry["message"] = message
    stages.append(entry)


def _forward(topology: Topology, collective: Collective, chunk_bytes: float, sketch: Sketch, deadline: Deadline,
             stages: list, options: dict, share: float) -> tuple[Algorithm, dict[str, Any]]:
    logical, trees, routing_info = _route(topology, collective, chunk_bytes, sketch, deadline, stages, options, share)
    edges = [(c, l) for c, tree in enumerate(trees) for l in sorted(tree.values())]
    heuristic = pick_heuristic(options["heuristic"], logical)
    lat = [l.lat(chunk_bytes) for l in logical.links]
    began = time.perf_counter()
    orders = order_edges(logical, trees, collective.pre, lat, heuristic, routing_info["send_time"])
    _record(stages, "ordering", {"status": "feasible", "solve_seconds": time.perf_counter() - began,
                                 "build_seconds": 0.0, "heuristic": heuristic})
    schedule = solve_schedule(logical, edges, orders.per_physical, orders.rank, collective.pre, collective.post,
                              chunk_bytes, max_contig=options["max_contig"],
                              time_limit=_stage_seconds(deadline, 1.0, options),
                              seed=options["seed"], backend=options["backend"], mip_gap=options["mip_gap"],
                              threads=options["threads"])
    _record(stages, "contiguity", schedule.stats, schedule.message)
    algorithm = _emit(topology, collective, chunk_bytes, logical, schedule, "copy")
    info = dict(routing_info, makespan=schedule.makespan, heuristic=heuristic, schedule=schedule, trees=trees,
                logical=logical, orders=orders)
    info["lower_bound"] = _lower_bound(topology, logical, sketch, collective, routing_info)
    return algorithm, info


def _route(topology: Topology, collective: Collective, chunk_bytes: float, sketch: Sketch, deadline: Deadline,
           stages: list, options: dict, share: float):
    logical = build_logical(topology, sketch)
    routing = solve_routing(logical, collective, chunk_bytes, sketch,
                            time_limit=_stage_seconds(deadline, 0.5 * share, options),
                            seed=options["seed"], backend=options["backend"], mip_gap=options["mip_gap"],
                            threads=options["threads"])
    _record(stages, "routing", dict(routing.stats, objective=routing.objective, bound=routing.bound), routing.message)
    if not routing.parents:
        raise RuntimeError(f"taccl routing MILP ended {routing.status} without a solution ({routing.message}); "
                           "raise the time limit or restrict the sketch")
    info = {"routing_time": routing.objective, "routing_bound": routing.bound, "send_time": routing.send_time,
            "routing_status": routing.status}
    return logical, routing.parents, info


def _combining(topology: Topology, collective: Collective, chunk_bytes: float, sketch: Sketch, deadline: Deadline,
               stages: list, options: dict) -> tuple[Algorithm, float, dict[str, Any]]:
    n, k = collective.num_ranks, collective.chunks_per_rank
    gather_kind = _COMBINING[collective.kind]
    gather = make_collective(gather_kind, n, k, collective.root)
    reduce_kind = "reducescatter" if gather_kind == "allgather" else "reduce"
    reduce_coll = make_collective(reduce_kind, n, k, collective.root)
    reversed_topology = topology.reversed()
    symmetric = reversed_topology.links == topology.links
    view = topology if symmetric else reversed_topology
    view_sketch = sketch if symmetric else _transposed(sketch)
    forward_share = 0.45 if collective.kind == "allreduce" and not symmetric else 0.6
    inverse_alg, inverse = _forward(view, gather, chunk_bytes, view_sketch, deadline, stages, options, forward_share)
    rs_schedule, logical = _inverted_schedule(topology, reduce_coll, chunk_bytes, inverse, view_sketch, deadline, stages,
                                              options)
    rs_alg = _emit(topology, reduce_coll, chunk_bytes, logical, rs_schedule, "reduce")
    info = {"routing_time": inverse["routing_time"], "routing_bound": inverse["routing_bound"],
            "heuristic": inverse["heuristic"]}
    if collective.kind != "allreduce":
        return rs_alg, rs_schedule.makespan, info
    if symmetric:
        ag_alg, ag_makespan = inverse_alg, inverse["makespan"]
    else:
        ag_alg, ag = _forward(topology, gather, chunk_bytes, sketch, deadline, stages, options, 1.0)
        ag_makespan = ag["makespan"]
    combined = rs_alg.concat(ag_alg, collective)
    return combined, rs_schedule.makespan + ag_makespan, info


def _inverted_schedule(topology: Topology, reduce_coll: Collective, chunk_bytes: float, inverse: dict,
                       plan_sketch: Sketch, deadline: Deadline, stages: list, options: dict) -> tuple[Schedule, LogicalTopology]:
    """Reduce-Scatter edges: every All-Gather tree edge s -> d becomes d -> s, ordered by flipped AG times.

    The edges live on the original topology under the transposed sketch of the view the
    All-Gather was planned on (its inter-node connections point the other way).
    """
    source_logical: LogicalTopology = inverse["logical"]
    logical = build_logical(topology, _transposed(plan_sketch))
    ag_schedule: Schedule = inverse["schedule"]
    edges, rank = [], {}
    for c, tree in enumerate(inverse["trees"]):
        for l in tree.values():
            link = source_logical.links[l]
            back = logical.by_pair.get((link.dst, link.src))
            if back is None:
                raise RuntimeError(f"the inverted All-Gather needs a link {link.dst} -> {link.src} on {topology.name}")
            edge = (c, back)
            edges.append(edge)
            finish = ag_schedule.send[(c, l)] + link.lat(chunk_bytes)
            rank[edge] = (-round(finish, 15), c, back)
    order: dict[int, list] = {}
    for edge in sorted(edges, key=rank.__getitem__):
        for p in logical.links[edge[1]].physical:
            order.setdefault(p, []).append(edge)
    post = reduce_coll.post
    schedule = solve_schedule(logical, edges, order, rank, reduce_coll.pre, post, chunk_bytes, reduce=True,
                              max_contig=options["max_contig"], merge_ok=lambda a, b: post[a] == post[b],
                              serialise_reductions=options["serialise_reductions"],
                              time_limit=_stage_seconds(deadline, 1.0, options),
                              seed=options["seed"], backend=options["backend"], mip_gap=options["mip_gap"],
                              threads=options["threads"])
    _record(stages, "reduce-contiguity", schedule.stats, schedule.message)
    return schedule, logical


def _transposed(sketch: Sketch) -> Sketch:
    """The sketch for planning on the reversed topology: inter-node connections transposed.

    Relay maps and relay ordering describe where chunks leave a node; on the reversed graph they
    would constrain where partial sums arrive, so they are dropped (documented deviation).
    """
    import copy

    view = copy.copy(sketch)
    if isinstance(sketch.conn, dict):
        transposed: dict[int, list[int]] = {}
        for s, dsts in sketch.conn.items():
            for d in dsts:
                transposed.setdefault(d, []).append(s)
        view.conn = transposed
    view.relay_rev_map = None
    view.relay_affine = None
    view.enforce_ordering = False
    view.beta_split = {}
    return view


def _emit(topology: Topology, collective: Collective, chunk_bytes: float, logical: LogicalTopology,
          schedule: Schedule, op: str) -> Algorithm:
    """Transfers in stage-3 send order; a transfer waits for the transfers that brought its chunks to its source."""
    links = logical.links
    chain = DeliveryChain(every=True)  # a reduction's send waits for every contribution that arrived
    for group in schedule.groups:
        link = links[group[0][1]]
        chunks = tuple(c for c, _ in group)
        start = min(schedule.send[e] for e in group)
        end = start + link.lat(chunk_bytes, len(chunks))
        chain.send(chunks, link.src, link.dst, op if not topology.is_switch(link.dst) else "copy", start, end)
    return chain.build(topology, collective, chunk_bytes)


def _lower_bound(topology: Topology, logical: LogicalTopology, sketch: Sketch, collective: Collective,
                 routing_info: dict) -> float | None:
    """Stage 1's bound is a bound on every algorithm only when nothing but the physics restricted it."""
    unrestricted = (not sketch.symmetry and not sketch.shortest_paths and sketch.conn is None
                    and sketch.relay_rev_map is None and sketch.relay_affine is None and not sketch.beta_split
                    and topology.num_switches == 0 and all(l.alpha == 0 for l in topology.links)
                    and not collective.combining and len(logical.links) == len(topology.links))
    return routing_info.get("routing_bound") if unrestricted else None
