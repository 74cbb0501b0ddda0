"""The multi-commodity-flow LP bound for non-combining collectives (All-to-All, custom demands).

Chunks that one origin set sends to *single* ranks (All-to-All, scatter, gather, unicast
demands) gain nothing from replication, so they are aggregated into one flow per origin set. For
a group of chunks that several ranks need (multicast), each destination gets its own flow of the
group's chunk count, and the group's load on a link is a variable at least every destination's
flow on it (one copy crossing a link can serve every destination behind it). Any schedule yields
a feasible point (each chunk's path to each destination), so ``T`` is a lower bound on the time
to push the bytes; the smallest alpha of any link is added (the last byte still has to arrive).
With only unicast demands (All-to-All) this is the max-concurrent-flow LP and its value is the
exact throughput optimum; with multicast groups it is a valid relaxation.

Symbols -> code (``FlowLp``; ``E`` links, ``e`` a link, ``V`` nodes, ``O_k`` origins of flow k):

==========================  ====================================================================
``f_k[e] >= 0``             column ``flow_k + e``: flow k on link e, in chunks (a block of E
                            columns per flow; ``add_flow`` returns its first column)
``y_g[e] >= 0``             column ``load_g + e``: multicast group g's load on link e
``T >= 0``                  the last column ``t_col``, in chunk times on the fastest link
``d_k(v)``                  ``demand[v]``: chunks node v needs from flow k
``w_e``                     ``scale[e] = max_bw / bandwidth_e`` (a chunk's time on e, in units of T)
==========================  ====================================================================

Rows, one block each, tagged in ``FlowLp.blocks``:

* (F1) conservation, per flow k and node v outside ``O_k``:
  ``sum_{e into v} f_k[e] - sum_{e out of v} f_k[e] >= d_k(v)`` (a node may absorb flow, never
  create it: that is what rules out self-sustaining circulations);
* (F2) multicast load, per group g, destination flow k of g and link e: ``f_k[e] - y_g[e] <= 0``;
* (F3) capacity, per link e: ``sum_k w_e * L_k[e] - T <= 0`` with ``L_k`` the load-bearing
  columns (a unicast flow's own, a group's ``y_g``);
* objective: minimise ``T``.

The blocks are numpy arrays (COO triples built by index arithmetic), not ``MilpModel`` rows:
the same LP written through ``MilpModel.add`` and expressions builds about 8x slower (256-NPU
All-to-All, 262,145 columns, 66,304 rows, 785,408 nonzeros: 0.18 s as blocks, 1.6 s as rows),
and this bound runs inside every cell's evaluation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from workbench.util.lazy import lazy_module
from workbench.model.collective import Collective
from workbench.topology import Topology

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["flow_lp_bound", "flow_lp_size", "build_flow_lp", "FlowLp"]


Groups = list[tuple[frozenset, frozenset, int]]


def _commodities(groups: Groups) -> tuple[dict[frozenset, dict[int, int]], list[tuple[frozenset, list[int], int]]]:
    """Unicast demands aggregated per origin set, and the multicast groups (pre, needers, count)."""
    unicast: dict[frozenset, dict[int, int]] = {}
    multicast: list[tuple[frozenset, list[int], int]] = []
    for pre, post, count in groups:
        needers = sorted(post - pre)
        if not needers:
            continue
        if len(needers) == 1:
            demand = unicast.setdefault(pre, {})
            demand[needers[0]] = demand.get(needers[0], 0) + count
        else:
            multicast.append((pre, needers, count))
    return unicast, multicast


def _gather_view(topology: Topology, collective: Collective) -> tuple[Topology, Groups] | None:
    """The groups to route: a reduction's are those of its dual gather on the reversed graph."""
    groups = collective.groups()
    if not collective.combining:
        return topology, groups
    if any(len(post) != 1 for _, post, _ in groups):
        return None  # all-reduce: no flow relaxation here
    return topology.reversed(), [(post, pre, count) for pre, post, count in groups]


def flow_lp_size(topology: Topology, collective: Collective) -> int:
    """Columns of the LP (to refuse it before building when too large); 0 when it does not apply."""
    view = _gather_view(topology, collective)
    if view is None:
        return 0
    unicast, multicast = _commodities(view[1])
    per_flow = len(topology.links)
    return per_flow * (len(unicast) + sum(1 + len(needers) for _, needers, _ in multicast)) + 1


@dataclass
class FlowLp:
    """The LP as arrays for ``workbench.kit.solvers.solve_lp``; ``blocks`` names the rows: (tag, first, end)."""

    num_cols: int
    t_col: int
    rows: tuple[np.ndarray, np.ndarray, np.ndarray]  # COO: row index, column index, value
    row_lower: np.ndarray
    row_upper: np.ndarray
    max_bw: float
    blocks: list[tuple[str, int, int]]
    # the unicast flows in column order: flow i's columns are ``i * len(links)`` onwards
    unicast: list[tuple[frozenset, dict[int, int]]] = field(default_factory=list)

    def tag(self, row: int) -> str:
        """The equation row ``row`` comes from."""
        return next(tag for tag, first, end in self.blocks if first <= row < end)

    def tag_counts(self) -> dict[str, int]:
        """The number of rows per equation tag."""
        counts: dict[str, int] = {}
        for tag, first, end in self.blocks:
            counts[tag] = counts.get(tag, 0) + end - first
        return counts


def build_flow_lp(topology: Topology, collective: Collective) -> FlowLp | None:
    """The LP of the module docstring, or None when it does not apply (all-reduce) or has no demand."""
    view = _gather_view(topology, collective)
    return None if view is None else _build(*view)


def _build(topology: Topology, groups: Groups) -> FlowLp | None:
    unicast, multicast = _commodities(groups)
    if not unicast and not multicast:
        return None
    links = topology.links
    num_links = len(links)
    num_nodes = topology.num_nodes
    src = np.array([l.src for l in links], dtype=np.int64)
    dst = np.array([l.dst for l in links], dtype=np.int64)
    edge_ids = np.arange(num_links, dtype=np.int64)
    rows_i: list[np.ndarray] = []
    rows_j: list[np.ndarray] = []
    rows_v: list[np.ndarray] = []
    lower: list[np.ndarray] = []
    upper: list[np.ndarray] = []
    blocks: list[tuple[str, int, int]] = []
    state = {"row": 0, "col": 0}
    load_columns: list[int] = []  # first column of each block that counts towards link load

    def rows_done(tag: str, count: int, lo: np.ndarray, hi: np.ndarray) -> None:
        blocks.append((tag, state["row"], state["row"] + count))
        lower.append(lo)
        upper.append(hi)
        state["row"] += count

    def add_flow(origins: frozenset, demand: dict[int, int]) -> int:
        """E columns f_k and the (F1) rows of one flow; returns its first column."""
        base = state["col"]
        state["col"] += num_links
        row_of = np.full(num_nodes, -1, dtype=np.int64)
        free = [v for v in range(num_nodes) if v not in origins]
        row_of[free] = state["row"] + np.arange(len(free))
        for ends, sign in ((dst, 1.0), (src, -1.0)):  # +f_k[e] in the row of e's head, -f_k[e] in its tail's
            keep = row_of[ends] >= 0
            rows_i.append(row_of[ends][keep])
            rows_j.append(base + edge_ids[keep])
            rows_v.append(np.full(int(keep.sum()), sign))
        rows_done("(F1)", len(free), np.array([float(demand.get(v, 0)) for v in free]), np.full(len(free), math.inf))
        return base

    for origins, demand in unicast.items():
        load_columns.append(add_flow(origins, demand))
    for origins, needers, count in multicast:
        load = state["col"]  # y_g
        state["col"] += num_links
        load_columns.append(load)
        for rank in needers:
            flow = add_flow(origins, {rank: count})
            rows = state["row"] + edge_ids  # (F2) f_k[e] - y_g[e] <= 0 on every link
            rows_i.extend([rows, rows])
            rows_j.extend([flow + edge_ids, load + edge_ids])
            rows_v.extend([np.ones(num_links), -np.ones(num_links)])
            rows_done("(F2)", num_links, np.full(num_links, -math.inf), np.zeros(num_links))
    t_col = state["col"]
    # (F3) sum_k w_e * L_k[e] - T <= 0, T in units of one chunk on the fastest link
    max_bw = max(l.bandwidth for l in links)
    scale = np.array([max_bw / l.bandwidth for l in links])
    capacity_rows = state["row"] + edge_ids
    for base in load_columns:
        rows_i.append(capacity_rows)
        rows_j.append(base + edge_ids)
        rows_v.append(scale)
    rows_i.append(capacity_rows)
    rows_j.append(np.full(num_links, t_col))
    rows_v.append(-np.ones(num_links))
    rows_done("(F3)", num_links, np.full(num_links, -math.inf), np.zeros(num_links))
    return FlowLp(t_col + 1, t_col, (np.concatenate(rows_i), np.concatenate(rows_j), np.concatenate(rows_v)),
                  np.concatenate(lower), np.concatenate(upper), max_bw, blocks, list(unicast.items()))


def flow_lp_bound(topology: Topology, collective: Collective, chunk_bytes: float,
                  time_limit: float = 10.0, max_variables: int = 1_000_000) -> float | None:
    """The LP bound in seconds, or None when it does not apply, is too large or was not solved to optimality.

    Reduce-scatter and reduce use the all-gather / broadcast of the reversed graph (equal link
    loads); all-reduce has no flow relaxation here.
    """
    from workbench.kit.solvers import solve_lp

    view = _gather_view(topology, collective)
    if view is None or flow_lp_size(topology, collective) > max_variables:
        return None
    lp = _build(*view)
    if lp is None:
        return 0.0  # nothing to route
    num_cols = lp.num_cols
    cost = np.zeros(num_cols)
    cost[lp.t_col] = 1.0  # minimise T
    outcome = solve_lp(cost, np.zeros(num_cols), np.full(num_cols, math.inf), lp.rows, lp.row_lower, lp.row_upper,
                       time_limit,
                       # interior point (with crossover, so the optimum is proven) is several times
                       # faster than simplex on the large flow LPs (256-NPU All-to-All: ~45 s)
                       options={"solver": "ipm"} if num_cols > 20_000 else None)
    if outcome.status != "optimal" or outcome.objective is None:
        return None  # a non-optimal LP value is not a proven bound
    unit = chunk_bytes / lp.max_bw
    # shave the solver's feasibility tolerance so the value stays below the true optimum
    # + the smallest alpha and per-message overhead: the last message still pays both once
    return float(outcome.objective) * unit * (1 - 1e-7) + min(l.alpha for l in topology.links) + topology.min_overhead()
