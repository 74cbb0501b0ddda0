"""The bit-level pieces of TACOS's compiled engine (``compiled_engine``): LLVM's bit counts,
CPython's Mersenne Twister, and draws from chunk rows.

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
# arrays are indexed in place, never as row views, and sorted by ``sort_prefix`` (numba's own sort
# needs the runtime). A kernel that did allocate would fail to compile, not misbehave.
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


# ---------------------------------------------------------------- sorting without the runtime
@njit(**INLINE)
def _sift_down(a, start, end):
    root = start
    while True:
        child = 2 * root + 1
        if child >= end:
            return
        if child + 1 < end and a[child] < a[child + 1]:
            child += 1
        if a[root] >= a[child]:
            return
        a[root], a[child] = a[child], a[root]
        root = child


@njit(**KERNEL)
def sort_prefix(a, n):
    """Sort ``a[:n]`` in place: a heapsort, which needs neither a slice nor the runtime."""
    for start in range(n // 2 - 1, -1, -1):
        _sift_down(a, start, n)
    for end in range(n - 1, 0, -1):
        a[0], a[end] = a[end], a[0]
        _sift_down(a, 0, end)
