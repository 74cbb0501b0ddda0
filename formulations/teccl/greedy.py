"""TE-CCL's greedy warm start: earliest-arrival trees list-scheduled epoch by epoch.

Not a technique of the paper: the workbench's incumbent for the MILP (note 2.10) and the A*
rounds (note 4), so every solve has one and the MILP's horizon n_e comes from a feasible schedule.
It keeps the MILP's rules on the same ``EpochGraph``:

* a chunk leaves only a node holding it, from its ready epoch k + 1 + L on (``arrival_delay``);
* capacity over a window of kappa epochs: at most ``floor(kappa T tau)`` chunk starts per edge
  (Appendix F, note section 7 item 9)  -> ``_Usage.fits`` / ``_Usage.take``;
* switches hold nothing: a chunk crosses a switch in the epoch it arrives (``_earliest_pair``); a copy
  switch sends one inbound chunk out on several links, a no-copy switch carries a chunk once
  (``crossed``); hyper-edges: one out and one in hyper-edge of a switch per GPU and at most
  min(#in, #out) busy per switch and epoch (note 1.6 / 2.5);
* one hop (or one switch crossing) per chunk per pass, round-robin over chunks, the earliest arrival
  first (``_best_move``); then the silly-flow removal of note 2.7 (``epochs.prune_flows``).
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
    runs again without that preference.
    """
    try:
        flows = _earliest_arrivals(graph, collective, horizon_cap, initial, prefer_wanted=True)
    except _Unreached:
        if graph.switch_model != "no-copy":
            raise
        flows = _earliest_arrivals(graph, collective, horizon_cap, initial, prefer_wanted=False)
    flows = prune_flows(graph, collective, flows)
    return flows, finish_epoch(graph, collective, flows)


class _Unreached(ValueError):
    """A demand the greedy could not reach (the message names it)."""


def _earliest_arrivals(graph: EpochGraph, collective: Collective, horizon_cap: int, initial: list[Flow] | None,
                       prefer_wanted: bool) -> list[Flow]:
    usage = _Usage(graph)
    C = collective.num_chunks
    npus = list(graph.topology.npus)
    avail: list[dict[int, int]] = [{r: 0 for r in collective.pre[c]} for c in range(C)]
    inbound_used: set[tuple[int, int, int]] = set()  # (c, edge into a switch, k) already sent
    flows: list[Flow] = list(initial or [])
    crossed: set[tuple[int, int]] = set()  # (chunk, switch): no-copy switches carry a chunk once
    no_copy = graph.switch_model == "no-copy"
    _take_initial(graph, usage, flows, avail, inbound_used, crossed)
    pending = [set(npus) - set(avail[c]) for c in range(C)]
    while any(pending):
        progressed = False
        for c in range(C):
            if not pending[c]:
                continue
            wanted = collective.post[c].difference(avail[c]) if prefer_wanted else None
            move = _best_move(graph, usage, c, avail[c], pending[c], inbound_used, horizon_cap,
                              crossed if no_copy else None, wanted)
            if move is None:
                pending[c] = set()  # unreachable rest: the demands are checked below
                continue
            arrival, target, hops = move
            _take_hops(graph, usage, c, hops, flows, inbound_used, crossed)
            avail[c][target] = arrival
            pending[c].discard(target)
            progressed = True
        if not progressed:
            break
    _check_reached(collective, avail, no_copy)
    return flows


def _take_initial(graph: EpochGraph, usage: _Usage, flows: list[Flow], avail: list[dict[int, int]],
                  inbound_used: set, crossed: set) -> None:
    """Book the given flows: their slots, their switch crossings and the arrivals they make."""
    edges = graph.edges
    for c, ei, k in flows:
        e = edges[ei]
        if graph.is_switch(e.src):
            crossed.add((c, e.src))
        usage.take(e, k)
        if graph.is_switch(e.dst):
            inbound_used.add((c, ei, k))
        else:
            ready = k + 1 + graph.arrival_delay(e)
            avail[c][e.dst] = min(avail[c].get(e.dst, ready), ready)


def _take_hops(graph: EpochGraph, usage: _Usage, c: int, hops: list, flows: list[Flow], inbound_used: set,
               crossed: set) -> None:
    """Book chunk c's move: each hop's slot and flow (none for a copy switch already receiving it then)."""
    for e, k in hops:
        if graph.is_switch(e.src):
            crossed.add((c, e.src))
        key = (c, e.index, k)
        if graph.is_switch(e.dst) and key in inbound_used and graph.switch_model == "copy":
            continue  # the switch copies a chunk it already receives in this epoch
        usage.take(e, k)
        flows.append(key)
        if graph.is_switch(e.dst):
            inbound_used.add(key)


def _check_reached(collective: Collective, avail: list[dict[int, int]], no_copy: bool) -> None:
    """_Unreached naming the first demand no chunk arrival covers."""
    for c in range(collective.num_chunks):
        for d in collective.post[c]:
            if d not in avail[c]:
                model = (" (no-copy switches carry each chunk once; Reduce-Scatter and All-Reduce use them, "
                         "being reversed All-Gathers)" if no_copy else "")
                raise _Unreached(f"chunk {c} cannot reach rank {d} in the epoch model{model}")


def _best_move(graph: EpochGraph, usage: _Usage, c: int, holders: dict[int, int], targets: set[int],
               inbound_used: set, cap: int, crossed: set | None = None, wanted: set[int] | None = None):
    """The earliest arrival of chunk ``c`` at one more of ``targets``: (epoch, NPU, hops).

    ``crossed`` (no-copy switches): the (chunk, switch) pairs already used; a chunk crosses a
    no-copy switch once, so that one crossing goes to an NPU that ``wanted`` the chunk (its
    destinations not yet reached) whenever the switch reaches one; spent on a relay, it would
    strand the destination (an All-to-All chunk behind a single switch has no second way in).
    """
    best = None
    edges = graph.edges
    for i, ready in holders.items():
        for ei in graph.out_edges.get(i, []):
            e = edges[ei]
            if graph.is_switch(e.dst):
                if crossed is not None and (c, e.dst) in crossed:
                    continue
                exits = [edges[eo] for eo in graph.out_edges.get(e.dst, []) if edges[eo].dst in targets]
                if crossed is not None and wanted:
                    exits = [out for out in exits if out.dst in wanted] or exits
                for out in exits:
                    k = _earliest_pair(graph, usage, c, e, out, ready, inbound_used, cap)
                    if k is None:
                        continue
                    arrival = k + 1 + e.delay + 1 + graph.arrival_delay(out)
                    cand = (arrival, out.dst, [(e, k), (out, k + 1 + e.delay)])
                    if best is None or cand[:2] < best[:2]:
                        best = cand
            elif e.dst in targets:
                k = ready
                while not usage.fits(e, k):
                    k += 1
                    if k > cap:
                        break
                else:
                    arrival = k + 1 + graph.arrival_delay(e)
                    cand = (arrival, e.dst, [(e, k)])
                    if best is None or cand[:2] < best[:2]:
                        best = cand
    return best


def _earliest_pair(graph: EpochGraph, usage: _Usage, c: int, up: Edge, down: Edge, ready: int, inbound_used: set,
                   cap: int) -> int | None:
    k = ready
    while k <= cap:
        shared = (c, up.index, k) in inbound_used
        up_ok = (shared and graph.switch_model == "copy") or (not shared and usage.fits(up, k))
        if up_ok and usage.fits(down, k + 1 + up.delay):
            return k
        k += 1
    return None
