"""TE-CCL's time expansion (note 1.2, 1.7, 2.6, 5.1): epoch duration and per-edge delays in epochs.

* ``tau``: one chunk's transmission time on the fastest link (``"fastest"``, the paper's default,
  Appendix F), on the slowest link (``"slowest"``) or a user value in seconds; times the epoch
  multiplier (EM).
* per edge: ``a`` = ceil(alpha / tau) epochs of latency (0 when alpha / tau <= the threshold,
  0.1 in the authors' code); ``kappa`` = ceil(chunk time on the edge / tau) epochs a chunk occupies
  it; ``L = a + kappa - 1``: a chunk sent at epoch k is in the receiver's buffer at k + 1 + L.
* capacity: at most ``floor(kappa * T * tau)`` chunks start in any window of kappa consecutive
  epochs (Appendix F with the off-by-one resolved as note section 7 item 9: kappa terms).

The graph is the physical topology (switch nodes included) or, for the TACCL-style switch model,
the topology with every switch replaced by hyper-edges (note 2.5).

A schedule on the graph is a list of flows ``(chunk, edge index, send epoch)`` (``Flow``; F_{c,e,k}
= 1 of note 2.10), whatever made it (``greedy``, ``milp``, ``astar``); ``EpochSchedule`` is one
with its horizon n_e and finish epoch. ``prune_flows`` is the silly-flow removal of note 2.7 (a
backward walk from every demand's first arrival to a holder), ``finish_epoch`` the epoch by which
every demand is in its buffer (claimed time = finish x tau).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from workbench.model.collective import Collective
from workbench.topology import Topology

__all__ = ["Edge", "EpochGraph", "epoch_graph", "base_epoch", "SWITCH_MODELS", "Flow", "EpochSchedule", "prune_flows",
           "finish_epoch"]

SWITCH_MODELS = ("copy", "no-copy", "hyperedge")

Flow = tuple[int, int, int]  # (chunk, edge index, send epoch)


@dataclass(frozen=True)
class Edge:
    index: int
    src: int
    dst: int
    alpha: float
    bandwidth: float
    a: int  # latency epochs
    kappa: int  # epochs one chunk occupies the edge
    per_window: int  # chunks per window of kappa epochs
    switch: int | None = None  # the switch a hyper-edge replaces

    @property
    def delay(self) -> int:
        """L: a chunk sent at epoch k is in the receiver's buffer from epoch k + 1 + L."""
        return self.a + self.kappa - 1


@dataclass
class EpochGraph:
    topology: Topology
    tau: float
    edges: list[Edge]
    switch_model: str
    single_beta: bool
    chunk_bytes: float = 0.0
    out_edges: dict[int, list[int]] = field(default_factory=dict)
    in_edges: dict[int, list[int]] = field(default_factory=dict)
    hyperedges: dict[int, list[int]] = field(default_factory=dict)  # switch -> its hyper-edges

    def is_switch(self, node: int) -> bool:
        """True for a switch node of the topology."""
        return self.topology.is_switch(node)

    @property
    def nodes(self) -> list[int]:
        """The graph's nodes: the NPUs in the hyperedge model, every topology node otherwise."""
        if self.switch_model == "hyperedge":
            return list(self.topology.npus)
        return list(range(self.topology.num_nodes))

    def arrival_delay(self, e: Edge) -> int:
        """Epochs from a send at k to the buffer: the chunk is usable from k + 1 + this."""
        if self.single_beta and self.is_switch(e.src) and not self.is_switch(e.dst):
            return e.a - 1  # TACCL's single-beta accounting: the switch -> GPU hop adds alpha only
        return e.delay


def _edge(index: int, src: int, dst: int, alpha: float, bandwidth: float, chunk_bytes: float, tau: float,
          threshold: float, switch: int | None = None) -> Edge:
    ratio = alpha / tau
    a = 0 if ratio <= threshold else math.ceil(ratio - 1e-9)
    per_chunk = chunk_bytes / bandwidth
    kappa = max(1, math.ceil(per_chunk / tau - 1e-9))
    per_window = max(1, math.floor(kappa * tau / per_chunk + 1e-9))
    return Edge(index, src, dst, alpha, bandwidth, a, kappa, per_window, switch)


def base_epoch(topology: Topology, chunk_bytes: float, epoch: str | float) -> float:
    """tau before the multiplier: one chunk on the fastest / slowest link, or a user value in seconds."""
    bandwidths = [l.bandwidth for l in topology.links]
    if epoch == "fastest":
        return chunk_bytes / max(bandwidths)
    if epoch == "slowest":
        return chunk_bytes / min(bandwidths)
    if isinstance(epoch, (int, float)) and not isinstance(epoch, bool) and epoch > 0:
        return float(epoch)
    raise ValueError(f"epoch must be 'fastest', 'slowest' or a duration in seconds, got {epoch!r}")


def epoch_graph(topology: Topology, chunk_bytes: float, epoch: str | float = "fastest", multiplier: float = 1.0,
                alpha_threshold: float = 0.1, switch_model: str = "copy", single_beta: bool = False) -> EpochGraph:
    """The epoch graph of ``topology`` at ``chunk_bytes``: tau (``base_epoch`` times ``multiplier``) and
    each edge's epochs (module docstring); "hyperedge" replaces each switch by NPU-to-NPU edges."""
    if switch_model not in SWITCH_MODELS:
        raise ValueError(f"unknown switch model {switch_model!r} (choose from {', '.join(SWITCH_MODELS)})")
    if multiplier <= 0:
        raise ValueError(f"epoch multiplier must be positive, got {multiplier!r}")
    tau = base_epoch(topology, chunk_bytes, epoch) * multiplier
    edges: list[Edge] = []
    hyperedges: dict[int, list[int]] = {}
    if switch_model == "hyperedge":
        direct = {(l.src, l.dst) for l in topology.links if not topology.is_switch(l.src) and not topology.is_switch(l.dst)}
        for l in topology.links:
            if (l.src, l.dst) in direct:
                edges.append(_edge(len(edges), l.src, l.dst, l.alpha, l.bandwidth, chunk_bytes, tau, alpha_threshold))
        for w in topology.switches:
            ins = [l for l in topology.in_links(w) if not topology.is_switch(l.src)]
            outs = [l for l in topology.out_links(w) if not topology.is_switch(l.dst)]
            for up in ins:
                for down in outs:
                    if up.src == down.dst or (up.src, down.dst) in direct:
                        continue
                    edge = _edge(len(edges), up.src, down.dst, up.alpha + down.alpha, min(up.bandwidth, down.bandwidth),
                                 chunk_bytes, tau, alpha_threshold, switch=w)
                    edges.append(edge)
                    hyperedges.setdefault(w, []).append(edge.index)
        if any(topology.is_switch(l.src) and topology.is_switch(l.dst) for l in topology.links):
            raise ValueError("the hyperedge switch model needs every switch between NPUs (no switch-to-switch links)")
    else:
        for l in topology.links:
            edges.append(_edge(len(edges), l.src, l.dst, l.alpha, l.bandwidth, chunk_bytes, tau, alpha_threshold))
    graph = EpochGraph(topology, tau, edges, switch_model, single_beta and switch_model != "hyperedge",
                       chunk_bytes=chunk_bytes, hyperedges=hyperedges)
    for e in edges:
        graph.out_edges.setdefault(e.src, []).append(e.index)
        graph.in_edges.setdefault(e.dst, []).append(e.index)
    return graph


# ------------------------------------------------------------------------------------ schedules
@dataclass
class EpochSchedule:
    """A schedule of flows and what made it: the model's horizon, the finish epoch, status and statistics."""

    flows: list[Flow]
    horizon: int  # n_e the model used
    finish: int  # epoch by which every demand is in its buffer (claimed time = finish * tau)
    status: str
    stats: dict[str, Any] = field(default_factory=dict)
    message: str = ""


def prune_flows(graph: EpochGraph, collective: Collective, flows: list[Flow]) -> list[Flow]:
    """Keep only flows on a backward path from each demand's first arrival to a holder (note 2.7)."""
    edges = graph.edges
    arrivals: dict[tuple[int, int], list[tuple[int, Flow]]] = defaultdict(list)  # (c, node) -> (ready epoch, flow)
    for flow in flows:
        c, ei, k = flow
        e = edges[ei]
        ready = k + 1 + (graph.arrival_delay(e) if not graph.is_switch(e.dst) else e.delay)
        arrivals[(c, e.dst)].append((ready, flow))
    keep: set[Flow] = set()

    def explain(c: int, node: int, by: int) -> None:
        """Keep the flows that put chunk c on ``node`` no later than epoch ``by``."""
        if node in collective.pre[c]:
            return
        options = sorted(a for a in arrivals.get((c, node), []) if a[0] <= by)
        if graph.is_switch(node):  # a switch forwards at exactly the epoch the chunk arrives
            options = [a for a in options if a[0] == by]
        if not options:
            raise RuntimeError(f"flow bookkeeping: chunk {c} has no arrival at node {node} by epoch {by}")
        ready, flow = options[0]
        if flow in keep:
            return
        keep.add(flow)
        explain(c, edges[flow[1]].src, flow[2])

    for c in range(collective.num_chunks):
        for d in collective.post[c] - collective.pre[c]:
            first = min((a[0] for a in arrivals.get((c, d), [])), default=None)
            if first is None:
                raise RuntimeError(f"chunk {c} never reaches rank {d}")
            explain(c, d, first)
    return sorted(keep, key=lambda f: (f[2], f[0], f[1]))


def finish_epoch(graph: EpochGraph, collective: Collective, flows: list[Flow]) -> int:
    """The epoch from which every demand (post rank not in pre) holds its chunk, by the flows'
    earliest arrivals; 0 without demands."""
    first: dict[tuple[int, int], int] = {}
    for c, ei, k in flows:
        e = graph.edges[ei]
        if graph.is_switch(e.dst):
            continue
        ready = k + 1 + graph.arrival_delay(e)
        key = (c, e.dst)
        first[key] = min(first.get(key, ready), ready)
    return max((first[(c, d)] for c in range(collective.num_chunks) for d in collective.post[c] - collective.pre[c]),
               default=0)
