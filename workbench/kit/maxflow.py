"""Integer max-flow / min-cut on a topology's links, the engine of the exact bounds.

Bandwidths become integer capacities (``integer_capacities``) so that no floating-point
comparison ever decides whether a flow meets a demand. ``FlowNetwork`` keeps one sparse
structure (the topology's links plus a few extra arcs, e.g. a super-source) and changes only the
capacities between calls; ``min_cut`` returns the flow value and the source side of a minimum
cut (the nodes reachable from the source in the residual graph).

scipy's ``maximum_flow`` works in int32: it silently overflows at or above 2^31, so every call
checks the total capacity first and falls back to networkx (Python integers, exact, slower).
``value`` (the loops that ask tens of thousands of flows) uses OR-Tools' compiled max-flow in
int64 where it is installed; a max-flow value is unique, so every path gives the same number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from workbench.util.lazy import lazy_module

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["IntegerCapacities", "integer_capacities", "FlowNetwork", "INT32_SAFE"]

INT32_SAFE = 2**31 - 1
_VALUE_SAFE = 2**30 - 1  # residual capacities of opposite arcs add up: stay below half of int32
_RESOLUTION = 2**16  # largest capacity after quantising bandwidths that are not small multiples
_ORTOOLS_SAFE = 2**50  # capacities OR-Tools sums in int64 without overflow on any network here
SMALL_NETWORK = 256  # distinct arcs up to which plain-Python Dinic runs (no scipy import, exact integers)


@dataclass(frozen=True)
class IntegerCapacities:
    """Bandwidths as integers: ``bandwidth ~= capacity * unit``.

    ``exact`` is True when every bandwidth is the capacity times ``unit`` to 1e-12 relative
    (bandwidths that are integer multiples of a common quantum, as every builder's are). Otherwise
    the bandwidths were rounded *up* to a quantum of ``max / 2^16`` (recorded as ``unit``): a cut's
    quantised capacity is never below its real one.
    """

    values: np.ndarray  # int64, one per link
    unit: float  # B/s per capacity unit
    exact: bool


def integer_capacities(bandwidths: Sequence[float]) -> IntegerCapacities:
    """Scale bandwidths (B/s) to small integers, exactly when they share a quantum."""
    bw = np.asarray(bandwidths, dtype=float)
    if len(bw) == 0:
        return IntegerCapacities(np.zeros(0, dtype=np.int64), 1.0, True)
    rounded = np.rint(bw)
    if np.all(np.abs(rounded - bw) <= 1e-12 * bw) and rounded.max() < 2**62:
        g = 0
        for value in np.unique(rounded.astype(np.int64)):
            g = math.gcd(g, int(value))
        values = (rounded.astype(np.int64) // g)
        if values.max() <= _RESOLUTION:
            return IntegerCapacities(values, float(g), True)
    unit = float(bw.max()) / _RESOLUTION
    values = np.ceil(bw / unit - 1e-9).astype(np.int64)
    values = np.maximum(values, 1)
    exact = bool(np.all(np.abs(values * unit - bw) <= 1e-12 * bw))
    return IntegerCapacities(values, unit, exact)


class FlowNetwork:
    """A fixed set of arcs whose integer capacities change between max-flow calls.

    ``num_nodes`` nodes, arcs ``(src[i], dst[i])``; parallel arcs are allowed (their capacities add).
    """

    def __init__(self, num_nodes: int, src: Sequence[int], dst: Sequence[int]) -> None:
        self.num_nodes = num_nodes
        self.src = np.asarray(src, dtype=np.int64)
        self.dst = np.asarray(dst, dtype=np.int64)
        # one entry per distinct (src, dst) pair; arc i lands in entry slot[i]
        keys = self.src * num_nodes + self.dst
        unique, self._slot = np.unique(keys, return_inverse=True)
        rows, cols = unique // num_nodes, unique % num_nodes
        self._pairs = (rows, cols)
        self._csr = None  # scipy's matrix, built on first use (small networks never import scipy)
        self._capacity = np.zeros(len(unique), dtype=np.int64)
        self.calls = 0  # max-flow computations so far
        self._ortools = None  # the compiled solver for ``value`` (False: not installed)

    @property
    def _matrix(self):
        if self._csr is None:
            from scipy.sparse import csr_matrix

            rows, cols = self._pairs
            self._csr = csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, cols)),
                                   shape=(self.num_nodes, self.num_nodes))
            self._csr.sort_indices()  # csr order equals the sorted unique keys: data[j] is pair j
        return self._csr

    @property
    def _small(self) -> bool:
        return len(self._pairs[0]) <= SMALL_NETWORK

    def set_capacities(self, capacities: Sequence[int]) -> None:
        """Capacity per arc (non-negative integers)."""
        values = np.asarray(capacities, dtype=np.int64)
        if len(values) != len(self.src):
            raise ValueError(f"expected {len(self.src)} capacities, got {len(values)}")
        if (values < 0).any():
            raise ValueError("capacities must be non-negative")
        capacity = np.zeros(len(self._pairs[0]), dtype=np.int64)
        np.add.at(capacity, self._slot, values)
        self._capacity = capacity
        self._fits_int32 = sum(int(v) for v in self._capacity) <= INT32_SAFE

    def value(self, capacities: Sequence[int], source: int, sink: int) -> int:
        """The max-flow value only, for one capacity per arc given with the call (none is stored).

        For loops that ask tens of thousands of values on graphs differing in a few capacities.
        scipy is used while every summed capacity is below 2^30 and the flow value stays below it
        (true when arcs meant as infinite carry 1 + the sum of the finite capacities); otherwise
        the exact networkx path.
        """
        if source == sink:
            raise ValueError("source and sink must differ")
        self.calls += 1
        values = np.asarray(capacities, dtype=np.int64)
        data = np.zeros(len(self._capacity), dtype=np.int64)
        np.add.at(data, self._slot, values)
        compiled = self._compiled()
        if compiled is not None and data.max(initial=0) < _ORTOOLS_SAFE:
            compiled.set_arcs_capacity(self._arc_ids, data)
            if compiled.solve(source, sink) == compiled.OPTIMAL:
                return int(compiled.optimal_flow())
        from scipy.sparse.csgraph import maximum_flow

        if self._small:
            return _dinic(self.num_nodes, self._pairs, data.tolist(), source, sink)[0]
        if data.max(initial=0) > _VALUE_SAFE:
            self.set_capacities(values)
            return self._networkx_min_cut(source, sink)[0]
        graph = self._matrix.copy()
        graph.data = data.astype(np.int32)
        return int(maximum_flow(graph, source, sink).flow_value)

    def flows(self, capacities: Sequence[int], source: int, sink: int) -> list[int]:
        """A maximum flow, as the flow on each arc (in the order given), for networks whose arcs
        are all distinct pairs (a parallel arc has no flow of its own); ValueError otherwise."""
        if source == sink:
            raise ValueError("source and sink must differ")
        if len(self._pairs[0]) != len(self.src):
            raise ValueError("flows() needs distinct arcs (no parallel pair)")
        self.calls += 1
        values = np.asarray(capacities, dtype=np.int64)
        data = np.zeros(len(self._capacity), dtype=np.int64)
        data[self._slot] = values
        compiled = self._compiled()
        if compiled is not None and data.max(initial=0) < _ORTOOLS_SAFE:
            compiled.set_arcs_capacity(self._arc_ids, data)
            if compiled.solve(source, sink) == compiled.OPTIMAL:
                return compiled.flows(self._arc_ids)[self._slot].astype(np.int64).tolist()
        import networkx as nx

        graph = nx.DiGraph()
        graph.add_nodes_from(range(self.num_nodes))
        for u, v, c in zip(self.src.tolist(), self.dst.tolist(), values.tolist()):
            graph.add_edge(u, v, capacity=c)
        _, flow = nx.maximum_flow(graph, source, sink)
        return [int(flow[u][v]) for u, v in zip(self.src.tolist(), self.dst.tolist())]

    def _compiled(self):
        """OR-Tools' max-flow (C++, int64 capacities) over the distinct arcs, built on first use;
        None where OR-Tools is not installed (the optional ``cpsat`` extra)."""
        if self._ortools is None:
            try:
                from ortools.graph.python.max_flow import SimpleMaxFlow
            except ImportError:
                self._ortools = False
                return None
            solver = SimpleMaxFlow()
            rows, cols = self._pairs
            self._arc_ids = solver.add_arcs_with_capacity(rows.astype(np.int64), cols.astype(np.int64),
                                                          np.zeros(len(rows), dtype=np.int64))
            self._ortools = solver
        return self._ortools or None

    def min_cut(self, source: int, sink: int) -> tuple[int, np.ndarray]:
        """Max-flow value and a boolean mask of the source side of a minimum cut."""
        if source == sink:
            raise ValueError("source and sink must differ")
        self.calls += 1
        if self._small:
            value, reached = _dinic(self.num_nodes, self._pairs, self._capacity.tolist(), source, sink)
            side = np.zeros(self.num_nodes, dtype=bool)
            side[list(reached)] = True
            return value, side
        if self._fits_int32:
            return self._scipy_min_cut(source, sink)
        return self._networkx_min_cut(source, sink)

    def _scipy_min_cut(self, source: int, sink: int) -> tuple[int, np.ndarray]:
        from scipy.sparse.csgraph import breadth_first_order, maximum_flow

        graph = self._matrix.copy()
        graph.data = self._capacity.astype(np.int32)
        result = maximum_flow(graph, source, sink)
        flow = result.flow
        residual = (graph - flow).tocsr()  # flow is skew-symmetric: reverse arcs gain what flows forward
        residual.data = (residual.data > 0).astype(np.int8)
        residual.eliminate_zeros()
        reached = breadth_first_order(residual, source, directed=True, return_predecessors=False)
        side = np.zeros(self.num_nodes, dtype=bool)
        side[reached] = True
        return int(result.flow_value), side

    def _networkx_min_cut(self, source: int, sink: int) -> tuple[int, np.ndarray]:
        import networkx as nx

        graph = nx.DiGraph()
        graph.add_nodes_from(range(self.num_nodes))
        for (u, v), c in zip(zip(*self._pairs), self._capacity):
            if int(c) > 0:
                graph.add_edge(int(u), int(v), capacity=int(c))
        value, (reachable, _) = nx.minimum_cut(graph, source, sink)
        side = np.zeros(self.num_nodes, dtype=bool)
        side[list(reachable)] = True
        return int(value), side


def _dinic(num_nodes: int, pairs: tuple[np.ndarray, np.ndarray], capacity: list[int], source: int,
           sink: int) -> tuple[int, set[int]]:
    """Dinic's max-flow in plain Python integers (exact at any size of number) for small networks;
    returns the value and the nodes reachable from ``source`` in the final residual graph (the
    source side of the minimum cut nearest the source, the same for every maximum flow)."""
    head: list[list[int]] = [[] for _ in range(num_nodes)]
    to: list[int] = []
    cap: list[int] = []
    for u, v, c in zip(pairs[0].tolist(), pairs[1].tolist(), capacity):
        head[u].append(len(to))
        to.append(v)
        cap.append(int(c))
        head[v].append(len(to))
        to.append(u)
        cap.append(0)
    total = sum(cap) + 1  # more than any path can carry
    flow = 0
    while True:
        level = [-1] * num_nodes
        level[source] = 0
        queue = [source]
        for u in queue:
            for e in head[u]:
                if cap[e] > 0 and level[to[e]] < 0:
                    level[to[e]] = level[u] + 1
                    queue.append(to[e])
        if level[sink] < 0:
            return flow, {u for u in range(num_nodes) if level[u] >= 0}
        pointer = [0] * num_nodes

        def push(u: int, limit: int) -> int:
            if u == sink:
                return limit
            edges = head[u]
            while pointer[u] < len(edges):
                e = edges[pointer[u]]
                v = to[e]
                if cap[e] > 0 and level[v] == level[u] + 1:
                    pushed = push(v, min(limit, cap[e]))
                    if pushed:
                        cap[e] -= pushed
                        cap[e ^ 1] += pushed
                        return pushed
                pointer[u] += 1
            return 0

        while True:
            pushed = push(source, total)
            if not pushed:
                break
            flow += pushed
