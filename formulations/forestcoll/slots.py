"""The order of a round's transfers: a start slot per (shared edge, hop) so that transfers sharing a
link do not overlap (``round_slots``), and the round's stretch over its busiest link's load. The
edges are ``schedule.SharedEdge`` objects (``hops``, ``width``); ``schedule`` imports this module.

``schedule`` lists each round's transfers by these slots; ``build_forest`` weighs forests by the
stretch. Small rounds are placed earliest-fit (``_place``, a bitmask per link); a round of more than
``LARGE_ROUND`` items (a 512-GPU forest has some 300,000) is appended item by item after the last
use of each of its links (``_append``), which is linear and leaves gaps only where routes cross.
"""

from __future__ import annotations

import math
import random

from workbench.kit.maxflow import integer_capacities
from workbench.topology import Topology


__all__ = ["slot_order", "round_slots", "loose_links", "LARGE_ROUND"]

_SHUFFLES = 6
_MAX_SLOTS = 200_000  # summed item durations per round, to keep the bitmask placement fast
LARGE_ROUND = 100_000  # items from which a round is appended rather than placed earliest-fit
LOOSE_SHARE = 0.9  # a link is loose below this share of the busiest link's time per round


def loose_links(topology: Topology, shared: list) -> frozenset[int]:
    """The links whose time per round (their hops' widths over their bandwidth, for a forest sent hop
    by hop) stays below ``LOOSE_SHARE`` of the busiest link's: a cut-through transfer holds all its
    links at once, which costs nothing where they have time to spare, and couples the busiest
    links' orders (stalls) where they have none."""
    load: dict[int, float] = {}
    for edge in shared:
        for src, dst in edge.hops:
            index = topology.link_index(src, dst)
            load[index] = load.get(index, 0.0) + edge.width / topology.links[index].bandwidth
    busiest = max(load.values(), default=0.0)
    return frozenset(i for i, value in load.items() if value < LOOSE_SHARE * busiest)


def slot_order(topology: Topology, shared: list) -> dict:
    """The pieces ``[(slot, chunks), ...]`` per (shared edge, hop) of ``round_slots``."""
    return round_slots(topology, shared)[0]


def round_slots(topology: Topology, shared: list) -> tuple[dict, float]:
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
    for e, edge in enumerate(shared):
        for h, (src, dst) in enumerate(edge.hops):
            route = topology.route(src, dst)
            links = [topology.link_index(a, b) for a, b in zip(route, route[1:])]
            routes.append((edge.width, (e, h), links, min(int(capacity[l]) for l in links)))
    # time in slots: a message of w chunks holds its links for w / c_min (c_min: its slowest link in
    # capacity units); scale by the lcm of the c_min values so that durations are integers, coarser
    # when that would make a round too many slots long
    scale = 1
    for *_, c_min in routes:
        scale = math.lcm(scale, c_min)
    longest = max((w * scale // c for w, _, _, c in routes), default=1)
    total = sum(w * scale // c for w, _, _, c in routes) or 1
    large = len(routes) > LARGE_ROUND  # appended, not placed in a bitmask: exact durations
    if total > _MAX_SLOTS and not large:
        scale_factor = _MAX_SLOTS / total
    else:
        scale_factor = 1.0
    items = []
    load: dict[int, int] = {}
    ideal: dict[int, float] = {}  # per link, the slots its tree-units need at its own speed
    for w, key, links, c_min in routes:
        duration = max(1, math.ceil(w * scale / c_min * scale_factor - 1e-9))
        items.append((duration, key, links, w))
        for l in links:
            load[l] = load.get(l, 0) + duration
            ideal[l] = ideal.get(l, 0.0) + w * scale / int(capacity[l]) * scale_factor
    del longest
    # a few priority orders (open-shop style: busiest links first, then long routes and wide
    # items), plus seeded shuffles of the first; the placement with the shortest round wins
    bottleneck = [max(load[l] for l in links) for _, _, links, _ in items]
    bound = max(load.values(), default=0)
    base = sorted(range(len(items)), key=lambda i: (-bottleneck[i], -len(items[i][2]), -items[i][0], items[i][1]))
    if large:  # earliest-fit would take minutes: each item after its links' last use, in the order
        # of the hop's id difference: on a fabric of translated trees, the hops of one difference
        # (say GPU i to GPU i + 1 of every box) share no link, so they run side by side
        nodes = topology.num_nodes
        difference = [(dst - src) % nodes for edge in shared for src, dst in edge.hops]
        slot, length = _append(items, sorted(range(len(items)), key=lambda i: (difference[i], -items[i][0],
                                                                                items[i][1])))
        return slot, length / max(max(ideal.values(), default=1.0), 1e-9)
    if all(len(links) == 1 for _, _, links, _ in items):
        # every transfer holds one link: placing them back to back per link (in the first order)
        # fills each link without a gap, which is what the earliest-fit placement would find
        return _stack(items, base), bound / max(max(ideal.values(), default=1.0), 1e-9)

    def orders():
        yield base
        yield sorted(range(len(items)), key=lambda i: (-len(items[i][2]), -items[i][0], items[i][1]))
        rng = random.Random(0)
        for _ in range(_SHUFFLES):
            keys = {i: (-bottleneck[i], rng.random()) for i in range(len(items))}
            yield sorted(range(len(items)), key=keys.__getitem__)

    best: tuple[int, dict] | None = None
    for order in orders():
        makespan, slot = _place(items, order, bound)
        if best is None or makespan < best[0]:
            best = (makespan, slot)
        if makespan == bound:
            break  # every link busy all round: cannot do better
    if best is None:
        return {}, 1.0
    return best[1], best[0] / max(max(ideal.values(), default=1.0), 1e-9)


def _stack(items: list, order: list[int]) -> dict:
    """Single-link items in ``order``, each starting where the previous one on its link ended."""
    end: dict[int, int] = {}
    slot: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for i in order:
        duration, key, (link,), chunks = items[i]
        start = end.get(link, 0)
        slot[key] = [(start, chunks)]
        end[link] = start + duration
    return slot


def _place(items: list, order: list[int], bound: int) -> tuple[int, dict]:
    """Earliest-fit placement of items in ``order``; returns (round length in slots, pieces per item).

    An item is one message when a contiguous window ending by ``bound`` (the busiest link's load)
    is free on all its links; otherwise, if it is cheaper, its chunks are split over the earliest
    free gaps (several messages with one chunk subset each, like preemption in an open shop).
    """
    busy: dict[int, int] = {}  # link -> bitmask of occupied slots
    slot: dict[tuple[int, int], list[tuple[int, int]]] = {}
    makespan = 0
    for i in order:
        duration, key, links, chunks = items[i]
        occupied = 0
        for l in links:
            occupied |= busy.get(l, 0)
        window = (1 << duration) - 1
        start = 0
        while (occupied >> start) & window:
            start += 1
        placed = [(start, chunks)]
        marks = [(start, duration)]
        end = start + duration
        if chunks > 1 and end > bound:
            unit = duration / chunks
            gaps, left, s, taken, last = [], chunks, 0, occupied, 0
            while left and s < end:
                rest = ~taken >> s
                s += (rest & -rest).bit_length() - 1  # next free slot
                blocked = taken >> s
                run = (blocked & -blocked).bit_length() - 1 if blocked else end - s
                n = min(left, int(run / unit + 1e-9))
                if n >= 1:
                    length = max(1, math.ceil(n * unit - 1e-9))
                    gaps.append((s, n, length))
                    taken |= ((1 << length) - 1) << s
                    left -= n
                    last = s + length
                s += max(run, 1)
            if not left and last < end:
                placed = [(g, n) for g, n, _ in gaps]
                marks = [(g, length) for g, _, length in gaps]
                end = last
        for first, length in marks:
            for l in links:
                busy[l] = busy.get(l, 0) | (((1 << length) - 1) << first)
        slot[key] = placed
        makespan = max(makespan, end)
    return makespan, slot


def _append(items: list, order: list[int]) -> tuple[dict, int]:
    """Items in ``order``, each starting when the last of its links is free; the slots and the
    round's length."""
    end: dict[int, int] = {}
    slot: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for i in order:
        duration, key, links, chunks = items[i]
        start = max(end.get(l, 0) for l in links)
        slot[key] = [(start, chunks)]
        for l in links:
            end[l] = start + duration
    return slot, max(end.values(), default=1)
