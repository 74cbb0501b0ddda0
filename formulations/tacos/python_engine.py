"""TACOS matching in plain Python: Python-int bitsets over chunks (note 2.4).

The reference loop; ``compiled_engine`` is the same loop compiled and must stay in step with it
(every random draw in the same order). State, per NPU ``v``:

* ``held[v]`` / ``need[v]``: precond / postcond bitsets (``need`` keeps chunks still in flight to
  ``v``, as in the released code, so where links differ in cost a second copy can be sent; its
  arrival is a duplicate);
* ``arrival[v][c]``: the index of the event at which ``c`` reached ``v`` (-1 if ``v`` started
  with it); events are numbered in the order they happen (several share a time only where a link
  costs nothing), so comparing indices orders arrivals. Kept only for causal replacement where
  links differ in cost: elsewhere no chunk can arrive twice (``matching.DUPLICATE_ON_ONE_COST``);
* ``offer[e]``: what link ``e`` can carry, ``held[src] & need[dst]``, kept up to date at every
  delivery on fabrics of one link cost (the receiver's out-links may now offer the chunk, its
  in-links no longer do).

A match draws each chunk uniformly from the union of its free in-links' offers (minus the chunks
already drawn in this match), as the paper's greedy does. Where links differ in cost, the union is
formed and a bit drawn from it (``_match_union``). On fabrics of one link cost (meshes, tori,
rings, hypercubes), where every rank is matched at every event, the draw does not form the union:
a link is chosen with weight its offer count, then a chunk of that link's offer, uniformly; the draw
is kept only if no link earlier in the match's list offers the chunk too, and the chunk is not
already drawn. Each chunk of the union is so kept with probability 1/total, whichever links offer
it, so the kept draw is uniform over the union; the expected number of tries is the offers' total
over the union's size, at most the number of links. The compiled engine so never reads a chunk
row whole while matching there (``compiled_offers``); where links differ in cost it reads a few
words of each row (``compiled_fronts``), which stays cheaper than keeping offer rows up to date.
Both draws give every chunk of the union the same chance; they use the random stream differently.
"""

from __future__ import annotations

import heapq
import random
import time

from workbench.util.lazy import lazy_module

from formulations.tacos.matching import (DUPLICATE_ON_ONE_COST, TIE, Fabric, MatchResult, OutOfTime,
                                         empty_matches, end_time, unreachable)

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)


def random_bit(x: int, rng: random.Random) -> int:
    """A uniformly random set bit of ``x`` (non-zero)."""
    count = x.bit_count()
    if count == 1:
        return x.bit_length() - 1
    length = x.bit_length()
    if count * 8 >= length:  # dense: rejection sampling, at most ~8 tries on average
        draw = rng.random
        while True:
            position = int(draw() * length)
            if (x >> position) & 1:
                return position
    return nth_bit(x, int(rng.random() * count))  # sparse: the target-th set bit, lowest first


def nth_bit(x: int, target: int) -> int:
    """The ``target``-th set bit of ``x``, lowest first (0 <= target < x.bit_count())."""
    if target < 24:
        for _ in range(target):
            x &= x - 1
        return (x & -x).bit_length() - 1
    bits = np.unpackbits(np.frombuffer(x.to_bytes((x.bit_length() + 7) // 8, "little"), dtype=np.uint8),
                         bitorder="little")
    return int(np.flatnonzero(bits)[target])


def bit_positions(x: int) -> list[int]:
    """The positions of the set bits of ``x``, lowest first."""
    positions = []
    while x:
        low = x & -x
        positions.append(low.bit_length() - 1)
        x ^= low
    return positions


class _Engine:
    def __init__(self, fabric: Fabric, rng: random.Random, replacement: str, deadline: float) -> None:
        self.fabric = fabric
        self.rng = rng
        self.replacement = replacement
        self.deadline = deadline
        n = fabric.num_npus
        self.held = [0] * n
        self.need = [0] * n
        self.by_offers = len(set(fabric.cost)) == 1  # see the module docstring
        # read only by causal replacement, and only where a duplicate can arrive
        self.arrival = (np.full((n, fabric.num_chunks), np.iinfo(np.int64).max, dtype=np.int64)
                        if replacement == "causal" and not self.by_offers else None)
        for chunk, holders in enumerate(fabric.pre):
            for v in holders:
                self.held[v] |= 1 << chunk
                if self.arrival is not None:
                    self.arrival[v, chunk] = -1
        for chunk, needers in enumerate(fabric.post):
            for v in needers:
                if v not in fabric.pre[chunk]:
                    self.need[v] |= 1 << chunk
        self.offer = [self.held[u] & self.need[v] for u, v in zip(fabric.src, fabric.dst)] if self.by_offers else []
        self.out_links: list[list[int]] = [[] for _ in range(n)]
        for e, u in enumerate(fabric.src):
            self.out_links[u].append(e)

    def run(self, record: bool) -> MatchResult:
        fabric = self.fabric
        src, dst, out_nodes = fabric.src, fabric.dst, fabric.out_nodes
        inflight: list[tuple[int, float, int] | None] = [None] * len(src)
        busy = [False] * len(src)
        ending: dict[float, list[int]] = {}
        heap = [0.0]
        matches: list[tuple[int, int, int, float, float]] = []
        dirty = set(range(fabric.num_npus))
        claimed = 0.0
        deliveries = wasted = events = 0
        held, need, arrival = self.held, self.need, self.arrival
        while heap:
            t = heapq.heappop(heap)
            event = events
            events += 1
            if events % 64 == 0 and time.perf_counter() > self.deadline:
                raise OutOfTime(deliveries, self.fabric.deliveries)
            eventful = False
            for e in sorted(ending.pop(t, ())):  # retire in (src, dst) order, as the reference
                u, v = src[e], dst[e]
                chunk, started, started_event = inflight[e]
                inflight[e] = None
                busy[e] = False
                dirty.add(v)
                if (held[v] >> chunk) & 1:
                    if self.by_offers:
                        raise RuntimeError(DUPLICATE_ON_ONE_COST)
                    chunk = self._replacement(u, v, started_event)
                    if chunk < 0:
                        wasted += 1
                        continue
                bit = 1 << chunk
                held[v] |= bit
                need[v] &= ~bit
                if self.by_offers:
                    self._offers_after(v, bit)
                if arrival is not None:
                    arrival[v, chunk] = event
                deliveries += 1
                if record:
                    matches.append((u, v, chunk, started, t))
                eventful = True
                dirty.update(out_nodes[v])
            if eventful:
                claimed = t
            for v in sorted(dirty):
                if need[v]:
                    self._match(v, t, event, busy, inflight, ending, heap)
            dirty = set()
        if any(need):
            v = next(i for i, bits in enumerate(need) if bits)
            raise unreachable(v, bit_positions(need[v])[0])
        columns = empty_matches()
        if matches:
            u, v, c, s, e = zip(*matches)
            columns = {"src": np.array(u, np.int64), "dst": np.array(v, np.int64), "chunk": np.array(c, np.int64),
                       "started": np.array(s, np.float64), "ended": np.array(e, np.float64)}
        return MatchResult(claimed, **columns, deliveries=deliveries, wasted=wasted, events=events, engine="python")

    def _offers_after(self, v: int, bit: int) -> None:
        """v has just received the chunk ``bit``: its out-links offer it to ranks that need it, its
        in-links no longer offer it."""
        offer, need, dst = self.offer, self.need, self.fabric.dst
        for f in self.out_links[v]:
            if need[dst[f]] & bit:
                offer[f] |= bit
        for f in self.fabric.in_links[v]:
            if offer[f] & bit:
                offer[f] ^= bit

    def _replacement(self, u: int, v: int, started_event: int) -> int:
        """A chunk to relabel a redundant arrival with, or -1 to drop it (note 2.3, A5)."""
        if self.replacement == "off":
            return -1
        candidates = self.need[v] & self.held[u]
        if not candidates:
            return -1
        if self.replacement == "causal":
            arrived = self.arrival[u]
            positions = [c for c in bit_positions(candidates) if arrived[c] <= started_event]
            if not positions:
                return -1
            return positions[self.rng.randrange(len(positions))]
        return random_bit(candidates, self.rng)

    def _match(self, v: int, t: float, event: int, busy, inflight, ending, heap) -> None:
        """Greedy matching of destination v's free in-links at time t (Alg. 1 restricted to v)."""
        if not self.by_offers:
            return self._match_union(v, t, event, busy, inflight, ending, heap)
        offer = self.offer
        active = [e for e in self.fabric.in_links[v] if not busy[e] and offer[e]]
        picked: list[int] = []
        while active:
            chunk = self._draw(active, picked)
            picked.append(chunk)
            e = self._send([x for x in active if (offer[x] >> chunk) & 1], chunk, t, event, busy, inflight, ending,
                           heap)
            active = [x for x in active
                      if x != e and offer[x].bit_count() > sum((offer[x] >> c) & 1 for c in picked)]

    def _send(self, holders: list[int], chunk: int, t: float, event: int, busy, inflight, ending, heap) -> int:
        """Send ``chunk`` over the cheapest of the free links ``holders`` offering it (random among
        ties, note 2.4) from time t; returns the link."""
        cost = self.fabric.cost
        if len(holders) == 1:
            e = holders[0]
        else:
            best = min(cost[x] for x in holders)
            ties = [x for x in holders if cost[x] <= best + TIE]
            e = ties[int(self.rng.random() * len(ties))] if len(ties) > 1 else ties[0]
        busy[e] = True
        inflight[e] = (chunk, t, event)
        end = end_time(t, cost[e])
        slot = ending.get(end)
        if slot is None:
            ending[end] = [e]
            heapq.heappush(heap, end)
        else:
            slot.append(e)
        return e

    def _draw(self, active: list[int], picked: list[int]) -> int:
        """A chunk drawn uniformly from the union of ``active``'s offers minus ``picked`` (non-empty):
        see the module docstring."""
        offer, rng = self.offer, self.rng
        counts = [offer[e].bit_count() for e in active]
        total = sum(counts)
        while True:
            target = int(rng.random() * total)
            i = 0
            while target >= counts[i]:
                target -= counts[i]
                i += 1
            chunk = nth_bit(offer[active[i]], target)
            if chunk not in picked and not any((offer[e] >> chunk) & 1 for e in active[:i]):
                return chunk


    def _match_union(self, v: int, t: float, event: int, busy, inflight, ending, heap) -> None:
        """``_match`` where links differ in cost: the union of the free in-links' offers is formed, and a
        chunk drawn from it with ``random_bit``."""
        fabric = self.fabric
        need_v = self.need[v]
        held, src = self.held, fabric.src
        carry = {}
        for e in fabric.in_links[v]:
            if not busy[e]:
                bits = held[src[e]] & need_v
                if bits:
                    carry[e] = bits
        if not carry:
            return
        rng = self.rng
        active = list(carry)
        picked = 0
        while active:
            union = 0
            for e in active:
                union |= carry[e]
            union &= ~picked
            if not union:
                return
            chunk = random_bit(union, rng)
            picked |= 1 << chunk
            holders = active if len(active) == 1 else [x for x in active if (carry[x] >> chunk) & 1]
            e = self._send(holders, chunk, t, event, busy, inflight, ending, heap)
            active = [x for x in active if x != e and carry[x] & ~picked]


def run_python(fabric: Fabric, rng: random.Random, replacement: str, deadline: float, record: bool) -> MatchResult:
    """One greedy matching of ``fabric`` by the reference loop; ``OutOfTime`` past ``deadline`` (a
    ``time.perf_counter`` time)."""
    return _Engine(fabric, rng, replacement, deadline).run(record)
