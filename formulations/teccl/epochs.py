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

Switch semantics are per switch (note 1.6, 2.11; ``EpochGraph.copies_at``): under ``switch_model``
``copy`` a switch copies (sends one inbound chunk on several out-edges) where the topology lets it:

* an ordinary gather graph (``dual`` false): where the switch multicasts (``SwitchAbility.multicast``;
  a ``multicast: false`` switch carries what enters it one for one, as in the no-copy model);
* the graph of a reduction's dual gather (``dual``: the All-Gather / Broadcast that is reversed into
  a Reduce-Scatter / Reduce, on the reversed topology): where the switch reduces
  (``Topology.reduces``), since ``Algorithm.reverse`` turns a copy there into a sum in the switch;
  there a chunk's visits do not overlap (``one_at_a_time``: each reversed sum is one operation of
  the switch, read once), and at a switch with ``reduce_trees`` a copy goes to one out-edge or to
  every port the chunk did not come from (``fans_out_fully``: every sum there has the one tree
  "all ports", so no schedule opens more than one; only where every port is an NPU); every other
  switch carries a chunk once (``crosses_once``), or one for one if it does not multicast.

``no-copy`` makes every switch carry each chunk once; ``hyperedge`` has no switch nodes. A switch
that neither copies nor multicasts holds no value (``passes_through``): a crossing is emitted as one
transfer through it.

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

__all__ = ["Edge", "EpochGraph", "epoch_graph", "copying_switches", "base_epoch", "SWITCH_MODELS", "Flow",
           "EpochSchedule", "prune_flows", "finish_epoch"]

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
    dual: bool = False  # the graph of a reduction's dual gather (module docstring)
    copying: frozenset[int] = frozenset()  # switches that may send one inbound chunk on several out-edges
    tree_limited: frozenset[int] = frozenset()  # copying switches whose copies reach every port (dual only)

    def is_switch(self, node: int) -> bool:
        """True for a switch node of the topology."""
        return self.topology.is_switch(node)

    def copies_at(self, node: int) -> bool:
        """True where switch ``node`` may send one inbound chunk on several out-edges (module docstring);
        False at a switch that carries each chunk once (and at an NPU: NPUs copy from their buffers)."""
        return node in self.copying

    def crosses_once(self, node: int) -> bool:
        """True where a chunk leaves switch ``node`` at most once: a switch that does not copy but holds
        what crosses it (``passes_through`` is false), under the no-copy model or in a dual graph (its
        crossings are reversed; note 2.10 "cross once")."""
        return (not self.copies_at(node) and (self.switch_model == "no-copy" or self.dual)
                and not self.passes_through(node))

    def passes_through(self, node: int) -> bool:
        """True at a switch that neither copies nor multicasts (``multicast: false``): it holds no value,
        so a crossing is emitted as one transfer from its sender to its receiver through it (several
        crossings of one chunk may overlap, which two transfers ending and starting there could not)."""
        return not self.copies_at(node) and not self.topology.ability(node).multicast

    def one_at_a_time(self, node: int) -> bool:
        """True where a chunk's visits to switch ``node`` may not overlap: a copying switch of a dual
        graph, whose every copy is reversed into a sum there. A chunk enters it only after its
        previous visit has left (``visit``), so each reversed sum is one operation of the switch,
        read once."""
        return self.dual and node in self.copying

    def visit(self, e: Edge, k: int) -> range:
        """The epochs a chunk sent into a switch on ``e`` at epoch ``k`` occupies it: from the send to
        the epoch it leaves, k .. k + 1 + L."""
        return range(k, k + 2 + e.delay)

    def fans_out_fully(self, node: int) -> bool:
        """True at a copying switch of a dual graph with ``reduce_trees``: a copy there leaves on one
        out-edge, or on every out-edge to a port the chunk did not come from (one reduction tree, all
        ports; ``milp.tree_rows``)."""
        return node in self.tree_limited

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


def copying_switches(topology: Topology, switch_model: str,
                     dual: bool = False) -> tuple[frozenset[int], frozenset[int]]:
    """The switches that copy and, among them, those whose copies reach every port (module docstring):
    under ``copy``, the multicasting switches, or in a ``dual`` graph the reducing ones (those with
    ``reduce_trees`` fanning out fully); none under ``no-copy`` or ``hyperedge``."""
    if switch_model != "copy":
        return frozenset(), frozenset()
    if dual:
        copying = frozenset(w for w in topology.switches if topology.reduces(w))
        return copying, frozenset(w for w in copying if topology.ability(w).reduce_trees is not None)
    return frozenset(w for w in topology.switches if topology.ability(w).multicast), frozenset()


def epoch_graph(topology: Topology, chunk_bytes: float, epoch: str | float = "fastest", multiplier: float = 1.0,
                alpha_threshold: float = 0.1, switch_model: str = "copy", single_beta: bool = False,
                dual: bool = False) -> EpochGraph:
    """The epoch graph of ``topology`` at ``chunk_bytes``: tau (``base_epoch`` times ``multiplier``) and
    each edge's epochs (module docstring); "hyperedge" replaces each switch by NPU-to-NPU edges.
    ``dual``: the graph of a reduction's dual gather (``topology`` is already the reversed one), whose
    switches copy where they reduce (``copying_switches``)."""
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
    copying, tree_limited = copying_switches(topology, switch_model, dual)
    graph = EpochGraph(topology, tau, edges, switch_model, single_beta and switch_model != "hyperedge",
                       chunk_bytes=chunk_bytes, hyperedges=hyperedges, dual=dual, copying=copying,
                       tree_limited=tree_limited)
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
    """Keep only flows on a backward path from each demand's first arrival to a holder (note 2.7).
    At a switch that does not copy, each kept out-flow is explained by its own in-flow (the switch
    carries what enters it one for one)."""
    edges = graph.edges
    arrivals: dict[tuple[int, int], list[tuple[int, Flow]]] = defaultdict(list)  # (c, node) -> (ready epoch, flow)
    for flow in flows:
        c, ei, k = flow
        e = edges[ei]
        ready = k + 1 + (graph.arrival_delay(e) if not graph.is_switch(e.dst) else e.delay)
        arrivals[(c, e.dst)].append((ready, flow))
    keep: set[Flow] = set()
    claimed: set[Flow] = set()  # in-flows of switches that do not copy, each explaining one out-flow

    def explain(c: int, node: int, by: int) -> None:
        """Keep the flows that put chunk c on ``node`` no later than epoch ``by``."""
        if node in collective.pre[c]:
            return
        options = sorted(a for a in arrivals.get((c, node), []) if a[0] <= by)
        if graph.is_switch(node):  # a switch forwards at exactly the epoch the chunk arrives
            options = [a for a in options if a[0] == by]
            if not graph.copies_at(node):
                options = [a for a in options if a[1] not in claimed] or options
        if not options:
            raise RuntimeError(f"flow bookkeeping: chunk {c} has no arrival at node {node} by epoch {by}")
        ready, flow = options[0]
        if graph.is_switch(node) and not graph.copies_at(node):
            claimed.add(flow)
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
