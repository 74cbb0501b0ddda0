"""The link-level simulator: one set of timing rules for every algorithm (docs/cost-model.md).

* The file order is the plan. A transfer uses its direct link, else the BFS route of
  ``Topology.route``. The route is cut into segments at NPUs (they store and forward); a switch is
  cut-through, so a segment ``npu -> switch -> npu`` occupies all its links at once
  (``switch_model="store-and-forward"`` makes every hop its own segment).
* A segment of ``m`` bytes occupies its links for ``max(overhead) + m / min(bandwidth)`` and
  arrives ``sum(alpha)`` after that (``pipelined``); in the ``blocking`` model its links stay
  occupied for the alpha sum too. The per-message overhead is 0 unless a topology gives one
  (docs/cost-model.md).
* ``in-order`` (default): on every link segments start in file order; one pass in file order.
  ``fifo``: event driven; at each instant every ready segment whose links are all free starts, in
  (ready time, file order); a waiting segment reserves nothing.
* A switch that reduces (``workbench.topology.abilities``) with a ``reduce_rate`` streams a
  reduce into it and a sum out of it at ``min(link bandwidth, reduce_rate)``.
* A periodic schedule (``workbench.model.periodic``) is timed as its expansion, without writing it out;
  its per-transfer arrays are piece-major (piece k of template transfer i at ``k * m + i``).
* A model is written as one string, ``link model/order/switch model`` (``model_name``,
  ``parse_model``): an algorithm's ``meta.claim_model`` names the model of its claimed time.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Literal

from workbench.util.lazy import lazy_module
from workbench.model.algorithm import Algorithm
from workbench.model.collective import bus_factor
from workbench.compiled.engines import choose_engine
from workbench.topology import Topology

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["SimulationResult", "SimulationError", "simulate", "route_segments", "named_route", "segment_table", "LINK_MODELS", "ORDERS", "SWITCH_MODELS",
           "DEFAULT_MODEL", "DEFAULT_MODEL_NAME", "model_name", "parse_model"]

LINK_MODELS = ("pipelined", "blocking")
ORDERS = ("in-order", "fifo")
SWITCH_MODELS = ("cut-through", "store-and-forward")
# the default model: the one every algorithm is verified against and every table reports
DEFAULT_MODEL = {"link_model": LINK_MODELS[0], "order": ORDERS[0], "switch_model": SWITCH_MODELS[0]}
# a model as one string, "link model/order/switch model": how an algorithm's meta.claim_model names
# the model its claimed time is in (model_name, parse_model)
DEFAULT_MODEL_NAME = "/".join((DEFAULT_MODEL["link_model"], DEFAULT_MODEL["order"], DEFAULT_MODEL["switch_model"]))

# (link indices, alpha sum, bottleneck bandwidth, per-message overhead: the largest of its links')
Segment = tuple[tuple[int, ...], float, float, float]


class SimulationError(ValueError):
    """An algorithm the simulator cannot run (unroutable transfer, bad option); names the transfer."""


@dataclass
class SimulationResult:
    collective_time: float
    start: np.ndarray  # per transfer: start of its first segment (s)
    end: np.ndarray  # per transfer: arrival at dst (s)
    link_busy: np.ndarray  # per link (topology.links order): occupied seconds
    link_bytes: np.ndarray  # per link: bytes carried
    size_bytes: float
    bus_factor: float
    options: dict[str, str]
    topology: Topology = field(repr=False)
    occupancy: tuple[np.ndarray, np.ndarray, np.ndarray] = field(repr=False)  # (link, start, end)

    @property
    def algbw(self) -> float:
        """Algorithm bandwidth in B/s (size / collective time)."""
        return self.size_bytes / self.collective_time if self.collective_time > 0 else float("inf")

    @property
    def busbw(self) -> float:
        """Bus bandwidth in B/s (nccl-tests factor times algbw)."""
        return self.algbw * self.bus_factor

    def link_utilisation(self) -> np.ndarray:
        """Per link: busy time / collective time."""
        if self.collective_time <= 0:
            return np.zeros_like(self.link_busy)
        return self.link_busy / self.collective_time

    def utilisation_trace(self, bins: int = 100) -> tuple[np.ndarray, np.ndarray]:
        """Bin edges (s) and, per bin, the mean fraction of all links that were busy."""
        edges = np.linspace(0.0, max(self.collective_time, 1e-30), bins + 1)
        links, starts, ends = self.occupancy
        if len(links) == 0:
            return edges, np.zeros(bins)
        s_sorted = np.sort(starts)
        e_sorted = np.sort(ends)
        s_prefix = np.concatenate(([0.0], np.cumsum(s_sorted)))
        e_prefix = np.concatenate(([0.0], np.cumsum(e_sorted)))
        ns = np.searchsorted(s_sorted, edges, side="left")
        ne = np.searchsorted(e_sorted, edges, side="left")
        cumulative = (edges * ns - s_prefix[ns]) - (edges * ne - e_prefix[ne])  # busy link-seconds up to t
        busy = np.diff(cumulative)
        width = np.diff(edges)
        return edges, busy / (width * max(len(self.link_busy), 1))

    def summary(self) -> dict[str, Any]:
        """The headline numbers: collective time (s), algbw and busbw (GB/s), size (bytes), transfers,
        peak link utilisation, and the simulation options."""
        return {
            "collective_time": self.collective_time,
            "algbw": self.algbw / 1e9,
            "busbw": self.busbw / 1e9,
            "size_bytes": self.size_bytes,
            "transfers": int(len(self.end)),
            "max_link_utilisation": float(self.link_utilisation().max()) if len(self.link_busy) else 0.0,
            **self.options,
        }

    def to_dict(self, per_transfer: bool = False) -> dict[str, Any]:
        """``summary()`` plus each link's busy seconds and bytes; with ``per_transfer``, every transfer's
        start and end (s)."""
        data = self.summary()
        data["links"] = [
            {"src": l.src, "dst": l.dst, "busy": float(b), "bytes": float(n)}
            for l, b, n in zip(self.topology.links, self.link_busy, self.link_bytes)
        ]
        if per_transfer:
            data["start"] = self.start.tolist()
            data["end"] = self.end.tolist()
        return data


def route_segments(topology: Topology, src: int, dst: int, switch_model: str = "cut-through",
                   via: tuple[int, ...] | None = None) -> list[Segment]:
    """The segments a transfer ``src -> dst`` occupies, in order, each as (link indices, alpha sum,
    bottleneck bandwidth, overhead), over the switches ``via`` names or else the topology's route;
    SimulationError when unroutable."""
    path = topology.route(src, dst) if via is None else named_route(topology, src, dst, via)
    if path is None:
        raise SimulationError(f"no path from node {src} to node {dst} in topology {topology.name!r}")
    segments: list[Segment] = []
    current: list[int] = []
    last = path[-1]
    for u, v in zip(path, path[1:]):
        current.append(topology.link_index(u, v))
        if switch_model == "store-and-forward" or not topology.is_switch(v) or v == last:
            links = tuple(current)
            segments.append((links, sum(topology.links[l].alpha for l in links),
                             min(topology.links[l].bandwidth for l in links),
                             max(topology.links[l].overhead for l in links)))
            current = []
    return segments


def _check_options(link_model: str, order: str, switch_model: str) -> None:
    if link_model not in LINK_MODELS:
        raise SimulationError(f"unknown link model {link_model!r} (use {' or '.join(LINK_MODELS)})")
    if order not in ORDERS:
        raise SimulationError(f"unknown order {order!r} (use {' or '.join(ORDERS)})")
    if switch_model not in SWITCH_MODELS:
        raise SimulationError(f"unknown switch model {switch_model!r} (use {' or '.join(SWITCH_MODELS)})")


def model_name(link_model: str = LINK_MODELS[0], order: str = ORDERS[0], switch_model: str = SWITCH_MODELS[0]) -> str:
    """``simulate``'s options as one string, ``link model/order/switch model``
    (``DEFAULT_MODEL_NAME`` is ``pipelined/in-order/cut-through``); SimulationError for an unknown option."""
    _check_options(link_model, order, switch_model)
    return f"{link_model}/{order}/{switch_model}"


def parse_model(name: str) -> dict[str, str] | None:
    """The ``simulate`` options a ``model_name`` string spells, or None for a name with no ``/``:
    a formulation's own model (``sccl-steps``, ``teccl-epochs``), which no simulator option
    reproduces. SimulationError for a name with slashes that is not a simulator model."""
    if "/" not in name:
        return None
    parts = name.split("/")
    if len(parts) != 3:
        raise SimulationError(f"model {name!r}: expected link model/order/switch model, "
                              f"e.g. {DEFAULT_MODEL_NAME!r}")
    options = dict(zip(("link_model", "order", "switch_model"), parts))
    _check_options(**options)
    return options


def named_route(topology: Topology, src: int, dst: int, via: tuple[int, ...]) -> list[int]:
    """The path ``src, *via, dst``; SimulationError unless every node of ``via`` is a switch and each
    step is a link."""
    path = [src, *via, dst]
    for node in via:
        if not (0 <= node < topology.num_nodes and topology.is_switch(node)):
            raise SimulationError(f"its route names node {node}, which is not a switch")
    for u, v in zip(path, path[1:]):
        if not topology.has_link(u, v):
            raise SimulationError(f"its route steps from node {u} to node {v}, which no link joins")
    return path


def segment_table(algorithm: Algorithm, switch_model: str) -> list[list[Segment]]:
    """Per transfer, its segments (routes are cached per (src, dst, via)); a reduce into a switch
    with a ``reduce_rate``, and a sum taken from one, hold that segment at the rate
    (``workbench.checking.switch_values.rated_segments``)."""
    from workbench.checking.switch_values import rated_segments, rated_transfers

    topology = algorithm.topology
    rated = rated_transfers(algorithm)
    cache: dict[tuple, list[Segment]] = {}
    table = []
    for t in algorithm.transfers:
        key = (t.src, t.dst, t.via)
        segments = cache.get(key)
        if segments is None:
            try:
                segments = cache[key] = route_segments(topology, t.src, t.dst, switch_model, t.via)
            except SimulationError as exc:
                raise SimulationError(f"transfer {t.id}: {exc}") from None
            except (IndexError, KeyError):
                raise SimulationError(f"transfer {t.id}: endpoint {t.src} or {t.dst} is not a node") from None
        table.append(rated_segments(topology, t, segments) if t.id in rated else segments)
    return table


COMPILED_FROM = 200_000  # transfers: from here the compiled pass pays for loading numba (workbench.compiled.engines)


def simulate(
    algorithm: Algorithm,
    link_model: Literal["pipelined", "blocking"] = "pipelined",
    order: Literal["in-order", "fifo"] = "in-order",
    switch_model: Literal["cut-through", "store-and-forward"] = "cut-through",
    *,
    engine: str = "auto",
) -> SimulationResult:
    """Time an algorithm under the rules of docs/cost-model.md (verify it first; this only times).

    ``engine``: ``python``, ``compiled`` (numba: ``workbench.compiled.simulate``; the in-order
    pass only, fifo always runs in Python) or ``auto`` (compiled from ``COMPILED_FROM`` transfers);
    the timings are bit-identical.
    """
    _check_options(link_model, order, switch_model)
    return _simulate(algorithm, link_model, order, switch_model, engine, None)


def simulate_with_arrays(algorithm: Algorithm, arrays: Any) -> SimulationResult:
    """The default simulation, compiled, on ``TransferArrays`` a caller already built (the verifier)."""
    return _simulate(algorithm, **DEFAULT_MODEL, engine="compiled", arrays=arrays)


def _simulate(algorithm: Algorithm, link_model: str, order: str, switch_model: str, engine: str,
              arrays: Any) -> SimulationResult:
    blocking = link_model == "blocking"
    timing = None
    chosen = choose_engine(engine, algorithm.total_transfers, COMPILED_FROM, "simulate", eager=False)
    if order == "in-order" and chosen == "compiled":
        from workbench.compiled.simulate import timing as compiled_timing
        from workbench.compiled.arrays import transfer_arrays

        if arrays is None:
            arrays = transfer_arrays(algorithm.transfers)
        if arrays is not None:
            timing = compiled_timing(algorithm, arrays, blocking, switch_model, route_segments)
    if timing is None:
        timing = _python_timing(algorithm, blocking, order, switch_model)
    start, end, busy, nbytes, occupancy = timing
    collective_time = float(end.max()) if len(end) else 0.0
    return SimulationResult(
        collective_time=collective_time,
        start=start,
        end=end,
        link_busy=busy,
        link_bytes=nbytes,
        size_bytes=algorithm.size_bytes,
        bus_factor=bus_factor(algorithm.collective.kind, algorithm.collective.num_ranks),
        options={"link_model": link_model, "order": order, "switch_model": switch_model},
        topology=algorithm.topology,
        occupancy=occupancy,
    )


def _python_timing(algorithm: Algorithm, blocking: bool, order: str, switch_model: str):
    if algorithm.period is not None:
        return _periodic_timing(algorithm, blocking, order, switch_model)
    segments = segment_table(algorithm, switch_model)
    for t in algorithm.transfers:
        for d in t.deps:
            if not (0 <= d < t.id):
                raise SimulationError(f"transfer {t.id}: dependency {d} does not name an earlier transfer")
    if order == "in-order":
        return _run_in_order(algorithm, segments, blocking)
    return _run_fifo(algorithm, segments, blocking)


def _serve(segments: list[Segment], ready: float, nbytes: float, free: list[float], busy: list[float],
           carried: list[float], occupied: tuple[list, list, list], blocking: bool) -> tuple[float | None, float]:
    """One transfer's segments in turn, each starting at max(ready, free time of its links): the
    first segment's start (None without segments) and the arrival. Link state and occupancy are
    updated in place."""
    occ_link, occ_start, occ_end = occupied
    first = None
    for links, alpha_sum, bandwidth, overhead in segments:
        begin = ready
        for l in links:
            if free[l] > begin:
                begin = free[l]
        serialise = nbytes / bandwidth + overhead  # + 0.0 without overhead: the same float
        release = begin + serialise + alpha_sum if blocking else begin + serialise
        held = release - begin
        for l in links:
            free[l] = release
            busy[l] += held
            carried[l] += nbytes
            occ_link.append(l)
            occ_start.append(begin)
            occ_end.append(release)
        if first is None:
            first = begin
        ready = begin + serialise + alpha_sum
    return first, ready


def _run_in_order(algorithm: Algorithm, segments: list[list[Segment]], blocking: bool):
    """One pass in file order: a segment starts at max(ready, free time of each of its links)."""
    num_links = len(algorithm.topology.links)
    free = [0.0] * num_links
    busy = [0.0] * num_links
    carried = [0.0] * num_links
    count = len(algorithm.transfers)
    start = [0.0] * count
    end = [0.0] * count
    occ_link: list[int] = []
    occ_start: list[float] = []
    occ_end: list[float] = []
    chunk_bytes = algorithm.chunk_bytes
    occupied = (occ_link, occ_start, occ_end)
    for t, segs in zip(algorithm.transfers, segments):
        ready = 0.0
        for d in t.deps:
            if end[d] > ready:
                ready = end[d]
        first, end[t.id] = _serve(segs, ready, chunk_bytes * len(t.chunks), free, busy, carried, occupied, blocking)
        if first is not None:
            start[t.id] = first
    occupancy = (np.asarray(occ_link, dtype=np.int64), np.asarray(occ_start), np.asarray(occ_end))
    return np.asarray(start), np.asarray(end), np.asarray(busy), np.asarray(carried), occupancy


def _periodic_timing(algorithm: Algorithm, blocking: bool, order: str, switch_model: str):
    """A periodic schedule (``workbench.model.periodic``), its arrays piece-major (piece k's copy of template
    transfer i at ``k * len(template) + i``). In order: the expansion served without writing it out;
    fifo: the expansion written out and run (fifo is event driven over the whole schedule)."""
    from workbench.model.periodic import PeriodError, check_template_order, expansion_order

    try:
        check_template_order(algorithm.transfers)
    except PeriodError as exc:
        raise SimulationError(str(exc)) from None
    if order == "fifo":
        start, end, busy, carried, occupancy = _python_timing(algorithm.expanded(), blocking, order, switch_model)
        m = len(algorithm.transfers)
        where = np.fromiter((k * m + i for k, i in expansion_order([t.lag for t in algorithm.transfers],
                                                                    algorithm.period.repeat)),
                            dtype=np.int64, count=len(end))
        piece_start, piece_end = np.empty_like(start), np.empty_like(end)
        piece_start[where], piece_end[where] = start, end
        return piece_start, piece_end, busy, carried, occupancy
    return _run_in_order_periodic(algorithm, segment_table(algorithm, switch_model), blocking)


def _run_in_order_periodic(algorithm: Algorithm, segments: list[list[Segment]], blocking: bool):
    """``_run_in_order`` over the expansion of a periodic schedule, the same operations in the same order."""
    from workbench.model.periodic import expansion_order

    transfers = algorithm.transfers
    m = len(transfers)
    repeat = algorithm.period.repeat
    num_links = len(algorithm.topology.links)
    free = [0.0] * num_links
    busy = [0.0] * num_links
    carried = [0.0] * num_links
    start = [0.0] * (m * repeat)
    end = [0.0] * (m * repeat)
    occ_link: list[int] = []
    occ_start: list[float] = []
    occ_end: list[float] = []
    chunk_bytes = algorithm.chunk_bytes
    occupied = (occ_link, occ_start, occ_end)
    for k, i in expansion_order([t.lag for t in transfers], repeat):
        t = transfers[i]
        base = k * m
        ready = 0.0
        for d in t.deps:
            if end[base + d] > ready:
                ready = end[base + d]
        first, end[base + i] = _serve(segments[i], ready, chunk_bytes * len(t.chunks), free, busy, carried, occupied,
                                      blocking)
        if first is not None:
            start[base + i] = first
    occupancy = (np.asarray(occ_link, dtype=np.int64), np.asarray(occ_start), np.asarray(occ_end))
    return np.asarray(start), np.asarray(end), np.asarray(busy), np.asarray(carried), occupancy


def _waiting_and_dependants(transfers: list) -> tuple[list[int], list[list[int]]]:
    """Per transfer: how many distinct deps it waits for, and the transfers that depend on it."""
    count = len(transfers)
    remaining = [0] * count
    dependants: list[list[int]] = [[] for _ in range(count)]
    for t in transfers:
        for d in set(t.deps):
            dependants[d].append(t.id)
        remaining[t.id] = len(set(t.deps))
    return remaining, dependants


def _run_fifo(algorithm: Algorithm, segments: list[list[Segment]], blocking: bool):
    """Event driven: at each instant, ready segments whose links are all free start in (ready, file order)."""
    num_links = len(algorithm.topology.links)
    count = len(algorithm.transfers)
    transfers = algorithm.transfers
    chunk_bytes = algorithm.chunk_bytes
    link_free_at = [0.0] * num_links
    busy = [0.0] * num_links
    carried = [0.0] * num_links
    waiters: list[list[tuple[float, int, int]]] = [[] for _ in range(num_links)]
    start = [0.0] * count
    end = [0.0] * count
    remaining, dependants = _waiting_and_dependants(transfers)
    occ_link: list[int] = []
    occ_start: list[float] = []
    occ_end: list[float] = []
    # event heap entries: (time, kind, a, b); kind 0 = arrival of segment b of transfer a,
    # kind 1 = link a becomes free. Both are applied before any start at that instant.
    events: list[tuple[float, int, int, int]] = []
    candidates: list[tuple[float, int, int]] = [(0.0, t.id, 0) for t in transfers if remaining[t.id] == 0]
    now = 0.0
    done = 0
    while True:
        candidates.sort()
        for ready, tid, seg in candidates:
            links, alpha_sum, bandwidth, overhead = segments[tid][seg]
            blocked = next((l for l in links if link_free_at[l] > now), None)
            if blocked is not None:
                waiters[blocked].append((ready, tid, seg))
                continue
            nbytes = chunk_bytes * len(transfers[tid].chunks)
            serialise = nbytes / bandwidth + overhead
            release = now + serialise + (alpha_sum if blocking else 0.0)
            for l in links:
                link_free_at[l] = release
                busy[l] += release - now
                carried[l] += nbytes
                occ_link.append(l)
                occ_start.append(now)
                occ_end.append(release)
                heapq.heappush(events, (release, 1, l, 0))
            if seg == 0:
                start[tid] = now
            heapq.heappush(events, (now + serialise + alpha_sum, 0, tid, seg))
        candidates = []
        if not events:
            break
        now = events[0][0]
        while events and events[0][0] == now:
            _, kind, a, b = heapq.heappop(events)
            if kind == 1:
                if link_free_at[a] <= now and waiters[a]:
                    candidates.extend(waiters[a])
                    waiters[a] = []
                continue
            if b + 1 < len(segments[a]):
                candidates.append((now, a, b + 1))
                continue
            end[a] = now
            done += 1
            for child in dependants[a]:
                remaining[child] -= 1
                if remaining[child] == 0:
                    candidates.append((now, child, 0))
    if done != count:
        raise SimulationError("fifo simulation stalled: some transfers never became ready")
    return (np.asarray(start), np.asarray(end), np.asarray(busy), np.asarray(carried),
            (np.asarray(occ_link, dtype=np.int64), np.asarray(occ_start), np.asarray(occ_end)))
