"""Trees to a pipelined workbench schedule (spec forestcoll 4).

* Data split: root u has ``k * P`` chunks (``P`` pieces per tree-unit). Its path groups, in order,
  own consecutive slices of the ``k`` tree-units; group g (multiplicity ``C_g``, offset ``o_g``)
  carries, in batch ``b``, chunk indices ``j = b * k + o_g + i`` (``i < C_g``), i.e. chunk ``j * N + u``
  of an All-Gather (chunk ``j`` of a broadcast). One transfer per (group, edge, batch, hop) carries
  the batch's ``C_g`` chunks as one message.
* Rounds: batch b crosses hop h of a tree edge of depth d (in transfers from the root; the root's
  edges: 0) in round ``b + d + h``, so a transfer waits only for one of the previous round.
* Paths: a logical edge whose physical path is the simulator's route ``topology.route(x, y)`` is one
  ``x -> y`` transfer (cut-through through its switches, ForestColl's model). Otherwise it is sent hop
  by hop with the switches as endpoints, each hop waiting for the previous one. A switch never
  multicasts: two children reached through one switch are two sends on the uplink, as budgeted.
* File order: (round, slot of ``slot_order``, group, edge, hop). Deps name the transfer that brought the batch to the
  edge's tail (or the previous hop), always earlier in that order.
* Claimed time: ``(P + H - 1) * tau + H * alpha_max`` with ``tau`` the longest per-round occupation
  of any link, ``H`` the most transfers on a root-to-leaf chain, ``alpha_max`` the largest alpha sum
  of one transfer's route (spec 4.4: loose, since the simulator does not wait for round boundaries).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from workbench.algorithm import Algorithm, Transfer
from workbench.collective import make_collective
from workbench.maxflow import integer_capacities
from workbench.topology import Topology

from .mapping import PathGroup

_SHUFFLES = 6
_MAX_SLOTS = 200_000  # summed item durations per round, to keep the bitmask placement fast

__all__ = ["EdgePlan", "plan_edges", "emit_schedule", "transfers_per_batch", "slot_order"]


@dataclass
class EdgePlan:
    """One tree edge of a group: its level, the edge that feeds its tail, and its transfer hops.

    ``depth`` counts transfers, not tree edges: the root's edges start at 0 and an edge sent as ``h``
    hops gives its head's edges depth + h, so every dependency spans exactly one round.
    """

    depth: int
    parent: int | None  # index of the edge into the tail (None at the root)
    hops: list[tuple[int, int]]


def plan_edges(topology: Topology, group: PathGroup) -> list[EdgePlan]:
    """Depths, parents and hops of a group's edges (edges are in BFS order: parents come first)."""
    depth = {group.root: 0}
    feeder: dict[int, int] = {}
    plans = []
    for index, ((x, y), path) in enumerate(zip(group.edges, group.paths)):
        if topology.route(x, y) == path:
            hops = [(x, y)]
        else:
            hops = list(zip(path, path[1:]))
        plans.append(EdgePlan(depth[x], feeder.get(x), hops))
        depth[y] = depth[x] + len(hops)
        feeder[y] = index
    return plans


def transfers_per_batch(plans: list[list[EdgePlan]]) -> int:
    return sum(len(p.hops) for group in plans for p in group)


def emit_schedule(topology: Topology, kind: str, num_ranks: int, k: int, pieces: int, groups: list[PathGroup],
                  plans: list[list[EdgePlan]], chunk_bytes: float, root: int | None = None,
                  slots: dict | None = None) -> tuple[Algorithm, dict]:
    """The schedule of the module docstring and its timing facts (tau, H, alpha_max, claimed_time)."""
    offsets: list[int] = []
    used: dict[int, int] = {}
    for group in groups:
        offsets.append(used.get(group.root, 0))
        used[group.root] = used.get(group.root, 0) + group.multiplicity

    def chunk_ids(g: int, batch: int) -> tuple[int, ...]:
        group = groups[g]
        base = batch * k + offsets[g]
        if kind == "broadcast":
            return tuple(range(base, base + group.multiplicity))
        return tuple((base + i) * num_ranks + group.root for i in range(group.multiplicity))

    slot = slots if slots is not None else slot_order(topology, groups, plans)
    entries = []
    for g, group_plans in enumerate(plans):
        for e, plan in enumerate(group_plans):
            for h in range(len(plan.hops)):
                position = slot[(g, e, h)]
                for b in range(pieces):
                    entries.append((b + plan.depth + h, position, g, e, h, b))
    entries.sort()
    ids: dict[tuple[int, int, int, int], int] = {}
    transfers: list[Transfer] = []
    for tid, (_, _, g, e, h, b) in enumerate(entries):
        plan = plans[g][e]
        src, dst = plan.hops[h]
        if h > 0:
            deps: tuple[int, ...] = (ids[(g, e, h - 1, b)],)
        elif plan.parent is not None:
            parent = plans[g][plan.parent]
            deps = (ids[(g, plan.parent, len(parent.hops) - 1, b)],)
        else:
            deps = ()
        ids[(g, e, h, b)] = tid
        transfers.append(Transfer(tid, chunk_ids(g, b), src, dst, "copy", deps))
    collective = make_collective(kind, num_ranks, k * pieces, root)
    timing = _timing(topology, groups, plans, chunk_bytes, pieces)
    return Algorithm(topology, collective, chunk_bytes, transfers, {}), timing


def slot_order(topology: Topology, groups: list[PathGroup], plans: list[list[EdgePlan]]) -> dict:
    """The slot per (group, edge, hop) of ``round_slots``."""
    return round_slots(topology, groups, plans)[0]


def round_slots(topology: Topology, groups: list[PathGroup], plans: list[list[EdgePlan]]) -> tuple[dict, float]:
    """A start slot per (group, edge, hop) inside a round, so that transfers sharing a link do not overlap.

    A cut-through transfer holds every link of its route at once, and the in-order simulator starts
    segments on each link in file order; listing a round's transfers in arbitrary order then leaves
    links idle while a transfer waits for its other links (up to 2x on a single switch). Each item
    of a steady-state round (every group, edge and hop) occupies its links for ``multiplicity``
    slots; items are placed greedily at the earliest slot where all their links are free (longest
    routes and largest groups first), and the file order lists a round's transfers by slot. Rounds
    during pipeline fill and drain hold subsets of these items, so the order stays conflict-free.
    """
    capacity = integer_capacities([l.bandwidth for l in topology.links]).values
    routes = []
    for g, (group, group_plans) in enumerate(zip(groups, plans)):
        for e, plan in enumerate(group_plans):
            for h, (src, dst) in enumerate(plan.hops):
                route = topology.route(src, dst)
                links = [topology.link_index(a, b) for a, b in zip(route, route[1:])]
                routes.append((group.multiplicity, (g, e, h), links, min(int(capacity[l]) for l in links)))
    # time in slots: a message of w chunks holds its links for w / c_min (c_min: its slowest link in
    # capacity units); scale by the lcm of the c_min values so that durations are integers, coarser
    # when that would make a round too many slots long
    scale = 1
    for *_, c_min in routes:
        scale = math.lcm(scale, c_min)
    longest = max((w * scale // c for w, _, _, c in routes), default=1)
    total = sum(w * scale // c for w, _, _, c in routes) or 1
    if total > _MAX_SLOTS:
        scale_factor = _MAX_SLOTS / total
    else:
        scale_factor = 1.0
    items = []
    load: dict[int, int] = {}
    for w, key, links, c_min in routes:
        duration = max(1, math.ceil(w * scale / c_min * scale_factor - 1e-9))
        items.append((duration, key, links))
        for l in links:
            load[l] = load.get(l, 0) + duration
    del longest
    # a few priority orders (open-shop style: busiest links first, then long routes and wide
    # items), plus seeded shuffles of the first; the placement with the shortest round wins
    bottleneck = [max(load[l] for l in links) for _, _, links in items]
    base = sorted(range(len(items)), key=lambda i: (-bottleneck[i], -len(items[i][2]), -items[i][0], items[i][1]))
    orders = [base, sorted(range(len(items)), key=lambda i: (-len(items[i][2]), -items[i][0], items[i][1]))]
    rng = random.Random(0)
    for _ in range(_SHUFFLES):
        keys = {i: (-bottleneck[i], rng.random()) for i in range(len(items))}
        orders.append(sorted(range(len(items)), key=keys.__getitem__))
    best: tuple[int, dict] | None = None
    for order in orders:
        makespan, slot = _place(items, order)
        if best is None or makespan < best[0]:
            best = (makespan, slot)
        if makespan == max(load.values(), default=0):
            break  # every link busy all round: cannot do better
    if best is None:
        return {}, 1.0
    return best[1], best[0] / max(max(load.values(), default=1), 1)


def _place(items: list, order: list[int]) -> tuple[int, dict]:
    """Earliest-fit placement of items in ``order``; returns (round length in slots, slot per item)."""
    busy: dict[int, int] = {}  # link -> bitmask of occupied slots
    slot: dict[tuple[int, int, int], int] = {}
    makespan = 0
    for i in order:
        width, key, links = items[i]
        occupied = 0
        for l in links:
            occupied |= busy.get(l, 0)
        window = (1 << width) - 1
        start = 0
        while (occupied >> start) & window:
            start += 1
        for l in links:
            busy[l] = busy.get(l, 0) | (window << start)
        slot[key] = start
        makespan = max(makespan, start + width)
    return makespan, slot


def _timing(topology: Topology, groups: list[PathGroup], plans: list[list[EdgePlan]], chunk_bytes: float,
            pieces: int) -> dict:
    busy = [0.0] * len(topology.links)
    alpha_max = 0.0
    height = 0
    for group, group_plans in zip(groups, plans):
        chain: list[int] = []
        for plan in group_plans:
            chain.append((chain[plan.parent] if plan.parent is not None else 0) + len(plan.hops))
            for src, dst in plan.hops:
                route = topology.route(src, dst)
                links = [topology.link_index(a, b) for a, b in zip(route, route[1:])]
                bandwidth = min(topology.links[l].bandwidth for l in links)
                alpha_max = max(alpha_max, sum(topology.links[l].alpha for l in links))
                for l in links:
                    busy[l] += group.multiplicity * chunk_bytes / bandwidth
        height = max([height] + chain)
    tau = max(busy) if busy else 0.0
    claimed = (pieces + height - 1) * tau + height * alpha_max
    return {"tau": tau, "H": height, "alpha_max": alpha_max, "claimed_time": claimed}
