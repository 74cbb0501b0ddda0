"""The exchanges and the piece count, by the cost model, before anything is built.

A message of ``m`` bytes over a segment costs its overhead plus ``m`` over its bottleneck bandwidth
on every link it holds and arrives its alpha sum later (docs/cost-model.md). In each stage of the
piece schedule (``schedule``) a rank sends ``k`` messages carrying ``c`` chunks in all on one link
class (the scale-up link for the box stages, the NIC for the others; one link for all on a
leaf-spine fabric), so one piece keeps it ``busy_s = k o + c x chunk / bw`` in stage ``s``
(``Stage.busy``). Pipelined over P pieces, the first piece passes every stage (``latency_s``: its
busy time, and once a round, the other hops' serialisation where a message is stored at the
switches of its way, and every alpha) and each further piece adds the busiest link class's
share, its period tau:

    T(P) = sum_s latency_s(P) + (P - 1) tau(P),   tau(P) = max_class sum_{s in class} busy_s(P) (+ idle)

With no overhead T falls as P grows (the fill and drain shrink) until the transfer budget stops
it; with an overhead every piece costs messages, and T has a minimum, where halving-doubling's
log2 q messages beat direct's q - 1 (``exchange``). ``choose`` takes the least T over the
exchanges allowed and P in powers of two; the simulator's time of the schedule built is what the
algorithm claims.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from formulations.two_level.exchange import allowed, shape
from formulations.two_level.layout import Layout, rail_path
from formulations.two_level.schedule import stages_of
from workbench.checking.simulate import route_segments
from workbench.topology import Topology

__all__ = ["Stage", "Choice", "stage_costs", "pipeline_time", "choose", "period", "step_lags", "transfers_per_piece"]


@dataclass(frozen=True)
class Stage:
    """One stage as each rank sees it: ``messages`` carrying ``chunks`` chunks in all, sent on the
    link ``link_class`` names (the sender's first link: on a rail fabric the scale-up link for a
    box stage and the NIC for the others; on a leaf-spine fabric one link for all)."""

    name: str
    link_class: int
    messages: int
    chunks: int
    rounds: int  # messages one after another on one piece's way (levels, or partial sums a switch keeps)
    hops: int  # transfers a message takes (one per switch it is stored at, plus one)
    overhead: float  # per message, the largest of its hops' segments
    inverse_bandwidth: float  # seconds per byte at the slowest hop
    relay: float  # seconds per byte the other hops add to one message's way
    alpha: float  # every hop's alphas

    def busy(self, chunk_bytes: float) -> float:
        """Seconds one rank's link spends on this stage for one piece."""
        return self.messages * self.overhead + self.chunks * chunk_bytes * self.inverse_bandwidth

    def latency(self, chunk_bytes: float) -> float:
        """Seconds from one piece's first message of this stage to its last arrival."""
        per_message = self.chunks / self.messages * chunk_bytes
        return self.busy(chunk_bytes) + self.rounds * (self.relay * per_message + self.alpha)


def _path(topology: Topology, path: list[int]) -> tuple[int, float, float, float, float]:
    """(first link, overhead, seconds per byte, relay seconds per byte, alpha) of a message stored
    at each node of ``path`` (``Stage``'s fields)."""
    overhead = alpha = 0.0
    rates = []
    first = -1
    for src, dst in zip(path, path[1:]):
        for links, alphas, bandwidth, over in route_segments(topology, src, dst):
            first = links[0] if first < 0 else first
            overhead = max(overhead, over)  # each hop holds its own links
            rates.append(1.0 / bandwidth)
            alpha += alphas
    return first, overhead, max(rates), sum(rates) - max(rates), alpha


def stage_costs(topology: Topology, layout: Layout, kind: str, exchanges: dict[str, str]) -> list[Stage]:
    """The stages ``kind`` runs on ``layout`` with the box and rail ``exchanges``, each measured on
    one representative pair."""
    box, g, q = layout.boxes, layout.num_groups, layout.per_group
    near, far = box[layout.groups[0][0]][0], box[layout.groups[-1][-1]][0]
    paths = {"box": [box[0][0], box[0][1]]}
    members = {"box": (layout.per_box, layout.num_boxes), "rail": (q, g), "cross": (g, 1)}
    if q > 1:
        paths["rail"] = rail_path(topology, near, box[layout.groups[0][1]][0], 1)
    if g > 1:
        paths["cross"] = rail_path(topology, near, far, 1)
    stages = []
    for name in stages_of(kind):
        level = name.split("-")[0]
        if level not in paths:
            continue
        count, per_share = members[level]
        messages, shares, levels = shape(count, exchanges.get(level, "direct"))
        stored = len(paths[level]) > 2 and name.endswith("-rs")  # a partial sum at a time per switch
        link, overhead, per_byte, relay, alpha = _path(topology, paths[level])
        stages.append(Stage(name, link, messages, shares * per_share, max(levels, messages if stored else 1),
                            len(paths[level]) - 1, overhead, per_byte, relay, alpha))
    return stages


def period(stages: list[Stage], chunk_bytes: float) -> float:
    """tau: one piece's time on the busiest link class, the steady state's period. Levels that wait
    for each other inside one step (halving-doubling through no stored hop) may leave their link an
    alpha idle between them; the other stage's rounds listed in between often fill it, but not
    always (the first levels of recursive doubling are small), so the estimate charges every gap:
    halving-doubling is then taken only where it saves more than that (per-message overheads)."""
    by_class: dict[int, float] = {}
    for s in stages:
        idle = (s.rounds - 1) * s.alpha if s.hops == 1 else 0.0
        by_class[s.link_class] = by_class.get(s.link_class, 0.0) + s.busy(chunk_bytes) + idle
    return max(by_class.values())


def pipeline_time(stages: list[Stage], whole_chunk: float, pieces: int) -> float:
    """T(P) of the module docstring; ``whole_chunk``: the bytes of a chunk with one piece."""
    chunk = whole_chunk / pieces
    return sum(s.latency(chunk) for s in stages) + (pieces - 1) * period(stages, chunk)


def step_lags(steps: list[str], stages: list[Stage], chunk_bytes: float) -> list[int]:
    """The period each step of a piece is listed in, counted from its first step. A step waits for
    the one before it, which ends up to a period after its own period began and arrives its alpha
    later; a step listed too soon would hold its link idle until then (links serve in file order),
    so it lags by one period plus its predecessor's alpha in periods. Lagging more costs nothing
    but buffers: a link still serves every piece in turn."""
    tau = period(stages, chunk_bytes)
    alpha = {s.name: s.alpha for s in stages}
    lags = [0]
    for before in steps[:-1]:
        lags.append(lags[-1] + 1 + (math.ceil(alpha.get(before, 0.0) / tau) if tau > 0 else 0))
    return lags


@dataclass(frozen=True)
class Choice:
    """The box and rail exchanges, the piece count, the estimate T(P) and the stages it priced."""

    exchanges: dict[str, str]
    pieces: int
    estimate: float
    stages: list[Stage]


def transfers_per_piece(stages: list[Stage], ranks: int) -> int:
    """About how many transfers one piece takes (every rank's messages times their hops)."""
    return ranks * sum(s.messages * s.hops for s in stages)


def choose(topology: Topology, layout: Layout, kind: str, whole_chunk: float, fixed: dict[str, str | int],
           budget: int, tolerance: float) -> Choice:
    """The exchanges and piece count (powers of two, within ``budget`` transfers) of least T(P),
    except those ``fixed`` gives. Among the choices within ``tolerance`` of the least: direct
    exchanges first (their estimate is the closer), then the fewest transfers, which are the
    cheapest to write, verify and simulate."""
    options = []
    levels = {"box": layout.per_box, "rail": layout.per_group}
    for box in [fixed["box"]] if "box" in fixed else allowed(levels["box"]):
        for rail in [fixed["rail"]] if "rail" in fixed else allowed(levels["rail"]):
            exchanges = {"box": str(box), "rail": str(rail)}
            stages = stage_costs(topology, layout, kind, exchanges)
            per_piece = transfers_per_piece(stages, topology.num_npus)
            for pieces in _powers(budget // max(per_piece, 1)) if "pieces" not in fixed else [int(fixed["pieces"])]:
                estimate = pipeline_time(stages, whole_chunk, pieces)
                options.append((estimate, pieces * per_piece, Choice(exchanges, pieces, estimate, stages)))
    best = min(estimate for estimate, _, _ in options)
    near = [(list(choice.exchanges.values()).count("direct") * -1, transfers, estimate, choice)
            for estimate, transfers, choice in options if estimate <= best * (1 + tolerance)]
    return min(near, key=lambda item: item[:3])[3]


def _powers(most: int) -> list[int]:
    """1, 2, 4, ... up to ``most`` (at least 1)."""
    return [1 << b for b in range(max(most, 1).bit_length())]
