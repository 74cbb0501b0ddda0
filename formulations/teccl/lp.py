"""TE-CCL's LP for copy-free demands (note 3.3, 3.6) and the extraction of its rates into paths (3.5).

Commodity = source rank s. The paper numbers none of its equations; each row is tagged with the
note section that states it (3.3) and a short name (``MilpModel.row_tags``).

Paper symbol -> code (all continuous, >= 0, volumes in chunks):

==========================  ====================================================================
``F_{s,i,j,k}``             ``f[s, e, k]`` (family ``F``), edge e = (i, j), only sends that arrive
                            by the last epoch (k + a_e <= n_e - 1); <= M_s
``B_{s,n,k}``               ``b[s, n, k]`` (family ``B``), NPUs only, k = 0..n_e; <= M_s
``R_{s,n,k}``               ``r[s, n, k]`` (family ``R``), only where n wants s's data; <= M_{s,n}
``RR_{s,d,k}`` (cumulative) not a column: ``sum_{t<=k} r[s,d,t]``, folded into the objective
``ceil(delta_jn)``          ``Edge.a``: a send at k arrives during k + a (consumed then, or buffered /
                            forwarded from k + a + 1; a switch forwards at k + a + 1)
``T_ij tau``                ``cap`` = bandwidth x tau / chunk bytes (fractional, no window)
``M_s``, ``M_{s,d}``        ``volume[s]``, ``demand[(s, d)]``
==========================  ====================================================================

Rows (tags): ``(3.3 first epoch)`` App. A's ``B[s,n,0] + sum_out F[s,n,j,0] = M_s`` at n = s and 0
elsewhere (the intended reading, note A13); ``(3.3 flow)`` the flow conservation constraint
``sum_in F[k - a] + B[k] = B[k + 1] + R[k] + sum_out F[k + 1]`` (equality, the paper's form; the last
epoch's App. A row is its k = n_e - 1 instance); ``(3.3 switch)`` the same without B and R at a
switch, ``sum_in F[k - a] = sum_out F[k + 1]``; ``(3.3 destination)`` ``sum_k R[s,d,k] = M_{s,d}``
(``RR_{s,d,K} = D``); ``(3.3 capacity)`` ``sum_s F[s,e,k] <= T tau``. Objective: ``max sum_k
RR[s,d,k] / (k+1)`` (written on R: ``R[s,d,k]`` weighs ``sum_{t>=k} 1/(t+1)``) minus a small
per-unit flow penalty 0.2 / (n_e + 1) (the authors' code, note A15) so no useless cycles appear.

The number of epochs starts at a lower bound (the workbench's cut / flow bounds over tau plus the
longest path in epochs) and grows by 15% while infeasible; the objective makes the schedule finish
as early as the horizon allows. HiGHS's interior-point solver is the default (the simplex method
is several times slower on these sizes).

The LP has no copy anywhere (flow conservation at every switch), so it keeps every switch's rules of
note 2.11 as it is: a sub-chunk group crosses a switch once on its path, one operation read once.

Extraction: a forward pass over epochs splits each source's data into parcels that follow the
flows (first in, first out at every node); consumption closes a parcel as a path piece for its
destination. ``to_subchunks`` rounds each destination's pieces to whole sub-chunks (largest
remainder), so the schedule becomes an ordinary algorithm on a collective with finer chunks.
"""

from __future__ import annotations

import math
import time as clock
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from formulations.teccl.epochs import EpochGraph
from workbench.model.algorithm import no_cyclic_gc
from workbench.kit.deadline import Deadline
from workbench.kit.milp import MilpModel, VarFamily, total

__all__ = ["LpResult", "solve_lp_schedule", "to_subchunks"]

Hop = tuple[int, int]  # (edge index, send epoch)


@dataclass
class LpResult:
    pieces: dict[tuple[int, int], list[tuple[float, tuple[Hop, ...]]]]  # (s, d) -> [(volume, path)]
    horizon: int
    finish: int  # epochs: last consumption epoch + 1
    status: str
    stats: dict[str, Any] = field(default_factory=dict)
    message: str = ""


def _lp(graph: EpochGraph, demand: dict[tuple[int, int], float], horizon: int,
        with_objective: bool) -> tuple[MilpModel, VarFamily, VarFamily]:
    with no_cyclic_gc():  # hundreds of thousands of small expressions, none in a cycle
        return _rows(graph, demand, horizon, with_objective)


def _rows(graph: EpochGraph, demand: dict[tuple[int, int], float], horizon: int,
          with_objective: bool) -> tuple[MilpModel, VarFamily, VarFamily]:
    model = MilpModel("teccl-lp")
    edges = graph.edges
    sources = sorted({s for s, _ in demand})
    volume = {s: sum(v for (a, _), v in demand.items() if a == s) for s in sources}  # M_s
    # objective: max sum_k RR[s,d,k] / (k+1) = sum_k R[s,d,k] sum_{t>=k} 1/(t+1), less a flow penalty
    # (set as the columns' costs when they are created: a total over every column adds a tenth to the build)
    penalty = 0.2 / (horizon + 1) if with_objective else 0.0
    weight = [sum(1.0 / (t + 1) for t in range(k, horizon)) if with_objective else 0.0 for k in range(horizon)]
    f = model.family("F", ((s, e.index, k) for s in sources for e in edges if e.dst != s
                           for k in range(horizon - e.a)), upper=lambda key: volume[key[0]], cost=penalty)
    b, r = model.family("B"), model.family("R")  # declared below, interleaved (the authors' column order)
    _declare_buffers_and_reads(model, graph, b, r, sources, volume, demand, weight, horizon)
    for s in sources:
        for n in graph.nodes:
            if graph.is_switch(n):
                _switch_rows(model, graph, f, s, n, horizon)
                continue
            _first_epoch_row(model, graph, f, b, s, n, volume[s])
            _flow_rows(model, graph, f, b, r, s, n, horizon)
    for (s, d), wanted in demand.items():
        model.add(total(r[s, d, k] for k in range(horizon)) == wanted, tag="(3.3 destination)")
    _capacity_rows(model, graph, f, sources, horizon)
    return model, f, r


def _declare_buffers_and_reads(model: MilpModel, graph: EpochGraph, b: VarFamily, r: VarFamily, sources: list[int],
                               volume: dict[int, float], demand: dict[tuple[int, int], float], weight: list[float],
                               horizon: int) -> None:
    """``B[s, n, k]`` (k = 0..horizon, NPUs) and ``R[s, d, k]`` (demanded pairs), interleaved per NPU;
    then neither family takes a new key."""

    def declare(family: VarFamily, key: tuple[int, int, int], upper: float, cost: float = 0.0) -> None:
        col = family.col(key)
        model.upper[col] = float(upper)
        model.cost[col] = cost

    for s in sources:
        for n in graph.nodes:
            if graph.is_switch(n):
                continue
            for k in range(horizon + 1):
                declare(b, (s, n, k), volume[s])
            if (s, n) in demand:
                for k in range(horizon):
                    declare(r, (s, n, k), demand[(s, n)], -weight[k])
    for family in (b, r):
        family.lazy = False  # from here on a missing key is a mistake, not a new variable


def _switch_rows(model: MilpModel, graph: EpochGraph, f: VarFamily, s: int, n: int, horizon: int) -> None:
    """(3.3 switch): a switch holds nothing; what arrives in epoch k leaves in k + 1."""
    edges = graph.edges
    outs = graph.out_edges.get(n, [])
    ins = graph.in_edges.get(n, [])
    for k in range(-1, horizon):
        inflow = [f[key] for ei in ins if (key := (s, ei, k - edges[ei].a)) in f]
        outflow = [f[key] for eo in outs if (key := (s, eo, k + 1)) in f]
        if inflow or outflow:
            model.add(total(inflow) == total(outflow), tag="(3.3 switch)")


def _first_epoch_row(model: MilpModel, graph: EpochGraph, f: VarFamily, b: VarFamily, s: int, n: int,
                     volume: float) -> None:
    """(3.3 first epoch): ``B[0] + sum_out F[0]`` is the source's volume at the source, 0 elsewhere."""
    sent = total(f[key] for eo in graph.out_edges.get(n, []) if (key := (s, eo, 0)) in f)
    model.add(b[s, n, 0] + sent == (volume if n == s else 0.0), tag="(3.3 first epoch)")


def _flow_rows(model: MilpModel, graph: EpochGraph, f: VarFamily, b: VarFamily, r: VarFamily, s: int, n: int,
               horizon: int) -> None:
    """(3.3 flow): ``B[k] + sum_in F[k - a] = B[k + 1] + R[k] + sum_out F[k + 1]`` at an NPU."""
    edges = graph.edges
    outs = graph.out_edges.get(n, [])
    arrivals = [(ei, edges[ei].a) for ei in graph.in_edges.get(n, [])]
    for k in range(horizon):
        inflow = [f[key] for ei, a in arrivals if (key := (s, ei, k - a)) in f]
        outflow = [f[key] for eo in outs if (key := (s, eo, k + 1)) in f]
        read = [r[s, n, k]] if (s, n, k) in r else []
        model.add(total([b[s, n, k], *inflow]) == total([b[s, n, k + 1], *read, *outflow]),
                  tag="(3.3 flow)")


def _capacity_rows(model: MilpModel, graph: EpochGraph, f: VarFamily, sources: list[int], horizon: int) -> None:
    """(3.3 capacity): an edge carries at most its bandwidth times tau per epoch, in chunks."""
    for e in graph.edges:
        cap = e.bandwidth * graph.tau / graph.chunk_bytes
        for k in range(horizon):
            on_edge = [f[key] for s in sources if (key := (s, e.index, k)) in f]
            if on_edge:
                model.add(total(on_edge) <= cap, tag="(3.3 capacity)")


def solve_lp_schedule(graph: EpochGraph, demand: dict[tuple[int, int], float], *, time_limit: float,
                      horizon: int | None = None, threads: int = 1, lower_bound_epochs: int = 0,
                      solver: str = "ipm") -> LpResult:
    """Solve for ``horizon`` epochs, or from a lower bound upwards (+15% per infeasible try)."""
    deadline = Deadline(time_limit)
    probes: list[tuple[int, str]] = []
    options = {"solver": solver}
    fixed = horizon is not None
    h = horizon if fixed else max(lower_bound_epochs, 1)
    while True:
        built = clock.perf_counter()
        model, f, r = _lp(graph, demand, h, with_objective=True)
        build_seconds = clock.perf_counter() - built
        outcome = model.solve("highs", time_limit=deadline.limit(floor=0.5), threads=threads,
                              options=options)
        probes.append((h, outcome.status))
        if outcome.status != "infeasible" or fixed:
            break
        h = int(math.ceil(h * 1.15)) + 1
    stats = {"build_seconds": build_seconds, "solve_seconds": outcome.seconds, "horizon": h, "probes": probes,
             "search_seconds": built - deadline.started, "lp_solver": solver, **model.stats()}
    if not outcome.has_solution:
        return LpResult({}, h, -1, outcome.status, stats, outcome.message)
    x = outcome.x
    flows = {key: float(x[col]) for key, col in f.columns.items() if x[col] > 1e-6}
    consumed = {key: float(x[col]) for key, col in r.columns.items() if x[col] > 1e-6}
    last = max((k for (_, _, k), v in consumed.items() if v > 1e-5), default=-1)
    pieces = _decompose(graph, demand, flows, consumed)
    return LpResult(pieces, h, last + 1, outcome.status, stats, outcome.message)


def _decompose(graph: EpochGraph, demand, flows: dict, consumed: dict) -> dict:
    """Parcels of each source's data follow the flows epoch by epoch (FIFO at every node)."""
    edges = graph.edges
    pieces: dict[tuple[int, int], list[tuple[float, tuple[Hop, ...]]]] = defaultdict(list)
    sources = sorted({s for s, _ in demand})
    horizon = 1 + max([k for (_, _, k) in flows] + [k for (_, _, k) in consumed] + [0])
    consumed_at: dict[tuple[int, int], list] = defaultdict(list)
    for (src, d, t), volume in consumed.items():
        consumed_at[(src, t)].append((d, volume))
    flows_at: dict[tuple[int, int], list] = defaultdict(list)
    for (src, ei, t), volume in sorted(flows.items()):
        flows_at[(src, t)].append((ei, volume))
    for s in sources:
        total = sum(v for (a, _), v in demand.items() if a == s)
        at: dict[int, deque] = defaultdict(deque)  # node -> parcels [volume, path, ready epoch]
        at[s].append([total, (), 0])
        arriving: dict[int, list] = defaultdict(list)  # epoch -> (node, parcel)
        for k in range(horizon + 1):
            for ei, volume in flows_at.get((s, k), []):  # sends use what arrived before this epoch
                e = edges[ei]
                for vol, path in _take(at[e.src], volume, k, sending=True):
                    arriving[k + e.a].append((e.dst, [vol, path + ((ei, k),), k + e.a]))
            for node, parcel in arriving.pop(k, []):
                at[node].append(parcel)
            for d, volume in consumed_at.get((s, k), []):  # consumption may use this epoch's arrivals
                for vol, path in _take(at[d], volume, k):
                    pieces[(s, d)].append((vol, path))
    return dict(pieces)


def _take(queue: deque, volume: float, epoch: int, sending: bool = False) -> list:
    """Remove ``volume`` from the parcels usable at ``epoch`` (sends need a parcel from an earlier epoch)."""
    taken = []
    remaining = volume
    for parcel in list(queue):
        if remaining <= 1e-9:
            break
        ready = parcel[2]
        usable = ready < epoch if sending else ready <= epoch
        if parcel[1] == () and sending:
            usable = True  # the source's own data is there from the start
        if not usable:
            continue
        amount = min(parcel[0], remaining)
        taken.append((amount, parcel[1]))
        parcel[0] -= amount
        remaining -= amount
        if parcel[0] <= 1e-9:
            queue.remove(parcel)
    return taken


def to_subchunks(pieces: list[tuple[float, tuple[Hop, ...]]], units: int) -> list[tuple[int, tuple[Hop, ...]]]:
    """Whole sub-chunk counts for fractional pieces (largest remainder), ``units`` in total."""
    total = sum(v for v, _ in pieces)
    if total <= 0:
        return []
    exact = [v / total * units for v, _ in pieces]
    counts = [math.floor(x + 1e-9) for x in exact]
    short = units - sum(counts)
    order = sorted(range(len(pieces)), key=lambda i: -(exact[i] - counts[i]))
    for i in order[:short]:
        counts[i] += 1
    return [(n, pieces[i][1]) for i, n in enumerate(counts) if n > 0]
