"""Exact throughput optima by max-flow: the yardsticks every schedule is measured against.

All-Gather (Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on
Heterogeneous Network Fabrics", arXiv 2402.06787, Theorem 1): on a directed graph with compute
nodes C (N of them) and switches, the All-Gather of M bytes needs

    T* = (M / N) * max over S with 0 < |S ∩ C| < N of |S ∩ C| / B+(S)

(``B+(S)``: bandwidth of the links leaving S), and pipelined spanning-tree packing reaches it.
Reduce-Scatter is the same on the reversed graph. The maximum is found without enumerating S:
Newton's (Dinkelbach's) method on ``f(r) = max_S |S ∩ C| - r B+(S)``. For ``r = c/B`` (integers)
add a super-source with an arc of capacity ``B`` to every NPU and give link e capacity ``c b_e``;
``r`` is the optimum iff every NPU receives a flow of ``N B``. A failing sink's minimum cut is a
set with a larger ratio, so ``r`` climbs through ratios of real cuts until it stops
(docs/methods/forestcoll.md section 1.6). Every comparison is on integers.

Single-root collectives, same idea: broadcast of M bytes needs ``M / min_v maxflow(root, v)``
(Edmonds' branching theorem makes it achievable); scatter needs
``(M/N) max over S ∋ root of |C \\ S| / B+(S)`` (one max-flow per Newton step, sink side joined to a
super-sink); reduce and gather are their reversals.

All-Reduce: ``smallest_splitting_cut`` is the smallest one-direction capacity of any cut that
splits the NPUs (``2(N-1)`` max-flows from / to NPU 0).

Results carry the maximising set, its ratio with the *real* bandwidths, and the smallest alpha on
its links. When bandwidths had to be quantised (``IntegerCapacities.exact`` False) the returned set
is still a real cut, so its ratio is still a valid lower bound; it is exact to the quantum.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from workbench.util.lazy import lazy_module
from workbench.kit.maxflow import FlowNetwork, IntegerCapacities, integer_capacities
from workbench.kit.symmetry import is_vertex_transitive
from workbench.topology import Topology, TopologyError

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["CutRatio", "allgather_cut_ratio", "reducescatter_cut_ratio", "broadcast_cut", "scatter_cut_ratio",
           "smallest_splitting_cut", "cut_capacity"]


@dataclass(frozen=True)
class CutRatio:
    """A maximising cut of a throughput bound.

    ``ratio`` is in integer-capacity units (``capacities``); ``seconds_per_byte`` uses the real
    bandwidths: the bound's bandwidth term is ``size * seconds_per_byte`` for single-root
    collectives and ``size / N * seconds_per_byte`` for All-Gather-like ones. ``exact`` says the
    ratio is the proven maximum (bandwidths representable as integers); ``iterations`` counts
    Newton steps, ``flows`` max-flow calls.
    """

    ratio: Fraction
    cut: frozenset[int]
    seconds_per_byte: float
    alpha: float
    capacities: IntegerCapacities
    exact: bool
    iterations: int = 0
    flows: int = 0


def _leaving(topology: Topology, side: np.ndarray) -> np.ndarray:
    """Mask of the links leaving the node set ``side`` (a boolean mask over the nodes)."""
    src = np.fromiter((l.src for l in topology.links), dtype=np.int64, count=len(topology.links))
    dst = np.fromiter((l.dst for l in topology.links), dtype=np.int64, count=len(topology.links))
    return side[src] & ~side[dst]


def cut_capacity(topology: Topology, side: frozenset[int] | set[int] | np.ndarray) -> tuple[float, float]:
    """(total bandwidth, smallest alpha) of the links leaving ``side`` (a node set or a node mask)."""
    if not isinstance(side, np.ndarray):
        mask = np.zeros(topology.num_nodes, dtype=bool)
        mask[list(side)] = True
        side = mask
    leaving = _leaving(topology, side[: topology.num_nodes])
    if not leaving.any():
        return 0.0, float("inf")
    bandwidth = np.array([l.bandwidth for l in topology.links])[leaving]
    alpha = np.array([l.alpha for l in topology.links])[leaving]
    return float(bandwidth.sum()), float(alpha.min())


def _network_with_source(topology: Topology) -> tuple[FlowNetwork, int]:
    """The links plus a super-source (node id num_nodes) with an arc to every NPU (arcs appended)."""
    n = topology.num_nodes
    source = n
    src = [l.src for l in topology.links] + [source] * topology.num_npus
    dst = [l.dst for l in topology.links] + list(topology.npus)
    return FlowNetwork(n + 1, src, dst), source


def _check_reachable(value: int, sink: int, what: str) -> None:
    if value == 0:
        raise TopologyError(f"rank {sink} cannot be reached ({what})")


def allgather_cut_ratio(topology: Topology, symmetry: bool = True) -> CutRatio:
    """The All-Gather optimum's maximising cut (see the module docstring).

    On a fabric whose translations take every NPU to every other (``workbench.kit.symmetry``: tori,
    rings), the network (capacities and the source's equal arcs) looks the same from every NPU, so
    the max-flow to NPU 0 stands for all of them: one sink per ratio instead of N.
    """
    n_npus = topology.num_npus
    if n_npus < 2:
        raise TopologyError("an All-Gather bound needs at least two NPUs")
    caps = integer_capacities([l.bandwidth for l in topology.links])
    cap = caps.values
    network, source = _network_with_source(topology)
    n = topology.num_nodes
    in_cap = np.zeros(n, dtype=np.int64)
    np.add.at(in_cap, [l.dst for l in topology.links], cap)
    # start: the best single-NPU cut V \ {v} (a real cut, so r0 <= the optimum)
    start = min(range(n_npus), key=lambda v: (in_cap[v], v))
    if in_cap[start] == 0:
        raise TopologyError(f"rank {start} has no incoming link")
    best_c, best_b = n_npus - 1, int(in_cap[start])
    best_cut = frozenset(set(range(n)) - {start})
    flows = iterations = 0
    passed = 0  # consecutive sinks that met the demand at the current ratio
    sinks_needed = 1 if symmetry and is_vertex_transitive(topology) else n_npus
    sink = 0
    link_src = np.array([l.src for l in topology.links], dtype=np.int64)
    link_dst = np.array([l.dst for l in topology.links], dtype=np.int64)
    network.set_capacities(np.concatenate([best_c * cap, np.full(n_npus, best_b, dtype=np.int64)]))
    while passed < sinks_needed:
        value, side = network.min_cut(source, sink)
        flows += 1
        if value >= n_npus * best_b:
            passed += 1
        else:
            _check_reachable(value, sink, "no path from some NPU")
            members = np.flatnonzero(side[:n])
            crossing = side[link_src] & ~side[link_dst]
            c = int(np.count_nonzero(members < n_npus))
            b = int(cap[crossing].sum())
            if b == 0 or c * best_b <= best_c * b:  # cannot happen with exact integers; guard anyway
                raise RuntimeError("max-flow returned a cut that does not improve the ratio")
            best_c, best_b, best_cut = c, b, frozenset(int(x) for x in members)
            iterations += 1
            passed = 0
            network.set_capacities(np.concatenate([best_c * cap, np.full(n_npus, best_b, dtype=np.int64)]))
            continue  # re-test the same sink at the new ratio
        sink = (sink + 1) % n_npus
    real, alpha = cut_capacity(topology, best_cut)
    return CutRatio(Fraction(best_c, best_b), best_cut, best_c / real, alpha, caps, caps.exact, iterations, flows)


def reducescatter_cut_ratio(topology: Topology) -> CutRatio:
    """Reduce-Scatter: the All-Gather cut of the reversed graph (its set is on the reversed graph)."""
    return allgather_cut_ratio(topology.reversed())


def broadcast_cut(topology: Topology, root: int) -> CutRatio:
    """Broadcast from ``root``: ratio ``1 / min_v maxflow(root, v)``; the cut is the argmin's source side."""
    caps = integer_capacities([l.bandwidth for l in topology.links])
    network = FlowNetwork(topology.num_nodes, [l.src for l in topology.links], [l.dst for l in topology.links])
    network.set_capacities(caps.values)
    best_value, best_side = None, None
    for sink in topology.npus:
        if sink == root:
            continue
        value, side = network.min_cut(root, sink)
        _check_reachable(value, sink, f"from root {root}")
        if best_value is None or value < best_value:
            best_value, best_side = value, side
    if best_value is None:
        raise TopologyError("a broadcast bound needs at least two NPUs")
    cut = frozenset(int(x) for x in np.flatnonzero(best_side))
    real, alpha = cut_capacity(topology, cut)
    return CutRatio(Fraction(1, best_value), cut, 1.0 / real, alpha, caps, caps.exact, 1, topology.num_npus - 1)


def scatter_cut_ratio(topology: Topology, root: int) -> CutRatio:
    """Scatter from ``root``: max over S containing the root of |C \\ S| / B+(S) (Newton on one max-flow)."""
    n, n_npus = topology.num_nodes, topology.num_npus
    caps = integer_capacities([l.bandwidth for l in topology.links])
    cap = caps.values
    sink = n
    others = [v for v in topology.npus if v != root]
    if not others:
        raise TopologyError("a scatter bound needs at least two NPUs")
    network = FlowNetwork(n + 1, [l.src for l in topology.links] + others,
                          [l.dst for l in topology.links] + [sink] * len(others))
    out_cap = int(sum(int(c) for l, c in zip(topology.links, cap) if l.src == root))
    if out_cap == 0:
        raise TopologyError(f"root {root} has no outgoing link")
    best_c, best_b, best_cut = n_npus - 1, out_cap, frozenset({root})
    flows = iterations = 0
    while True:
        network.set_capacities(np.concatenate([best_c * cap, np.full(len(others), best_b, dtype=np.int64)]))
        value, side = network.min_cut(root, sink)
        flows += 1
        if value >= best_b * len(others):
            break
        members = frozenset(int(x) for x in np.flatnonzero(side[:n]))
        c = sum(1 for v in topology.npus if v not in members)
        b = int(cap[_leaving(topology, side[:n])].sum())
        if b == 0:
            _check_reachable(0, min(v for v in topology.npus if v not in members), f"from root {root}")
        if c * best_b <= best_c * b:
            raise RuntimeError("max-flow returned a cut that does not improve the ratio")
        best_c, best_b, best_cut = c, b, members
        iterations += 1
    real, alpha = cut_capacity(topology, best_cut)
    return CutRatio(Fraction(best_c, best_b), best_cut, best_c / real, alpha, caps, caps.exact, iterations, flows)


def smallest_splitting_cut(topology: Topology) -> tuple[float, frozenset[int], float]:
    """(bandwidth, source side, smallest alpha) of the weakest one-direction cut splitting the NPUs.

    Any set S holding NPU 0 but not NPU v is cut by the 0 -> v max-flow, any set holding v but not
    0 by the v -> 0 one, so ``2(N-1)`` max-flows find the minimum over all splitting sets.
    """
    caps = integer_capacities([l.bandwidth for l in topology.links])
    network = FlowNetwork(topology.num_nodes, [l.src for l in topology.links], [l.dst for l in topology.links])
    network.set_capacities(caps.values)
    best: tuple[float, frozenset[int], float] | None = None
    for v in range(1, topology.num_npus):
        for s, t in ((0, v), (v, 0)):
            value, side = network.min_cut(s, t)
            _check_reachable(value, t, f"from rank {s}")
            cut = frozenset(int(x) for x in np.flatnonzero(side))
            real, alpha = cut_capacity(topology, cut)
            if best is None or real < best[0]:
                best = (real, cut, alpha)
    if best is None:
        raise TopologyError("a splitting cut needs at least two NPUs")
    return best
