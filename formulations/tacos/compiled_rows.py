"""Arrays for TACOS's compiled engine (``compiled_engine``): per rank, chunk sets as rows of 64-bit
words, and lists of lists as CSR (start offsets and one flat array)."""

from __future__ import annotations

from itertools import chain

import numpy as np


def chunk_rows(sets: list[frozenset[int]], n: int, words: int) -> np.ndarray:
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
        np.bitwise_or.at(mask, chunk_ids >> 6, bit_of(chunk_ids))
        rows[np.fromiter(ranks, dtype=np.int64, count=len(ranks))] |= mask
    if singles:
        pairs = np.array(singles, dtype=np.int64)
        np.bitwise_or.at(rows, (pairs[:, 0], pairs[:, 1] >> 6), bit_of(pairs[:, 1]))
    return rows


def bit_of(chunks: np.ndarray) -> np.ndarray:
    """Each chunk's bit within its 64-bit word."""
    return np.left_shift(np.uint64(1), (chunks & 63).astype(np.uint64))


def csr(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Lists of lists as CSR: start offsets (``len(rows) + 1``) and the items in one flat int64 array."""
    start = np.zeros(len(rows) + 1, dtype=np.int64)
    start[1:] = np.cumsum([len(row) for row in rows])
    flat = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(start[-1]))
    return start, flat
