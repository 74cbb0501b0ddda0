"""TACOS matching compiled with numba: ``python_engine``'s loop over word-array bitsets.

Every random draw happens in the same order as in ``python_engine`` and comes from the same
Mersenne Twister stream (CPython's own, in ``compiled_bits``). Both engines therefore give the
same schedule for the same seed; the tests hold them to it.

Chunk sets are rows of 64-bit words (``held[v]``, ``need[v]``). Ranks with no free in-link offering
anything are not matched.
Two ways of matching, as in ``python_engine``, each compiled into its own kernel:

* one link cost (meshes, tori, rings): every rank is matched at every event. Each link keeps the
  count of its offers, ``held[src] & need[dst]``, by groups of words, up to date at every
  delivery, by which its n-th chunk is found without reading the rows whole (``compiled_offers``),
  so a match costs about the same at 64 NPUs as at 40,000; the words a delivery will touch are
  prefetched a few deliveries ahead, since at that size they are random words of rows far larger
  than the caches. No chunk can arrive twice there, so no arrival times are kept (an N x chunks
  matrix, one more random store per delivery: 6.4 GB at 40,000 NPUs);
* several link costs (the 3D-RFS): links end at scattered times and few ranks have a free link
  with offers. Links keep one offer count each (no group counts), and rows are read over each
  rank's front words (``compiled_fronts``).

Links ending together are retired in link order from a calendar of buckets (``compiled_calendar``);
they and the ranks to match come out of ordered bit sets in increasing order (the reference's) without
sorting. The loop runs a bounded number of events per call, so the caller can watch the deadline.
The kernels run without numba's reference counting (``compiled_bits.KERNEL``).
"""

from __future__ import annotations

import random
import time

import numpy as np
from numba import njit

from formulations.tacos.compiled_bits import (INLINE, KERNEL, ONE, ZERO, has_bit, ordered_set, popcount,
                                              random_bit_within, random_float, randbelow, set_add, set_drain,
                                              trailing_zeros)
from formulations.tacos.compiled_calendar import (DELIVERIES, EVENTS, FREE, HEAP_SIZE, RECORD, SLOTS,
                                                 TOUCHED, WASTED, end_time_on_grid, heap_pop, schedule_end)
from formulations.tacos.compiled_fronts import and_row, front_words, initial_counts, prefetch_counts, update_counts
from formulations.tacos.compiled_offers import (GROUP_COUNT, group_count, initial_offers, nth_offer, prefetch_delivery,
                                                update_offers)
from formulations.tacos.compiled_rows import chunk_rows, csr
from formulations.tacos.matching import DUPLICATE_ON_ONE_COST, TIE, Fabric, MatchResult, OutOfTime, unreachable
from workbench.compiled.first_call import locked_first_call

_CAUSAL, _REFERENCE, _OFF = 0, 1, 2
_NEVER = np.iinfo(np.int32).max
_AHEAD = 8  # deliveries whose words are prefetched ahead of the one being made

# numba keeps the kernels' machine code between runs and checks only this file for changes, while
# the kernels inline the helpers of the other compiled_* files: this digest of them
# ties them to this one, so editing a helper (and updating the digest, as a test asks) recompiles.
HELPERS_DIGEST = "07a3002e649f8639"

# ---------------------------------------------------------------- matching
@njit(**INLINE)
def _send(v, chunk, t, event, holds, live, active, cost, rng, busy, offering, flight_chunk, flight_start,
          flight_event, calendar, counters):
    """python_engine._Engine._send: ``chunk`` over the cheapest of the links ``active[i]`` with
    ``holds[i]`` (random among ties); returns its index i."""
    pick = -1
    holders = 0
    best = np.inf
    for i in range(live):
        if holds[i]:
            holders += 1
            pick = i
            best = min(best, cost[active[i]])
    if holders > 1:
        ties = 0
        for i in range(live):
            if holds[i] and cost[active[i]] <= best + TIE:
                ties += 1
                pick = i
        if ties > 1:
            nth = np.int64(random_float(rng) * ties)
            for i in range(live):
                if holds[i] and cost[active[i]] <= best + TIE:
                    if nth == 0:
                        pick = i
                        break
                    nth -= 1
    e = active[pick]
    busy[e] = True
    offering[v] -= 1
    flight_chunk[e] = chunk
    flight_start[e] = t
    flight_event[e] = event
    schedule_end(e, end_time_on_grid(t, cost[e]), calendar, counters)
    return pick


@njit(**INLINE)
def _held_by_then(rows, r, first, last, u, started_event, arrival, positions, count):
    """Append to ``positions[count:]`` the chunks of ``rows[r]`` (words first..last) that u held when
    event ``started_event`` began (causal replacement); returns the new count."""
    for w in range(first, last + 1):
        word = rows[r, w]
        while word != ZERO:
            c = w * 64 + np.int64(trailing_zeros(word))
            word &= word - ONE
            if arrival[u, c] <= started_event:
                positions[count] = c
                count += 1
    return count


@njit(**INLINE)
def _draw(v, src, held, need, active, live, picked, npicked, offers, rng):
    """python_engine._Engine._draw: a chunk uniformly from the union of the live links' offers minus
    the picked chunks (non-empty)."""
    counts = offers[1]
    total = 0
    for i in range(live):
        total += counts[active[i]]
    while True:
        target = np.int64(random_float(rng) * total)
        i = 0
        while target >= counts[active[i]]:
            target -= counts[active[i]]
            i += 1
        chunk = nth_offer(src[active[i]], v, held, need, offers[0], active[i], target)
        kept = True
        for j in range(npicked):
            if picked[j] == chunk:
                kept = False
        for j in range(i):  # the chunk is in need[v]: link j offers it iff its sender holds it
            if has_bit(held, src[active[j]], chunk):
                kept = False
        if kept:
            return chunk


@njit(**INLINE)
def _match(v, t, event, src, cost, in_start, in_links, held, need, busy, flight_chunk, flight_start, flight_event,
           calendar, counters, active, left, holds, picked, rng, offers, offering):
    """python_engine._Engine._match; ``left[i]``: the chunks ``active[i]`` offers that are not picked."""
    counts = offers[1]
    live = 0
    for i in range(in_start[v], in_start[v + 1]):
        e = in_links[i]
        if not busy[e] and counts[e] > 0:
            active[live] = e
            left[live] = counts[e]
            live += 1
    npicked = 0
    while live > 0:
        chunk = _draw(v, src, held, need, active, live, picked, npicked, offers, rng)
        picked[npicked] = chunk
        npicked += 1
        for i in range(live):
            holds[i] = has_bit(held, src[active[i]], chunk)
        pick = _send(v, chunk, t, event, holds, live, active, cost, rng, busy, offering, flight_chunk, flight_start,
                     flight_event, calendar, counters)
        # keep, in order, the links other than the one used that still offer a chunk not yet picked
        kept = 0
        for i in range(live):
            if i == pick:
                continue
            remaining = left[i] - 1 if holds[i] else left[i]
            if remaining > 0:
                active[kept] = active[i]
                left[kept] = remaining
                kept += 1
        live = kept


# ---------------------------------------------------------------- matching where links differ in cost
@njit(**INLINE)
def _replacement_rows(u, v, started_event, mode, held, need, arrival, scratch, positions, rng, want, front):
    """python_engine._Engine._replacement where links differ in cost; ``want`` = |need[v] & held[u]| > 0
    and mode is not "off"."""
    front_size = front_words(v, need, front)
    count, first, last = and_row(held, u, need, v, scratch, 0, want, front, front_size)
    if count == 0:
        return -1
    if mode == _REFERENCE:
        return random_bit_within(scratch, 0, first, last, count, rng)
    count = _held_by_then(scratch, 0, first, last, u, started_event, arrival, positions, 0)
    return positions[randbelow(rng, count)] if count > 0 else -1


@njit(**INLINE)
def _draw_from_union(live, carry, carry_count, carry_span, union, rng):
    """A random chunk of the union of the ``live`` carried rows (of the one row itself when ``live`` is 1),
    read over the words their spans cover."""
    if live == 1:  # the union is the one row
        first, last = carry_span[0, 0], carry_span[0, 1]
        return random_bit_within(carry, 0, first, last, carry_count[0], rng)
    first, last = carry_span[0, 0], carry_span[0, 1]
    for i in range(1, live):
        first, last = min(first, carry_span[i, 0]), max(last, carry_span[i, 1])
    for w in range(first, last + 1):
        union[0, w] = ZERO
    for i in range(live):
        for w in range(carry_span[i, 0], carry_span[i, 1] + 1):
            union[0, w] |= carry[i, w]
    count = 0
    for w in range(first, last + 1):
        count += popcount(union[0, w])
    return random_bit_within(union, 0, first, last, count, rng)


@njit(**INLINE)
def _match_rows(v, t, event, src, cost, in_start, in_links, held, need, busy, flight_chunk, flight_start,
                flight_event, calendar, counters, carry, carry_count, carry_span, active, holds, union, rng, offers,
                offering, front):
    """python_engine._Engine._match_union, where links differ in cost; ``carry[i]`` is the chunk row
    of ``active[i]``, exact within the words ``carry_span[i]`` (the words outside hold stale data
    and are never read). Links without offers are skipped: their rows are empty."""
    front_size = front_words(v, need, front)
    live = 0
    for i in range(in_start[v], in_start[v + 1]):
        e = in_links[i]
        if busy[e] or offers[e] == 0:
            continue
        count, first, last = and_row(held, src[e], need, v, carry, live, offers[e], front,
                                      front_size)
        if count > 0:
            active[live] = e
            carry_count[live] = count
            carry_span[live, 0], carry_span[live, 1] = first, last
            live += 1
    while live > 0:
        chunk = _draw_from_union(live, carry, carry_count, carry_span, union, rng)
        word, mask = chunk >> 6, ONE << np.uint64(chunk & 63)
        for i in range(live):
            holds[i] = carry_span[i, 0] <= word <= carry_span[i, 1] and carry[i, word] & mask != ZERO
        pick = _send(v, chunk, t, event, holds, live, active, cost, rng, busy, offering, flight_chunk, flight_start,
                     flight_event, calendar, counters)
        # drop the chunk from every row, then the link just used and the rows left empty (in order)
        kept = 0
        for i in range(live):
            if holds[i]:
                carry[i, word] &= ~mask
                carry_count[i] -= 1
            if i == pick or carry_count[i] == 0:
                continue
            if kept != i:
                for w in range(carry_span[i, 0], carry_span[i, 1] + 1):  # a loop: numba copies overlapping slices
                    carry[kept, w] = carry[i, w]
                active[kept] = active[i]
                carry_count[kept] = carry_count[i]
                carry_span[kept, 0], carry_span[kept, 1] = carry_span[i, 0], carry_span[i, 1]
            kept += 1
        live = kept


# ---------------------------------------------------------------- the event loop
@njit(**INLINE)
def _pop_ending_buckets(heap, bucket_time, bucket_head, free_buckets, link_next, retiring, counters):
    """Pops every calendar bucket ending at the earliest time, its links into ``retiring``; that time."""
    bucket = heap_pop(heap, bucket_time, counters)
    t = bucket_time[bucket]
    while True:
        e = bucket_head[bucket]
        while e >= 0:
            set_add(retiring, e)
            e = link_next[e]
        free_buckets[counters[FREE]] = bucket
        counters[FREE] += 1
        if counters[HEAP_SIZE] == 0 or bucket_time[heap[0]] != t:
            break
        bucket = heap_pop(heap, bucket_time, counters)
    return t


@njit(**INLINE)
def _prefetch(by_offers, e, src, dst, in_start, in_links, out_link_start, held, need, flight_chunk, offers, front):
    """The words link ``e``'s delivery will touch, fetched ahead of it."""
    if by_offers:
        prefetch_delivery(e, src, dst, in_start, in_links, out_link_start, held, need, flight_chunk, offers[0])
    else:
        prefetch_counts(e, src, dst, in_start, in_links, out_link_start, held, need, flight_chunk, front[0])


@njit(**INLINE)
def _deliver(by_offers, e, t, event, mode, src, dst, in_start, in_links, out_link_start, held, need, offers,
             offering, arrival, busy, flight_chunk, flight_start, flight_event, counters, dirty, union, positions,
             rng, m_src, m_dst, m_chunk, m_start, m_end, front):
    """Link ``e`` ends at ``t``: its chunk (or, for a duplicate, a replacement) joins ``dst[e]``'s row, the
    offers follow, and ``dst[e]`` and its out-neighbours are marked for matching. False when wasted."""
    counts = offers[1]
    u, v, chunk = src[e], dst[e], flight_chunk[e]
    busy[e] = False
    if counts[e] > 0:
        offering[v] += 1
    set_add(dirty, v)  # matched at the end of this event (once, however many arrivals touch it)
    if has_bit(held, v, chunk):
        if by_offers:
            raise RuntimeError(DUPLICATE_ON_ONE_COST)
        if counts[e] == 0 or mode == _OFF:  # v needs nothing u holds: nothing to replace it with
            chunk = -1
        else:
            chunk = _replacement_rows(u, v, flight_event[e], mode, held, need, arrival, union, positions,
                                      rng, counts[e], front)
        if chunk < 0:
            counters[WASTED] += 1
            return False
    word, mask = chunk >> 6, ONE << np.uint64(chunk & 63)
    held[v, word] |= mask
    if by_offers:  # in any order: it reads the neighbours' rows only (no self-links)
        update_offers(v, word, mask, src, dst, in_start, in_links, out_link_start, held, need, busy, offers,
                      offering)
    else:  # before need[v] loses the chunk: it tells whether v's in-links offered it
        update_counts(v, word, mask, src, dst, in_start, in_links, out_link_start, held, need, busy, counts,
                      offering, front[0])
    need[v, word] &= ~mask
    if not by_offers and mode == _CAUSAL:  # no arrival times kept where no duplicate can arrive
        arrival[v, chunk] = event
    if counters[RECORD]:
        i = counters[DELIVERIES]
        m_src[i], m_dst[i], m_chunk[i], m_start[i], m_end[i] = u, v, chunk, flight_start[e], t
    counters[DELIVERIES] += 1
    for f in range(out_link_start[v], out_link_start[v + 1]):  # v's out-neighbours
        set_add(dirty, dst[f])
    return True


@njit(**INLINE)
def _match_marked(by_offers, marked, dirty_list, t, event, src, cost, in_start, in_links, held, need, busy,
                  flight_chunk, flight_start, flight_event, calendar, counters, active, left, holds, picked, carry,
                  carry_count, carry_span, union, rng, offers, offering, front):
    """Matches the ``marked`` ranks of ``dirty_list`` (in rank order) that an in-link offers something."""
    for j in range(marked):
        v = dirty_list[j]
        if offering[v] == 0:
            continue
        if by_offers:
            _match(v, t, event, src, cost, in_start, in_links, held, need, busy, flight_chunk, flight_start,
                   flight_event, calendar, counters, active, left, holds, picked, rng, offers, offering)
        else:
            _match_rows(v, t, event, src, cost, in_start, in_links, held, need, busy, flight_chunk,
                        flight_start, flight_event, calendar, counters, carry, carry_count, carry_span,
                        active, holds, union, rng, offers[1], offering, front)


def _event_kernel(by_offers: bool):
    """The event loop, compiled once per way of matching: ``by_offers`` (one link cost, offer counts by groups)
    or not (counts and fronts); being a constant of each kernel, the other way's code is left out."""

    @njit(**KERNEL)
    def _run_events(budget, mode, src, dst, cost, in_start, in_links, out_link_start, held, need, offers,
                    offering, arrival, busy, flight_chunk, flight_start, flight_event, calendar, counters, claimed,
                    dirty, dirty_list, retiring, retire, active, left, holds, picked, carry, carry_count, carry_span,
                    union, positions, rng, m_src, m_dst, m_chunk, m_start, m_end, front):
        """Up to ``budget`` events; returns True when no link is busy any more (the run is over).
        The scratch rows of both ways of matching are passed; one of them is used."""
        heap, bucket_time, bucket_head, free_buckets, link_next, cost_class, class_bucket, touched = calendar
        while counters[HEAP_SIZE] > 0 and budget > 0:
            budget -= 1
            t = _pop_ending_buckets(heap, bucket_time, bucket_head, free_buckets, link_next, retiring, counters)
            count = set_drain(retiring, retire)  # retire in (src, dst) order, as the reference
            event = counters[EVENTS]
            counters[EVENTS] += 1
            eventful = False
            for r in range(count + _AHEAD):  # each delivery's words prefetched _AHEAD deliveries before it
                if r < count:
                    _prefetch(by_offers, retire[r], src, dst, in_start, in_links, out_link_start, held, need,
                              flight_chunk, offers, front)
                if r < _AHEAD:
                    continue
                if _deliver(by_offers, retire[r - _AHEAD], t, event, mode, src, dst, in_start, in_links,
                            out_link_start, held, need, offers, offering, arrival, busy, flight_chunk, flight_start,
                            flight_event, counters, dirty, union, positions, rng, m_src, m_dst, m_chunk, m_start,
                            m_end, front):
                    eventful = True
            if eventful:
                claimed[0] = t
            marked = set_drain(dirty, dirty_list)  # in rank order, as the reference
            _match_marked(by_offers, marked, dirty_list, t, event, src, cost, in_start, in_links, held, need, busy,
                          flight_chunk, flight_start, flight_event, calendar, counters, active, left, holds, picked,
                          carry, carry_count, carry_span, union, rng, offers, offering, front)
            for i in range(counters[TOUCHED]):  # the next event opens new buckets
                class_bucket[touched[i]] = -1
            counters[TOUCHED] = 0
        return counters[HEAP_SIZE] == 0
    return _run_events


# each kernel's first call in a process holds its compile lock: two processes starting together on a
# fresh install compile it once (about 30 s of CPU), the other loads the cache (workbench.compiled.first_call)
_KERNELS = {by_offers: locked_first_call(_event_kernel(by_offers), f"tacos-events-{by_offers}", __file__)
            for by_offers in (True, False)}



def _arrival_events(held: np.ndarray, n: int, num_chunks: int, causal: bool) -> np.ndarray:
    """Each arrival's event index (-1: held from the start), N x chunks in int32 where ``causal``, else a
    placeholder: read only by causal replacement, and only where a duplicate can arrive."""
    arrival = np.full((n, num_chunks) if causal else (1, 1), _NEVER, dtype=np.int32)
    if causal:
        for start in range(0, n, 1024):  # rows in blocks: the unpacked bits are a byte per chunk
            bits = np.unpackbits(held[start:start + 1024].view(np.uint8), axis=1, bitorder="little")
            arrival[start:start + 1024][bits[:, :num_chunks].astype(bool)] = -1
    return arrival


def _check_finished(need: np.ndarray, counts: np.ndarray, num_chunks: int) -> None:
    """TopologyError naming the first chunk still needed; RuntimeError if offers remain with none needed."""
    pending = need.any(axis=1)
    if not pending.any() and counts.any():  # nothing is needed, so no link can offer anything
        raise RuntimeError("TACOS compiled engine: offer counts out of step with the chunk rows")
    if pending.any():
        v = int(np.flatnonzero(pending)[0])
        chunk = next(c for c in range(num_chunks) if (int(need[v, c >> 6]) >> (c & 63)) & 1)
        raise unreachable(v, chunk)


def run_compiled(fabric: Fabric, rng: random.Random, replacement: str, deadline: float,
                 record: bool) -> MatchResult:
    """One greedy matching of ``fabric`` by the numba kernels; ``OutOfTime`` past ``deadline`` (a
    ``time.perf_counter`` time), ``TopologyError`` when a needed chunk can never arrive."""
    n, num_chunks, num_links = fabric.num_npus, fabric.num_chunks, len(fabric.src)
    words = max(1, (num_chunks + 63) // 64)
    held = chunk_rows(fabric.pre, n, words)
    need = chunk_rows(fabric.post, n, words) & ~held
    by_offers = len(set(fabric.cost)) == 1  # see the module docstring
    # event index of each arrival (-1: held from the start); int32 keeps N x chunks affordable. Read
    # only by causal replacement, and only where a duplicate can arrive (matching.DUPLICATE_ON_ONE_COST)
    arrival = _arrival_events(held, n, num_chunks, replacement == "causal" and not by_offers)
    in_start, in_links = csr(fabric.in_links)
    max_in = max(1, max((len(row) for row in fabric.in_links), default=0))
    capacity = fabric.deliveries if record else 0
    m_src, m_dst, m_chunk = (np.zeros(capacity, dtype=np.int64) for _ in range(3))
    m_start, m_end = np.zeros(capacity), np.zeros(capacity)
    counters = np.zeros(SLOTS, dtype=np.int64)
    counters[RECORD] = int(record)
    cost = np.array(fabric.cost, dtype=np.float64)
    classes, cost_class = np.unique(cost, return_inverse=True)
    buckets = num_links + 1  # at most one per busy link, and the first event's
    calendar = (np.zeros(buckets, dtype=np.int64), np.zeros(buckets), np.full(buckets, -1, dtype=np.int64),
                np.arange(buckets - 1, -1, -1, dtype=np.int64), np.zeros(max(1, num_links), dtype=np.int64),
                cost_class.astype(np.int64).reshape(-1), np.full(len(classes), -1, dtype=np.int64),
                np.zeros(len(classes), dtype=np.int64))
    # heap, bucket_time, bucket_head, free_buckets, link_next, cost_class, class_bucket, touched
    counters[FREE] = buckets - 1  # bucket 0 (the top of the free stack) is the first event, at t = 0:
    counters[HEAP_SIZE] = 1       # heap[0] = 0, bucket_time[0] = 0.0, no links
    # every rank is matched at t = 0
    dirty, dirty_list, retiring = ordered_set(n, full=True), np.zeros(n, dtype=np.int64), ordered_set(num_links)
    claimed = np.zeros(1)
    src, dst = np.array(fabric.src, dtype=np.int64), np.array(fabric.dst, dtype=np.int64)
    if by_offers:
        offers = (np.zeros((num_links, group_count(words)), dtype=GROUP_COUNT), np.zeros(num_links, dtype=np.int64))
        initial_offers(src, dst, held, need, *offers)  # group counts, counts (compiled_offers)
        marks = np.zeros((1, 1), dtype=np.uint64)
    else:  # counts and fronts only (compiled_fronts)
        marks = np.zeros((n, (words + 63) // 64), dtype=np.uint64)
        offers = (np.zeros((1, 1), dtype=np.int32), initial_counts(src, dst, held, need, marks))
    offering = np.bincount(dst[offers[1] > 0], minlength=n).astype(np.int64)
    out_link_start = np.searchsorted(src, np.arange(n + 1)).astype(np.int64)  # links are sorted by source
    links = (src, dst, cost, in_start, in_links, out_link_start)
    flights = (np.zeros(num_links, dtype=np.bool_), np.zeros(num_links, dtype=np.int64), np.zeros(num_links),
               np.zeros(num_links, dtype=np.int64))  # busy, chunk, start time, start event
    rows_words = 1 if by_offers else words
    matching = (np.zeros(max_in, dtype=np.int64), np.zeros(max_in, dtype=np.int64), np.zeros(max_in, dtype=np.bool_),
                np.zeros(max_in, dtype=np.int64),  # active, left, holds, picked
                np.zeros((max_in, rows_words), dtype=np.uint64), np.zeros(max_in, dtype=np.int64),
                np.zeros((max_in, 2), dtype=np.int64), np.zeros((1, words), dtype=np.uint64))
    # carry, carry_count, carry_span, union
    rng_state = np.array(rng.getstate()[1], dtype=np.int64)
    arrays = (*links, held, need, offers, offering, arrival, *flights, calendar, counters, claimed, dirty,
              dirty_list, retiring, np.zeros(num_links + 1, dtype=np.int64), *matching,
              np.zeros(max(1, num_chunks), dtype=np.int64), rng_state, m_src, m_dst, m_chunk, m_start, m_end,
              (marks, np.zeros(words, dtype=np.int64)))
    # ... retiring, retire, the matching's scratch, positions, rng, the record, the fronts (marks, word list)
    mode = {"causal": _CAUSAL, "reference": _REFERENCE, "off": _OFF}[replacement]
    kernel = _KERNELS[by_offers]
    budget = 16
    while True:  # a growing number of events per call, with the deadline checked in between
        started = time.perf_counter()
        if kernel(budget, mode, *arrays):
            break
        now = time.perf_counter()
        if now > deadline:
            raise OutOfTime(int(counters[DELIVERIES]), fabric.deliveries)
        if now - started < 0.05:
            budget *= 2
    _check_finished(need, offers[1], num_chunks)
    return MatchResult(float(claimed[0]), m_src, m_dst, m_chunk, m_start, m_end, int(counters[DELIVERIES]),
                       int(counters[WASTED]), int(counters[EVENTS]), "compiled")
