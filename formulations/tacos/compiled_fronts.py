"""Offer counts and fronts for TACOS's compiled engine (``compiled_engine``) where links differ in
cost (on fabrics of one link cost it keeps offer counts by groups of words instead:
``compiled_offers``).

Offer counts. Links of several costs end at scattered times, and most ranks marked for a match (an
in-neighbour received a chunk, say, while the link from it was busy) have no free in-link offering
anything: matching them would read whole rows to draw nothing. So each link keeps
``offers[e] = |held[src] & need[dst]|``, updated at every delivery (``update_counts``: the
receiver's out-links may offer the chunk now, its in-links no longer do), and ``offering[v]``
counts v's free in-links with offers. A rank with none is not matched and a link without offers is
not read: neither draws a random number, so the schedule is unchanged.

Fronts. ``marks[v]`` has a bit per word of v's chunk rows, set wherever an in-neighbour may hold a
chunk v needs: every word where one does is marked, since a delivery marks the word at each
out-neighbour that needs the chunk and needs only shrink. A row is read over v's front words only
(``front_words``, about four on the 3D-RFS), in increasing order, until its offer count is
complete (``and_row``), instead of over the N/64 words of whole rows.

After editing this file, update ``compiled_engine.HELPERS_DIGEST`` (a test says to what): the
engine's cached machine code inlines these functions, and numba checks only the engine's file.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from formulations.tacos.compiled_bits import INLINE, ONE, ZERO, popcount, prefetch, trailing_zeros


@njit(**INLINE)
def update_counts(v, word, mask, src, dst, in_start, in_links, out_link_start, held, need, busy, offers, offering,
                  marks):
    """v has just received the chunk of (word, mask), which v may need: its out-links to ranks that
    need it offer one more chunk (and the word joins their fronts), its in-links from ranks that hold
    it one fewer."""
    for f in range(out_link_start[v], out_link_start[v + 1]):
        if need[dst[f], word] & mask != ZERO:
            marks[dst[f], word >> 6] |= ONE << np.uint64(word & 63)
            offers[f] += 1
            if offers[f] == 1 and not busy[f]:
                offering[dst[f]] += 1
    if need[v, word] & mask != ZERO:
        for i in range(in_start[v], in_start[v + 1]):
            f = in_links[i]
            if held[src[f], word] & mask != ZERO:
                offers[f] -= 1
                if offers[f] == 0 and not busy[f]:
                    offering[v] -= 1


@njit(**INLINE)
def prefetch_counts(e, src, dst, in_start, in_links, out_link_start, held, need, flight_chunk, marks):
    """Prefetch the words that delivering link e's chunk will read (``update_counts``)."""
    v, word = dst[e], flight_chunk[e] >> 6
    prefetch(held, v, word)
    prefetch(need, v, word)
    for f in range(out_link_start[v], out_link_start[v + 1]):
        prefetch(need, dst[f], word)
        prefetch(marks, dst[f], word >> 6)
    for i in range(in_start[v], in_start[v + 1]):
        prefetch(held, src[in_links[i]], word)


@njit(cache=True)
def initial_counts(src, dst, held, need, marks):
    """Each link's offers, and the fronts: the words where they are."""
    offers = np.zeros(src.shape[0], dtype=np.int64)
    for e in range(src.shape[0]):
        count = 0
        for w in range(held.shape[1]):
            bits = held[src[e], w] & need[dst[e], w]
            if bits != ZERO:
                count += popcount(bits)
                marks[dst[e], w >> 6] |= ONE << np.uint64(w & 63)
        offers[e] = count
    return offers


@njit(**INLINE)
def front_words(v, need, front):
    """v's front words, increasing, into ``front[1]``; returns how many. ``front[0][v]`` marks, a bit
    per word, every word where an in-neighbour may hold a chunk v needs (a delivery marks the word
    at each out-neighbour that needs the chunk, and needs only shrink); words v needs nothing in any
    more are unmarked here."""
    marks, word_list = front
    count = 0
    for m in range(marks.shape[1]):
        bits = marks[v, m]
        while bits != ZERO:
            b = np.int64(trailing_zeros(bits))
            bits &= bits - ONE
            w = m * 64 + b
            if need[v, w] == ZERO:
                marks[v, m] &= ~(ONE << np.uint64(b))
            else:
                word_list[count] = w
                count += 1
    return count


@njit(**INLINE)
def and_row(held, u, need, v, rows, r, want, front, front_size):
    """rows[r] = held[u] & need[v], whose bit count ``want`` (> 0, the link's offers) is known; returns
    the count found and the first and last word that can be non-zero (the row is exact between them
    and not read outside). Only v's front words are read, in increasing order, until the count is
    complete; the words between the first and the last found are zero-filled."""
    word_list = front[1]
    count = 0
    first = last = -1
    for j in range(front_size):
        w = word_list[j]
        bits = held[u, w] & need[v, w]
        if bits != ZERO:
            if first < 0:
                first = w
            else:
                for gap in range(last + 1, w):
                    rows[r, gap] = ZERO
            rows[r, w] = bits
            last = w
            count += popcount(bits)
            if count >= want:
                break
    return count, first, last
