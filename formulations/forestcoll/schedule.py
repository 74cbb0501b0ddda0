"""Trees to a pipelined workbench schedule (spec forestcoll 4).

* Data split: root u has ``k * P`` chunks (``P`` pieces per tree-unit). Its path groups, in order,
  own consecutive slices of the ``k`` tree-units; group g (multiplicity ``C_g``, offset ``o_g``)
  carries, in batch ``b``, chunk indices ``j = b * k + o_g + i`` (``i < C_g``), i.e. chunk ``j * N + u``
  of an All-Gather (chunk ``j`` of a broadcast). One transfer per (shared edge, batch, hop) carries
  the batch's chunks of every group sharing that edge (``share_edges``) as one message.
* Rounds: batch b crosses hop h of a tree edge of depth d (in transfers from the root; the root's
  edges: 0) in round ``b + d + h``, so a transfer waits only for one of the previous round.
* Paths: a logical edge through switches is sent hop by hop with the switches as endpoints, each
  hop waiting for the previous one, so every link serves its own tree-units in its own order and
  at its own speed. (Option ``cut_through``: an edge whose physical path is the simulator's route
  ``topology.route(x, y)`` is one ``x -> y`` transfer, ForestColl's own model. A cut-through segment
  holds all its links at once for the slowest link's serialisation, so segments through a switch
  wait for each other's links and, on a path mixing speeds, e.g. 25 GB/s NICs over a faster trunk,
  use the fast link longer than its tree-unit budget: 1.14x T* on nvs-ib:2 and dgx2:2 against
  1.01x hop by hop; ``slots.round_slots`` measures that stretch.) A switch never
  multicasts: two children reached through one switch are two sends on the uplink, as budgeted.
* Timeline (``plan_times``): one round lasts ``R`` seconds, each piece of a round placed at the
  earliest instant its links are free, in slot order (the simulator's segment rules: a piece holds
  its links for its serialisation and arrives alpha later); batch b of a hop starts at
  ``(b + r) * R + offset``, where ``r`` is the first round in which every piece of the batch before
  it (on the previous hop or the parent edge) has arrived, alpha included, and at least the rounds
  the plan above leaves between them (in a forest staggered for reversal, also after the batch's
  previous visit to the same switch has left it). Where alpha outweighs a piece's serialisation
  (small messages), a hop is thus many rounds behind its parent, as it is on the wire; where it
  does not, the rounds are the plan's. No link carries two pieces at once and no piece starts
  before what it waits for: a timeline of the default model, whose last arrival is ``planned_time``.
* File order: by the timeline's round, then slot (group, edge, hop), which on every link is the
  order of planned starts (``workbench.kit.schedule.order_by_start`` would give the same per-link
  order; this one also keeps the round plan's order across links where the rounds are the plan's).
  Listing by the round plan instead makes each round wait for the alpha of the round before it: at
  64 KB on ring:8, 116 us in the default model against 2.5 us. Deps name the transfers that brought
  the batch to the edge's tail (or the previous hop), always a round or more earlier.
* The default model runs that per-link order without waiting for round boundaries, so it finishes
  no later than ``planned_time``, and earlier where lightly loaded hops run ahead of the round (10%
  on dgx1 at 64 KB). The claim is therefore that run itself (``synthesis``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from workbench.model.algorithm import Algorithm, Transfer
from workbench.model.collective import make_collective
from workbench.kit.maxflow import integer_capacities
from workbench.model.periodic import repeated
from workbench.checking.simulate import route_segments
from workbench.topology import Topology

from .mapping import PathGroup
from .slots import slot_order


__all__ = ["EdgePlan", "SharedEdge", "Plan", "plan_edges", "share_edges", "emit_schedule", "plan_times",
           "transfers_per_batch", "pipeline_height", "switch_visit_clashes"]


@dataclass
class EdgePlan:
    """One tree edge of a group: its level, the edge that feeds its tail, and its transfer hops.

    ``depth`` counts transfers, not tree edges: the root's edges start at 0 and an edge sent as ``h``
    hops gives its head's edges depth + h, so every dependency spans exactly one round.
    """

    depth: int
    parent: int | None  # index of the edge into the tail (None at the root)
    hops: list[tuple[int, int]]


def plan_edges(topology: Topology, group: PathGroup, cut_through: bool | frozenset[int] = False) -> list[EdgePlan]:
    """Depths, parents and hops of a group's edges (edges are in BFS order: parents come first).

    By default every edge through a switch is sent hop by hop; with ``cut_through`` an edge whose
    path is the simulator's own route is one transfer (given a set of link indices: only where
    every link of the path is in it, see ``slots.loose_links``).
    """
    depth = {group.root: 0}
    feeder: dict[int, int] = {}
    plans = []
    allowed = cut_through if isinstance(cut_through, frozenset) else None
    for index, ((x, y), path) in enumerate(zip(group.edges, group.paths)):
        if len(path) == 2 or (cut_through and topology.route(x, y) == path and (
                allowed is None or all(topology.link_index(a, b) in allowed for a, b in zip(path, path[1:])))):
            hops = [(x, y)]
        else:
            hops = list(zip(path, path[1:]))
        plans.append(EdgePlan(depth[x], feeder.get(x), hops))
        depth[y] = depth[x] + len(hops)
        feeder[y] = index
    return plans


@dataclass
class SharedEdge:
    """Tree edges of several groups of one root that are identical from the root down.

    Clones made during packing share their first edges; where two groups reach a node along the
    same chain of (edge, path), each batch crosses it in the same round, so one message carries
    the chunks of all of them (one alpha, fewer transfers for the same pipeline depth).
    """

    depth: int
    parent: int | None  # index of the shared edge into the tail
    hops: list[tuple[int, int]]
    members: list[int]  # group indices
    width: int  # sum of the members' multiplicities


def share_edges(groups: list[PathGroup], plans: list[list[EdgePlan]]) -> list[SharedEdge]:
    """Merge identical root chains (a trie over each root's groups); parents come before children."""
    index: dict[tuple, int] = {}
    shared: list[SharedEdge] = []
    for g, (group, group_plans) in enumerate(zip(groups, plans)):
        node_of: dict[int, int] = {}
        for e, ((x, y), path) in enumerate(zip(group.edges, group.paths)):
            plan = group_plans[e]
            parent = node_of.get(x)
            key = (group.root, parent, x, y, path)
            i = index.get(key)
            if i is None:
                i = index[key] = len(shared)
                shared.append(SharedEdge(plan.depth, parent, plan.hops, [], 0))
            shared[i].members.append(g)
            shared[i].width += group.multiplicity
            node_of[y] = i
    return shared


def pipeline_height(shared: list[SharedEdge]) -> int:
    """Rounds from a batch's first transfer to its last arrival (H): the deepest edge end, delays included."""
    return max((edge.depth + len(edge.hops) for edge in shared), default=0)


def transfers_per_batch(shared: list[SharedEdge]) -> int:
    """Transfers of one batch hop by hop: one per hop of every shared edge."""
    return sum(len(edge.hops) for edge in shared)


def _batch_zero(kind: str, num_ranks: int, groups: list[PathGroup],
                shared: list[SharedEdge]) -> Callable[[int], tuple[int, ...]]:
    """Batch 0's chunk ids on shared edge ``e``, sorted (computed once per edge): group g carries
    ``o_g + i`` (``i < C_g``), chunk ``(o_g + i) * N + u`` of an All-Gather."""
    offsets: list[int] = []
    used: dict[int, int] = {}
    for group in groups:
        offsets.append(used.get(group.root, 0))
        used[group.root] = used.get(group.root, 0) + group.multiplicity
    first_ids: dict[int, tuple[int, ...]] = {}

    def batch_zero(e: int) -> tuple[int, ...]:
        if e not in first_ids:
            ids = []
            for g in shared[e].members:
                group = groups[g]
                if kind == "broadcast":
                    ids += range(offsets[g], offsets[g] + group.multiplicity)
                else:
                    ids += ((offsets[g] + i) * num_ranks + group.root for i in range(group.multiplicity))
            first_ids[e] = tuple(sorted(ids))
        return first_ids[e]

    return batch_zero


def _listing(shared: list[SharedEdge], slot: dict, rounds: dict[tuple[int, int], int], pieces: int,
             periodic: bool) -> list[tuple[int, int, int, int, int, int]]:
    """The file order of the module docstring: (round, position, e, h, p, b) per transfer, sorted."""
    entries = []
    for e, edge in enumerate(shared):
        for h in range(len(edge.hops)):
            first_round = rounds[(e, h)]
            for p, (position, _) in enumerate(slot[(e, h)]):
                if periodic:  # a period lists batch 0 by slot alone: the expansion orders period q
                    # by (q, template index), which is the listing's (round, position, e, h, p)
                    entries.append((0, position, e, h, p, 0))
                    continue
                for b in range(pieces):
                    entries.append((b + first_round, position, e, h, p, b))
    entries.sort()
    return entries


def emit_schedule(topology: Topology, kind: str, num_ranks: int, k: int, pieces: int, groups: list[PathGroup],
                  shared: list[SharedEdge], chunk_bytes: float, root: int | None = None,
                  slots: dict | None = None, periodic: bool = False) -> tuple[Algorithm, dict]:
    """The schedule of the module docstring, listed by the timeline's rounds, and its timing facts
    (tau, H, alpha_max, the round length and planned_time).

    ``periodic``: the same schedule as a ``workbench.algorithm/3`` period (``workbench.model.periodic``):
    batch 0's transfers, each hop lagging by its round, repeated ``pieces`` times with a stride of
    one batch's chunks. Its expansion is, transfer for transfer, the listing written out."""
    # batch b's chunks are batch 0's shifted by b * stride (the same order): computed once per edge
    stride = k if kind == "broadcast" else k * num_ranks
    batch_zero = _batch_zero(kind, num_ranks, groups, shared)

    slot = slots if slots is not None else slot_order(topology, shared)
    plan = plan_times(topology, shared, slot, chunk_bytes, pieces)
    rounds = plan.rounds
    entries = _listing(shared, slot, rounds, pieces, periodic)
    # deps by tree position (edge, hop, batch), not workbench.kit.schedule.DeliveryChain's (node, chunk):
    # a piece waits for every piece of the batch on the hop before, however the two hops split it
    ids: dict[tuple[int, int, int], list[int]] = {}
    if periodic:  # a template lists by slot alone, so a feeder may come later in it (its lag is smaller)
        for tid, (_, _, e, h, p, b) in enumerate(entries):
            ids.setdefault((e, h, b), []).append(tid)
    transfers: list[Transfer] = []
    for tid, (_, _, e, h, p, b) in enumerate(entries):
        edge = shared[e]
        src, dst = edge.hops[h]
        if h > 0:
            deps: tuple[int, ...] = tuple(ids[(e, h - 1, b)])
        elif edge.parent is not None:
            deps = tuple(ids[(edge.parent, len(shared[edge.parent].hops) - 1, b)])
        else:
            deps = ()
        if not periodic:  # the listing: every feeder came earlier
            ids.setdefault((e, h, b), []).append(tid)
        split = slot[(e, h)]
        first = sum(n for _, n in split[:p]) if p else 0
        piece = batch_zero(e)[first:first + split[p][1]]
        if b:
            piece = tuple(i + b * stride for i in piece)
        transfers.append(Transfer(tid, piece, src, dst, "copy", deps, None, None, rounds[(e, h)]) if periodic
                         else Transfer(tid, piece, src, dst, "copy", deps))
    timing = _timing(topology, shared, chunk_bytes)
    timing.update(round=plan.round, planned_time=plan.makespan)
    if periodic:
        one = make_collective(kind, num_ranks, k, root)
        algorithm = repeated(Algorithm(topology, one, chunk_bytes, [], {}), pieces)
        algorithm.transfers = transfers
        return algorithm, timing
    collective = make_collective(kind, num_ranks, k * pieces, root)
    return Algorithm(topology, collective, chunk_bytes, transfers, {}), timing


@dataclass
class Plan:
    """The schedule's timeline: batch ``b`` of piece ``p`` of hop ``h`` of shared edge ``e`` starts
    at ``(b + rounds[(e, h)]) * round + offsets[(e, h, p)]``; the last arrival is ``makespan``."""

    round: float
    rounds: dict[tuple[int, int], int]
    offsets: dict[tuple[int, int, int], float]
    makespan: float


def _one_round(topology: Topology, shared: list[SharedEdge], slot: dict,
               chunk_bytes: float) -> tuple[float, dict[tuple[int, int, int], float], dict[tuple[int, int, int], float]]:
    """One round in the slot order, each piece at the earliest instant its links are free: the round
    length ``R`` and each piece's start offset and arrival within the round."""
    segments_of: dict[tuple[int, int], list] = {}
    free: dict[int, float] = {}
    offsets: dict[tuple[int, int, int], float] = {}
    arrive: dict[tuple[int, int, int], float] = {}
    items = sorted((position, e, h, p) for (e, h), split in slot.items() for p, (position, _) in enumerate(split))
    for _, e, h, p in items:  # one round, in the slot order
        hop = shared[e].hops[h]
        segments = segments_of.get(hop)
        if segments is None:
            segments = segments_of[hop] = route_segments(topology, *hop)
        nbytes = slot[(e, h)][p][1] * chunk_bytes
        links = [link for segment in segments for link in segment[0]]
        hold = (sum(overhead + nbytes / bandwidth for _, _, bandwidth, overhead in segments)
                + sum(segment[1] for segment in segments[:-1]))
        begin = max((free.get(link, 0.0) for link in links), default=0.0)
        for link in links:
            free[link] = begin + hold
        offsets[(e, h, p)] = begin
        arrive[(e, h, p)] = begin + hold + segments[-1][1]
    return max(free.values(), default=0.0), offsets, arrive


class _RoundPlacer:
    """The rounds of the hops of the shared edges, placed edge by edge (``plan_times``): ``first`` and
    ``last`` are each hop's earliest start and latest arrival within a round of length ``round_length``."""

    def __init__(self, topology: Topology, shared: list[SharedEdge], round_length: float,
                 first: dict[tuple[int, int], float], last: dict[tuple[int, int], float]) -> None:
        self.topology = topology
        self.shared = shared
        self.round_length = round_length
        self.first = first
        self.last = last
        # a forest staggered for reversal (stagger) never has two visits of a group's chunk in one switch
        # in the round plan; the timeline keeps them apart in time, from the hop into the switch to the
        # arrival of the hop out of it, or the reversal's one-partial-sum-per-buffer rule makes links wait
        self.apart = round_length > 0 and switch_visit_clashes(topology, shared) == 0
        self.visits: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)

    def earliest(self, key: tuple[int, int], before: tuple[int, int], after: int) -> int:
        """The first round of hop ``key`` in which its batch has arrived from hop ``before`` (in round
        ``after``), and at least the round plan's rounds after it."""
        shared, round_length = self.shared, self.round_length
        r = after + (shared[key[0]].depth + key[1]) - (shared[before[0]].depth + before[1])
        if round_length > 0:
            # a piece listed before its batch has arrived makes its link wait, round after round
            # (the round plan's order at 16 MB on ring:8: 193 us against 149 us)
            ready = after * round_length + self.last[before]
            r = max(r, math.ceil((ready - self.first[key]) / round_length))
            while r * round_length + self.first[key] < ready:  # float rounding in the division
                r += 1
        return r

    def _clear_of_visits(self, e: int, edge: SharedEdge, h: int, r: int, mine: list[list]) -> tuple[int, float, float]:
        """The first round from ``r`` on in which hop ``h`` into a switch, and the hop out of it, meet
        no other visit of the edge's groups to that switch: the round and the visit's begin and end."""
        round_length, first, last = self.round_length, self.first, self.last
        switch = edge.hops[h][1]
        taken = [self.visits[(g, switch)] for g in edge.members]
        while True:
            begin = r * round_length + first[(e, h)]
            end = self.earliest((e, h + 1), (e, h), r) * round_length + last[(e, h + 1)]
            clash = max((b for held in taken for a, b in held if a < end and begin < b), default=None)
            clash = max((b for w, a, b in mine if w == switch and a < end and begin < b), default=clash)
            if clash is None:
                return r, begin, end
            r = max(r + 1, math.ceil((clash - first[(e, h)]) / round_length))

    def place(self, e: int, edge: SharedEdge, start: int) -> tuple[list[int], list[list]] | None:
        """The rounds of an edge's hops from ``start`` on, and its visits [switch, begin, end]; None
        when a hop delayed by its own switch would keep the visit before it, to the switch it
        leaves, in that switch into another visit's time (the edge then has to start later)."""
        placed: list[int] = []
        mine: list[list] = []
        previous = None  # this edge's visit that hop h leaves
        for h in range(len(edge.hops)):
            r = start if h == 0 else self.earliest((e, h), (e, h - 1), placed[-1])
            switch = edge.hops[h][1]
            into = self.apart and self.topology.is_switch(switch)  # a path goes on from a switch: hop h + 1 leaves it
            if into:
                r, begin, end = self._clear_of_visits(e, edge, h, r, mine)
            if previous is not None:  # the visit before lasts until this hop has arrived
                w, a0, b0 = previous
                held_until = r * self.round_length + self.last[(e, h)]
                if held_until > b0:
                    if any(a < held_until and a0 < b for g in edge.members for a, b in self.visits[(g, w)]):
                        return None
                    previous[2] = held_until
            previous = None
            if into:
                previous = [switch, begin, end]
                mine.append(previous)
            placed.append(r)
        return placed, mine


def plan_times(topology: Topology, shared: list[SharedEdge], slot: dict, chunk_bytes: float, pieces: int) -> Plan:
    """The timeline of the module docstring, timed by the simulator's segment rules.

    A piece holds its links for its serialisation (overhead included) and arrives alpha later; a
    route cut at an NPU into several segments (not made by this schedule, whose hops are links or
    cut-through paths) is held whole. Every hop is at least one round behind the one before it, so
    listing by round keeps deps first.
    """
    round_length, offsets, arrive = _one_round(topology, shared, slot, chunk_bytes)
    first = {key: min(offsets[(*key, p)] for p in range(len(split))) for key, split in slot.items()}
    last = {key: max(arrive[(*key, p)] for p in range(len(split))) for key, split in slot.items()}
    placer = _RoundPlacer(topology, shared, round_length, first, last)
    rounds: dict[tuple[int, int], int] = {}
    makespan = 0.0
    for e, edge in enumerate(shared):
        if edge.parent is not None:
            parent = (edge.parent, len(shared[edge.parent].hops) - 1)
            start = placer.earliest((e, 0), parent, rounds[parent])
        else:
            start = edge.depth
        placed = placer.place(e, edge, start)
        while placed is None:  # a later start moves every visit of the edge past the one it met
            start += 1
            placed = placer.place(e, edge, start)
        for h, r in enumerate(placed[0]):
            rounds[(e, h)] = r
            makespan = max(makespan, (pieces - 1 + r) * round_length + last[(e, h)])
        for switch, begin, end in placed[1]:
            for g in edge.members:
                placer.visits[(g, switch)].append((begin, end))
    return Plan(round_length, rounds, offsets, makespan)


def switch_visit_clashes(topology: Topology, shared: list[SharedEdge]) -> int:
    """Pairs of visits of one group's chunk to one switch less than two rounds apart in the round
    plan (0 after ``stagger.stagger_switch_visits``)."""
    rounds: dict[tuple[int, int], list[int]] = defaultdict(list)
    for edge in shared:
        for h, (_, dst) in enumerate(edge.hops):
            if topology.is_switch(dst):
                for g in edge.members:
                    rounds[(g, dst)].append(edge.depth + h)
    clashes = 0
    for visits in rounds.values():
        visits.sort()
        clashes += sum(1 for a, b in zip(visits, visits[1:]) if b - a < 2)
    return clashes


def _timing(topology: Topology, shared: list[SharedEdge], chunk_bytes: float) -> dict:
    """tau (the busiest link's seconds per batch), H and alpha_max (the largest alpha sum of a hop)."""
    busy = [0.0] * len(topology.links)
    alpha_max = 0.0
    for edge in shared:
        for src, dst in edge.hops:
            route = topology.route(src, dst)
            links = [topology.link_index(a, b) for a, b in zip(route, route[1:])]
            bandwidth = min(topology.links[l].bandwidth for l in links)
            alpha_max = max(alpha_max, sum(topology.links[l].alpha for l in links))
            for l in links:
                busy[l] += edge.width * chunk_bytes / bandwidth
    height = pipeline_height(shared)
    tau = max(busy) if busy else 0.0
    return {"tau": tau, "H": height, "alpha_max": alpha_max}
