"""The calendar of link ends for TACOS's compiled engine (``compiled_engine``), and the slots of its
integer state vector ``counters``.

After editing this file, update ``compiled_engine.HELPERS_DIGEST`` (a test says to what): the
engine's cached machine code inlines these functions, and numba checks only the engine's file.
"""

from __future__ import annotations

from numba import njit

from formulations.tacos.compiled_bits import INLINE
from formulations.tacos.matching import end_time

end_time_on_grid = njit(**INLINE)(end_time)  # the very grid the Python engine uses

# slots of the integer state vector ``counters``
HEAP_SIZE, EVENTS, WASTED, DELIVERIES, RECORD, FREE, TOUCHED = range(7)
SLOTS = 7


# ---------------------------------------------------------------- the calendar of link ends
# Links ending at the same time share a bucket; a binary heap orders the buckets by time. Links
# that start together over links of one cost class end together, so a bucket is found without a
# search: ``class_bucket[class]`` during the event that fills it. Buckets of different events or
# classes may still end at the same time; popping takes them all.
@njit(**INLINE)
def heap_push(heap, bucket_time, counters, bucket):
    """Push ``bucket`` onto the heap of buckets ordered by ``bucket_time``."""
    i = counters[HEAP_SIZE]
    counters[HEAP_SIZE] += 1
    t = bucket_time[bucket]
    while i > 0:
        parent = (i - 1) >> 1
        if bucket_time[heap[parent]] <= t:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = bucket


@njit(**INLINE)
def heap_pop(heap, bucket_time, counters):
    """Remove and return the bucket with the earliest time."""
    top = heap[0]
    size = counters[HEAP_SIZE] - 1
    counters[HEAP_SIZE] = size
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
def schedule_end(e, end, calendar, counters):
    """File link e under its end time: the bucket its cost class opened in this event, or a new one."""
    heap, bucket_time, bucket_head, free_buckets, link_next, cost_class, class_bucket, touched = calendar
    cls = cost_class[e]
    bucket = class_bucket[cls]
    if bucket < 0:
        counters[FREE] -= 1
        bucket = free_buckets[counters[FREE]]
        bucket_time[bucket] = end
        bucket_head[bucket] = -1
        heap_push(heap, bucket_time, counters, bucket)
        class_bucket[cls] = bucket
        touched[counters[TOUCHED]] = cls
        counters[TOUCHED] += 1
    link_next[e] = bucket_head[bucket]
    bucket_head[bucket] = e
