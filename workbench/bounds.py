"""Lower bounds on collective time, and TACOS's "Ideal" metric under its own name.

Valid bounds (no algorithm timed by the simulator, in any of its models, can beat them):

* ``injection``: every rank must receive (send) at least one chunk for each chunk it needs
  (each of its contributions someone else needs); its in-links (out-links) serialise those bytes,
  and the last one still pays the smallest alpha of those links.
* ``latency``: a needed chunk travels at least the alpha-shortest path from its (nearest, for
  copies; every, for reductions) holder, plus one chunk's serialisation on the fastest in-link.
* ``cut``: for every node subset A (small topologies), the chunks that must enter A cross links
  into A: ``need(A) * chunk / cap(A)`` plus the smallest alpha of those links (SCCL spec sec. 4).
* ``flow_lp``: a multi-commodity-flow LP on HiGHS where a node can replicate what it received
  (a node not in pre sends on each out-link at most its inflow) and link loads fit ``T * bw``.
  Reductions use the all-gather of the reversed graph (reverse an RS to get an AG with equal
  link loads); all-reduce has none.

``ideal`` is TACOS's metric: ``size * factor / min_N BW_N + diameter`` (spec tacos 4.1). It is
*not* valid under pipelining, so ``best`` never uses it; ``efficiency`` uses ``best``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.collective import Collective, bus_factor
from workbench.topology import Topology

__all__ = [
    "Bounds",
    "lower_bounds",
    "injection_bound",
    "latency_bound",
    "cut_bound",
    "flow_lp_bound",
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
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def best(self) -> float:
        """The largest valid lower bound (``ideal`` is not one)."""
        return max(v for v in (self.injection, self.latency, self.cut, self.flow_lp) if v is not None)

    def efficiency(self, collective_time: float) -> float:
        return self.best / collective_time if collective_time > 0 else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {"injection": self.injection, "latency": self.latency, "cut": self.cut,
                "flow_lp": self.flow_lp, "best": self.best, "ideal": self.ideal}


def injection_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> float:
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
            best = max(best, must_receive[rank] * chunk_bytes / bw + min(l.alpha for l in links))
        if must_send[rank]:
            links = topology.out_links(rank)
            bw = sum(l.bandwidth for l in links)
            best = max(best, must_send[rank] * chunk_bytes / bw + min(l.alpha for l in links))
    return float(best)


def latency_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> float:
    dist = topology.alpha_distances()
    fastest_in = np.array([max((l.bandwidth for l in topology.in_links(r)), default=math.inf)
                           for r in range(collective.num_ranks)])
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
            best = max(best, float(travel) + chunk_bytes / float(fastest_in[rank]))
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
    return float(values.max())


def flow_lp_bound(topology: Topology, collective: Collective, chunk_bytes: float,
                  time_limit: float = 10.0, max_variables: int = 300_000) -> float | None:
    """The replication-aware multi-commodity-flow LP bound; None when not applicable or too large."""
    from workbench.solvers import solve_lp

    groups = collective.groups()
    if collective.combining:
        if any(len(post) != 1 for _, post, _ in groups):
            return None  # all-reduce: no flow relaxation here
        topology = topology.reversed()
        groups = [(post, pre, count) for pre, post, count in groups]
    links = topology.links
    num_links = len(links)
    num_groups = len(groups)
    num_cols = num_groups * num_links + 1
    if num_cols > max_variables:
        return None
    t_col = num_cols - 1
    max_bw = max(l.bandwidth for l in links)
    unit = chunk_bytes / max_bw  # T is measured in this unit to keep coefficients near 1
    rows_i: list[np.ndarray] = []
    rows_j: list[np.ndarray] = []
    rows_v: list[np.ndarray] = []
    lower: list[float] = []
    upper: list[float] = []
    row = 0
    in_links = [[] for _ in range(topology.num_nodes)]
    out_links = [[] for _ in range(topology.num_nodes)]
    for index, link in enumerate(links):
        in_links[link.dst].append(index)
        out_links[link.src].append(index)
    col_upper = np.empty(num_cols)
    for g, (pre, post, count) in enumerate(groups):
        base = g * num_links
        col_upper[base:base + num_links] = count
        for node in range(topology.num_nodes):
            if node in pre:
                continue
            inflow = [base + l for l in in_links[node]]
            if node in post:  # demand: inflow >= count
                rows_i.append(np.full(len(inflow), row))
                rows_j.append(np.array(inflow))
                rows_v.append(np.ones(len(inflow)))
                lower.append(count)
                upper.append(math.inf)
                row += 1
            for out in out_links[node]:  # justification: f_out <= inflow
                rows_i.append(np.full(len(inflow) + 1, row))
                rows_j.append(np.array([base + out] + inflow))
                rows_v.append(np.array([1.0] + [-1.0] * len(inflow)))
                lower.append(-math.inf)
                upper.append(0.0)
                row += 1
    for index, link in enumerate(links):  # capacity: sum_g f_g[e] * (bw_max / bw_e) - T <= 0
        cols = np.array([g * num_links + index for g in range(num_groups)] + [t_col])
        coefficient = max_bw / link.bandwidth
        rows_i.append(np.full(len(cols), row))
        rows_j.append(cols)
        rows_v.append(np.array([coefficient] * num_groups + [-1.0]))
        lower.append(-math.inf)
        upper.append(0.0)
        row += 1
    col_upper[t_col] = math.inf
    cost = np.zeros(num_cols)
    cost[t_col] = 1.0
    outcome = solve_lp(cost, np.zeros(num_cols), col_upper,
                       (np.concatenate(rows_i), np.concatenate(rows_j), np.concatenate(rows_v)),
                       np.array(lower), np.array(upper), time_limit)
    if outcome.status != "optimal" or outcome.objective is None:
        return None  # a non-optimal LP value is not a proven bound
    min_alpha = min(l.alpha for l in links)
    return float(outcome.objective) * unit * (1 - 1e-9) + min_alpha


def ideal_factor(kind: str, num_ranks: int) -> float:
    """The bandwidth factor of TACOS's Ideal: all-reduce 2(n-1)/n, all-gather and kin (n-1)/n.

    These are the nccl-tests bus-bandwidth factors, so the two stay one definition.
    """
    return bus_factor(kind, num_ranks)


def tacos_ideal(topology: Topology, collective: Collective, size_bytes: float,
                bandwidth_rule: str = "links") -> float | None:
    """TACOS's Ideal: ``size * factor / min_N BW_N + alpha-only diameter`` between NPUs (ranks).

    ``bandwidth_rule="links"`` (spec tacos 4.1, the recommended reading): BW_N = min(total ingress,
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


def lower_bounds(topology: Topology, collective: Collective, chunk_bytes: float, *,
                 cut_max_nodes: int = 16, lp: bool = True, lp_time_limit: float = 10.0) -> Bounds:
    """All bounds for one problem (the cut and LP bounds only where they are cheap enough)."""
    size = collective.size_bytes(chunk_bytes)
    bounds = Bounds(
        injection=injection_bound(topology, collective, chunk_bytes),
        latency=latency_bound(topology, collective, chunk_bytes),
        cut=cut_bound(topology, collective, chunk_bytes, cut_max_nodes),
        flow_lp=flow_lp_bound(topology, collective, chunk_bytes, lp_time_limit) if lp else None,
        ideal=tacos_ideal(topology, collective, size) if collective.num_ranks > 1 else 0.0,
    )
    return bounds
