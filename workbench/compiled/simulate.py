"""The default (in-order) simulation compiled with numba, for algorithms of hundreds of thousands
of transfers (a periodic one without writing it out; a plain one is one piece with no lag).

``simulate._run_in_order``'s pass, on ``TransferArrays`` and a table of distinct routes: every
floating-point operation is the same one in the same order, so both give bit-identical timings
(the tests hold them to it). Anything the arrays cannot express, or any transfer the Python
simulator would refuse, makes ``timing`` return None and the Python simulator run, so its
``SimulationError`` messages stay the only ones.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from workbench.compiled.arrays import TransferArrays
from workbench.compiled.first_call import locked_first_call

__all__ = ["timing"]


@njit(cache=True)
def _in_order_periodic(route_of, chunk_counts, dep_start, deps, lags, repeat, route_seg_start, seg_link_start,
                       seg_links, seg_alpha, seg_bandwidth, seg_overhead, chunk_bytes, blocking, num_links,
                       occupancy_size):
    """``_in_order`` over a periodic schedule's expansion (``workbench.model.periodic.expansion_order``):
    period q serves template transfer i for piece q - lag[i]; arrays are piece-major."""
    m = len(route_of)
    count = m * repeat
    max_lag = 0
    for i in range(m):
        if lags[i] > max_lag:
            max_lag = lags[i]
    free = np.zeros(num_links)
    busy = np.zeros(num_links)
    carried = np.zeros(num_links)
    start = np.zeros(count)
    end = np.zeros(count)
    occ_link = np.empty(occupancy_size, dtype=np.int64)
    occ_start = np.empty(occupancy_size)
    occ_end = np.empty(occupancy_size)
    o = 0
    for q in range(repeat + max_lag):
        for i in range(m):
            piece = q - lags[i]
            if piece < 0 or piece >= repeat:
                continue
            base = piece * m
            t = base + i
            ready = 0.0
            for k in range(dep_start[i], dep_start[i + 1]):
                if end[base + deps[k]] > ready:
                    ready = end[base + deps[k]]
            nbytes = chunk_bytes * chunk_counts[i]
            r = route_of[i]
            for s in range(route_seg_start[r], route_seg_start[r + 1]):
                begin = ready
                for k in range(seg_link_start[s], seg_link_start[s + 1]):
                    if free[seg_links[k]] > begin:
                        begin = free[seg_links[k]]
                serialise = nbytes / seg_bandwidth[s] + seg_overhead[s]
                if blocking:
                    release = begin + serialise + seg_alpha[s]
                else:
                    release = begin + serialise
                held = release - begin
                for k in range(seg_link_start[s], seg_link_start[s + 1]):
                    link = seg_links[k]
                    free[link] = release
                    busy[link] += held
                    carried[link] += nbytes
                    occ_link[o] = link
                    occ_start[o] = begin
                    occ_end[o] = release
                    o += 1
                if s == route_seg_start[r]:
                    start[t] = begin
                ready = begin + serialise + seg_alpha[s]
            end[t] = ready
    return start, end, busy, carried, occ_link, occ_start, occ_end


# the first call in a process holds the compile lock (workbench.compiled.first_call)
_in_order_periodic = locked_first_call(_in_order_periodic, "in_order_periodic", __file__)


def _distinct_routes(arrays: TransferArrays, num_nodes: int):
    """The distinct (src, dst, via) routes and each transfer's index among them."""
    if arrays.vias is None:
        pairs, route_of = np.unique(arrays.src * num_nodes + arrays.dst, return_inverse=True)
        return [(pair // num_nodes, pair % num_nodes, None) for pair in pairs.tolist()], route_of
    index: dict[tuple, int] = {}
    keys = zip(arrays.src.tolist(), arrays.dst.tolist(), arrays.vias)
    route_of = np.fromiter((index.setdefault(key, len(index)) for key in keys), dtype=np.int64, count=len(arrays))
    return list(index), route_of


def timing(algorithm, arrays: TransferArrays, blocking: bool, switch_model: str, route_segments):
    """``_run_in_order``'s five results, or None where the Python simulator must run (it then
    raises for a bad transfer, or handles what the arrays cannot express)."""
    topology = algorithm.topology
    count = len(arrays)
    num_nodes = topology.num_nodes
    chunk_bytes = algorithm.chunk_bytes
    if not (type(chunk_bytes) is float or (type(chunk_bytes) is int and abs(chunk_bytes) <= 2**53)):
        return None  # Python multiplies in the value's own type (a numpy float32, an exact big int)
    period = algorithm.period
    if period is not None:
        from workbench.model.periodic import PeriodError, check_template_order

        try:
            check_template_order(algorithm.transfers)
        except PeriodError:
            return None  # the Python simulator names it
    elif not arrays.deps_point_back():
        return None
    if not (arrays.ids_are_positions() and arrays.nodes_within(num_nodes)):
        return None
    if any(a.reduce_rate is not None for a in topology.abilities.values()):
        return None  # a switch's reduce rate depends on the transfer, not only its route: the Python pass
    routes, route_of = _distinct_routes(arrays, num_nodes)
    route_seg_start, seg_link_start, seg_links, seg_alpha, seg_bandwidth, route_links = [0], [0], [], [], [], []
    seg_overhead: list[float] = []
    for src, dst, via in routes:
        try:
            segments = route_segments(topology, src, dst, switch_model, via)
        except Exception:  # whatever it is, the Python simulator meets it too, at the transfer it names
            return None
        for links, alpha_sum, bandwidth, overhead in segments:
            seg_links.extend(links)
            seg_link_start.append(len(seg_links))
            seg_alpha.append(alpha_sum)
            seg_bandwidth.append(bandwidth)
            seg_overhead.append(overhead)
        route_seg_start.append(len(seg_alpha))
        route_links.append(sum(len(segment[0]) for segment in segments))
    occupancy_size = int(np.asarray(route_links, dtype=np.int64)[route_of].sum()) if count else 0
    as_int = lambda values: np.asarray(values, dtype=np.int64)  # noqa: E731
    routes = (as_int(route_seg_start), as_int(seg_link_start), as_int(seg_links),
              np.asarray(seg_alpha, dtype=np.float64), np.asarray(seg_bandwidth, dtype=np.float64),
              np.asarray(seg_overhead, dtype=np.float64), float(algorithm.chunk_bytes), blocking, len(topology.links))
    if period is not None:
        lags = as_int([t.lag for t in algorithm.transfers])
        start, end, busy, carried, occ_link, occ_start, occ_end = _in_order_periodic(
            route_of.astype(np.int64), arrays.chunk_counts, arrays.dep_start, arrays.deps, lags, period.repeat,
            *routes, occupancy_size * period.repeat)
        return start, end, busy, carried, (occ_link, occ_start, occ_end)
    # a plain algorithm is one piece with no lag: the same pass, the same operations in the same order
    start, end, busy, carried, occ_link, occ_start, occ_end = _in_order_periodic(
        route_of.astype(np.int64), arrays.chunk_counts, arrays.dep_start, arrays.deps, np.zeros(count, dtype=np.int64),
        1, *routes, occupancy_size)
    return start, end, busy, carried, (occ_link, occ_start, occ_end)
