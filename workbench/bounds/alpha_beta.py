"""The alpha-beta bound: latency along paths and bandwidth together, valid in every simulator model.

The other bounds see either the bandwidth (a cut, the throughput optimum) or the latency (the
alpha-shortest path) and add at most one alpha to the first. This one asks both at once: data is a
fluid (so the bound holds for every chunking of the problem's bytes), time is cut into ``K`` steps
of ``tau`` seconds, and a flow LP over the time-expanded network (the idea of TE-CCL's
time-expanded network: Liu et al., SIGCOMM 2024; here a relaxation, not a schedule) must deliver
every demand by step ``K - 1`` while each link carries at most ``bandwidth * tau`` per step and a
byte that enters a segment reaches its end no earlier than the segment's alpha sum later. When
the LP cannot (``workbench.bounds.time_expanded.infeasible_within``), no schedule finishes within
``K * tau``; a search over ``tau`` returns the largest such time. docs/bounds.md ("The alpha-beta
bound") proves it never exceeds a simulated time in any model.

Symbols -> code:

==========================  ==================================================================
``K``, ``tau``              ``steps``, ``tau`` (``alpha_beta_bound`` searches ``tau``)
segment                     ``Network``: a link on its own, or a cut-through segment as a walk
                            through one hub per switch that books all its links in one step
unit                        ``Unit``: the commodities one LP serves (``units_of``)
``pi``, ``sigma``           ``Potentials``: per-node and per-link time shifts
==========================  ==================================================================

What one LP serves (``units_of``):

* a copying collective's chunks that several ranks need (All-Gather, broadcast): one LP per
  destination d, one flow from every holder of what d needs. Copies make a link's load the
  *largest* of the destinations' flows, not their sum, so each destination is checked alone with
  the whole fabric to itself, and the bound is the largest of their times;
* chunks that one rank alone needs (All-to-All, scatter, gather): one flow per origin (or per
  needer, whichever is fewer) in one LP whose link loads add up (a byte serves one destination);
* a reduction whose every chunk has one post rank (Reduce-Scatter, reduce): one LP per
  contributing rank s, one flow of s's contributions to the ranks that need them. A byte carries
  the partial sum of many contributions, so the load is the largest over contributors (the time
  reversal of the All-Gather case on the reversed graph: ``workbench.kit.duality``);
* All-Reduce: its Reduce-Scatter's LPs. Every rank of an All-Reduce ends with the sum of every
  chunk, so in particular with the sums a Reduce-Scatter of the same buffer leaves it: an
  All-Reduce schedule is a Reduce-Scatter schedule (with extra transfers), and no faster than the
  fastest one. The bound charges one pass of latency and bandwidth, not the two an
  All-Reduce's gather also needs, so it is weakest where both phases cost alike.

Where it runs (``lower_bounds`` calls it inside its LP time): at most ``MAX_NPUS`` NPUs and LPs of
at most ``MAX_COLUMNS`` columns, ``COUPLED_COLUMNS`` when several flows share one LP (the step count
is lowered to fit, never below ``MIN_STEPS``). All-Gather takes 0.1-0.4 s on ring:8, dgx1 and
torus:4x4, about 1 s on dgx2:2 and 2-3 s (CPU) on torus:8x8 and dgx2:4 (64 NPUs); All-to-All on
torus:4x4 about 13 s. The search stops at its time limit with what it has proven by then (a note
says so). docs/bounds.md has the numbers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from workbench.model.collective import Collective, make_collective
from workbench.kit.deadline import Deadline
from workbench.bounds.time_expanded import Commodity, Network, Unit, infeasible_within, network_of, potentials
from workbench.topology import Topology, TopologyError

__all__ = ["AlphaBeta", "alpha_beta_bound", "units_of", "STEPS", "COUPLED_COLUMNS", "MIN_STEPS", "MAX_NPUS",
           "MAX_COLUMNS"]

STEPS = 32  # K: the bound's resolution is about 1/K of the time (plus RTOL)
COUPLED_COLUMNS = 20_000  # where several flows share one LP (All-to-All): interior point, ~1 s an LP
MIN_STEPS = 8  # fewer steps than this say too little to be worth an LP
MAX_NPUS = 64
MAX_COLUMNS = 100_000  # per one-flow LP: a few seconds of HiGHS (64-NPU fabrics need about 10,000)
RTOL = 0.002  # the search stops when the proven time is within this of a feasible one
_GROWTH = 1.5  # tau grows by this factor until the LP delivers: most bounds are within 2x of the seed
_GROWTHS = 100  # ... at most this often (1.5^100 times the seed is not a bound worth chasing)


@dataclass
class AlphaBeta:
    """The bound in seconds (None: not computed, ``note`` says why) and how it was found."""

    seconds: float | None
    note: str | None = None
    steps: int = 0
    units: int = 0
    lps: int = 0
    largest_lp: int = 0  # columns
    wall: float = 0.0
    complete: bool = True  # False: a time limit or an unsolved LP stopped the search (the value is weaker)


def _reduction_units(groups, chunk_bytes: float) -> tuple[list[Unit], str | None]:
    """A combining collective's LPs: one per sending rank, its contributions to each post rank."""
    if any(len(post) != 1 for _, post, _ in groups):
        return [], "a reduction with several post ranks per chunk is left to the splitting-cut and gossip bounds"
    sent: dict[int, dict[int, float]] = {}
    for pre, post, count in groups:
        (rank,) = post
        for s in pre - {rank}:
            sent.setdefault(s, {})[rank] = sent.get(s, {}).get(rank, 0.0) + count * chunk_bytes
    units = [Unit([Commodity({s: sum(d.values())}, d, shared=True)]) for s, d in sorted(sent.items())]
    return [_anchored(u) for u in units], None


def units_of(topology: Topology, collective: Collective, chunk_bytes: float) -> tuple[list[Unit], str | None]:
    """The LPs that bound the collective (module docstring), or ``([], why not)``."""
    if collective.kind == "allreduce":  # bounded by the Reduce-Scatter it contains (module docstring)
        collective = make_collective("reducescatter", collective.num_ranks, collective.chunks_per_rank)
    groups = collective.groups()
    if collective.combining:
        return _reduction_units(groups, chunk_bytes)
    virtual: dict[frozenset, int] = {}

    def origin(pre: frozenset) -> int:
        """The node a flow starts from: the holder itself, or a virtual node for several holders."""
        if len(pre) == 1:
            return next(iter(pre))
        return virtual.setdefault(pre, topology.num_nodes + topology.num_switches + len(virtual))  # after the hubs

    multicast: dict[int, dict[int, float]] = {}  # needer -> origin -> bytes
    by_origin: dict[int, dict[int, float]] = {}  # unicast: origin -> needer -> bytes
    for pre, post, count in groups:
        needers = post - pre
        amount = count * chunk_bytes
        for d in needers:
            if len(needers) > 1:
                flows = multicast.setdefault(d, {})
                flows[origin(pre)] = flows.get(origin(pre), 0.0) + amount
            else:
                flows = by_origin.setdefault(origin(pre), {})
                flows[d] = flows.get(d, 0.0) + amount
    holders = {node: tuple(sorted(pre)) for pre, node in virtual.items()}
    shared = [Commodity(dict(o), {d: sum(o.values())}, shared=True) for d, o in sorted(multicast.items())]
    by_needer: dict[int, dict[int, float]] = {}
    for o, needs in by_origin.items():
        for d, amount in needs.items():
            by_needer.setdefault(d, {})[o] = amount
    if len(by_needer) < len(by_origin):
        unicast = [Commodity(dict(o), {d: sum(o.values())}) for d, o in sorted(by_needer.items())]
    else:
        unicast = [Commodity({o: sum(d.values())}, dict(d)) for o, d in sorted(by_origin.items())]
    if not unicast:
        units = [Unit([c], holders) for c in shared]
    elif len(unicast) + len(shared) == 1:
        units = [Unit(unicast, holders)]
    else:  # link loads add up across these: one LP, unshifted (each link keeps one clock for all)
        return [Unit(unicast + shared, holders, "none")], None
    return [_anchored(u) for u in units], None


def _anchored(unit: Unit) -> Unit:
    """A one-commodity unit shifted by its one sink if it has one, else by its one source."""
    (commodity,) = unit.commodities
    unit.anchor = "source" if len(commodity.demands) > 1 and len(commodity.supplies) == 1 else "sink"
    return unit


def _seed(topology: Topology, unit: Unit) -> float:
    """A quick valid bound for one unit: a sink's in-links must carry its demand, a source's
    out-links its supply when every byte of it is needed, and a needed byte travels at least the
    alpha distance from its nearest holder."""
    dist = topology.alpha_distances()

    def distance(src: int, dst: int) -> float:
        return min(float(dist[h, dst]) for h in unit.virtual.get(src, (src,)))

    best = 0.0
    for commodity in unit.commodities:
        everything = math.isclose(sum(commodity.demands.values()), sum(commodity.supplies.values()))
        for d, demand in commodity.demands.items():
            best = max(best, demand / sum(l.bandwidth for l in topology.in_links(d)))
            reach = [distance(s, d) for s in commodity.supplies]
            best = max(best, max(reach) if everything and len(commodity.demands) == 1 else min(reach))
        if everything:
            for s, supply in commodity.supplies.items():
                if s < topology.num_nodes:
                    best = max(best, supply / sum(l.bandwidth for l in topology.out_links(s)))
    return best


def _looks(topology: Topology, unit: Unit) -> tuple:
    """What a unit looks like from its sinks and sources: the alpha distances of every node to the
    nearest sink and from the nearest source, each supply's distances to the sinks, and the links
    at each sink, all sorted. Symmetric fabrics (rings, tori, DGX boxes) give equal looks to
    destinations that an automorphism exchanges, so one LP serves them all."""
    dist = topology.alpha_distances()
    real = topology.num_nodes

    def r(x: float) -> float:
        return float(f"{x:.12g}")

    def links(ls) -> tuple:
        return tuple(sorted((r(l.alpha), r(l.bandwidth)) for l in ls))

    parts: list[tuple] = [(unit.anchor, len(unit.commodities))]
    for c in unit.commodities:
        sinks = sorted(c.demands)
        holders = [h for s in c.supplies for h in unit.virtual.get(s, (s,))]
        to_sink, from_source = dist[:real, sinks].min(axis=1), dist[holders, :real].min(axis=0)
        parts.append((tuple(sorted((r(c.demands[d]), links(topology.in_links(d)), links(topology.out_links(d)))
                                   for d in sinks)),
                      tuple(sorted((r(a), tuple(sorted(r(min(dist[h, d] for h in unit.virtual.get(s, (s,))))
                                                       for d in sinks))) for s, a in c.supplies.items())),
                      tuple(sorted((r(a), r(b)) for a, b in zip(to_sink.tolist(), from_source.tolist())))))
    return tuple(parts)


def alpha_beta_bound(topology: Topology, collective: Collective, chunk_bytes: float, *, time_limit: float = 10.0,
                     steps: int = STEPS, max_npus: int = MAX_NPUS, max_columns: int = MAX_COLUMNS,
                     rtol: float = RTOL) -> AlphaBeta:
    """The alpha-beta bound of the module docstring (``AlphaBeta.seconds`` None with a note when it
    does not apply or does not fit)."""
    started = time.perf_counter()
    if topology.num_npus > max_npus:
        return AlphaBeta(None, f"{topology.num_npus} NPUs: over the {max_npus} it runs on")
    if collective.num_ranks < 2:
        return AlphaBeta(None, "one rank: nothing moves")
    try:
        collective.check_reachable(topology)
    except TopologyError as exc:
        return AlphaBeta(None, str(exc))
    units, why = units_of(topology, collective, chunk_bytes)
    if not units:
        return AlphaBeta(None, why or "nothing to deliver")
    net = network_of(topology)
    per_step = max(len(u.commodities) * (len(net.tail) + 2 * len(u.virtual) + net.first_virtual) for u in units)
    if any(len(u.commodities) > 1 for u in units):  # flows sharing links: an LP that grows fast
        max_columns = min(max_columns, COUPLED_COLUMNS)
    steps = min(steps, max_columns // per_step)
    if steps < MIN_STEPS:
        return AlphaBeta(None, f"{per_step * MIN_STEPS:,} LP columns at {MIN_STEPS} steps: over the "
                               f"{max_columns:,} it runs with")
    result = AlphaBeta(0.0, steps=steps, units=len(units))
    deadline = Deadline(time_limit)
    seeds = [_seed(topology, u) for u in units]
    best = max(seeds)
    seen: set[tuple] = set()
    for rank, index in enumerate(sorted(range(len(units)), key=lambda i: -seeds[i])):
        look = _looks(topology, units[index])
        if look in seen:
            continue  # taken as equivalent to a unit already solved (skipping can only lower the bound)
        seen.add(look)
        # the first unit starts at the seed; a later one just above what is proven, since a unit
        # like the one before it would only prove the same value again, within rtol
        start = best if rank == 0 else best * (1 + rtol)
        proven, complete = _search(topology, net, units[index], steps, start, rtol, deadline, result)
        best = max(best, proven)
        if not complete:
            result.complete = False
            result.note = (f"stopped after {result.lps} LPs (time limit {time_limit:g} s or an LP not solved): "
                           "the value is what was proven by then")
            break
    # the search's float arithmetic is shaved off; a schedule also pays one message's overhead
    result.seconds = best * (1 - 1e-9) + topology.min_overhead()
    result.wall = time.perf_counter() - started
    return result


def _search(topology: Topology, net: Network, unit: Unit, steps: int, floor: float, rtol: float,
            deadline: Deadline, result: AlphaBeta) -> tuple[float, bool]:
    """The largest ``steps * tau`` the unit's LP proves too short, searched upwards from ``floor``
    (0.0 when nothing above ``floor`` is proven), and whether the search finished (False: an LP was
    not solved in time; the value is then what was proven before)."""
    shift = potentials(topology, net, unit)

    def too_short(tau: float) -> bool | None:
        if deadline.expired:
            return None
        answer, columns = infeasible_within(topology, net, unit, shift, steps, tau, deadline.limit(floor=0.05))
        result.lps += 1
        result.largest_lp = max(result.largest_lp, columns)
        return answer

    low = floor / steps
    answer = too_short(low)
    if not answer:
        return 0.0, answer is not None  # False: this unit needs no more than what is already proven
    high = _GROWTH * low
    for _ in range(_GROWTHS):
        answer = too_short(high)
        if answer is None:
            return steps * low, False
        if not answer:
            break
        low, high = high, _GROWTH * high
    while high - low > rtol * low:
        middle = (low + high) / 2
        answer = too_short(middle)
        if answer is None:
            return steps * low, False
        if answer:
            low = middle
        else:
            high = middle
    return steps * low, True
