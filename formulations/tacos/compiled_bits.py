"""The bit-level pieces of TACOS's compiled engine (``compiled_engine``): LLVM's bit counts,
CPython's Mersenne Twister, and draws from whole chunk rows.

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
@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
def _random(rng):
    """random.random(): 53 bits from two words."""
    a = _next_word(rng) >> 5
    b = _next_word(rng) >> 6
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)


@njit(cache=True, inline="always")
def _randbelow(rng, n):
    """random.randrange(n) for 0 < n < 2**32 (CPython 3.11's _randbelow_with_getrandbits)."""
    k = 64 - _leading_zeros(np.int64(n))
    r = _next_word(rng) >> (32 - k)
    while r >= n:
        r = _next_word(rng) >> (32 - k)
    return r


# ---------------------------------------------------------------- bit rows
@njit(cache=True, inline="always")
def _row_count(row):
    count = 0
    for w in range(row.shape[0]):
        count += _popcount(row[w])
    return count


@njit(cache=True, inline="always")
def _row_bit_length(row):
    for w in range(row.shape[0] - 1, -1, -1):
        if row[w] != _ZERO:
            return w * 64 + 64 - np.int64(_leading_zeros(row[w]))
    return 0


@njit(cache=True, inline="always")
def _has(row, bit):
    return (row[bit >> 6] >> np.uint64(bit & 63)) & _ONE != _ZERO


@njit(cache=True, inline="always")
def _nth_bit(row, target):
    """The target-th set bit, lowest first."""
    for w in range(row.shape[0]):
        word = row[w]
        here = np.int64(_popcount(word))
        if target < here:
            for _ in range(target):
                word &= word - _ONE
            return w * 64 + np.int64(_trailing_zeros(word))
        target -= here
    return -1


@njit(cache=True, inline="always")
def _random_bit(row, rng):
    """python_engine.random_bit over a word row (non-zero)."""
    count = _row_count(row)
    length = _row_bit_length(row)
    if count == 1:
        return length - 1
    if count * 8 >= length:
        while True:
            position = np.int64(_random(rng) * length)
            if _has(row, position):
                return position
    return _nth_bit(row, np.int64(_random(rng) * count))
