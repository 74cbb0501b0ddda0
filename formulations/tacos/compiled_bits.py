"""The bit-level pieces of TACOS's compiled engine (``compiled_engine``): LLVM's bit counts,
CPython's Mersenne Twister, draws from chunk rows, rows read over a rank's front words, and ordered
sets of small integers.

The Mersenne Twister is ``random.Random``'s own: its state (624 words and the position) is copied
into ``rng`` and advanced with CPython's recurrence, tempering, ``random()`` (53 bits from two
words) and ``randrange`` (rejection over ``getrandbits``), so the compiled engine draws exactly what
``python_engine`` draws.

numba caches machine code per function and checks only that function's own file, so the engine's
cached loop can keep an old copy of a function from here: after editing this module, delete the
``*.nbi`` / ``*.nbc`` files in ``formulations/tacos/__pycache__`` (a fresh checkout has none).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.extending import intrinsic

_ONE = np.uint64(1)
_ZERO = np.uint64(0)

# The kernels run without numba's reference counting (``_nrt=False``): they allocate nothing, and
# with it every array passed to an inlined helper or sliced into a row view cost an atomic increment
# and decrement, which perf showed taking half of the engine's time (NRT_incref, NRT_decref). So
# arrays are indexed in place, never as row views, and put in order by ``ordered_set`` (numba's own
# sort needs the runtime). A kernel that did allocate would fail to compile, not misbehave.
KERNEL = {"cache": True, "_nrt": False}
INLINE = {**KERNEL, "inline": "always"}


def _bit_intrinsic(name: str, emit):
    """A numba intrinsic for one LLVM bit-counting instruction on an integer of any width."""

    def typer(typingctx, word):
        if not isinstance(word, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            return emit(builder, args[0])
        return word(word), codegen

    typer.__name__ = typer.__qualname__ = name
    return intrinsic(typer)


_DEFINED_AT_ZERO = ir.Constant(ir.IntType(1), 0)  # ctlz/cttz of 0 is the word's width, not poison
_popcount = _bit_intrinsic("_popcount", lambda builder, x: builder.ctpop(x))
_leading_zeros = _bit_intrinsic("_leading_zeros", lambda builder, x: builder.ctlz(x, _DEFINED_AT_ZERO))
_trailing_zeros = _bit_intrinsic("_trailing_zeros", lambda builder, x: builder.cttz(x, _DEFINED_AT_ZERO))


# ---------------------------------------------------------------- CPython's Mersenne Twister
@njit(**INLINE)
def _next_word(rng):
    """genrand_uint32 of CPython's _randommodule.c; ``rng[624]`` is the position."""
    if rng[624] >= 624:
        for i in range(624):
            y = (rng[i] & 0x80000000) | (rng[(i + 1) % 624] & 0x7FFFFFFF)
            value = rng[(i + 397) % 624] ^ (y >> 1)
            if y & 1:
                value ^= 0x9908B0DF
            rng[i] = value
        rng[624] = 0
    y = rng[rng[624]]
    rng[624] += 1
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    y ^= y >> 18
    return y


@njit(**INLINE)
def _random(rng):
    """random.random(): 53 bits from two words."""
    a = _next_word(rng) >> 5
    b = _next_word(rng) >> 6
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)


@njit(**INLINE)
def _randbelow(rng, n):
    """random.randrange(n) for 0 < n < 2**32 (CPython 3.11's _randbelow_with_getrandbits)."""
    k = 64 - _leading_zeros(np.int64(n))
    r = _next_word(rng) >> (32 - k)
    while r >= n:
        r = _next_word(rng) >> (32 - k)
    return r


# ---------------------------------------------------------------- bit rows
@njit(**INLINE)
def _has(rows, r, bit):
    """Whether bit ``bit`` of ``rows[r]`` is set (rows are indexed in place: a row view would cost a
    reference count, an atomic operation, each time)."""
    return (rows[r, bit >> 6] >> np.uint64(bit & 63)) & _ONE != _ZERO


@njit(**INLINE)
def _random_bit_within(rows, r, first, last, count, rng):
    """python_engine.random_bit of ``rows[r]`` with ``count`` set bits, all in words ``first..last``
    (the words outside are not read): the same draws over the same count and bit length, so the same
    bit."""
    top = last
    while rows[r, top] == _ZERO:
        top -= 1
    length = top * 64 + 64 - np.int64(_leading_zeros(rows[r, top]))
    if count == 1:
        return length - 1
    if count * 8 >= length:
        while True:
            position = np.int64(_random(rng) * length)
            if position >> 6 >= first and _has(rows, r, position):
                return position
    target = np.int64(_random(rng) * count)
    for w in range(first, last + 1):
        word = rows[r, w]
        here = np.int64(_popcount(word))
        if target < here:
            for _ in range(target):
                word &= word - _ONE
            return w * 64 + np.int64(_trailing_zeros(word))
        target -= here
    return -1


# ---------------------------------------------------------------- chunk rows and fronts
@njit(**INLINE)
def front_words(v, need, front):
    """v's front words, increasing, into ``front[1]``; returns how many. ``front[0][v]`` marks, a bit
    per word, every word where an in-neighbour may hold a chunk v needs (a delivery marks the word
    at each out-neighbour that needs the chunk, and needs only shrink); words v needs nothing in any
    more are unmarked here."""
    marks, wlist = front
    count = 0
    for m in range(marks.shape[1]):
        bits = marks[v, m]
        while bits != _ZERO:
            b = np.int64(_trailing_zeros(bits))
            bits &= bits - _ONE
            w = m * 64 + b
            if need[v, w] == _ZERO:
                marks[v, m] &= ~(_ONE << np.uint64(b))
            else:
                wlist[count] = w
                count += 1
    return count


@njit(**INLINE)
def and_row(held, u, need, v, rows, r, want, front, front_size):
    """rows[r] = held[u] & need[v]; returns its bit count and the first and last word that can be
    non-zero (the row is exact between them and not read outside).

    ``want`` > 0 is the count already known (the link's offers): then only v's front words are read,
    in increasing order, until the count is complete, and the words between the first and the last
    found are zero-filled. Without it the whole row is written in one loop the compiler vectorises."""
    words = rows.shape[1]
    count = 0
    if want == 0:
        for w in range(words):
            bits = held[u, w] & need[v, w]
            rows[r, w] = bits
            count += _popcount(bits)
        return count, 0, words - 1
    wlist = front[1]
    first = last = -1
    for j in range(front_size):
        w = wlist[j]
        bits = held[u, w] & need[v, w]
        if bits != _ZERO:
            if first < 0:
                first = w
            else:
                for gap in range(last + 1, w):
                    rows[r, gap] = _ZERO
            rows[r, w] = bits
            last = w
            count += _popcount(bits)
            if count >= want:
                break
    return count, first, last


# ---------------------------------------------------------------- ordered sets of small integers
# A set of integers below n: a bit row, and a summary row with a bit per non-zero word of it. Adding
# is two ORs; draining lists the members in increasing order and empties the set, reading n/4096
# summary words and one word per stretch of 64 that has members. Each event's links and ranks come
# out in order this way, without a sort (numba's needs the runtime; a heapsort took 30% of a large
# 3D-RFS run).
def ordered_set(n: int, full: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """An empty set of integers below n, or (``full``) the set of all of them."""
    words = (n + 63) // 64
    bits, summary = np.zeros(max(1, words), dtype=np.uint64), np.zeros(max(1, (words + 63) // 64), dtype=np.uint64)
    if full and n:
        members = np.arange(n, dtype=np.int64)
        np.bitwise_or.at(bits, members >> 6, np.left_shift(np.uint64(1), (members & 63).astype(np.uint64)))
        word_ids = np.arange(words, dtype=np.int64)
        np.bitwise_or.at(summary, word_ids >> 6, np.left_shift(np.uint64(1), (word_ids & 63).astype(np.uint64)))
    return bits, summary


@njit(**INLINE)
def set_add(members, i):
    bits, summary = members
    word = i >> 6
    bits[word] |= _ONE << np.uint64(i & 63)
    summary[word >> 6] |= _ONE << np.uint64(word & 63)


@njit(**INLINE)
def set_drain(members, out):
    """Write the members into ``out`` in increasing order, empty the set, return how many."""
    bits, summary = members
    count = 0
    for s in range(summary.shape[0]):
        words = summary[s]
        summary[s] = _ZERO
        while words != _ZERO:
            word = s * 64 + np.int64(_trailing_zeros(words))
            words &= words - _ONE
            row = bits[word]
            bits[word] = _ZERO
            while row != _ZERO:
                out[count] = word * 64 + np.int64(_trailing_zeros(row))
                row &= row - _ONE
                count += 1
    return count
