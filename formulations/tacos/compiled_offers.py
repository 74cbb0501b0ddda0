"""Offer counts for TACOS's compiled engine (``compiled_engine``): how many chunks each link can
carry, kept up to date, so that a match never reads a chunk row whole.

Link e = (u, v) offers ``held[u] & need[v]``; ``counts[e]`` is its number of set bits and
``groups[e, g]`` the set bits in its words ``16 g .. 16 g + 15``. A delivery changes them at the
receiver's links only (``update_offers``): its out-links to ranks that need the chunk offer it, its
in-links from ranks that hold it no longer do. ``offering[v]`` counts v's free in-links that offer
anything: a rank with none is not matched. The ``target``-th offer of a link (``nth_offer``) is
found by reading its group counts, then the words of one group of the two rows: N/1024 counts and
at most 2 x 16 words for N chunks, where a whole row is N/64 words.

The offers themselves are not kept as rows of their own: they are two words to AND where they are
read. Rows kept up to date took one more random word to write per link at every delivery and, on
a 2D mesh, twice the memory of the chunk rows (0.8 of the 1.2 GB at 40,000 NPUs), which made large
runs wait on memory: without them a 91x90 mesh takes 0.65x the time.

After editing this file, update ``compiled_engine.HELPERS_DIGEST`` (a test says to what): the
engine's cached machine code inlines these functions, and numba checks only the engine's file.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from formulations.tacos.compiled_bits import INLINE, ZERO, nth_bit_of_and, popcount, prefetch

GROUP_SHIFT = 4  # 16 words (1,024 chunks) per group count
# a group count is at most 1,024: 16 bits halve the counts' memory (12.8 MB at 40,000 NPUs, read and
# written at random), which keeps more of them in the cache (0.94x the time at 16,384 NPUs)
GROUP_COUNT = np.int16


def group_count(words: int) -> int:
    """Group counts per link for rows of ``words`` words."""
    return (words + (1 << GROUP_SHIFT) - 1) >> GROUP_SHIFT


@njit(cache=True)
def initial_offers(src, dst, held, need, groups, counts):
    """Fill each link's group counts and count from the start's rows."""
    for e in range(src.shape[0]):
        total = 0
        for w in range(held.shape[1]):
            here = np.int64(popcount(held[src[e], w] & need[dst[e], w]))
            groups[e, w >> GROUP_SHIFT] += here
            total += here
        counts[e] = total


@njit(**INLINE)
def update_offers(v, word, mask, src, dst, in_start, in_links, out_link_start, held, need, busy, offers, offering):
    """v has just received the chunk of (word, mask), which it needed and did not hold (no chunk
    arrives twice where offers are counted this way): its out-links to ranks that need it offer one
    more chunk, its in-links from ranks that hold it one fewer."""
    groups, counts = offers
    group = word >> GROUP_SHIFT
    for f in range(out_link_start[v], out_link_start[v + 1]):
        if need[dst[f], word] & mask != ZERO:
            groups[f, group] += 1
            counts[f] += 1
            if counts[f] == 1 and not busy[f]:
                offering[dst[f]] += 1
    for i in range(in_start[v], in_start[v + 1]):
        f = in_links[i]
        if held[src[f], word] & mask != ZERO:
            groups[f, group] -= 1
            counts[f] -= 1
            if counts[f] == 0 and not busy[f]:
                offering[v] -= 1


@njit(**INLINE)
def prefetch_delivery(e, src, dst, in_start, in_links, out_link_start, held, need, flight_chunk, groups):
    """Prefetch the words that delivering link e's chunk will read: the receiver's rows, its
    out-neighbours' need, its in-neighbours' held and the group counts of its links."""
    v, word = dst[e], flight_chunk[e] >> 6
    group = word >> GROUP_SHIFT
    prefetch(held, v, word)
    prefetch(need, v, word)
    for f in range(out_link_start[v], out_link_start[v + 1]):
        prefetch(need, dst[f], word)
        prefetch(groups, f, group)
    for i in range(in_start[v], in_start[v + 1]):
        f = in_links[i]
        prefetch(held, src[f], word)
        prefetch(groups, f, group)


@njit(**INLINE)
def nth_offer(u, v, held, need, groups, e, target):
    """The ``target``-th chunk link e = (u, v) offers, lowest first (python_engine.nth_bit of
    ``held[u] & need[v]``)."""
    g = 0
    while target >= groups[e, g]:
        target -= groups[e, g]
        g += 1
    return nth_bit_of_and(held, u, need, v, g << GROUP_SHIFT, target)
