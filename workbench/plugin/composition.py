"""A collective composed from sub-collectives that a formulation solves on one group per class.

Any formulation can run on a regular cluster's decomposition (``workbench.kit.decomposition``)
instead of the whole fabric: its own model solves the All-Gather of one rail group and of one box
group (one per isomorphism class), and the answers are translated to every group of their class
and stitched (SyCCL's sub-demand reuse: J. Cao et al., SIGCOMM 2025; ``docs/methods/syccl.md``).
The composition is the sketch SyCCL ranks first on rail fabrics: rails first (every box receives a
chunk over its NICs once), then the boxes spread what arrived. The data is cut into ``rounds``
that pipeline: round ``q``'s box stage overlaps round ``q + 1``'s rail stage.

Chunks. With ``rounds`` R and sub-algorithms of ``k_r`` (rail) and ``k_b`` (box) chunks per rank,
the whole All-Gather has ``R * c`` chunks per rank, ``c = lcm(k_r, k_b)``. A rail sub-chunk is
``c / k_r`` global chunks of its source; a box member's data in a round is every round chunk of
the sources on its rail (``B * c`` chunks), and a box sub-chunk is ``c / k_b`` of each. A
sub-algorithm's transfer becomes one transfer carrying those global chunks between the images
of its nodes (switches included, so hop-by-hop answers keep their hops).

Order. Each sub-algorithm is simulated on its group fabric once; its transfers' start times,
offset by the round's stage start, are the planned starts that ``stitch`` lists by, and every
transfer waits for its chunks' delivery to its sender. Reductions come from the composed
All-Gather by duality (``workbench.kit.duality``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from workbench.checking.simulate import simulate
from workbench.kit.deadline import Deadline
from workbench.kit.decomposition import Decomposition, Dimension, Send, decompose, stitch
from workbench.kit.duality import by_duality_phases
from workbench.kit.schedule import claim_in_model
from workbench.model.algorithm import Algorithm
from workbench.model.collective import Collective, make_collective
from workbench.plugin import call
from workbench.plugin.registry import Problem, SynthesisResult, Unsupported
from workbench.topology import Topology

__all__ = ["GroupSolver", "Composition", "compose", "synthesize_by_dimensions"]

# (the group's All-Gather problem, the dimension's name, the reduction phase's role or None) -> its algorithm
GroupSolver = Callable[[Problem, str], "Algorithm | None"]
KINDS = ("allgather", "reducescatter", "allreduce")


@dataclass
class Composition:
    """The composed algorithm (None where a group's solve gave nothing) and what was solved."""

    algorithm: Algorithm | None
    record: dict[str, Any] = field(default_factory=dict)
    message: str = ""


def compose(problem: Problem, rounds: int, solve: GroupSolver) -> Composition:
    """``problem``'s All-Gather, Reduce-Scatter or All-Reduce composed from ``solve``'s group
    All-Gathers (module docstring); a message instead where the fabric has no decomposition,
    the collective is another kind, or a group solve returned nothing."""
    if problem.collective.kind not in KINDS:
        return Composition(None, message=f"composition by dimensions defines {', '.join(KINDS)}")
    record: dict[str, Any] = {"rounds": rounds, "solved": [], "reused": 0}
    n = problem.collective.num_ranks
    round_bytes = problem.size_bytes / (n * rounds)  # one source's data in one round
    views: dict[bool, tuple[Decomposition, dict]] = {}

    def groups_of(view: Topology, reversed_: bool) -> tuple[Decomposition, dict]:
        if reversed_ not in views:
            found = decompose(view)
            if found is None or {d.name for d in found.dimensions} != {"box", "rail"}:
                raise _NoComposition("the fabric has no box and rail dimensions whose translations verify")
            views[reversed_] = (found, _solve_groups(found, round_bytes, solve, record))
        return views[reversed_]

    try:
        found, subs = groups_of(problem.topology, False)
        per_round = _per_round(subs)
        target = make_collective(problem.collective.kind, n, rounds * per_round)

        def gather(view: Topology, collective: Collective, chunk_bytes: float, phase) -> Algorithm:
            view_found, view_subs = groups_of(view, phase.reversed)
            if _per_round(view_subs) != per_round:
                raise _NoComposition("the reversed groups' schedules cut their chunks differently")
            return _allgather(view, view_found, collective, chunk_bytes, rounds, per_round, view_subs)

        algorithm = by_duality_phases(problem.topology, target, target.chunk_bytes(problem.size_bytes), gather)
    except _NoComposition as exc:
        return Composition(None, record, str(exc))
    record["chunks_per_rank"] = rounds * per_round
    return Composition(algorithm, record)


class _NoComposition(Exception):
    pass


def _solve_groups(found: Decomposition, round_bytes: float, solve: GroupSolver, record: dict) -> dict:
    """Per dimension: the class's group All-Gather, its transfers' simulated starts and its time."""
    boxes_per_rail = found.dimension("rail").group_size
    subs = {}
    for dim, per_rank in ((found.dimension("rail"), round_bytes), (found.dimension("box"), round_bytes * boxes_per_rail)):
        if len(dim.classes) != 1:
            raise _NoComposition(f"the {dim.name} groups form {len(dim.classes)} classes; composition needs one")
        fabric = dim.fabrics[0]
        g = fabric.size
        algorithm = solve(Problem(fabric.topology, make_collective("allgather", g, 1), per_rank * g), dim.name)
        if algorithm is None:
            raise _NoComposition(f"the {dim.name} group's All-Gather ({g} GPUs) found no schedule")
        timing = simulate(algorithm)
        subs[dim.name] = (algorithm, timing.start, timing.collective_time)
        record["solved"].append({"dimension": dim.name, "gpus": g, "transfers": len(algorithm.transfers),
                                 "chunks": _pieces(algorithm.collective)[1], "time": timing.collective_time})
        record["reused"] += len(dim.groups) - 1
    return subs


def _pieces(collective: Collective) -> tuple[dict[int, tuple[int, int]], int]:
    """Per chunk of a group All-Gather (also one a formulation cut into a ``custom`` collective of
    finer pieces): (piece index among its origin's, origin rank), and the pieces per rank."""
    by_origin: dict[int, list[int]] = {}
    for c in range(collective.num_chunks):
        if len(collective.pre[c]) != 1 or len(collective.post[c]) != collective.num_ranks:
            raise _NoComposition("a group's schedule is not an All-Gather of its GPUs")
        by_origin.setdefault(min(collective.pre[c]), []).append(c)
    counts = {len(chunks) for chunks in by_origin.values()}
    if len(by_origin) != collective.num_ranks or len(counts) != 1:
        raise _NoComposition("a group's schedule gives its GPUs unequal numbers of pieces")
    return {c: (j, r) for r, chunks in by_origin.items() for j, c in enumerate(sorted(chunks))}, counts.pop()


def _per_round(subs: dict) -> int:
    """Global chunks per rank and round: the common multiple of the sub-algorithms' chunkings."""
    return math.lcm(_pieces(subs["rail"][0].collective)[1], _pieces(subs["box"][0].collective)[1])


def _allgather(topology: Topology, found: Decomposition, collective: Collective, chunk_bytes: float, rounds: int,
               per_round: int, subs: dict) -> Algorithm:
    """The composed All-Gather of ``collective`` (``rounds * per_round`` chunks per rank)."""
    n = topology.num_npus
    rail, box = found.dimension("rail"), found.dimension("box")
    k_rail = _pieces(subs["rail"][0].collective)[1]
    k_box = _pieces(subs["box"][0].collective)[1]
    t_rail, t_box = subs["rail"][2], subs["box"][2]
    period = max(t_rail, t_box)
    table = found.translations.nodes
    sends: list[Send] = []
    for q in range(rounds):
        first = q * per_round
        _translate(rail, table, subs["rail"], q * period, 0, sends,
                   lambda group, local, j: [(first + j * (per_round // k_rail) + u) * n + rail.groups[group][local]
                                            for u in range(per_round // k_rail)])
        _translate(box, table, subs["box"], q * period + t_rail, 1, sends,
                   lambda group, local, j: [(first + u) * n + s for s in rail.groups[local]
                                            for u in range(j * (per_round // k_box), (j + 1) * (per_round // k_box))])
    return stitch(topology, collective, chunk_bytes, sends)


def _translate(dim: Dimension, table, sub: tuple, offset: float, stage: int, sends: list[Send],
               global_chunks: Callable[[int, int, int], list[int]]) -> None:
    """Every group's image of the sub-algorithm's transfers, with their global chunks."""
    algorithm, starts, _ = sub
    piece_of = _pieces(algorithm.collective)[0]
    for group in range(len(dim.groups)):
        nodes = dim.node_map(group, table)
        for transfer, start in zip(algorithm.transfers, starts):
            chunks: list[int] = []
            for c in transfer.chunks:
                j, local = piece_of[c]
                chunks.extend(global_chunks(group, local, j))
            sends.append(Send(offset + float(start), stage, nodes[transfer.src], nodes[transfer.dst], tuple(chunks),
                              transfer.op))


def synthesize_by_dimensions(formulation: Any, problem: Problem, *, time_limit: float, seed: int, options: Any,
                             rounds: int, on_incumbent: Callable[[Algorithm], None] | None = None):
    """A formulation's own model run on one group per class and composed (module docstring), as a
    ``SynthesisResult``: ``options`` are passed to every group solve with ``symmetry`` off; each
    solve gets a third of the time left. ``feasible`` when every group solve completed, ``timeout``
    when one ended at its limit with an answer (the composition is no proof of optimality either
    way); ``Unsupported`` naming why where the fabric has no composition."""
    deadline = Deadline(time_limit)
    statuses: list[str] = []
    plain = dataclasses.replace(options, symmetry="off")

    def solve(sub: Problem, dimension: str) -> Algorithm | None:
        result = call.synthesize(formulation, sub, time_limit=max(1.0, deadline.remaining() / 3), seed=seed,
                                 options=plain)
        statuses.append(result.status)
        return result.algorithms[0] if result.algorithms else None

    started = time.perf_counter()
    composition = compose(problem, rounds, solve)
    seconds = time.perf_counter() - started
    if composition.algorithm is None:
        if "timeout" not in statuses:
            raise Unsupported(f"{formulation.name}: by dimensions: {composition.message}")
        return SynthesisResult([], "timeout", seconds, {"symmetry": composition.record},
                               message=f"by dimensions: {composition.message}")
    algorithm = composition.algorithm
    algorithm.meta["symmetry"] = {**composition.record, "group_statuses": statuses}
    claim_in_model(algorithm)
    if on_incumbent is not None:
        on_incumbent(algorithm)
    status = "timeout" if "timeout" in statuses else "feasible"
    return SynthesisResult([algorithm], status, seconds, {"symmetry_groups_solved": len(statuses)})
