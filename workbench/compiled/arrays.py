"""An algorithm's transfers as flat numpy arrays, for the compiled verifier and simulator.

One pass of list comprehensions over the ``Transfer`` objects (tens of nanoseconds each); the
ragged fields (chunks, deps) are stored as a flat array with ``start`` offsets (CSR style), so
transfer ``t``'s chunks are ``chunks[chunk_start[t]:chunk_start[t + 1]]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, repeat

import numpy as np

from workbench.model.algorithm import Transfer

__all__ = ["TransferArrays", "transfer_arrays"]


@dataclass(frozen=True)
class TransferArrays:
    ids: np.ndarray  # int64, what each transfer says its id is
    src: np.ndarray  # int64
    dst: np.ndarray  # int64
    reduce: np.ndarray  # bool: op == "reduce"
    known_op: np.ndarray  # bool: op is "copy" or "reduce"
    chunk_start: np.ndarray  # int64, len(transfers) + 1
    chunks: np.ndarray  # int64
    dep_start: np.ndarray  # int64, len(transfers) + 1
    deps: np.ndarray  # int64
    vias: list | None = None  # each transfer's ``via`` where some transfer names its route, else None

    def __len__(self) -> int:
        return len(self.src)

    @property
    def chunk_counts(self) -> np.ndarray:
        """Chunks per transfer."""
        return np.diff(self.chunk_start)

    # the structural checks the compiled verifier and simulator both need before trusting the arrays
    def ids_are_positions(self) -> bool:
        """True when every transfer's id is its position in the list."""
        return np.array_equal(self.ids, np.arange(len(self)))

    def deps_point_back(self) -> bool:
        """Every dependency names an earlier transfer."""
        owners = np.repeat(np.arange(len(self)), np.diff(self.dep_start))
        return not len(self.deps) or bool((self.deps >= 0).all() and (self.deps < owners).all())

    def nodes_within(self, num_nodes: int) -> bool:
        """True when every source and destination is a node id below ``num_nodes``."""
        return not len(self) or bool(min(self.src.min(), self.dst.min()) >= 0
                                     and max(self.src.max(), self.dst.max()) < num_nodes)


_OP_CODES = {"copy": 0, "reduce": 1}  # anything else: 2


def _offsets(lengths) -> np.ndarray:
    start = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(lengths, dtype=np.int64, count=len(lengths)), out=start[1:])
    return start


_INTEGER_TYPES = {int, bool}  # and numpy's integer scalars: what the Python verifier treats as integers


def _int_array(values: list) -> np.ndarray | None:
    """``values`` as int64, or None when one is not an integer (a float, a string, an array) or does
    not fit in 64 bits."""
    if not values:
        return np.zeros(0, dtype=np.int64)
    if not all(kind in _INTEGER_TYPES or issubclass(kind, np.integer) for kind in set(map(type, values))):
        return None
    try:
        array = np.array(values)
    except (ValueError, OverflowError):
        return None
    return array.astype(np.int64, copy=False) if array.dtype.kind == "i" else None


def transfer_arrays(transfers: list[Transfer]) -> TransferArrays | None:
    """The arrays, or None when a field holds something they cannot (a non-integer id, node, chunk
    or dependency, one beyond 64 bits, chunks or deps that are not sequences, an op that is not a
    string): the caller's exact checks then name it."""
    try:
        return _arrays(transfers)
    except TypeError:
        return None


def _arrays(transfers: list[Transfer]) -> TransferArrays | None:
    ops = [t.op for t in transfers]
    chunk_lists = [t.chunks for t in transfers]
    dep_lists = [t.deps for t in transfers]
    columns = [_int_array(values) for values in (
        [t.id for t in transfers], [t.src for t in transfers], [t.dst for t in transfers],
        list(chain.from_iterable(chunk_lists)), list(chain.from_iterable(dep_lists)))]
    if any(column is None for column in columns):
        return None
    ids, src, dst, chunks, deps = columns
    op_codes = np.fromiter(map(_OP_CODES.get, ops, repeat(2)), dtype=np.int8, count=len(ops))
    vias = [t.via for t in transfers]
    return TransferArrays(ids=ids, src=src, dst=dst, reduce=op_codes == 1, known_op=op_codes < 2,
                          chunk_start=_offsets(list(map(len, chunk_lists))), chunks=chunks,
                          dep_start=_offsets(list(map(len, dep_lists))), deps=deps,
                          vias=vias if any(v is not None for v in vias) else None)
