"""TE-CCL's greedy warm start: earliest-arrival trees list-scheduled epoch by epoch.

Not a technique of the paper: the workbench's incumbent for the MILP (note 2.10) and the A*
rounds (note 4), so every solve has one and the MILP's horizon n_e comes from a feasible schedule.
It keeps the MILP's rules on the same ``EpochGraph``:

* a chunk leaves only a node holding it, from its ready epoch k + 1 + L on (``arrival_delay``);
* capacity over a window of kappa epochs: at most ``floor(kappa T tau)`` chunk starts per edge
  (Appendix F, note section 7 item 9)  -> ``_Usage.fits`` / ``_Usage.take``;
* switches hold nothing: a chunk crosses a switch in the epoch it arrives (``_earliest_pair``); a
  switch that copies (``EpochGraph.copies_at``) sends one inbound chunk out on several links, any
  other one for one; a no-copy or dual graph's switch that does not copy carries a chunk once
  (``crosses_once``, ``_Switches.crossed``); in a dual graph a chunk's visits to a copying switch do
  not overlap (``one_at_a_time``, ``_Switches.visits``; a new visit is copied to every target whose
  link is free then), and at a switch with ``reduce_trees`` a visit forwards to one out-edge or fans
  out to every other port (``_fan_out``; the MILP's tree rows); hyper-edges: one out and one in
  hyper-edge of a switch per GPU and at most min(#in, #out) busy per switch and epoch (note 1.6,
  2.5, 2.11);
* one hop (or one switch crossing) per chunk per pass, round-robin over chunks, the earliest arrival
  first (``_best_move``; in a dual graph whose switches sum, the arrival plus kappa - 1 per hop, so
  a slow link is taken only well ahead of a fast route, note 2.11); then the silly-flow removal of
  note 2.7 (``epochs.prune_flows``).
"""

from __future__ import annotations

from collections import defaultdict

from formulations.teccl.epochs import Edge, EpochGraph, Flow, finish_epoch, prune_flows
from workbench.model.collective import Collective

__all__ = ["greedy_schedule"]


class _Usage:
    """Window capacity bookkeeping for the greedy scheduler."""

    def __init__(self, graph: EpochGraph) -> None:
        self.graph = graph
        self.starts: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.port_out: dict[tuple[int, int], dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.port_in: dict[tuple[int, int], dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.switch_busy: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        topo = graph.topology
        self.switch_cap = {w: min(len(topo.in_links(w)), len(topo.out_links(w))) for w in topo.switches}

    def fits(self, e: Edge, k: int) -> bool:
        starts = self.starts[e.index]
        for end in range(k, k + e.kappa):
            if sum(starts.get(t, 0) for t in range(end - e.kappa + 1, end + 1)) + 1 > e.per_window:
                return False
        if e.switch is not None:  # a GPU uses one out and one in hyper-edge of a switch at a time
            w = e.switch
            for t in range(k, k + e.kappa):
                if self.port_out[(w, e.src)].get(t, 0) or self.port_in[(w, e.dst)].get(t, 0):
                    return False
                if self.switch_busy[w].get(t, 0) + 1 > self.switch_cap[w]:
                    return False
        return True

    def take(self, e: Edge, k: int) -> None:
        self.starts[e.index][k] += 1
        if e.switch is not None:
            for t in range(k, k + e.kappa):
                self.port_out[(e.switch, e.src)][t] += 1
                self.port_in[(e.switch, e.dst)][t] += 1
                self.switch_busy[e.switch][t] += 1


def greedy_schedule(graph: EpochGraph, collective: Collective, horizon_cap: int = 100000,
                    initial: list[Flow] | None = None) -> tuple[list[Flow], int]:
    """Earliest-arrival trees, one hop (or one switch crossing) at a time, round-robin over chunks.

    ``initial``: flows already decided (an unfinished A* run); the greedy completes them.

    No-copy switches carry a chunk once, so where a crossing can reach an NPU that wants the chunk,
    the greedy first spends it there (an All-to-All chunk behind one switch has no other way in);
    if some demand is then left unreached (one that only a relay behind the switch reaches), it
    runs again without that preference. With switches whose copies must reach every port
    (``EpochGraph.tree_limited``) it runs twice, forwarding one out-edge at a time there and fanning
    out wherever it can (``_fan_out``), and keeps the earlier finish: a fan-out needs every port's
    link at once, which pays on a star of fast links and not on a few slow ones.
    """
    best = None
    for fan_out in ((False, True) if graph.tree_limited else (False,)):
        try:
            flows = _earliest_arrivals(graph, collective, horizon_cap, initial, True, fan_out)
        except _Unreached:
            if not _any_single(graph):
                raise
            flows = _earliest_arrivals(graph, collective, horizon_cap, initial, False, fan_out)
        flows = prune_flows(graph, collective, flows)
        finish = finish_epoch(graph, collective, flows)
        if best is None or finish < best[1]:
            best = (flows, finish)
    return best


class _Unreached(ValueError):
    """A demand the greedy could not reach (the message names it)."""


def _single(graph: EpochGraph, w: int) -> bool:
    """True where a chunk crosses switch ``w`` once (``EpochGraph.crosses_once``)."""
    return graph.crosses_once(w)


def _copies(graph: EpochGraph, w: int) -> bool:
    """True where the greedy lets one inbound chunk leave switch ``w`` on several links by sharing
    it: a copying switch, except one whose copies must reach every port (there a visit forwards to
    one out-edge, or fans out to all at once, ``_fan_out``)."""
    return graph.copies_at(w) and not graph.fans_out_fully(w)


def _any_single(graph: EpochGraph) -> bool:
    return graph.switch_model != "hyperedge" and any(_single(graph, w) for w in graph.topology.switches)


class _Switches:
    """The switch bookkeeping of one greedy run: the inbound (chunk, edge, epoch) already sent into a
    switch (``inbound``; a copying switch shares it), the (chunk, switch) crossings of switches
    crossed once (``crossed``) and the epochs a chunk's visits occupy a switch visited one at a time
    (``visits``)."""

    def __init__(self, graph: EpochGraph) -> None:
        self.graph = graph
        self.inbound: set[tuple[int, int, int]] = set()
        self.crossed: set[tuple[int, int]] = set()
        self.visits: dict[tuple[int, int], set[int]] = defaultdict(set)

    def book(self, c: int, e: Edge, k: int) -> None:
        """Chunk c sent on ``e`` at ``k``: what this means for the switches at its ends."""
        graph = self.graph
        if graph.is_switch(e.src):
            self.crossed.add((c, e.src))
        if graph.is_switch(e.dst) and (c, e.index, k) not in self.inbound:
            self.inbound.add((c, e.index, k))
            if graph.one_at_a_time(e.dst):
                self.visits[(c, e.dst)].update(graph.visit(e, k))

    def free(self, c: int, up: Edge, k: int) -> bool:
        """True when a new visit of chunk c to switch ``up.dst`` sent at ``k`` overlaps none booked."""
        if not self.graph.one_at_a_time(up.dst):
            return True
        busy = self.visits.get((c, up.dst))
        return not busy or busy.isdisjoint(self.graph.visit(up, k))


def _earliest_arrivals(graph: EpochGraph, collective: Collective, horizon_cap: int, initial: list[Flow] | None,
                       prefer_wanted: bool, fan_out: bool = False) -> list[Flow]:
    usage = _Usage(graph)
    C = collective.num_chunks
    npus = list(graph.topology.npus)
    avail: list[dict[int, int]] = [{r: 0 for r in collective.pre[c]} for c in range(C)]
    switches = _Switches(graph)
    flows: list[Flow] = list(initial or [])
    _take_initial(graph, usage, flows, avail, switches)
    pending = [set(npus) - set(avail[c]) for c in range(C)]
    while any(pending):
        progressed = False
        for c in range(C):
            if not pending[c]:
                continue
            wanted = collective.post[c].difference(avail[c]) if prefer_wanted else None
            move = _best_move(graph, usage, c, avail[c], pending[c], switches, horizon_cap, wanted, fan_out)
            if move is None:
                pending[c] = set()  # unreachable rest: the demands are checked below
                continue
            _take_hops(graph, usage, c, move[2], flows, switches)
            for e, k in move[2]:  # the move's target, and every other NPU a new visit's copies reach
                if not graph.is_switch(e.dst):
                    arrival = k + 1 + graph.arrival_delay(e)
                    avail[c][e.dst] = min(avail[c].get(e.dst, arrival), arrival)
                    pending[c].discard(e.dst)
            progressed = True
        if not progressed:
            break
    _check_reached(collective, avail, _any_single(graph))
    return flows


def _take_initial(graph: EpochGraph, usage: _Usage, flows: list[Flow], avail: list[dict[int, int]],
                  switches: _Switches) -> None:
    """Book the given flows: their slots, their switch crossings and the arrivals they make."""
    edges = graph.edges
    for c, ei, k in flows:
        e = edges[ei]
        switches.book(c, e, k)
        usage.take(e, k)
        if not graph.is_switch(e.dst):
            ready = k + 1 + graph.arrival_delay(e)
            avail[c][e.dst] = min(avail[c].get(e.dst, ready), ready)


def _take_hops(graph: EpochGraph, usage: _Usage, c: int, hops: list, flows: list[Flow], switches: _Switches) -> None:
    """Book chunk c's move: each hop's slot and flow (none for a copy switch already receiving it then)."""
    for e, k in hops:
        key = (c, e.index, k)
        if graph.is_switch(e.dst) and key in switches.inbound and _copies(graph, e.dst):
            if graph.is_switch(e.src):
                switches.crossed.add((c, e.src))
            continue  # the switch copies a chunk it already receives in this epoch
        switches.book(c, e, k)
        usage.take(e, k)
        flows.append(key)


def _check_reached(collective: Collective, avail: list[dict[int, int]], no_copy: bool) -> None:
    """_Unreached naming the first demand no chunk arrival covers."""
    for c in range(collective.num_chunks):
        for d in collective.post[c]:
            if d not in avail[c]:
                model = (" (no-copy switches carry each chunk once: in the no-copy model, and in Reduce-Scatter "
                         "and All-Reduce, being reversed All-Gathers, those that do not reduce)" if no_copy else "")
                raise _Unreached(f"chunk {c} cannot reach rank {d} in the epoch model{model}")


def _best_move(graph: EpochGraph, usage: _Usage, c: int, holders: dict[int, int], targets: set[int],
               switches: _Switches, cap: int, wanted: set[int] | None = None, fan_out: bool = False):
    """The earliest arrival of chunk ``c`` at one more of ``targets``: (epoch, NPU, hops).

    ``switches.crossed``: the (chunk, switch) pairs already used at switches crossed once
    (``_single``); a chunk crosses such a switch once, so that one crossing goes to an NPU that
    ``wanted`` the chunk (its destinations not yet reached) whenever the switch reaches one; spent
    on a relay, it would strand the destination (an All-to-All chunk behind a single switch has no
    second way in). At a switch visited one at a time (``EpochGraph.one_at_a_time``) a new visit
    overlaps none booked (``_Switches.free``) and also carries the chunk to every other target whose
    link from the switch is free then (visits are scarce there). At a switch whose copies must reach
    every port (``fans_out_fully``) a move is one forward, or with ``fan_out``, wherever every other
    port is a target, a fan-out to all of them (``_fan_out``) and nothing else.

    In a dual graph with switches that sum (``EpochGraph.copying``; our extension) the moves are
    ranked by arrival plus the epochs they hold slow links beyond one (kappa - 1 per hop, ``_rank``);
    elsewhere by arrival alone, as recorded before that extension.
    """
    rank = _rank if graph.dual and graph.copying else (lambda cand: cand[:2])
    candidates = []
    for i, ready in holders.items():
        for ei in graph.out_edges.get(i, []):
            e = graph.edges[ei]
            if graph.is_switch(e.dst):
                candidates += _through_switch(graph, usage, c, i, e, ready, targets, switches, cap, wanted, fan_out)
            elif e.dst in targets:
                candidates += _direct(usage, graph, e, ready, cap)
    best = min(candidates, key=rank, default=None)  # the first of equals, as the scan kept it
    if best is None:
        return None
    arrival, target, hops, exits = best
    if len(hops) == 2 and exits:
        (up, k), (out, k_out) = hops
        if _copies(graph, up.dst) and graph.one_at_a_time(up.dst) and (c, up.index, k) not in switches.inbound:
            hops += [(other, k_out) for other in exits if other is not out and usage.fits(other, k_out)]
    return arrival, target, hops


def _through_switch(graph: EpochGraph, usage: _Usage, c: int, i: int, e: Edge, ready: int, targets: set[int],
                    switches: _Switches, cap: int, wanted: set[int] | None, fan_out: bool) -> list:
    """``_best_move``'s candidates from holder ``i`` into switch ``e.dst``: a fan-out where it must
    reach every port, else one forward per exit towards a target (``_best_move``'s docstring)."""
    edges = graph.edges
    single = _single(graph, e.dst)
    if single and (c, e.dst) in switches.crossed:
        return []
    exits = [edges[eo] for eo in graph.out_edges.get(e.dst, []) if edges[eo].dst in targets]
    if single and wanted:
        exits = [out for out in exits if out.dst in wanted] or exits
    if fan_out and graph.fans_out_fully(e.dst):
        cand = _fan_out(graph, usage, c, i, e, ready, exits, switches, cap)
        if cand is not None:
            return [cand]
    found = []
    for out in exits:
        k = _earliest_pair(graph, usage, c, e, out, ready, switches, cap)
        if k is not None:
            arrival = k + 1 + e.delay + 1 + graph.arrival_delay(out)
            found.append((arrival, out.dst, [(e, k), (out, k + 1 + e.delay)], exits))
    return found


def _direct(usage: _Usage, graph: EpochGraph, e: Edge, ready: int, cap: int) -> list:
    """``_best_move``'s candidate over the NPU-to-NPU edge ``e``: its first free epoch from ``ready``."""
    k = ready
    while not usage.fits(e, k):
        k += 1
        if k > cap:
            return []
    return [(k + 1 + graph.arrival_delay(e), e.dst, [(e, k)], [])]


def _fan_out(graph: EpochGraph, usage: _Usage, c: int, sender: int, up: Edge, ready: int, exits: list[Edge],
             switches: _Switches, cap: int):
    """Chunk ``c`` sent by ``sender`` into a switch whose copies reach every port (``fans_out_fully``)
    and out on ``exits`` at once, at the earliest epoch all those links are free and the visit
    overlaps none booked: (earliest arrival, its NPU, hops, []); None unless ``exits`` lead to every
    other port (two or more)."""
    edges = graph.edges
    w = up.dst
    ports = {edges[ei].src for ei in graph.in_edges.get(w, [])} | {edges[eo].dst for eo in graph.out_edges.get(w, [])}
    if len(exits) < 2 or ports - {sender} != {out.dst for out in exits} or len(exits) != len(ports) - 1:
        return None
    k = ready
    while k <= cap:
        out_epoch = k + 1 + up.delay
        if (usage.fits(up, k) and switches.free(c, up, k) and (c, up.index, k) not in switches.inbound
                and all(usage.fits(out, out_epoch) for out in exits)):
            arrival, target = min((out_epoch + 1 + graph.arrival_delay(out), out.dst) for out in exits)
            return arrival, target, [(up, k)] + [(out, out_epoch) for out in exits], []
        k += 1
    return None


def _rank(cand: tuple) -> tuple:
    """A dual graph's move order: arrival plus kappa - 1 per hop (a slow link taken only well ahead of
    a fast route: reversed, every extra copy over it is an extra partial sum sent over it), then the NPU."""
    return cand[0] + sum(e.kappa - 1 for e, _ in cand[2]), cand[1]


def _earliest_pair(graph: EpochGraph, usage: _Usage, c: int, up: Edge, down: Edge, ready: int,
                   switches: _Switches, cap: int) -> int | None:
    """The earliest send epoch >= ``ready`` on ``up`` (into a switch) whose crossing leaves on ``down``:
    sharing an inbound already sent (a copying switch), or a new visit (``_Switches.free``)."""
    copies = _copies(graph, up.dst)
    k = ready
    while k <= cap:
        shared = (c, up.index, k) in switches.inbound
        up_ok = (shared and copies) or (not shared and usage.fits(up, k) and switches.free(c, up, k))
        if up_ok and usage.fits(down, k + 1 + up.delay):
            return k
        k += 1
    return None
