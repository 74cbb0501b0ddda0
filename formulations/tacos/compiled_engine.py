"""TACOS matching compiled with numba: ``python_engine``'s loop over word-array bitsets.

Every random draw happens in the same order as in ``python_engine`` and comes from the same
Mersenne Twister stream (CPython's own, in ``compiled_bits``). Both engines therefore give the
same schedule for the same seed; the tests hold them to it.

Chunk sets are rows of 64-bit words (``held[v]``, ``need[v]``); ``need_count[v]`` saves scanning
a row to learn that ``v`` is done. Links ending at the same time are retired together, in link
order, from a calendar of buckets (below). The loop runs a bounded number of events per call, so
the caller can watch the deadline between calls.

Where links differ in cost, ranks with no free in-link offering anything are not matched, and rows
are read over each rank's front words only (``compiled_offers``); on fabrics of one link cost every
link runs in step, matches are almost never empty (0.02% on a 32x32 mesh), and neither is kept.
The links ending together and the ranks to match come out of ordered bit sets in increasing order
(the reference's order) without sorting. The kernels run without numba's reference counting
(``compiled_bits.KERNEL``).
"""

from __future__ import annotations

import random
import time
from itertools import chain

import numpy as np
from numba import njit

from formulations.tacos.compiled_bits import (INLINE, KERNEL, ONE, ZERO, has_bit, ordered_set, popcount,
                                              random_bit_within, random_float, randbelow, set_add, set_drain,
                                              trailing_zeros)
from formulations.tacos.compiled_offers import and_row, front_words, initial_offers, update_offers
from formulations.tacos.matching import TIE, Fabric, MatchResult, OutOfTime, end_time, unreachable

_CAUSAL, _REFERENCE, _OFF = 0, 1, 2
_NEVER = np.iinfo(np.int32).max

_end_time = njit(**INLINE)(end_time)  # the very grid the Python engine uses

# numba keeps the kernels' machine code between runs and checks only this file for changes, while
# the kernels inline the helpers of compiled_bits and compiled_offers: this digest of those two files
# ties them to this one, so editing a helper (and updating the digest, as a test asks) recompiles.
HELPERS_DIGEST = "cbf24649793f6429"

# slots of the integer state vector ``counters``
_HEAP_SIZE, _EVENTS, _WASTED, _DELIVERIES, _RECORD, _FREE, _TOUCHED, _OFFERS = range(8)
_SLOTS = 8


# ---------------------------------------------------------------- the calendar of link ends
# Links ending at the same time share a bucket; a binary heap orders the buckets by time. Links
# that start together over links of one cost class end together, so a bucket is found without a
# search: ``class_bucket[class]`` during the event that fills it. Buckets of different events or
# classes may still end at the same time; popping takes them all.
@njit(**INLINE)
def _heap_push(heap, bucket_time, counters, bucket):
    i = counters[_HEAP_SIZE]
    counters[_HEAP_SIZE] += 1
    t = bucket_time[bucket]
    while i > 0:
        parent = (i - 1) >> 1
        if bucket_time[heap[parent]] <= t:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = bucket


@njit(**INLINE)
def _heap_pop(heap, bucket_time, counters):
    top = heap[0]
    size = counters[_HEAP_SIZE] - 1
    counters[_HEAP_SIZE] = size
    last = heap[size]
    t = bucket_time[last]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and bucket_time[heap[child + 1]] < bucket_time[heap[child]]:
            child += 1
        if bucket_time[heap[child]] >= t:
            break
        heap[i] = heap[child]
        i = child
    if size > 0:
        heap[i] = last
    return top


@njit(**INLINE)
def _schedule_end(e, end, calendar, counters):
    """File link e under its end time: the bucket its cost class opened in this event, or a new one."""
    heap, bucket_time, bucket_head, free_buckets, link_next, cost_class, class_bucket, touched = calendar
    cls = cost_class[e]
    bucket = class_bucket[cls]
    if bucket < 0:
        counters[_FREE] -= 1
        bucket = free_buckets[counters[_FREE]]
        bucket_time[bucket] = end
        bucket_head[bucket] = -1
        _heap_push(heap, bucket_time, counters, bucket)
        class_bucket[cls] = bucket
        touched[counters[_TOUCHED]] = cls
        counters[_TOUCHED] += 1
    link_next[e] = bucket_head[bucket]
    bucket_head[bucket] = e


# ---------------------------------------------------------------- the event loop
@njit(**INLINE)
def _replacement(u, v, started_event, mode, held, need, arrival, scratch, positions, rng, want, front):
    """python_engine._Engine._replacement; ``want`` is |need[v] & held[u]| (> 0) where offers are
    counted, else 0 (unknown: the whole rows are read)."""
    if mode == _OFF:
        return -1
    front_size = front_words(v, need, front) if want > 0 else 0
    count, first, last = and_row(held, u, need, v, scratch, 0, want, front, front_size)
    if count == 0:
        return -1
    if mode == _REFERENCE:
        return random_bit_within(scratch, 0, first, last, count, rng)
    count = 0
    for w in range(first, last + 1):
        word = scratch[0, w]
        while word != ZERO:
            c = w * 64 + np.int64(trailing_zeros(word))
            word &= word - ONE
            if arrival[u, c] <= started_event:
                positions[count] = c
                count += 1
    if count == 0:
        return -1
    return positions[randbelow(rng, count)]


@njit(**INLINE)
def _match(v, t, event, src, cost, in_start, in_links, held, need, busy, flight_chunk, flight_start,
           flight_event, calendar, counters, carry, carry_count, carry_span, active, union, rng, offers, offering,
           counting, front):
    """python_engine._Engine._match; ``carry[i]`` is the chunk row of ``active[i]``, exact within the
    words ``carry_span[i]`` (the words outside hold stale data and are never read). Links without
    offers are skipped: their rows are empty."""
    front_size = front_words(v, need, front) if counting else 0
    live = 0
    for i in range(in_start[v], in_start[v + 1]):
        e = in_links[i]
        if busy[e] or offers[e] == 0:
            continue
        count, first, last = and_row(held, src[e], need, v, carry, live, offers[e] if counting else 0, front,
                                      front_size)
        if count > 0:
            active[live] = e
            carry_count[live] = count
            carry_span[live, 0], carry_span[live, 1] = first, last
            live += 1
    while live > 0:
        if live == 1:  # the union is the one row
            first, last = carry_span[0, 0], carry_span[0, 1]
            chunk = random_bit_within(carry, 0, first, last, carry_count[0], rng)
        else:
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
            chunk = random_bit_within(union, 0, first, last, count, rng)
        word, mask = chunk >> 6, ONE << np.uint64(chunk & 63)
        pick = 0
        if live > 1:
            holders = 0
            best = np.inf
            for i in range(live):
                if carry_span[i, 0] <= word <= carry_span[i, 1] and carry[i, word] & mask != ZERO:
                    holders += 1
                    pick = i
                    best = min(best, cost[active[i]])
            if holders > 1:
                ties = 0
                for i in range(live):
                    if (carry_span[i, 0] <= word <= carry_span[i, 1] and carry[i, word] & mask != ZERO
                            and cost[active[i]] <= best + TIE):
                        ties += 1
                        pick = i
                if ties > 1:
                    nth = np.int64(random_float(rng) * ties)
                    for i in range(live):
                        if (carry_span[i, 0] <= word <= carry_span[i, 1] and carry[i, word] & mask != ZERO
                                and cost[active[i]] <= best + TIE):
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
        _schedule_end(e, _end_time(t, cost[e]), calendar, counters)
        # drop the chunk from every row, then the link just used and the rows left empty (in order)
        kept = 0
        for i in range(live):
            if carry_span[i, 0] <= word <= carry_span[i, 1] and carry[i, word] & mask != ZERO:
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


@njit(**KERNEL)
def _run_events(budget, mode, src, dst, cost, in_start, in_links, out_link_start, held, need,
                need_count, offers, offering, arrival, busy, flight_chunk, flight_start, flight_event, calendar,
                counters, claimed, dirty, dirty_list, retiring, retire, carry, carry_count, carry_span, active, union,
                positions, rng, m_src, m_dst, m_chunk, m_start, m_end, front):
    """Up to ``budget`` events; returns True when no link is busy any more (the run is over)."""
    heap, bucket_time, bucket_head, free_buckets, link_next, cost_class, class_bucket, touched = calendar
    counting = counters[_OFFERS] != 0
    while counters[_HEAP_SIZE] > 0 and budget > 0:
        budget -= 1
        bucket = _heap_pop(heap, bucket_time, counters)
        t = bucket_time[bucket]
        while True:
            e = bucket_head[bucket]
            while e >= 0:
                set_add(retiring, e)
                e = link_next[e]
            free_buckets[counters[_FREE]] = bucket
            counters[_FREE] += 1
            if counters[_HEAP_SIZE] == 0 or bucket_time[heap[0]] != t:
                break
            bucket = _heap_pop(heap, bucket_time, counters)
        count = set_drain(retiring, retire)  # retire in (src, dst) order, as the reference
        event = counters[_EVENTS]
        counters[_EVENTS] += 1
        eventful = False
        for r in range(count):
            e = retire[r]
            u, v, chunk = src[e], dst[e], flight_chunk[e]
            busy[e] = False
            if offers[e] > 0:
                offering[v] += 1
            set_add(dirty, v)  # matched at the end of this event (once, however many arrivals touch it)
            if has_bit(held, v, chunk):
                if counting and offers[e] == 0:  # v needs nothing u holds: nothing to replace it with
                    chunk = -1
                else:
                    chunk = _replacement(u, v, flight_event[e], mode, held, need, arrival, union, positions, rng,
                                         offers[e] if counting else 0, front)
                if chunk < 0:
                    counters[_WASTED] += 1
                    continue
            word, mask = chunk >> 6, ONE << np.uint64(chunk & 63)
            held[v, word] |= mask
            if counting:
                update_offers(v, word, mask, src, dst, in_start, in_links, out_link_start, held, need, busy, offers,
                              offering, front[0])
            if need[v, word] & mask != ZERO:
                need[v, word] &= ~mask
                need_count[v] -= 1
            if mode == _CAUSAL:
                arrival[v, chunk] = event
            if counters[_RECORD]:
                i = counters[_DELIVERIES]
                m_src[i], m_dst[i], m_chunk[i], m_start[i], m_end[i] = u, v, chunk, flight_start[e], t
            counters[_DELIVERIES] += 1
            eventful = True
            for f in range(out_link_start[v], out_link_start[v + 1]):  # v's out-neighbours
                set_add(dirty, dst[f])
        if eventful:
            claimed[0] = t
        marked = set_drain(dirty, dirty_list)  # in rank order, as the reference
        for j in range(marked):
            v = dirty_list[j]
            if (offering[v] > 0) if counting else (need_count[v] > 0):
                _match(v, t, event, src, cost, in_start, in_links, held, need, busy, flight_chunk, flight_start,
                       flight_event, calendar, counters, carry, carry_count, carry_span, active, union, rng, offers,
                       offering, counting, front)
        for i in range(counters[_TOUCHED]):  # the next event opens new buckets
            class_bucket[touched[i]] = -1
        counters[_TOUCHED] = 0
    return counters[_HEAP_SIZE] == 0


def _rows(sets: list[frozenset[int]], n: int, words: int) -> np.ndarray:
    """Per rank, the bit row of the chunks whose set holds the rank.

    Collectives share one frozenset among many chunks (everyone, a single rank), so chunks are
    grouped by set object: each group is one word mask OR-ed into its members' rows.
    """
    groups: dict[int, tuple[frozenset[int], list[int]]] = {}
    for chunk, ranks in enumerate(sets):
        if ranks:
            groups.setdefault(id(ranks), (ranks, []))[1].append(chunk)
    rows = np.zeros((n, words), dtype=np.uint64)
    singles: list[tuple[int, int]] = []  # (rank, chunk) of one-rank sets, done in one pass
    for ranks, chunks in groups.values():
        if len(ranks) == 1:
            rank = next(iter(ranks))
            singles.extend((rank, c) for c in chunks)
            continue
        mask = np.zeros(words, dtype=np.uint64)
        chunk_ids = np.array(chunks, dtype=np.int64)
        np.bitwise_or.at(mask, chunk_ids >> 6, _bit_of(chunk_ids))
        rows[np.fromiter(ranks, dtype=np.int64, count=len(ranks))] |= mask
    if singles:
        pairs = np.array(singles, dtype=np.int64)
        np.bitwise_or.at(rows, (pairs[:, 0], pairs[:, 1] >> 6), _bit_of(pairs[:, 1]))
    return rows


def _bit_of(chunks: np.ndarray) -> np.ndarray:
    """Each chunk's bit within its 64-bit word."""
    return np.left_shift(np.uint64(1), (chunks & 63).astype(np.uint64))


def _csr(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    start = np.zeros(len(rows) + 1, dtype=np.int64)
    start[1:] = np.cumsum([len(row) for row in rows])
    flat = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(start[-1]))
    return start, flat


def run_compiled(fabric: Fabric, rng: random.Random, replacement: str, deadline: float,
                 record: bool) -> MatchResult:
    n, num_chunks, num_links = fabric.num_npus, fabric.num_chunks, len(fabric.src)
    words = max(1, (num_chunks + 63) // 64)
    held = _rows(fabric.pre, n, words)
    need = _rows(fabric.post, n, words) & ~held
    need_count = np.bitwise_count(need).sum(axis=1, dtype=np.int64)
    causal = replacement == "causal"
    # event index of each arrival (-1: held from the start); int32 keeps N x chunks affordable
    arrival = np.full((n, num_chunks) if causal else (1, 1), _NEVER, dtype=np.int32)
    if causal:
        for start in range(0, n, 1024):  # rows in blocks: the unpacked bits are a byte per chunk
            bits = np.unpackbits(held[start:start + 1024].view(np.uint8), axis=1, bitorder="little")
            arrival[start:start + 1024][bits[:, :num_chunks].astype(bool)] = -1
    in_start, in_links = _csr(fabric.in_links)
    max_in = max(1, max((len(row) for row in fabric.in_links), default=0))
    capacity = fabric.deliveries if record else 0
    m_src, m_dst, m_chunk = (np.zeros(capacity, dtype=np.int64) for _ in range(3))
    m_start, m_end = np.zeros(capacity), np.zeros(capacity)
    counters = np.zeros(_SLOTS, dtype=np.int64)
    counters[_RECORD] = int(record)
    cost = np.array(fabric.cost, dtype=np.float64)
    classes, cost_class = np.unique(cost, return_inverse=True)
    buckets = num_links + 1  # at most one per busy link, and the first event's
    calendar = (np.zeros(buckets, dtype=np.int64), np.zeros(buckets), np.full(buckets, -1, dtype=np.int64),
                np.arange(buckets - 1, -1, -1, dtype=np.int64), np.zeros(max(1, num_links), dtype=np.int64),
                cost_class.astype(np.int64).reshape(-1), np.full(len(classes), -1, dtype=np.int64),
                np.zeros(len(classes), dtype=np.int64))
    # heap, bucket_time, bucket_head, free_buckets, link_next, cost_class, class_bucket, touched
    counters[_FREE] = buckets - 1  # bucket 0 (the top of the free stack) is the first event, at t = 0:
    counters[_HEAP_SIZE] = 1       # heap[0] = 0, bucket_time[0] = 0.0, no links
    # every rank is matched at t = 0
    dirty, dirty_list, retiring = ordered_set(n, full=True), np.zeros(n, dtype=np.int64), ordered_set(num_links)
    claimed = np.zeros(1)
    src, dst = np.array(fabric.src, dtype=np.int64), np.array(fabric.dst, dtype=np.int64)
    counters[_OFFERS] = int(len(classes) > 1)  # see the module docstring
    marks = np.zeros((n, (words + 63) // 64) if counters[_OFFERS] else (1, 1), dtype=np.uint64)
    if counters[_OFFERS]:
        offers = initial_offers(src, dst, held, need, marks)
        offering = np.bincount(dst[offers > 0], minlength=n).astype(np.int64)
    else:  # every link counts as offering: matches read every free in-link (``offering`` is not used)
        offers, offering = np.ones(num_links, dtype=np.int64), np.zeros(n, dtype=np.int64)
    out_link_start = np.searchsorted(src, np.arange(n + 1)).astype(np.int64)  # links are sorted by source
    links = (src, dst, cost, in_start, in_links, out_link_start)
    flights = (np.zeros(num_links, dtype=np.bool_), np.zeros(num_links, dtype=np.int64), np.zeros(num_links),
               np.zeros(num_links, dtype=np.int64))  # busy, chunk, start time, start event
    scratch = (np.zeros(num_links + 1, dtype=np.int64), np.zeros((max_in, words), dtype=np.uint64),
               np.zeros(max_in, dtype=np.int64), np.zeros((max_in, 2), dtype=np.int64),
               np.zeros(max_in, dtype=np.int64), np.zeros((1, words), dtype=np.uint64),
               np.zeros(max(1, num_chunks), dtype=np.int64))
    # retire, carry, carry_count, carry_span, active, union, positions
    rng_state = np.array(rng.getstate()[1], dtype=np.int64)
    arrays = (*links, held, need, need_count, offers, offering, arrival, *flights, calendar, counters, claimed, dirty,
              dirty_list, retiring, *scratch, rng_state, m_src, m_dst, m_chunk, m_start, m_end,
              (marks, np.zeros(words, dtype=np.int64)))  # the fronts: marks and a word list
    mode = {"causal": _CAUSAL, "reference": _REFERENCE, "off": _OFF}[replacement]
    budget = 16
    while True:  # a growing number of events per call, with the deadline checked in between
        started = time.perf_counter()
        if _run_events(budget, mode, *arrays):
            break
        now = time.perf_counter()
        if now > deadline:
            raise OutOfTime(int(counters[_DELIVERIES]), fabric.deliveries)
        if now - started < 0.05:
            budget *= 2
    if need_count.any():
        v = int(np.flatnonzero(need_count)[0])
        chunk = next(c for c in range(num_chunks) if (int(need[v, c >> 6]) >> (c & 63)) & 1)
        raise unreachable(v, chunk)
    return MatchResult(float(claimed[0]), m_src, m_dst, m_chunk, m_start, m_end, int(counters[_DELIVERIES]),
                       int(counters[_WASTED]), int(counters[_EVENTS]), "compiled")
