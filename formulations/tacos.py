"""TACOS: topology-aware collective synthesis by greedy link-chunk matching on a time-expanded network.

Paper: W. Won et al., "TACOS: Topology-Aware Collective Algorithm Synthesizer for Distributed
Machine Learning" (MICRO 2024); spec ``../shared/spec/tacos.md`` (section numbers below).

Paper symbol -> code name:

* TEN vertex (v, t), transfer edge (u, t) -> (v, t + w_uv)  -> an event loop over distinct arrival
  times (``_Engine.run``, spec 2.3/2.4); the TEN is never materialised
* link cost ``w_e = alpha_e + beta_e * m`` (Hockney, section IV-F)  -> ``_Engine.cost[e]``; the link is
  busy for all of it (no latency pipelining inside the synthesizer; the claimed time is this estimate)
* precond[d][c] / postcond[d][c]  -> ``held[v]`` / ``need[v]``, Python-int bitsets over chunks
  (``need`` = post and not yet arrived; chunks in flight still count, as in the reference)
* MATCH (Alg. 1): shuffle unsatisfied (c, d), take an in-neighbour holding c over a free link, the
  earliest arrival first, random among ties  -> ``_Engine._match``. Destinations are independent
  (only pairs for d compete for d's in-links), so each destination's random pair order is drawn
  on its own: repeatedly a uniform chunk among those a free in-link can carry. That is the same
  distribution as one global shuffle, and only destinations whose state changed are visited.
* holdings become true only on arrival (ambiguity A1); one chunk per link at a time (A2)
* duplicate replacement (A5, spec 2.3): an arrival of a chunk the destination already has is
  relabelled to a random chunk it still needs that the sender held at the transfer's *start*
  (``replacement="causal"``, default), at its arrival (``"reference"``, the released code), or
  dropped (``"off"``)
* switch unwinding (section IV-G): ``Topology.unwind_switches(d)`` with ``switch_degree`` d (1, an
  integer, or ``"full"`` = N-1); the schedule is synthesized on that view and timed on the
  physical topology with the switch node (``meta["synthesis_view"]``)
* Reduce-Scatter / Reduce: All-Gather / Broadcast on the reversed graph, reversed in time and
  direction (section 3, ``Algorithm.reverse``); All-Reduce = Reduce-Scatter then All-Gather
  (``Algorithm.concat``), claimed time T_RS + T_AG
* ``collectivesCount`` of the artifact = chunks per rank k; chunk = size / (n k)
* restarts: best claimed time over seeds ``seed, seed+1, ...`` (the reference tests take the
  minimum of 20 runs, A9)

All-Gather and Broadcast are the paper's native collectives; the engine accepts any
non-combining pre/postcondition (gather, scatter, all-to-all, custom), which the paper does not
evaluate.
"""

from __future__ import annotations

import heapq
import random
import time
from typing import Any, Callable

import numpy as np

from workbench.algorithm import Algorithm, Transfer
from workbench.collective import Collective, make_collective
from workbench.registry import Problem, SynthesisResult
from workbench.topology import Topology, TopologyError
from workbench.parameters import Parameter

__all__ = ["Tacos", "greedy_all_gather", "MatchResult"]

TIE = 1e-15  # seconds; the reference's 1e-9 us tie tolerance
REPLACEMENT_MODES = ("causal", "reference", "off")


class _OutOfTime(Exception):
    pass


def _random_bit(x: int, rng: random.Random) -> int:
    """A uniformly random set bit of ``x`` (non-zero)."""
    count = x.bit_count()
    if count == 1:
        return x.bit_length() - 1
    length = x.bit_length()
    if count * 8 >= length:  # dense: rejection sampling, at most ~8 tries on average
        draw = rng.random
        while True:
            position = int(draw() * length)
            if (x >> position) & 1:
                return position
    target = int(rng.random() * count)
    if count <= 24:
        while True:
            low = x & -x
            if target == 0:
                return low.bit_length() - 1
            x ^= low
            target -= 1
    bits = np.unpackbits(np.frombuffer(x.to_bytes((length + 7) // 8, "little"), dtype=np.uint8), bitorder="little")
    return int(np.flatnonzero(bits)[target])


def _bit_positions(x: int) -> list[int]:
    positions = []
    while x:
        low = x & -x
        positions.append(low.bit_length() - 1)
        x ^= low
    return positions


class MatchResult:
    """One greedy run: claimed time and the useful matches (u, v, chunk, t_start, t_end)."""

    def __init__(self, claimed_time: float, matches: list[tuple[int, int, int, float, float]],
                 delivered_by: dict[tuple[int, int], int], wasted: int, events: int) -> None:
        self.claimed_time = claimed_time
        self.matches = matches
        self.delivered_by = delivered_by
        self.wasted = wasted
        self.events = events


class _Engine:
    """The event-driven TEN matching of spec 2.4 on a switchless topology."""

    def __init__(self, topology: Topology, pre: list[frozenset[int]], post: list[frozenset[int]],
                 chunk_bytes: float, rng: random.Random, replacement: str, deadline: float) -> None:
        if topology.num_switches:
            raise TopologyError("the TACOS engine needs a switchless view (unwind the switches first)")
        self.rng = rng
        self.replacement = replacement
        self.deadline = deadline
        n = topology.num_npus
        self.n = n
        num_chunks = len(pre)
        self.src = [l.src for l in topology.links]
        self.dst = [l.dst for l in topology.links]
        self.cost = [l.alpha + chunk_bytes / l.bandwidth for l in topology.links]
        self.in_links: list[list[int]] = [[] for _ in range(n)]
        for e, link in enumerate(topology.links):
            self.in_links[link.dst].append(e)  # links are sorted by (src, dst): ascending u
        self.out_nodes = [topology.out_neighbors(u) for u in range(n)]
        self.held = [0] * n
        self.need = [0] * n
        self.arrive = np.full((n, num_chunks), np.inf)
        for chunk, holders in enumerate(pre):
            for v in holders:
                self.held[v] |= 1 << chunk
                self.arrive[v, chunk] = 0.0
        for chunk, needers in enumerate(post):
            for v in needers:
                if v not in pre[chunk]:
                    self.need[v] |= 1 << chunk

    def run(self) -> MatchResult:
        busy = [False] * len(self.src)
        inflight: list[tuple[int, float] | None] = [None] * len(self.src)
        ending: dict[float, list[int]] = {}
        heap = [0.0]
        matches: list[tuple[int, int, int, float, float]] = []
        delivered_by: dict[tuple[int, int], int] = {}
        dirty = set(range(self.n))
        claimed = 0.0
        wasted = 0
        events = 0
        held, need, arrive = self.held, self.need, self.arrive
        while heap:
            t = heapq.heappop(heap)
            events += 1
            if events % 64 == 0 and time.perf_counter() > self.deadline:
                raise _OutOfTime()
            eventful = False
            for e in sorted(ending.pop(t, ())):  # retire in (src, dst) order, as the reference
                u, v = self.src[e], self.dst[e]
                chunk, started = inflight[e]
                inflight[e] = None
                busy[e] = False
                dirty.add(v)
                if (held[v] >> chunk) & 1:
                    chunk = self._replacement(u, v, started, t)
                    if chunk < 0:
                        wasted += 1
                        continue
                bit = 1 << chunk
                held[v] |= bit
                need[v] &= ~bit
                arrive[v, chunk] = t
                delivered_by[(v, chunk)] = len(matches)
                matches.append((u, v, chunk, started, t))
                eventful = True
                dirty.update(self.out_nodes[v])
            if eventful:
                claimed = t
            for v in sorted(dirty):
                if need[v]:
                    self._match(v, t, busy, inflight, ending, heap)
            dirty = set()
        if any(self.need):
            v = next(i for i, bits in enumerate(self.need) if bits)
            chunk = _bit_positions(self.need[v])[0]
            raise TopologyError(f"rank {v} can never receive chunk {chunk}: TACOS sends a chunk only to ranks "
                                f"that need it, so a chunk that must be relayed through other ranks (All-to-All, "
                                f"Scatter on a sparse topology) cannot arrive")
        return MatchResult(claimed, matches, delivered_by, wasted, events)

    def _replacement(self, u: int, v: int, started: float, now: float) -> int:
        """A chunk to relabel a redundant arrival with, or -1 to drop it (spec 2.3, A5)."""
        if self.replacement == "off":
            return -1
        candidates = self.need[v] & self.held[u]
        if not candidates:
            return -1
        if self.replacement == "causal":
            positions = [c for c in _bit_positions(candidates) if self.arrive[u, c] <= started]
            if not positions:
                return -1
            return positions[self.rng.randrange(len(positions))]
        return _random_bit(candidates, self.rng)

    def _match(self, v: int, t: float, busy, inflight, ending, heap) -> None:
        """Greedy matching of destination v's free in-links at time t (Alg. 1 restricted to v)."""
        need_v = self.need[v]
        held, src, cost = self.held, self.src, self.cost
        carry = {}
        for e in self.in_links[v]:
            if not busy[e]:
                bits = held[src[e]] & need_v
                if bits:
                    carry[e] = bits
        if not carry:
            return
        rng = self.rng
        active = list(carry)
        picked = 0
        while active:
            union = 0
            for e in active:
                union |= carry[e]
            union &= ~picked
            if not union:
                return
            chunk = _random_bit(union, rng)
            picked |= 1 << chunk
            if len(active) == 1:
                e = active[0]
            else:
                holders = [e for e in active if (carry[e] >> chunk) & 1]
                if len(holders) == 1:
                    e = holders[0]
                else:
                    best = min(cost[x] for x in holders)
                    ties = [x for x in holders if cost[x] <= best + TIE]
                    e = ties[int(rng.random() * len(ties))] if len(ties) > 1 else ties[0]
            busy[e] = True
            inflight[e] = (chunk, t)
            end = round(t + cost[e], 15)
            slot = ending.get(end)
            if slot is None:
                ending[end] = [e]
                heapq.heappush(heap, end)
            else:
                slot.append(e)
            active = [x for x in active if x != e and carry[x] & ~picked]


def greedy_all_gather(view: Topology, collective: Collective, chunk_bytes: float, seed: int,
                      replacement: str = "causal", deadline: float = float("inf")) -> MatchResult:
    """One TACOS run for a non-combining collective on a switchless view."""
    engine = _Engine(view, list(collective.pre), list(collective.post), chunk_bytes, random.Random(seed),
                     replacement, deadline)
    return engine.run()


def _to_algorithm(physical: Topology, collective: Collective, chunk_bytes: float, result: MatchResult,
                  meta: dict[str, Any]) -> Algorithm:
    """Matches -> transfers in planned order with explicit deps (the delivery of the payload to u)."""
    matches = result.matches
    pre = collective.pre
    effective = []
    for i, (u, v, chunk, started, ended) in enumerate(matches):
        dep = None if u in pre[chunk] else result.delivered_by[(u, chunk)]
        ready = matches[dep][4] if dep is not None else 0.0
        effective.append((max(started, ready), started, ended, u, v, i, dep))
    effective.sort()
    new_id = {entry[5]: position for position, entry in enumerate(effective)}
    transfers = []
    for position, (_, started, ended, u, v, i, dep) in enumerate(effective):
        deps = () if dep is None else (new_id[dep],)
        transfers.append(Transfer(position, (matches[i][2],), u, v, "copy", deps, started, ended))
    return Algorithm(physical, collective, chunk_bytes, transfers, dict(meta))


class Tacos:
    """TACOS greedy synthesizer (see the module docstring)."""

    name = "tacos"
    kind = "schedule"
    parameters = (
        Parameter("restarts", ("int",), 1, "independent randomised runs; the best is kept", minimum=1),
        Parameter("switch_degree", ("int", "str"), 1, "links a switch serves at once per matching step",
                  choices=("full", "max"), minimum=1),
        Parameter("replacement", ("str",), "causal", "how a switch hop is replaced by a direct link",
                  choices=REPLACEMENT_MODES),
    )

    def synthesize(self, problem: Problem, *, time_limit: float, seed: int,
                   on_incumbent: Callable[[Algorithm], None] | None = None, restarts: int = 1,
                   switch_degree: int | str = 1, replacement: str = "causal", **params: Any) -> SynthesisResult:
        if params:
            raise ValueError(f"tacos: unknown parameters {sorted(params)} (restarts, switch_degree, replacement)")
        if replacement not in REPLACEMENT_MODES:
            raise ValueError(f"tacos: replacement must be one of {REPLACEMENT_MODES}, got {replacement!r}")
        if not isinstance(restarts, int) or restarts < 1:
            raise ValueError(f"tacos: restarts must be a positive integer, got {restarts!r}")
        started = time.perf_counter()
        deadline = started + time_limit
        degree = _degree(switch_degree)
        collective = problem.collective
        if collective.combining and collective.kind not in ("reducescatter", "reduce", "allreduce"):
            raise ValueError("tacos: a custom combining collective is not supported")
        best: Algorithm | None = None
        stats: dict[str, Any] = {"restarts_done": 0, "events": 0, "wasted_transfers": 0}
        status = "feasible"
        for attempt in range(restarts):
            if time.perf_counter() > deadline:
                status = "timeout"
                break
            try:
                algorithm, run_stats = self._one(problem, seed + attempt, degree, replacement, deadline)
            except _OutOfTime:
                status = "timeout"
                break
            stats["restarts_done"] += 1
            stats["events"] += run_stats["events"]
            stats["wasted_transfers"] += run_stats["wasted"]
            if best is None or algorithm.meta["claimed_time"] < best.meta["claimed_time"]:
                best = algorithm
                if on_incumbent is not None:
                    on_incumbent(best)
        seconds = time.perf_counter() - started
        if best is None:
            return SynthesisResult([], "timeout", seconds, stats, message="no complete run within the time limit")
        best.meta.update(status=status, synthesis_seconds=seconds,
                         params={"restarts": restarts, "switch_degree": switch_degree, "replacement": replacement})
        stats["transfers"] = len(best.transfers)
        return SynthesisResult([best], status, seconds, stats)

    def _one(self, problem: Problem, seed: int, degree: int | None, replacement: str,
             deadline: float) -> tuple[Algorithm, dict[str, int]]:
        topology, collective, chunk_bytes = problem.topology, problem.collective, problem.chunk_bytes
        n, k = collective.num_ranks, collective.chunks_per_rank
        meta = {"formulation": self.name, "seed": seed, "synthesis_view": _view_name(topology, degree)}
        if collective.kind == "allreduce":
            rs, rs_stats = self._one(Problem(topology, make_collective("reducescatter", n, k), problem.size_bytes),
                                     seed, degree, replacement, deadline)
            ag, ag_stats = self._one(Problem(topology, make_collective("allgather", n, k), problem.size_bytes),
                                     seed + 7919, degree, replacement, deadline)
            combined = rs.concat(ag)
            combined.meta.update(meta, claimed_time=rs.meta["claimed_time"] + ag.meta["claimed_time"])
            return combined, {key: rs_stats[key] + ag_stats[key] for key in rs_stats}
        if collective.kind in ("reducescatter", "reduce"):
            gather = make_collective("allgather" if collective.kind == "reducescatter" else "broadcast", n, k,
                                     collective.root)
            reversed_physical = topology.reversed()
            view = _unwound(reversed_physical, degree)
            gather.check_reachable(view)
            result = greedy_all_gather(view, gather, chunk_bytes, seed, replacement, deadline)
            forward = _to_algorithm(reversed_physical, gather, chunk_bytes, result, meta)
            algorithm = forward.reverse(topology)
            algorithm.meta.update(meta, claimed_time=result.claimed_time)
            return algorithm, {"events": result.events, "wasted": result.wasted}
        view = _unwound(topology, degree)
        collective.check_reachable(view)
        result = greedy_all_gather(view, collective, chunk_bytes, seed, replacement, deadline)
        algorithm = _to_algorithm(topology, collective, chunk_bytes, result, meta)
        algorithm.meta["claimed_time"] = result.claimed_time
        return algorithm, {"events": result.events, "wasted": result.wasted}


def _degree(value: int | str) -> int | None:
    if value in ("full", "max", None):
        return None
    if isinstance(value, int) and value >= 1:
        return value
    raise ValueError(f"tacos: switch_degree must be a positive integer or 'full', got {value!r}")


def _unwound(topology: Topology, degree: int | None) -> Topology:
    return topology.unwind_switches(degree) if topology.num_switches else topology


def _view_name(topology: Topology, degree: int | None) -> str:
    if not topology.num_switches:
        return topology.name
    return f"{topology.name} with switches unwound to degree {'N-1' if degree is None else degree}"
