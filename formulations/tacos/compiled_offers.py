"""Offer rows for TACOS's compiled engine (``compiled_engine``): what each link can carry, kept up to
date, so that a match never reads a chunk row whole.

``rows[e]`` is ``held[src] & need[dst]`` of link e, a row of 64-bit words; ``counts[e]`` its number
of set bits and ``groups[e, g]`` the set bits in its words ``16 g .. 16 g + 15``. A delivery changes
them at the receiver's links only (``update_offers``): its out-links to ranks that need the chunk
offer it, its in-links no longer do. ``offering[v]`` counts v's free in-links that offer anything:
a rank with none is not matched. The ``target``-th offer of a link (``nth_offer``) is found by
reading its group counts, then the words of one group: N/1024 counts and at most 16 words for N
chunks, where a whole row is N/64 words.

After editing this file, update ``compiled_engine.HELPERS_DIGEST`` (a test says to what): the
engine's cached machine code inlines these functions, and numba checks only the engine's file.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from formulations.tacos.compiled_bits import INLINE, ZERO, nth_bit_from, popcount, prefetch

GROUP_SHIFT = 4  # 16 words (1,024 chunks) per group count


def group_count(words: int) -> int:
    """Group counts per link for rows of ``words`` words."""
    return (words + (1 << GROUP_SHIFT) - 1) >> GROUP_SHIFT


@njit(cache=True)
def initial_offers(src, dst, held, need, rows, groups, counts):
    """Fill each link's offer row, group counts and count from the start's rows."""
    for e in range(src.shape[0]):
        total = 0
        for w in range(held.shape[1]):
            bits = held[src[e], w] & need[dst[e], w]
            rows[e, w] = bits
            here = np.int64(popcount(bits))
            groups[e, w >> GROUP_SHIFT] += here
            total += here
        counts[e] = total


@njit(**INLINE)
def update_offers(v, word, mask, dst, in_start, in_links, out_link_start, need, busy, offers, offering):
    """v has just received the chunk of (word, mask): its out-links to ranks that need it offer one
    more chunk, its in-links that offered it one fewer."""
    rows, groups, counts = offers
    group = word >> GROUP_SHIFT
    for f in range(out_link_start[v], out_link_start[v + 1]):
        if need[dst[f], word] & mask != ZERO and rows[f, word] & mask == ZERO:
            rows[f, word] |= mask
            groups[f, group] += 1
            counts[f] += 1
            if counts[f] == 1 and not busy[f]:
                offering[dst[f]] += 1
    for i in range(in_start[v], in_start[v + 1]):
        f = in_links[i]
        if rows[f, word] & mask != ZERO:
            rows[f, word] &= ~mask
            groups[f, group] -= 1
            counts[f] -= 1
            if counts[f] == 0 and not busy[f]:
                offering[v] -= 1


@njit(**INLINE)
def prefetch_delivery(e, src, dst, in_start, in_links, out_link_start, held, need, flight_chunk, offers):
    """Prefetch the words that delivering link e's chunk will read: the receiver's rows and the
    offer rows of its links, and its out-neighbours' need."""
    v, word = dst[e], flight_chunk[e] >> 6
    prefetch(held, v, word)
    prefetch(need, v, word)
    rows = offers[0]
    for f in range(out_link_start[v], out_link_start[v + 1]):
        prefetch(rows, f, word)
        prefetch(need, dst[f], word)
    for i in range(in_start[v], in_start[v + 1]):
        prefetch(rows, in_links[i], word)


@njit(**INLINE)
def nth_offer(offers, e, target):
    """The ``target``-th chunk link e offers, lowest first (python_engine.nth_bit of its row)."""
    rows, groups, _ = offers
    g = 0
    while target >= groups[e, g]:
        target -= groups[e, g]
        g += 1
    return nth_bit_from(rows, e, g << GROUP_SHIFT, target)
