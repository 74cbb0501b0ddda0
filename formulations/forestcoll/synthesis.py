"""The forestcoll formulation's implementation (the package docstring maps the paper to it): ``synthesize``
and what it uses, loaded when a synthesis runs, not when the formulation is listed."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

from workbench.model.algorithm import Algorithm
from workbench.model.collective import Collective, make_collective
from workbench.model.periodic import coarsened
from workbench.kit.deadline import Deadline
from workbench.kit.duality import by_duality
from workbench.plugin.registry import Problem, SynthesisResult, Unsupported
from workbench.kit.schedule import SETTLE_MOST, adapts_to_size, claim_in_model, claim_listing
from workbench.topology import Topology
from workbench.kit.symmetry import translations
from workbench.kit.cluster_translations import cluster_translations

from .mapping import PathGroup, check_link_budgets, map_to_paths
from .optimum import Timeout, TreeUnits, auto_units, broadcast_units, fixed_k_units
from .reverse import reverse_periodic, reverse_serialised
from .packing import PackingError, TreeGroup, pack_arborescences, validate_forest
from .symmetric import pack_symmetric
from .schedule import (EdgePlan, SharedEdge, emit_schedule, pipeline_height, plan_edges, plan_times, share_edges,
                       transfers_per_batch)
from .slots import LARGE_ROUND, loose_links, round_slots, slot_order
from .stagger import stagger_switch_visits
from .options import LISTING_BUDGET as _LISTING_BUDGET
from .options import MAX_DEFAULT_PIECES as _MAX_DEFAULT_PIECES
from .options import PACKINGS, PERIODIC_BUDGET, SIZED_PERIODIC_BUDGET, SPLITTINGS, ForestCollOptions
from .options import PERIODIC_FROM as _PERIODIC_FROM
from .sizing import fastest_depth
from .splitting import SplitResult, split_switches
from .bulk_splitting import split_in_bulk, switch_pairs
from .symmetric_splitting import SymmetricSplitFailed, split_by_translations

__all__ = ["synthesize", "Forest", "build_forest"]

# "auto" writes a periodic schedule (workbench.algorithm/3) from _PERIODIC_FROM transfers on (options:
# the budgets live there, where the parameters are priced): below it the listing written out is small
# without translations, "auto" splits a whole switch at a time (bulk_splitting) past this many in/out
# arc pairs (a 128-GPU rail fabric, 3,072: 0.1 s instead of 40 s); below, pair by pair gave the better
# trees (rfs:2x4x16, 2,048 pairs: 95.5% of T* in 64 s against 94.1% in 97 s)
_BULK_FROM_PAIRS = 3_000

_SUPPORTED = ("allgather", "reducescatter", "allreduce", "broadcast", "reduce")
_PIECES_PER_LEVEL = 64  # default P = 64 * tree height: the fill (H - 1) tau stays ~1.5% of T* or less
# the simulator does not wait for round boundaries, so the pipeline fill costs about half of its
# (H - 1) rounds (measured: nvs-ib:4 All-Gather 0.42, dgx2:2 Reduce-Scatter 0.5)
_FILL_SHARE = 0.5
# emitting a schedule and handing it over as the incumbent runs at ~60k transfers/s on this
# machine class; budgeting a third of that keeps a tight time limit from killing the run, and
# leaves room for the claim's simulation (100k to 300k transfers/s on a loaded machine)
_TRANSFERS_PER_SECOND = 20_000
# default transfer budgets: written out, and in a period's expansion (timed and checked without being
# written, ~80 bytes and ~1 us a transfer: a 1,024-GPU rail fabric gets ~70 pieces per tree)
# (_LISTING_BUDGET and PERIODIC_BUDGET, from options)
# a periodic schedule emits one batch; the expansion is timed and checked by the compiled engines
# (measured 3 million transfers simulated and verified in ~3 s; a third of that rate budgeted)
_PERIODIC_TRANSFERS_PER_SECOND = 300_000


@dataclass
class Forest:
    """The trees of one gather-like collective on one topology, with their provenance."""

    units: TreeUnits
    split: SplitResult
    trees: list[TreeGroup]
    groups: list[PathGroup]
    plans: list[list[EdgePlan]]
    shared: list[SharedEdge]
    seconds: float
    flows: int
    splitting: str = "greedy"
    slots: dict | None = None  # slots.round_slots: order of a round's transfers
    stretch: float = 1.0  # a round's length over the busiest link's load
    cut_through: bool | str = False  # edges through switches sent as one routed transfer ("loose": where
    # every link of the route has time to spare, slots.loose_links)
    packing: str = "levels"  # the packing that grew the trees: symmetric, levels or fifo

    @property
    def per_batch(self) -> int:
        """Transfers per batch: one per shared-edge hop, or per slot piece where slots split messages."""
        if self.slots is not None:  # a message may be split into pieces by the round's slot order
            return sum(len(pieces) for pieces in self.slots.values())
        return transfers_per_batch(self.shared)

    @property
    def height(self) -> int:
        """H: rounds from a batch's first transfer to its last arrival (``pipeline_height``)."""
        return pipeline_height(self.shared)


def build_forest(topology: Topology, kind: str, root: int | None = None, k: int | str = "auto", seed: int = 0,
                 deadline: Deadline | None = None, splitting: str = "auto",
                 max_transfers: int = 4_000_000, packing: str = "auto", reversible: bool = False,
                 cut_through: bool | str = "auto") -> Forest:
    """Optimum, splitting, packing and map-back for an all-gather (or a broadcast from ``root``).

    ``splitting``: "greedy" (largest safe amount per switch pair, as the reference), "spread" (each
    in-arc first spread evenly over the out-arcs: shallower trees, more tree groups), "bulk" (a whole
    switch at a time, checked afterwards: ``bulk_splitting``), "symmetric" (a switch orbit at a time,
    then root 0's trees translated: ``symmetric_splitting``) or "auto" (symmetric where
    ``cluster_translations`` verifies a group, falling back to: bulk alone past ``_BULK_FROM_PAIRS``
    switch arc pairs, else greedy and spread both built).
    ``cut_through``: True, False or "auto" (hop by hop; "loose", cut through where every link of the
    route has time to spare, ``slots.loose_links``; True, skipped past ``slots.LARGE_ROUND``). Every "auto" choice (on a fabric with switches) builds
    each variant and keeps the one whose pipeline, at the transfer budget ``max_transfers``, is
    predicted fastest: ``stretch * (1 + f (H - 1) / P)`` with the round stretch of
    ``slots.round_slots`` (cut-through convoys), ``(H - 1) / P`` fill rounds, P the pieces the
    budget affords (hop by hop needs a transfer per hop) and ``f = _FILL_SHARE``. With ``reversible`` (the forest will be
    reversed into a reduction) the forest is staggered first (``stagger``: its hop-by-hop edges, cut-through
    forests included), which deepens H.
    """
    started = time.perf_counter()
    units = _tree_units(topology, kind, root, k, deadline)
    table, group = _translations_for(topology, kind, splitting, packing)
    modes = _splitting_modes(topology, splitting, packing, group)
    if cut_through == "auto":
        variants = [False, "loose", True] if topology.num_switches else [False]
    else:
        variants = [bool(cut_through)]
    best: tuple[tuple[int, float], Forest] | None = None
    supply = [int(c) for c in units.supply]
    for mode in modes:
        forest_units = units
        if best is not None and best[1].splitting == "symmetric":
            break  # the others are fallbacks
        if mode == "symmetric":
            try:
                forest_units, split, trees, flows, used = _split_by_translations(topology, units, group, packing,
                                                                                 seed, deadline)
            except (SymmetricSplitFailed, PackingError) as failure:
                if len(modes) == 1:
                    raise PackingError(f"forestcoll: the translated split or packing failed: {failure}") from None
                continue  # the next mode: bulk or pair by pair
        else:
            if mode == "bulk":
                split = split_in_bulk(topology, units, deadline)
            else:
                split = split_switches(topology, units, deadline, spread=(mode != "greedy"))
            trees, flows, used = _pack(topology.num_npus, table, split, supply, packing, seed, deadline)
        validate_forest(trees, topology.num_npus, [int(c) for c in forest_units.supply], split.capacity)
        groups = map_to_paths(trees, split)
        check_link_budgets(groups, split.physical)
        flows += split.flows
        best = _keep_fastest(best, topology, variants, reversible, max_transfers,
                             forest_units, split, trees, groups, flows, mode, used)
    forest = best[1]
    forest.seconds = time.perf_counter() - started
    return forest


def _tree_units(topology: Topology, kind: str, root: int | None, k: int | str,
                deadline: Deadline | None) -> TreeUnits:
    """The optimum's tree-units: a broadcast's from ``root``, else ``k`` chosen ("auto") or fixed."""
    if kind == "broadcast":
        if k != "auto":
            raise ValueError("forestcoll: a fixed k applies to all-gather-like collectives, not broadcast/reduce")
        return broadcast_units(topology, root if root is not None else 0)
    if k == "auto":
        return auto_units(topology)
    return fixed_k_units(topology, int(k), deadline)


def _translations_for(topology: Topology, kind: str, splitting: str, packing: str) -> tuple[Any, Any]:
    """The options checked, and the fabric's translations where the packing or splitting may use them:
    ``(table, group)``, a cluster's translations (switches included) in ``group``, else ``table``."""
    if packing not in PACKINGS:
        raise ValueError(f"forestcoll: packing must be one of {', '.join(PACKINGS)}, got {packing!r}")
    if splitting not in SPLITTINGS:
        raise ValueError(f"forestcoll: splitting must be one of {', '.join(SPLITTINGS)}, got {splitting!r}")
    if "symmetric" in (splitting, packing) and kind == "broadcast":
        raise ValueError("forestcoll: symmetric splitting and packing build trees for every root (all-gather-like "
                         "collectives); a broadcast has one root")
    table = group = None
    if kind != "broadcast" and (packing in ("auto", "symmetric") or splitting == "symmetric"):
        if topology.num_switches and splitting in ("auto", "symmetric"):
            group = cluster_translations(topology)  # a cluster's translations, switches included
        else:
            table = translations(topology)
    if packing == "symmetric" and table is None and group is None:
        raise ValueError(f"forestcoll: packing 'symmetric' needs a translation-symmetric fabric (a torus or ring, "
                         f"or a cluster of equal boxes and leaf groups); {topology.name} is not one")
    if splitting == "symmetric" and group is None:
        raise ValueError(f"forestcoll: splitting 'symmetric' needs a cluster whose translations map the switches "
                         f"too (equal boxes and leaf groups: workbench.kit.cluster_translations); {topology.name} "
                         f"has none verified")
    return table, group


def _splitting_modes(topology: Topology, splitting: str, packing: str, group) -> list[str]:
    """The splittings to build, in order (``build_forest``'s "auto")."""
    if splitting not in ("auto", "symmetric"):
        modes = [splitting]
    elif not topology.num_switches:
        modes = ["auto"]
    elif switch_pairs(topology) > _BULK_FROM_PAIRS:
        modes = ["bulk"]  # pair by pair would take hours at this size (bulk_splitting)
    else:
        modes = ["greedy", "spread"]
    if group is not None:  # translated plans and root 0's trees; the others if that fails
        modes = ["symmetric"] + ([] if "symmetric" in (splitting, packing) else modes)
    return modes


def _split_by_translations(topology: Topology, units: TreeUnits, group, packing: str, seed: int,
                           deadline: Deadline | None) -> tuple[TreeUnits, SplitResult, list[TreeGroup], int, str]:
    """The symmetric split (a switch orbit at a time) and its trees: the units, split, trees, max-flows
    and packing used; raises ``SymmetricSplitFailed`` or ``PackingError`` when either fails."""
    forest_units, split = split_by_translations(topology, units, group, deadline)
    if packing in ("auto", "symmetric"):
        trees, flows = pack_symmetric(group.table, split.capacity, int(forest_units.k), seed, deadline)
        used = "symmetric"
    else:  # the general packer on the symmetric split, as asked
        trees, flows, used = _pack(topology.num_npus, None, split,
                                   [int(c) for c in forest_units.supply], packing, seed, deadline)
    return forest_units, split, trees, flows, used


def _keep_fastest(best: tuple[float, Forest] | None, topology: Topology, variants: list, reversible: bool,
                  max_transfers: int, forest_units: TreeUnits, split: SplitResult, trees: list[TreeGroup],
                  groups: list[PathGroup], flows: int, mode: str, used: str) -> tuple[float, Forest] | None:
    """``best`` (predicted stretch, forest) after weighing one splitting's trees sent as each of
    ``variants`` (hop by hop, "loose" or cut through); max-flows are summed into the forest kept."""
    hop_by_hop: list[SharedEdge] | None = None
    for label in variants:
        through = label
        if label == "loose":  # cut through where the links have time to spare (slots.loose_links)
            if hop_by_hop is None:
                continue
            through = loose_links(topology, hop_by_hop)
        elif label is True and hop_by_hop is not None and transfers_per_batch(hop_by_hop) > LARGE_ROUND:
            continue  # appended rounds (slots) stall on cut-through transfers over the busiest links
        plans = [plan_edges(topology, g, through) for g in groups]
        shared = share_edges(groups, plans)
        if reversible:  # one partial sum per switch buffer once reversed; a cut-through forest too,
            # as its edges off the simulator's route still go hop by hop through switches
            stagger_switch_visits(topology, shared)
        if through is False:
            hop_by_hop = shared
        slots, stretch = round_slots(topology, shared)
        forest = Forest(forest_units, split, trees, groups, plans, shared, 0.0, flows, mode, slots, stretch,
                        label, used)
        flows = 0  # counted once per splitting
        pieces = max(1, max_transfers // max(forest.per_batch, 1))
        predicted = stretch * (1 + _FILL_SHARE * (forest.height - 1) / pieces)
        if best is None or predicted < best[0]:
            if best is not None:
                forest.flows += best[1].flows
            best = (predicted, forest)
        else:
            best[1].flows += forest.flows
    return best


def _pack(num_npus: int, table, split: SplitResult, supply: list[int], packing: str, seed: int,
          deadline: Deadline | None) -> tuple[list[TreeGroup], int, str]:
    """Trees, max-flows used and the packing that grew them: the symmetric packer where ``table``
    (the fabric's translations) allows, else the general one, which also decides when the
    symmetric greedy gets stuck unless ``packing`` forces "symmetric"."""
    if table is not None:
        try:
            trees, flows = pack_symmetric(table, split.capacity, supply[0], seed, deadline)
            return trees, flows, "symmetric"
        except PackingError:
            if packing == "symmetric":
                raise
    trees, flows = pack_arborescences(num_npus, split.capacity, supply, seed, deadline, levels=(packing != "fifo"))
    return trees, flows, "fifo" if packing == "fifo" else "levels"


def synthesize(formulation: Any, problem: Problem, *, time_limit: float, seed: int,
               on_incumbent: Callable[[Algorithm], None] | None, options: ForestCollOptions) -> SynthesisResult:
    """A forest per phase of ``problem``, pipelined; below 256 MB, unpinned, other tree choices are tried too
    (``ForestColl.synthesize`` with its options resolved)."""
    pieces, k, max_transfers = options.depth, options.trees, int(options.max_transfers)
    deadline = Deadline(time_limit if time_limit and time_limit > 0 else None)  # <= 0: no limit
    collective = problem.collective
    kind = collective.kind
    if kind not in _SUPPORTED:
        raise Unsupported(f"forestcoll: {kind} is not supported (spanning-tree packing covers "
                          f"{', '.join(_SUPPORTED)})")
    topology = problem.topology
    n = collective.num_ranks
    if n != topology.num_npus:
        raise ValueError(f"forestcoll: the collective must span every NPU ({topology.num_npus}), got {n} ranks")
    # hop by hop serves every link at its own pace (1.01x T* on NVSwitch/IB fabrics against 1.14x
    # cut-through) but needs a transfer per hop, so fewer pieces fit the budget; "auto" weighs the two
    cut_through = options.cut_through_flag
    periodic = options.periodic_flag
    packing = options.packing
    # every kind may be written as a period: a reduction is its gather's period reversed, an All-Reduce
    # the two joined piece by piece (workbench.model.periodic)
    widened = periodic is not False and not options.is_given("max_transfers")
    sized = pieces is None and adapts_to_size(topology, problem.size_bytes)
    # build_forest weighs its variants at the depth this budget affords: a period's, except where the
    # depth is chosen by size later (sizing), weighed as before at a listing's
    forest_budget = PERIODIC_BUDGET if widened and not sized else max_transfers
    if widened:
        max_transfers = PERIODIC_BUDGET  # counts the expansion of a period, which is never written out

    def forests_of(k_choice: int | str, packing_choice: str) -> dict[str, Forest]:
        return _forests(problem, k_choice, packing_choice, seed, deadline, options.splitting,
                        forest_budget, cut_through)

    def scheduled(candidate: dict[str, Forest], started: float) -> tuple[Algorithm, str, dict[str, Any]]:
        return _scheduled(problem, candidate, pieces, max_transfers, deadline, started, periodic, widened)

    try:
        forests = forests_of(k, packing)
    except Timeout:
        return SynthesisResult([], "timeout", deadline.elapsed(), message=f"tree construction exceeded {time_limit:g} s")
    algorithm, status, stats = scheduled(forests, 0.0)
    first_seconds = deadline.elapsed()  # trees and schedule: what another candidate will cost
    if on_incumbent is not None:
        on_incumbent(algorithm)
    if sized and k == "auto" and packing == "auto":
        algorithm, status, stats = _other_trees(problem, forests, (algorithm, status, stats), forests_of, scheduled,
                                                deadline, first_seconds, on_incumbent)
    return SynthesisResult([algorithm], status, stats.pop("seconds"), stats=stats)


def _other_trees(problem: Problem, forests: dict[str, Forest], first: tuple[Algorithm, str, dict[str, Any]],
                 forests_of: Callable[[int | str, str], dict[str, Forest]],
                 scheduled: Callable[[dict[str, Forest], float], tuple[Algorithm, str, dict[str, Any]]],
                 deadline: Deadline, first_seconds: float,
                 on_incumbent: Callable[[Algorithm], None] | None) -> tuple[Algorithm, str, dict[str, Any]]:
    """The fastest of ``first`` and the other tree choices by size, each handed over when it is faster
    (``scheduled``: a forest's schedule as the first's was made)."""
    algorithm, status, stats = first
    # the trees by size (nothing pinned, below 256 MB): one tree per root, or BFS-layered trees
    # where the translation packer grew them, written and timed like the first (sizing)
    tried = {"auto": algorithm.meta["claimed_time"]}
    others = []
    rooted = problem.collective.kind in ("broadcast", "reduce")  # their trees come from the root: k is not chosen
    if not rooted and any(f.units.k > 1 for f in forests.values()):
        others.append(("k=1", 1, "auto"))
    if any(f.packing == "symmetric" for f in forests.values()):
        others.append(("levels", "auto", "levels"))
    for label, k_choice, packing_choice in others:
        if not deadline.unlimited and deadline.remaining() < 2 * first_seconds:
            break  # another forest would not fit what is left of the time limit
        started = deadline.elapsed()
        try:
            candidate_forests = forests_of(k_choice, packing_choice)
            candidate = scheduled(candidate_forests, started)
        except (Timeout, PackingError):
            continue
        tried[label] = candidate[0].meta["claimed_time"]
        if tried[label] < algorithm.meta["claimed_time"]:
            algorithm, status, stats = candidate
            if on_incumbent is not None:
                on_incumbent(algorithm)
    algorithm.meta.setdefault("time_by_choice", {})["trees"] = tried
    stats["seconds"] = deadline.elapsed()  # every candidate's trees and schedules
    return algorithm, status, stats


def _forests(problem: Problem, k: int | str, packing: str, seed: int, deadline: Deadline, splitting: str,
             max_transfers: int, cut_through: bool | str) -> dict[str, Forest]:
    """The forest of each phase (``same``: the topology; ``reversed``: its reversed graph, for a
    reduction), one forest serving both where the graph is its own reverse."""
    collective = problem.collective
    kind = collective.kind
    topology = problem.topology
    gather_kind = "broadcast" if kind in ("broadcast", "reduce") else "allgather"
    phases = {"reducescatter": ["reversed"], "reduce": ["reversed"], "allreduce": ["reversed", "same"]}.get(
        kind, ["same"])
    forests: dict[str, Forest] = {}
    reversed_topology = topology.reversed()
    for phase in phases:
        view = reversed_topology if phase == "reversed" else topology
        if phase == "same" and "reversed" in forests and reversed_topology.links == topology.links:
            forests[phase] = forests["reversed"]  # a symmetric fabric: the same forest serves both
            continue
        forests[phase] = build_forest(view, gather_kind, collective.root, k, seed, deadline, splitting,
                                      max_transfers, packing, reversible=(phase == "reversed"),
                                      cut_through=cut_through)
    return forests


def _scheduled(problem: Problem, forests: dict[str, Forest], pieces: int | None, max_transfers: int,
               deadline: Deadline, started: float, periodic: bool | str = "auto",
               widened: bool = False) -> tuple[Algorithm, str, dict[str, Any]]:
    """The pipelined schedule of the forests (depth by size unless ``pieces`` pins it; ``widened``: the
    default period budget, narrowed for a listing), its status and stats (``seconds``: synthesis so far,
    the claim timed apart; ``tree_seconds``: the forests' seconds, from ``started``)."""
    collective = problem.collective
    kind = collective.kind
    topology = problem.topology
    gather_kind = "broadcast" if kind in ("broadcast", "reduce") else "allgather"
    tree_seconds = deadline.elapsed() - started
    ks = [f.units.k for f in forests.values()]
    common = math.lcm(*ks)
    per_m = sum(common // f.units.k * f.per_batch for f in forests.values())
    height = max(f.height for f in forests.values())
    size = problem.size_bytes
    adaptive = pieces is None and adapts_to_size(topology, size)

    def depth(budget: int, rate: int) -> tuple[int, int]:
        return _depth_within(budget, rate, deadline, pieces, per_m, height)

    rate = _TRANSFERS_PER_SECOND // (3 if collective.combining else 1)  # reversal and concat cost more
    given_budget = max_transfers
    m, max_transfers = depth(given_budget, rate)
    # one period and its repeat count (workbench.model.periodic) where "auto" finds the listing large;
    # with the depth chosen by size, only past what a relisting could settle (claim_listing), so the
    # schedules that one improves stay written out
    large = SETTLE_MOST if adaptive else _PERIODIC_FROM
    write_period = periodic is True or (periodic == "auto" and m * per_m >= large)
    if widened and not write_period:  # the default budget was a period's; a listing written out has its own
        m, max_transfers = depth(min(given_budget, _LISTING_BUDGET), rate)
    if write_period:  # only one batch is emitted: the budget is what the compiled engines time and check
        if widened and adaptive:  # several depths are timed: each gets a smaller default budget
            given_budget = min(given_budget, SIZED_PERIODIC_BUDGET)
        m, max_transfers = depth(given_budget, _PERIODIC_TRANSFERS_PER_SECOND)
    phases = _PhaseSchedules(problem, forests, common, write_period)
    # the claim: the time of the pieces as written, in the default model (module docstring); below
    # 256 MB with no pinned depth, the depth that simulates fastest (sizing), each timed that way
    planned: dict[int, float] = {}
    if adaptive:  # timing the depths is how this one is chosen
        algorithm, timed, planned = fastest_depth(m, phases.plan_for, phases.schedule_for, deadline)
        m = algorithm.collective.chunks_per_rank // common
        seconds, claim_seconds = deadline.elapsed(), 0.0
    else:  # the claim is timed apart from the synthesis: it judges the schedule, it does not make it
        algorithm, timed = phases.schedule_for(m), {}
        seconds = deadline.elapsed()
        claim_in_model(algorithm)
        claim_seconds = deadline.elapsed() - seconds
    exact = all(f.units.optimal for f in forests.values())
    status = "optimal" if exact and kind != "allreduce" else "feasible"
    meta = _forest_meta(problem, forests, m, common, height, tree_seconds, max_transfers, write_period)
    if timed:  # the depths weighed at this size: planned, and simulated where written
        meta["plan_by_pieces"] = {str(p): t for p, t in planned.items()}
        meta.setdefault("time_by_choice", {})["pieces"] = {str(p): t for p, t in timed.items()}
    if timed:  # the depth chosen by size (nothing pinned): planned or list-scheduled listing, the faster
        algorithm = claim_listing(algorithm, size, None if deadline.unlimited else deadline.remaining(),
                                  claimed=True)  # fastest_depth claimed it
    algorithm.meta.update(meta)
    if status == "optimal":  # proven in the throughput model; the workbench judges the simulated time
        algorithm.meta["model_optimal"] = "forestcoll-throughput"
    stats = {"transfers": algorithm.total_transfers, "max_flows": meta["max_flows"], "tree_seconds": tree_seconds,
             "groups": meta["groups"], "claim_seconds": claim_seconds, "seconds": seconds}
    return algorithm, status, stats


class _PhaseSchedules:
    """The forests' pipelined schedule, and its round plan's time, at a given depth (``_scheduled``):
    each phase's forest found by its view's links (the topology's, or its reversed graph's)."""

    def __init__(self, problem: Problem, forests: dict[str, Forest], common: int, write_period: bool) -> None:
        self.problem = problem
        self.forests = forests
        self.common = common
        self.write_period = write_period
        self.topology = problem.topology
        self.reversed_topology = self.topology.reversed()
        self.by_links = {}
        for phase, forest in forests.items():
            self.by_links[self.reversed_topology.links if phase == "reversed" else self.topology.links] = forest

    def bytes_per_chunk(self, chunks_per_rank: int) -> float:
        collective, size = self.problem.collective, self.problem.size_bytes
        if collective.kind in ("broadcast", "reduce"):
            return size / chunks_per_rank
        return size / (collective.num_ranks * chunks_per_rank)

    def gather(self, view: Topology, target: Collective, chunk_bytes: float) -> Algorithm:
        forest = self.by_links[view.links]
        p = target.chunks_per_rank // forest.units.k
        algorithm, _ = emit_schedule(view, target.kind, target.num_ranks, forest.units.k, p, forest.groups,
                                     forest.shared, chunk_bytes, target.root, forest.slots,
                                     periodic=self.write_period)
        if self.write_period and forest.units.k < self.common:  # a piece of every phase: common // k batches
            algorithm = coarsened(algorithm, self.common // forest.units.k)
        return algorithm

    def schedule_for(self, m: int) -> Algorithm:
        """The schedule with ``m`` pieces per tree-unit."""
        collective, topology = self.problem.collective, self.topology
        kind, n = collective.kind, collective.num_ranks
        chunks_per_rank = self.common * m
        chunk_bytes = self.bytes_per_chunk(chunks_per_rank)
        target = make_collective(kind, n, chunks_per_rank, collective.root)
        try:
            return by_duality(topology, target, chunk_bytes, self.gather)
        except ValueError as exc:
            if "multicasts" not in str(exc):
                raise
        # a switch forwards a chunk twice (hop-by-hop edges): reverse with serialised switch buffers
        dual = make_collective("broadcast" if kind == "reduce" else "allgather", n, chunks_per_rank, collective.root)
        gather = self.gather(self.reversed_topology, dual, chunk_bytes)
        algorithm = (reverse_periodic if self.write_period else reverse_serialised)(gather, topology)
        if kind == "allreduce":
            algorithm = algorithm.concat(self.gather(topology, make_collective("allgather", n, chunks_per_rank),
                                                     chunk_bytes))
        return algorithm

    def plan_for(self, m: int) -> float:
        """The round plan's time with ``m`` pieces per tree-unit, summed over the phases."""
        topology, common = self.topology, self.common
        chunk_bytes = self.bytes_per_chunk(common * m)
        total = 0.0
        for links, forest in self.by_links.items():
            view = topology if links == topology.links else self.reversed_topology
            slots = forest.slots if forest.slots is not None else slot_order(view, forest.shared)
            total += plan_times(view, forest.shared, slots, chunk_bytes, common * m // forest.units.k).makespan
        return total if len(self.by_links) == len(self.forests) else 2 * total  # one forest serving both phases


def _depth_within(budget: int, rate: int, deadline: Deadline, pieces: int | None, per_m: int,
                  height: int) -> tuple[int, int]:
    """Pieces per tree-unit (``pieces`` if pinned, else the default depth within the budget) and
    the budget: ``max_transfers``, capped by what is left of the time limit at ``rate``."""
    if not deadline.unlimited:  # what is left of the time limit caps the schedule's size
        affordable = int(deadline.remaining() * rate)
        budget = max(per_m, min(budget, affordable))
    if pieces is not None:
        return pieces, budget
    goal = max(1, min(_MAX_DEFAULT_PIECES, _PIECES_PER_LEVEL * height))
    return max(1, min(goal, budget // max(per_m, 1))), budget


def _forest_meta(problem: Problem, forests: dict[str, Forest], m: int, common: int, height: int,
                 tree_seconds: float, max_transfers: int, write_period: bool) -> dict[str, Any]:
    """The schedule's meta about its forests: per phase where there are two (``m`` pieces per tree-unit
    of the common multiple ``common`` of the phases' k)."""
    collective = problem.collective
    n = collective.num_ranks
    gather_kind = "broadcast" if collective.kind in ("broadcast", "reduce") else "allgather"
    size = problem.size_bytes
    first = next(iter(forests.values()))
    ratio_seconds = {phase: float(f.units.ratio) / f.units.capacities.unit for phase, f in forests.items()}
    bandwidth_term = sum(size / (1 if gather_kind == "broadcast" else n) * r for r in ratio_seconds.values())
    meta = {
        "k": first.units.k if len(forests) == 1 else {p: f.units.k for p, f in forests.items()},
        "U": str(first.units.U) if len(forests) == 1 else {p: str(f.units.U) for p, f in forests.items()},
        "capacity_unit": first.units.capacities.unit,
        "P": m if len(forests) == 1 else {p: common * m // f.units.k for p, f in forests.items()},
        "H": height,
        "groups": len(first.groups) if len(forests) == 1 else {p: len(f.groups) for p, f in forests.items()},
        "trees": sum(len(f.trees) for f in forests.values()),
        "ratio": str(first.units.ratio) if len(forests) == 1 else {p: str(f.units.ratio) for p, f in forests.items()},
        "optimum_ratio": str(first.units.optimum_ratio),
        "bandwidth_time": bandwidth_term,
        "tree_seconds": tree_seconds,
        "transfer_budget": max_transfers,
        "max_flows": sum(f.flows for f in forests.values()),
        "packing": {p: f.packing for p, f in forests.items()},
        "stretch": {p: round(f.stretch, 4) for p, f in forests.items()},
        "splitting": {p: f.splitting for p, f in forests.items()},
        "cut_through": {p: f.cut_through for p, f in forests.items()},
        "views": {p: ("reversed graph" if p == "reversed" else "topology") for p in forests},
        "periodic": write_period,
    }
    if any(f.split.plan_solver == "networkx" for f in forests.values()):  # OR-Tools missing (bulk_splitting)
        meta["bulk_plans"] = {p: f.split.plan_solver for p, f in forests.items() if f.split.plan_solver}
        meta["bulk_plans_note"] = ("OR-Tools is not installed (pip install collective-workbench[cpsat]): the bulk "
                                   "splitting's min-cost flows were solved by NetworkX (same model, may break ties "
                                   "differently)")
    return meta


