"""The bit-level pieces of TACOS's compiled engine (``compiled_engine``): LLVM's bit counts,
a prefetch hint, CPython's Mersenne Twister, draws from chunk rows, and ordered sets of small integers.

The Mersenne Twister is ``random.Random``'s own: its state (624 words and the position) is copied
into ``rng`` and advanced with CPython's recurrence, tempering, ``random()`` (53 bits from two
words) and ``randrange`` (rejection over ``getrandbits``), so the compiled engine draws exactly what
``python_engine`` draws.

After editing this file, update ``compiled_engine.HELPERS_DIGEST`` (a test says to what): the
engine's cached machine code inlines these functions, and numba checks only the engine's file.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.core.extending import intrinsic

ONE = np.uint64(1)
ZERO = np.uint64(0)

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
popcount = _bit_intrinsic("popcount", lambda builder, x: builder.ctpop(x))
leading_zeros = _bit_intrinsic("leading_zeros", lambda builder, x: builder.ctlz(x, _DEFINED_AT_ZERO))
trailing_zeros = _bit_intrinsic("trailing_zeros", lambda builder, x: builder.cttz(x, _DEFINED_AT_ZERO))


@intrinsic
def prefetch(typingctx, rows, r, w):
    """Ask the CPU to start loading the cache line of ``rows[r, w]`` (a hint, with no effect on any
    result): the engine's loads land on random words of rows far larger than the caches, and issued
    a few deliveries ahead they overlap instead of stalling one after the other."""
    if not (isinstance(rows, types.Array) and rows.ndim == 2):
        return None

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = cgutils.get_item_pointer2(context, builder, array.data, cgutils.unpack_tuple(builder, array.shape),
                                            cgutils.unpack_tuple(builder, array.strides), signature.args[0].layout,
                                            [args[1], args[2]], wraparound=False, boundscheck=False)
        i32, byte_pointer = ir.IntType(32), ir.IntType(8).as_pointer()
        pointer = builder.bitcast(pointer, byte_pointer)  # one declaration serves rows of any type
        hint = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]), "llvm.prefetch.p0")
        # read, keep in all cache levels, data cache
        builder.call(hint, [pointer, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return types.void(rows, types.intp, types.intp), codegen


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
def random_float(rng):
    """random.random(): 53 bits from two words."""
    a = _next_word(rng) >> 5
    b = _next_word(rng) >> 6
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)


@njit(**INLINE)
def randbelow(rng, n):
    """random.randrange(n) for 0 < n < 2**32 (CPython 3.11's _randbelow_with_getrandbits)."""
    k = 64 - leading_zeros(np.int64(n))
    r = _next_word(rng) >> (32 - k)
    while r >= n:
        r = _next_word(rng) >> (32 - k)
    return r


# ---------------------------------------------------------------- bit rows
@njit(**INLINE)
def has_bit(rows, r, bit):
    """Whether bit ``bit`` of ``rows[r]`` is set (rows are indexed in place: a row view would cost a
    reference count, an atomic operation, each time)."""
    return (rows[r, bit >> 6] >> np.uint64(bit & 63)) & ONE != ZERO


@njit(**INLINE)
def random_bit_within(rows, r, first, last, count, rng):
    """python_engine.random_bit of ``rows[r]`` with ``count`` set bits, all in words ``first..last``
    (the words outside are not read): the same draws over the same count and bit length, so the same
    bit."""
    top = last
    while rows[r, top] == ZERO:
        top -= 1
    length = top * 64 + 64 - np.int64(leading_zeros(rows[r, top]))
    if count == 1:
        return length - 1
    if count * 8 >= length:
        while True:
            position = np.int64(random_float(rng) * length)
            if position >> 6 >= first and has_bit(rows, r, position):
                return position
    return nth_bit_of_and(rows, r, rows, r, first, np.int64(random_float(rng) * count))


@njit(**INLINE)
def nth_bit_of_and(left, r, right, s, w, target):
    """The ``target``-th set bit of ``left[r] & right[s]`` from word ``w`` on, lowest first
    (python_engine.nth_bit; there is one). A row alone is ANDed with itself."""
    while True:
        word = left[r, w] & right[s, w]
        here = np.int64(popcount(word))
        if target < here:
            for _ in range(target):
                word &= word - ONE
            return w * 64 + np.int64(trailing_zeros(word))
        target -= here
        w += 1


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
    """Add ``i`` to the ordered set ``members`` (its bit, and its word's summary bit)."""
    bits, summary = members
    word = i >> 6
    bits[word] |= ONE << np.uint64(i & 63)
    summary[word >> 6] |= ONE << np.uint64(word & 63)


@njit(**INLINE)
def set_drain(members, out):
    """Write the members into ``out`` in increasing order, empty the set, return how many."""
    bits, summary = members
    count = 0
    for s in range(summary.shape[0]):
        words = summary[s]
        summary[s] = ZERO
        while words != ZERO:
            word = s * 64 + np.int64(trailing_zeros(words))
            words &= words - ONE
            row = bits[word]
            bits[word] = ZERO
            while row != ZERO:
                out[count] = word * 64 + np.int64(trailing_zeros(row))
                row &= row - ONE
                count += 1
    return count
