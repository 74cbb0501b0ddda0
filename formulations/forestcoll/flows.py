"""Max-flow values on a sparse arc set whose capacities change between calls.

The splitting and packing loops ask for tens of thousands of max-flow *values* on graphs that
differ only in a few capacities (a helper arc switched on, a residual capacity lowered).
``FlowTemplate`` builds the CSR structure once (one entry per distinct ``(src, dst)`` pair,
parallel arcs added) and then only rewrites the data array, calling scipy's integer max-flow.

scipy works in int32. Callers give arcs meant as "infinite" ``inf`` = 1 + the sum of all finite
capacities, which exceeds every cut without one; then every flow value and residual capacity stays
below ``2 * inf``. When a capacity exceeds 2^30 the call falls back to ``workbench.maxflow.FlowNetwork`` (networkx, exact
Python integers).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from workbench.maxflow import FlowNetwork

__all__ = ["FlowTemplate"]

_SAFE = 2**30 - 1  # residual capacities of opposite arcs add up, so stay below half of int32


class FlowTemplate:
    """Arcs ``(src[i], dst[i])`` over ``num_nodes`` nodes; capacities are given per call."""

    def __init__(self, num_nodes: int, src: Sequence[int], dst: Sequence[int]) -> None:
        self.num_nodes = num_nodes
        self.src = np.asarray(src, dtype=np.int64)
        self.dst = np.asarray(dst, dtype=np.int64)
        keys = self.src * num_nodes + self.dst
        unique, self.slot = np.unique(keys, return_inverse=True)
        rows = unique // num_nodes
        self._indices = (unique % num_nodes).astype(np.int32)
        self._indptr = np.searchsorted(rows, np.arange(num_nodes + 1)).astype(np.int32)
        self._entries = len(unique)
        self._fallback: FlowNetwork | None = None
        self.calls = 0

    def value(self, capacities: np.ndarray, source: int, sink: int) -> int:
        """Max-flow value from ``source`` to ``sink`` with one (non-negative int) capacity per arc."""
        self.calls += 1
        data = np.bincount(self.slot, weights=capacities, minlength=self._entries)
        if data.max(initial=0) > _SAFE:  # the flow value is below the finite total, itself below inf
            return self._slow(capacities, source, sink)
        graph = csr_matrix((data.astype(np.int32), self._indices, self._indptr),
                           shape=(self.num_nodes, self.num_nodes))
        return int(maximum_flow(graph, source, sink).flow_value)

    def _slow(self, capacities: np.ndarray, source: int, sink: int) -> int:
        if self._fallback is None:
            self._fallback = FlowNetwork(self.num_nodes, self.src, self.dst)
        self._fallback.set_capacities(np.asarray(capacities, dtype=np.int64))
        return self._fallback.min_cut(source, sink)[0]
