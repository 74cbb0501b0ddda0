"""Lower bounds on collective time, the exact optima where they exist, and TACOS's "Ideal" under its own name.

Valid bounds (no algorithm timed by the simulator, in any of its models, can beat them); each
says the assumption it rests on:

* ``injection``: every rank must receive (send) the bytes of every chunk it needs (each of its
  contributions someone else needs); its in-links (out-links) serialise those bytes, and the last
  one still pays the smallest alpha of those links. Chunk count times chunk bytes is the bytes
  themselves, so the value is the same for every chunking of the problem.
* ``latency``: a needed byte travels at least the alpha-shortest path from its (nearest, for
  copies; every, for reductions) holder. No serialisation term: a schedule may cut its data into
  pieces as small as it likes, so the only piece every chunking must send is of 0 bytes. With
  per-message overheads the path also pays, per segment, its first link's overhead (every
  message occupies its links for at least that before it arrives: ``Topology.message_distances``).
* ``cut``: for every node subset A (small topologies), the chunks that must enter A cross links
  into A: ``need(A) * chunk / cap(A)`` plus the smallest alpha of those links (docs/methods/sccl.md section 4).
* ``optimum``: the exact throughput optimum by max-flow (``workbench.bounds.optimum``), plus the smallest
  alpha of the maximising cut's links. All-Gather ``(M/N) max_S |S∩C|/B+(S)`` (ForestColl,
  arXiv 2402.06787), Reduce-Scatter the same on the reversed graph, broadcast ``M / min_v
  maxflow(root, v)`` and reduce reversed, scatter ``(M/N) max_{S∋root} |C - S|/B+(S)`` and gather
  reversed. Exact in the bandwidth term: pipelined tree packing reaches it.
* ``flow_lp``: the multi-commodity-flow LP (``workbench.bounds.flow_lp``) for All-to-All (exact: the
  max-concurrent flow) and custom demands (a relaxation); it has no self-sustaining cycles.
* All-Reduce (no exact optimum is known on general fabrics):
  ``splitting_cut``: any fabric, any algorithm: every output byte outside a set S of NPUs depends
  on inputs inside it, so M bytes cross every cut that splits the NPUs, in both directions:
  ``M / min_S min(B+(S), B-(S))`` (+ the cut's smallest alpha);
  ``gossip``: every byte position needs at least ``2(N-1)`` one-way transmissions between NPUs
  (the one-way gossip minimum), each *ending* at an NPU over one of its in-links, so
  ``2(N-1) M / (sum over NPUs of their in-link bandwidths)`` (+ the smallest alpha of those links);
  without switches that sum is every link. Valid while switches do not reduce (the verifier refuses
  a reduce into a switch): an in-network reduction would need only one delivery per NPU. The
  out-link form (each transmission *starts* at an NPU) would need switches that do not copy either,
  and here they may: a chunk sent into a switch can leave it for several NPUs, so one NPU send can
  serve many (``gossip_bound``).
  ``achievable`` = RS* + AG* (both exact optima) is reported beside them: the best known
  achievable time (reduce-scatter then all-gather), *not* a bound.

``best`` is the largest valid bound. ``problem_bounds`` is the yardstick of a problem (topology,
collective, size): the bounds of the collective without its chunking, so every schedule of the
problem is measured against the same ``best`` whatever its chunk size. ``exact`` (label
"optimum") says ``best`` is proven to be the optimum in the simulator's model at this size, which
only a schedule that meets it shows (``schedule_time``): the max-flow ``optimum`` is exact in the
bandwidth term alone, and where alpha or finite chunks matter nothing proves any schedule reaches
it, so on its own it is labelled "bound".

Per-message overhead (docs/cost-model.md): every message occupies a link for at least the smallest
overhead, so each bound adds that once (the smallest of the rank's links for ``injection``, of all
links elsewhere) beside its alpha; it counts once per bound, not per chunk, and is 0 on fabrics
without overhead.

``ideal`` is TACOS's metric: ``size * factor / min_N BW_N + diameter`` (docs/methods/tacos.md 4.1). It is
*not* valid under pipelining, so ``best`` never uses it; ``efficiency`` uses ``best``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from workbench.util.lazy import lazy_module
from workbench.model.collective import Collective, bus_factor
from workbench.kit.deadline import Deadline
from workbench.bounds.flow_lp import flow_lp_bound, flow_lp_size
from workbench.topology import Topology

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

# a schedule within this relative distance of ``best`` proves it the optimum (float sums differ)
TIGHT = 1e-4

__all__ = [
    "Bounds",
    "TIGHT",
    "lower_bounds",
    "problem_bounds",
    "unchunked",
    "lp_seconds_within",
    "injection_bound",
    "latency_bound",
    "cut_bound",
    "flow_lp_bound",
    "optimum_bound",
    "allreduce_bounds",
    "gossip_bound",
    "tacos_ideal",
    "ideal_factor",
]


@dataclass
class Bounds:
    injection: float
    latency: float
    cut: float | None = None
    flow_lp: float | None = None
    ideal: float | None = None
    optimum: float | None = None
    splitting_cut: float | None = None
    gossip: float | None = None
    achievable: float | None = None  # All-Reduce: RS* + AG*, reported beside the bounds, not one
    alpha_beta: float | None = None  # latency and bandwidth together: workbench.bounds.alpha_beta
    optimum_exact: bool = False  # optimum / flow_lp is the proven throughput optimum
    notes: dict[str, str] = field(default_factory=dict)
    # the fastest simulated schedule of this problem the caller knows (s): it decides ``exact``
    schedule_time: float | None = None
    # an LP stopped by its time limit: another solve, with more time or less load, may prove more
    cut_short: bool = False

    @property
    def bandwidth_best(self) -> float:
        """The largest bound that holds no path latency (all but ``latency`` and ``alpha_beta``): what
        a caller adds its own latency term to (TE-CCL's hop count); 0 where none is set."""
        return max((v for v in (self.injection, self.cut, self.flow_lp, self.optimum, self.splitting_cut,
                                self.gossip) if v is not None), default=0.0)

    @property
    def best(self) -> float:
        """The largest valid lower bound (``ideal`` and ``achievable`` are not bounds)."""
        return max(v for v in (self.bandwidth_best, self.latency, self.alpha_beta) if v is not None)

    @property
    def above_schedule(self) -> bool:
        """True when ``best`` is above a verified schedule's simulated time (``schedule_time``) by
        more than ``TIGHT`` relative: a lower bound never is, so one that is proves nothing (a bound
        bug, or a cached bound that is not this problem's)."""
        return self.schedule_time is not None and self.best > self.schedule_time * (1 + TIGHT)

    @property
    def exact(self) -> bool:
        """True when ``best`` is proven to be the optimum in the simulator's model at this size: a
        simulated schedule (``schedule_time``) meets it within ``TIGHT`` relative. The throughput
        optimum (``optimum_exact``) proves the bandwidth term only; what alpha and finite chunks
        add above it is proven by nothing but a schedule. Never where ``best`` is above the
        schedule (``above_schedule``)."""
        return (self.schedule_time is not None and self.schedule_time <= self.best * (1 + TIGHT)
                and not self.above_schedule)

    @property
    def label(self) -> str:
        """``"optimum"`` when ``best`` is proven exact, else ``"bound"``."""
        return "optimum" if self.exact else "bound"

    def efficiency(self, collective_time: float) -> float | None:
        """``best / collective_time``: the fraction of the bound a schedule reaches, at most 1 (a
        schedule within ``TIGHT`` of the bound meets it; float sums differ). None where ``best`` is
        above that time by more (a lower bound never is: ``above_schedule``); NaN for time <= 0."""
        if not collective_time > 0:
            return float("nan")
        ratio = self.best / collective_time
        if ratio > 1 + TIGHT:
            return None
        return min(ratio, 1.0)

    def to_dict(self) -> dict[str, Any]:
        """Every bound (None where not computed) with ``best``, ``exact``, ``label`` and the notes
        (with ``above_schedule`` saying so where ``best`` is above the schedule's time)."""
        notes = dict(self.notes)
        if self.above_schedule:
            notes["above_schedule"] = (f"best bound {self.best:.6g} s is above the verified schedule's simulated "
                                       f"time {self.schedule_time:.6g} s: a lower bound never is (a bug in the "
                                       f"bounds); not used to call the schedule optimal")
        return {"injection": self.injection, "latency": self.latency, "cut": self.cut,
                "flow_lp": self.flow_lp, "optimum": self.optimum, "splitting_cut": self.splitting_cut,
                "gossip": self.gossip, "alpha_beta": self.alpha_beta,
                "best": self.best, "exact": self.exact, "label": self.label,
                "achievable": self.achievable, "ideal": self.ideal, "notes": notes}


def injection_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> float:
    """Seconds the busiest NPU needs to receive (or send) the chunks it must, at the summed bandwidth
    of its in- (out-) links, plus the smallest alpha and overhead among those links."""
    n = collective.num_ranks
    must_receive = np.zeros(n)
    must_send = np.zeros(n)
    for pre, post, count in collective.groups():
        for rank in post:
            needs = (pre != {rank}) if collective.combining else (rank not in pre)
            if needs:
                must_receive[rank] += count
        if collective.combining:
            for rank in pre:
                if post - {rank}:
                    must_send[rank] += count
        elif len(pre) == 1:
            (rank,) = pre
            if post - {rank}:
                must_send[rank] += count
    best = 0.0
    for rank in range(n):
        if must_receive[rank]:
            links = topology.in_links(rank)
            bw = sum(l.bandwidth for l in links)
            best = max(best, must_receive[rank] * chunk_bytes / bw + min(l.alpha for l in links)
                       + min(l.overhead for l in links))
        if must_send[rank]:
            links = topology.out_links(rank)
            bw = sum(l.bandwidth for l in links)
            best = max(best, must_send[rank] * chunk_bytes / bw + min(l.alpha for l in links)
                       + min(l.overhead for l in links))
    return float(best)


def latency_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> float:
    """The alpha-shortest path from the holders of each needed byte (module docstring).

    ``chunk_bytes`` is not used: the bound holds for every chunking, so it has no serialisation
    term (a chunk's own ``chunk / bandwidth`` would hold for that chunking only).
    """
    dist = topology.message_distances()  # with overheads, every segment of a chain pays its first link's
    best = 0.0
    for pre, post, _ in collective.groups():
        holders = np.array(sorted(pre))
        for rank in post:
            if collective.combining:
                others = holders[holders != rank]
                if len(others) == 0:
                    continue
                travel = dist[others, rank].max()
            else:
                if rank in pre:
                    continue
                travel = dist[holders, rank].min()
            best = max(best, float(travel))
    return float(best)


def cut_bound(topology: Topology, collective: Collective, chunk_bytes: float, max_nodes: int = 16) -> float | None:
    """Max over node subsets A of ``need(A) * chunk / cap(A) + min alpha into A``; None if too many nodes."""
    n = topology.num_nodes
    if n > max_nodes or n > 62:
        return None
    subsets = np.arange(1, (1 << n) - 1, dtype=np.int64)
    need = np.zeros(len(subsets))
    for pre, post, count in collective.groups():
        pre_mask = sum(1 << r for r in pre)
        post_mask = sum(1 << r for r in post)
        enters = (subsets & post_mask) != 0
        if collective.combining:
            missing = (subsets & pre_mask) != pre_mask  # some contribution lives outside A
        else:
            missing = (subsets & pre_mask) == 0
        need += count * (enters & missing)
    capacity = np.zeros(len(subsets))
    min_alpha = np.full(len(subsets), np.inf)
    for link in topology.links:
        crossing = (((subsets >> link.dst) & 1) == 1) & (((subsets >> link.src) & 1) == 0)
        capacity += crossing * link.bandwidth
        min_alpha = np.where(crossing, np.minimum(min_alpha, link.alpha), min_alpha)
    useful = (need > 0) & (capacity > 0)
    if not useful.any():
        return 0.0
    values = need[useful] * chunk_bytes / capacity[useful] + min_alpha[useful]
    return float(values.max()) + topology.min_overhead()


def ideal_factor(kind: str, num_ranks: int) -> float:
    """The bandwidth factor of TACOS's Ideal: all-reduce 2(n-1)/n, all-gather and kin (n-1)/n.

    These are the nccl-tests bus-bandwidth factors, so the two stay one definition.
    """
    return bus_factor(kind, num_ranks)


def tacos_ideal(topology: Topology, collective: Collective, size_bytes: float,
                bandwidth_rule: str = "links") -> float | None:
    """TACOS's Ideal: ``size * factor / min_N BW_N + alpha-only diameter`` between NPUs (ranks).

    ``bandwidth_rule="links"`` (docs/methods/tacos.md 4.1, our reading): BW_N = min(total ingress,
    total egress) link bandwidth of NPU N (a switch port counts once). ``"dimensions"``: BW_N = the
    sum over dimensions of one link's bandwidth (ASTRA-sim's per-dimension bandwidth; ambiguity
    A13), None for a topology not built from dimensions.
    """
    ranks = range(collective.num_ranks)
    if bandwidth_rule == "dimensions":
        dims = topology.meta.get("dims")
        per_dim = topology.meta.get("dim_bandwidth")
        if not dims or not per_dim:
            return None
        per_npu = [sum(bw for dim, bw in zip(dims, per_dim) if dim["size"] > 1)]
    else:
        per_npu = [min(sum(l.bandwidth for l in topology.in_links(r)),
                       sum(l.bandwidth for l in topology.out_links(r))) for r in ranks]
    dist = topology.alpha_distances()[: collective.num_ranks, : collective.num_ranks]
    diameter = float(np.max(dist)) if collective.num_ranks > 1 else 0.0
    return size_bytes * ideal_factor(collective.kind, collective.num_ranks) / min(per_npu) + diameter


_GATHER_LIKE = ("allgather", "reducescatter", "broadcast", "reduce", "scatter", "gather")


def optimum_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> tuple[float, bool] | None:
    """(seconds, exact) of the max-flow optimum plus its cut's alpha; None for other collectives.

    Applies to the standard all-gather, reduce-scatter, broadcast, reduce, scatter and gather over
    every NPU of the topology. ``exact`` is False only when bandwidths had to be quantised (the
    cut found is then still a real cut, so the value is still a valid bound).
    """
    from workbench.bounds.optimum import allgather_cut_ratio, broadcast_cut, scatter_cut_ratio

    kind, n = collective.kind, collective.num_ranks
    if kind not in _GATHER_LIKE or n != topology.num_npus or n < 2:
        return None
    size = collective.size_bytes(chunk_bytes)
    graph = topology.reversed() if kind in ("reducescatter", "reduce", "gather") else topology
    if kind in ("allgather", "reducescatter"):
        cut = allgather_cut_ratio(graph)
        seconds = size / n * cut.seconds_per_byte
    elif kind in ("broadcast", "reduce"):
        cut = broadcast_cut(graph, collective.root)
        seconds = size * cut.seconds_per_byte
    else:
        cut = scatter_cut_ratio(graph, collective.root)
        seconds = size / n * cut.seconds_per_byte
    return seconds * (1 - 1e-12) + cut.alpha + topology.min_overhead(), cut.exact


def allreduce_bounds(topology: Topology, collective: Collective, chunk_bytes: float) -> dict[str, float | None]:
    """All-Reduce: ``splitting_cut`` and ``gossip`` bounds and the ``achievable`` RS* + AG* (module docstring)."""
    from workbench.bounds.optimum import allgather_cut_ratio, reducescatter_cut_ratio, smallest_splitting_cut

    n = collective.num_ranks
    result: dict[str, float | None] = {"splitting_cut": None, "gossip": None, "achievable": None}
    if collective.kind != "allreduce" or n != topology.num_npus or n < 2:
        return result
    size = collective.size_bytes(chunk_bytes)
    bandwidth, _, alpha = smallest_splitting_cut(topology)
    result["splitting_cut"] = size / bandwidth * (1 - 1e-12) + alpha + topology.min_overhead()
    result["gossip"] = gossip_bound(topology, collective, chunk_bytes)
    rs, ag = reducescatter_cut_ratio(topology), allgather_cut_ratio(topology)
    result["achievable"] = size / n * (rs.seconds_per_byte + ag.seconds_per_byte) + rs.alpha + ag.alpha
    return result


def gossip_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> float | None:
    """All-Reduce over every NPU: ``2(N-1) M / (sum of the NPUs' in-link bandwidths)`` plus the
    smallest alpha of those links; None for another collective.

    Every byte position needs at least ``2(N-1)`` one-way transmissions between NPUs (one-way
    gossip: N-1 deliveries before any NPU can hold the whole sum, then one more into each of the
    other N-1), and each delivery ends at an NPU over one of its in-links, which serialise the
    bytes; in every simulator model a link is occupied at least ``bytes / bandwidth`` per message
    and the last delivery still pays an alpha. Valid because switches do not reduce (the verifier
    refuses a reduce into a switch); a switch model that reduces voids it (one delivery per NPU
    would do). Switches may copy here (a chunk sent into a switch may leave it for several
    NPUs), which voids the out-link form (``sum of the NPUs' out-link bandwidths``), so it is not
    used; on a fabric without switches both sums are every link.
    """
    n = collective.num_ranks
    if collective.kind != "allreduce" or n != topology.num_npus or n < 2:
        return None
    into_npus = [l for rank in range(n) for l in topology.in_links(rank)]
    total = sum(l.bandwidth for l in into_npus)
    return (2 * (n - 1) * collective.size_bytes(chunk_bytes) / total * (1 - 1e-12)
            + min(l.alpha for l in into_npus) + topology.min_overhead())


def alltoall_cut_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> float | None:
    """All-to-All at any size: ``k |S∩C| |C\\S| chunk / min(B+(S), B-(S))`` over sweep cuts.

    The sets are the prefixes of two orders of the nodes (by id, which is row-major for the grid
    and dimension builders, so the prefixes include every plane cut; and breadth-first from node 0).
    Valid for every set; not a maximum over all sets.
    """
    if collective.kind != "alltoall" or collective.num_ranks != topology.num_npus:
        return None
    n, k = collective.num_ranks, collective.chunks_per_rank
    nodes = topology.num_nodes
    src = np.array([l.src for l in topology.links])
    dst = np.array([l.dst for l in topology.links])
    bw = np.array([l.bandwidth for l in topology.links])
    alpha = np.array([l.alpha for l in topology.links])
    from workbench.util.graphs import bfs

    # links followed both ways, out-neighbours then in-neighbours, each by id: the order of
    # scipy's breadth_first_order(directed=False), which this replaced without its import
    both_ways = [topology.out_neighbors(u) + topology.in_neighbors(u) for u in range(nodes)]
    orders = [np.arange(nodes), np.array(bfs(both_ways, (0,)).order, dtype=np.int64)]
    best = 0.0
    for order in orders:
        if len(order) < nodes:
            continue
        position = np.empty(nodes, dtype=np.int64)
        position[order] = np.arange(nodes)
        # prefix m (the first m nodes) is left by links with position[src] < m <= position[dst]
        out_diff, in_diff = np.zeros(nodes + 1), np.zeros(nodes + 1)
        forward = position[src] < position[dst]
        np.add.at(out_diff, position[src][forward] + 1, bw[forward])
        np.add.at(out_diff, position[dst][forward] + 1, -bw[forward])
        backward = ~forward
        np.add.at(in_diff, position[dst][backward] + 1, bw[backward])
        np.add.at(in_diff, position[src][backward] + 1, -bw[backward])
        leaving, entering = np.cumsum(out_diff)[1:nodes], np.cumsum(in_diff)[1:nodes]
        npus_inside = np.cumsum(order < n)[: nodes - 1]
        pieces = k * npus_inside * (n - npus_inside)
        capacity = np.minimum(leaving, entering)
        useful = (pieces > 0) & (capacity > 0)
        if useful.any():
            best = max(best, float((pieces[useful] * chunk_bytes / capacity[useful]).max()))
    return best * (1 - 1e-12) + float(alpha.min()) + topology.min_overhead() if best > 0 else None


def lp_seconds_within(deadline: Deadline, share: float = 0.1, most: float = 30.0) -> float:
    """How long a bound's LP may run inside a formulation's ``deadline``: ``share`` of the time
    left, between 0.1 s and ``most``."""
    return max(0.1, min(most, share * deadline.remaining()))


def lower_bounds(topology: Topology, collective: Collective, chunk_bytes: float, *,
                 cut_max_nodes: int = 16, lp: bool = True, lp_time_limit: float = 10.0,
                 lp_max_variables: int = 1_000_000, alpha_beta: bool = True) -> Bounds:
    """All bounds for one problem (the enumerated cut and the LP only where they are cheap enough).

    Each holds for every chunking of the problem (they count bytes, not chunks); the floor measures
    schedules with ``problem_bounds``, which also makes the numbers identical across chunkings.
    """
    size = collective.size_bytes(chunk_bytes)
    bounds = Bounds(
        injection=injection_bound(topology, collective, chunk_bytes),
        latency=latency_bound(topology, collective, chunk_bytes),
        cut=cut_bound(topology, collective, chunk_bytes, cut_max_nodes),
        ideal=tacos_ideal(topology, collective, size) if collective.num_ranks > 1 else 0.0,
    )
    optimum = optimum_bound(topology, collective, chunk_bytes)
    if optimum is not None:
        bounds.optimum, bounds.optimum_exact = optimum
        if not optimum[1]:
            bounds.notes["optimum"] = "bandwidths quantised: the cut is real, its maximality holds to the quantum"
    elif collective.kind == "allreduce":
        for key, value in allreduce_bounds(topology, collective, chunk_bytes).items():
            setattr(bounds, key, value)
    else:
        if lp and flow_lp_size(topology, collective) <= lp_max_variables:
            started = time.perf_counter()
            bounds.flow_lp = flow_lp_bound(topology, collective, chunk_bytes, lp_time_limit, lp_max_variables)
            # None after most of the limit: not solved in time (None at once: it does not apply)
            bounds.cut_short = bounds.flow_lp is None and time.perf_counter() - started >= 0.9 * lp_time_limit
        unicast = all(len(post - pre) <= 1 for pre, post, _ in collective.groups())
        bounds.optimum_exact = bounds.flow_lp is not None and unicast and not collective.combining
        if bounds.flow_lp is None:
            from workbench.bounds.group_cuts import group_cut_bound

            sweep = alltoall_cut_bound(topology, collective, chunk_bytes)
            grouped = group_cut_bound(topology, collective, chunk_bytes)
            if sweep is not None or grouped is not None:
                bounds.cut = max(bounds.cut or 0.0, sweep or 0.0, grouped or 0.0)
                kind = "box and leaf-group cuts" if (grouped or 0.0) > (sweep or 0.0) else "sweep cuts"
                bounds.notes["cut"] = f"{kind} (the LP was too large or not run)"
    if lp and alpha_beta:  # the time-expanded alpha-beta LP, within the LP time; it notes where it does not run
        from workbench.bounds.alpha_beta import alpha_beta_bound

        found = alpha_beta_bound(topology, collective, chunk_bytes, time_limit=lp_time_limit)
        bounds.alpha_beta = found.seconds
        bounds.cut_short = bounds.cut_short or not found.complete
        if found.note:
            bounds.notes["alpha_beta"] = found.note
    return bounds


def unchunked(collective: Collective) -> Collective:
    """The collective as a problem, without a schedule's chunking: a standard kind with one chunk
    per rank (its chunks per rank are how a schedule cuts the data, not what must move); a custom
    demand as given (its chunks are the demand)."""
    from workbench.model.collective import make_collective

    if collective.kind == "custom" or collective.chunks_per_rank == 1:
        return collective
    return make_collective(collective.kind, collective.num_ranks, 1, collective.root)


def problem_bounds(topology: Topology, collective: Collective, size_bytes: float, **options: Any) -> Bounds:
    """The yardstick of one problem (topology, collective, nccl-tests ``size_bytes``): ``lower_bounds``
    of the ``unchunked`` collective, so ``best`` is the same for every schedule of the problem
    whatever its chunk size (an LP too large at one chunking is not skipped at another). ``options``
    are ``lower_bounds``'s keywords."""
    problem = unchunked(collective)
    return lower_bounds(topology, problem, problem.chunk_bytes(size_bytes), **options)
