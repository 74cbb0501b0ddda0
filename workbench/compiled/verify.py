"""The verifier's two replays compiled with numba, for algorithms of hundreds of thousands of transfers.

The same rules as ``workbench.checking.verify`` (docs/verifier.md), on ``TransferArrays``. A buffer's
contribution set is a row of ``words`` 64-bit words (bit ``r`` = rank ``r``). In a non-combining
collective every value a buffer can hold for chunk ``c`` is the same set (its origin's), so the
row shrinks to one word holding 1 (has the chunk) or 0: the comparisons give the same verdicts.

These kernels only say *whether* a rule breaks (a status, and the transfer for debugging); the
caller then runs the Python verifier, which raises the same ``InvalidAlgorithm`` it always did,
with its full message. A valid algorithm therefore never runs the slow path, and an invalid one is
described by the one implementation of the messages. Anything unusual (a value the arrays cannot
hold, a rank outside the collective, a transfer that takes no time) also goes the Python way.
"""

from __future__ import annotations

from itertools import chain

import numpy as np
from numba import njit

from workbench.compiled.first_call import locked_first_call

OK, MISSING, DOUBLE_COUNT, RACE = 0, 1, 2, 3


@njit(cache=True, inline="always")
def _write(state, row, reads, k, reduce):
    """Write what (transfer, chunk) ``k`` read into buffer ``row``: added (reduce) or copied."""
    if reduce:
        for w in range(state.shape[1]):
            state[row, w] |= reads[k, w]
    else:
        for w in range(state.shape[1]):
            state[row, w] = reads[k, w]


@njit(cache=True)
def file_order_replay(src, dst, reduce, chunk_start, chunks, num_chunks, state, reads):
    """Apply the transfers in file order on ``state`` (rows per node * num_chunks + chunk) and store
    what each (transfer, chunk) read in ``reads`` (rows per position in ``chunks``).
    Returns (status, transfer): MISSING (nothing to send), DOUBLE_COUNT (reduce overlap) or OK."""
    words = state.shape[1]
    for t in range(len(src)):
        src_base = src[t] * num_chunks
        for k in range(chunk_start[t], chunk_start[t + 1]):
            row = src_base + chunks[k]
            held = False
            for w in range(words):
                reads[k, w] = state[row, w]
                if state[row, w] != 0:
                    held = True
            if not held:
                return MISSING, t
        dst_base = dst[t] * num_chunks
        for k in range(chunk_start[t], chunk_start[t + 1]):
            row = dst_base + chunks[k]
            if reduce[t]:
                for w in range(words):
                    if state[row, w] & reads[k, w]:
                        return DOUBLE_COUNT, t
            _write(state, row, reads, k, reduce[t])
    return OK, -1


@njit(cache=True)
def first_unmet_postcondition(state, post_rows, want):
    """The first i whose post buffer ``post_rows[i]`` does not hold exactly ``want[i]``; -1 if none."""
    words = state.shape[1]
    for i in range(len(post_rows)):
        for w in range(words):
            if state[post_rows[i], w] != want[i, w]:
                return i
    return -1


@njit(cache=True)
def timeline_replay(event_kind, event_id, src, dst, reduce, chunk_start, chunks, num_chunks, state, reads):
    """Replay the default timeline (events sorted by the caller): at a start, every source buffer
    must hold what the file-order replay read; at an arrival, the read values are written.
    Returns (RACE, transfer) at the first difference, else (OK, -1)."""
    words = state.shape[1]
    for e in range(len(event_kind)):
        t = event_id[e]
        if event_kind[e] == 1:  # start: read
            base = src[t] * num_chunks
            for k in range(chunk_start[t], chunk_start[t + 1]):
                row = base + chunks[k]
                for w in range(words):
                    if state[row, w] != reads[k, w]:
                        return RACE, t
            continue
        base = dst[t] * num_chunks  # arrival: write what was read (equal to what was carried)
        for k in range(chunk_start[t], chunk_start[t + 1]):
            _write(state, base + chunks[k], reads, k, reduce[t])
    return OK, -1


# each kernel's first call in a process holds its compile lock, so processes starting together on a
# fresh install compile it once (workbench.compiled.first_call); numba code calls none of these three
file_order_replay = locked_first_call(file_order_replay, "file_order_replay", __file__)
first_unmet_postcondition = locked_first_call(first_unmet_postcondition, "first_unmet_postcondition", __file__)
timeline_replay = locked_first_call(timeline_replay, "timeline_replay", __file__)


def rows_of(masks: list[int], words: int) -> np.ndarray:
    """Python-int bitsets as rows of 64-bit words (little-endian word order)."""
    out = np.zeros((len(masks), words), dtype=np.uint64)
    for i, mask in enumerate(masks):
        if mask:
            out[i] = np.frombuffer(mask.to_bytes(words * 8, "little"), dtype="<u8")
    return out


# ---------------------------------------------------------------- the path verify() takes
MEMORY_LIMIT = 2**30  # bytes of rows (state and reads); beyond, the Python verifier (sparse) runs


def words_per_row(algorithm) -> int:
    """64-bit words in a buffer's contribution row: one bit per rank in a combining collective, else
    a single word (the buffer has the chunk or not)."""
    collective = algorithm.collective
    return max(1, (collective.num_ranks + 63) // 64) if collective.combining else 1


def fits(algorithm, arrays) -> bool:
    """The rows fit in ``MEMORY_LIMIT``, and every pre and post rank is one of the collective's (a
    hand-built collective may say otherwise; the Python verifier then decides)."""
    collective = algorithm.collective
    rows = algorithm.topology.num_nodes * collective.num_chunks + len(arrays.chunks)
    if rows * words_per_row(algorithm) * 8 > MEMORY_LIMIT:
        return False
    try:
        ranks = np.concatenate([_pairs(collective.pre)[0], _pairs(collective.post)[0]])
    except (TypeError, ValueError, OverflowError):
        return False
    return not len(ranks) or (ranks.min() >= 0 and ranks.max() < collective.num_ranks)


def structure_ok(algorithm, arrays) -> bool:
    """``verify.check_structure``'s rules, vectorised: True when none breaks (False: the Python
    check then names the first transfer that breaks one)."""
    topology, collective = algorithm.topology, algorithm.collective
    count = len(arrays)
    if collective.num_ranks > topology.num_npus:
        return False
    if count == 0:
        return True
    num_nodes, num_chunks = topology.num_nodes, collective.num_chunks
    src, dst, chunks = arrays.src, arrays.dst, arrays.chunks
    if not (arrays.ids_are_positions() and arrays.known_op.all() and arrays.nodes_within(num_nodes)
            and arrays.deps_point_back()) or (src == dst).any():
        return False
    if len(chunks) and ((chunks < 0).any() or (chunks >= num_chunks).any()):
        return False
    counts = arrays.chunk_counts
    if (counts == 0).any():
        return False
    if (counts > 1).any():  # a chunk twice in one message
        owner = np.repeat(np.arange(count), counts)
        keys = owner * num_chunks + chunks
        if len(np.unique(keys)) != len(keys):
            return False
    if arrays.reduce.any() and (not collective.combining or (dst[arrays.reduce] >= topology.num_npus).any()):
        return False
    if arrays.vias is not None:  # named routes: the Python check walks each one
        return False
    pairs = np.unique(src * num_nodes + dst)
    return all(topology.route(int(p // num_nodes), int(p % num_nodes)) is not None for p in pairs)


def _pairs(sets: list) -> tuple[np.ndarray, np.ndarray]:
    """Per (chunk, rank in sets[chunk]) pair: the rank and the chunk, as arrays."""
    lengths = list(map(len, sets))
    ranks = np.fromiter(chain.from_iterable(sets), dtype=np.int64, count=sum(lengths))
    return ranks, np.repeat(np.arange(len(sets), dtype=np.int64), lengths)


def initial_state(algorithm) -> np.ndarray:
    """Every pre rank's buffer: its own contribution (combining) or "has the chunk"."""
    collective = algorithm.collective
    collective.masks()  # what the Python verifier computes first (and raises from, for a chunk nobody holds)
    state = np.zeros((algorithm.topology.num_nodes * collective.num_chunks, words_per_row(algorithm)),
                     dtype=np.uint64)
    ranks, chunk_of = _pairs(collective.pre)
    rows = ranks * collective.num_chunks + chunk_of  # one pair per row: plain assignment suffices
    if collective.combining:
        state[rows, ranks // 64] = np.left_shift(np.uint64(1), (ranks % 64).astype(np.uint64))
    else:
        state[rows, 0] = 1
    return state


def postcondition_rows(algorithm) -> tuple[np.ndarray, np.ndarray]:
    """Per post (rank, chunk) pair: its state row and the row it must hold."""
    collective = algorithm.collective
    words = words_per_row(algorithm)
    ranks, chunk_of = _pairs(collective.post)
    if collective.combining:
        want = rows_of(collective.masks()[0], words)[chunk_of]
    else:
        want = np.ones((len(ranks), 1), dtype=np.uint64)
    return ranks * collective.num_chunks + chunk_of, want


def replay(algorithm, arrays) -> tuple[np.ndarray, int] | None:
    """The file-order replay and the postconditions: (what each transfer read, delivered pairs), or
    None when a rule breaks."""
    state = initial_state(algorithm)
    reads = np.empty((len(arrays.chunks), state.shape[1]), dtype=np.uint64)
    status, _ = file_order_replay(arrays.src, arrays.dst, arrays.reduce, arrays.chunk_start, arrays.chunks,
                                  algorithm.collective.num_chunks, state, reads)
    if status != OK:
        return None
    post_rows, want = postcondition_rows(algorithm)
    if first_unmet_postcondition(state, post_rows, want) >= 0:
        return None
    return reads, len(post_rows)


def timeline_ok(algorithm, arrays, simulation, reads: np.ndarray) -> bool:
    """The default timeline reads what the file order read and ends meeting every postcondition
    (event order as ``verify._timeline_replay``). False: it does not, or the Python replay must decide."""
    state = initial_state(algorithm)
    if not timeline_ok_with(algorithm, arrays, simulation, reads, state):
        return False
    post_rows, want = postcondition_rows(algorithm)
    return first_unmet_postcondition(state, post_rows, want) < 0


def timeline_ok_with(algorithm, arrays, simulation, reads: np.ndarray, state: np.ndarray | None) -> bool:
    """``timeline_ok`` from a given initial ``state`` (a copy the replay may change; None: built here).
    ``simulation`` needs only ``start`` and ``end`` per transfer."""
    count = len(arrays)
    if count == 0:
        return True
    if (simulation.end <= simulation.start).any():
        return False  # a transfer that takes no time arrives before it starts: the Python replay decides
    times = np.concatenate((simulation.end, simulation.start))
    kinds = np.concatenate((np.zeros(count, dtype=np.int8), np.ones(count, dtype=np.int8)))
    ids = np.concatenate((np.arange(count), np.arange(count)))
    order = np.lexsort((ids, kinds, times))
    if state is None:
        state = initial_state(algorithm)
    status, _ = timeline_replay(kinds[order], ids[order], arrays.src, arrays.dst, arrays.reduce, arrays.chunk_start,
                                arrays.chunks, algorithm.collective.num_chunks, state, reads)
    return status == OK
