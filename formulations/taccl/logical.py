"""The logical topology TACCL synthesises on: the physical topology filtered by a sketch.

A logical link ``s -> d`` between two NPUs exists where the simulator's route from ``s`` to ``d``
crosses switches only (a direct link, a switch hop, NIC/IB switch paths). Its per-chunk cost is
``lat = sum(alpha) + beta * chunk_bytes`` with ``beta = 1 / min(bandwidth)``, exactly what the
simulator charges a segment in the blocking model. Every physical link crossed by more than one
logical link is a shared port: TACCL's switch hyperedges (a GPU's NVSwitch port in and out) and
NIC sharing both appear as such groups, so the capacity rows of stage 1 (eqs. 6-8) and the port
orders of stage 3 (S8, S9) are written per physical link.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.util.lazy import lazy_module

from formulations.taccl.sketch import Sketch, SketchError
from workbench.util.graphs import all_pairs_hops, successor_lists
from workbench.topology import Topology

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["LogicalLink", "LogicalTopology", "build_logical"]


@dataclass(frozen=True)
class LogicalLink:
    index: int
    src: int
    dst: int
    alpha: float  # seconds, summed over the physical links crossed
    beta: float  # seconds per byte (1 / the slowest physical link), times the sketch's beta split
    physical: tuple[int, ...]  # indices into topology.links
    via_switch: bool
    internode: bool

    def lat(self, chunk_bytes: float, chunks: int = 1) -> float:
        """Seconds for ``chunks`` contiguous chunks sent as one message (one alpha)."""
        return self.alpha + self.beta * chunk_bytes * chunks


@dataclass
class LogicalTopology:
    topology: Topology
    links: list[LogicalLink]
    gpus_per_node: int
    by_pair: dict[tuple[int, int], int]
    out_links: list[list[int]]
    in_links: list[list[int]]
    groups: dict[int, list[int]]  # physical link index -> logical links crossing it
    policy_links: set[int]  # switch links counted by the hyperedge policy term

    @property
    def num_ranks(self) -> int:
        """Ranks: every NPU of the topology."""
        return self.topology.num_npus

    def node_of(self, rank: int) -> int:
        """The node (chassis) of ``rank``: ranks are numbered node by node."""
        return rank // self.gpus_per_node

    def hop_distances(self, allowed: np.ndarray | None = None) -> np.ndarray:
        """Hop counts over logical links (optionally only those with ``allowed[l]``); -1 = unreachable."""
        chosen = [(l.src, l.dst) for l in self.links if allowed is None or allowed[l.index]]
        hops = all_pairs_hops(successor_lists(self.num_ranks, chosen))
        return np.array(hops, dtype=np.int64).reshape(self.num_ranks, self.num_ranks)


def build_logical(topology: Topology, sketch: Sketch) -> LogicalTopology:
    """Logical links of ``topology`` that the sketch keeps; raises SketchError naming a bad field."""
    n = topology.num_npus
    nnodes = sketch.nnodes or int(topology.meta.get("chassis", 1) or 1)
    if n % nnodes:
        raise SketchError(f"sketch {sketch.source}: field nnodes: {nnodes} does not divide the {n} NPUs of {topology.name}")
    gpus = n // nnodes
    _check_local_ids(sketch, gpus)
    candidates: dict[tuple[int, int], tuple[tuple[int, ...], bool]] = {}
    for s in range(n):
        for d in range(n):
            if s == d:
                continue
            path = topology.route(s, d)
            if path is None or any(not topology.is_switch(v) for v in path[1:-1]):
                continue
            physical = tuple(topology.link_index(u, v) for u, v in zip(path, path[1:]))
            candidates[(s, d)] = (physical, len(path) > 2)
    _check_conn_exists(sketch, candidates, gpus, nnodes, topology)
    links: list[LogicalLink] = []
    for (s, d), (physical, via_switch) in sorted(candidates.items()):
        internode = s // gpus != d // gpus
        if internode and not sketch.allows_internode(s % gpus, d % gpus, gpus):
            continue
        alpha = sum(topology.links[p].alpha for p in physical)
        beta = 1.0 / min(topology.links[p].bandwidth for p in physical)
        if internode:
            beta *= sketch.beta_split.get(s % gpus, 1.0)
        links.append(LogicalLink(len(links), s, d, alpha, beta, physical, via_switch, internode))
    if not links:
        raise SketchError(f"sketch {sketch.source}: leaves no logical link on {topology.name}")
    by_pair = {(l.src, l.dst): l.index for l in links}
    out_links: list[list[int]] = [[] for _ in range(n)]
    in_links: list[list[int]] = [[] for _ in range(n)]
    groups: dict[int, list[int]] = {}
    for l in links:
        out_links[l.src].append(l.index)
        in_links[l.dst].append(l.index)
        for p in l.physical:
            groups.setdefault(p, []).append(l.index)
    policy_links = _policy_links(sketch, links, gpus)
    return LogicalTopology(topology, links, gpus, by_pair, out_links, in_links, groups, policy_links)


def _check_local_ids(sketch: Sketch, gpus: int) -> None:
    def check(value: int, where: str) -> None:
        if not 0 <= value < gpus:
            raise SketchError(f"sketch {sketch.source}: field {where}: GPU {value} is not a local id (0..{gpus - 1})")

    for i, members in enumerate(sketch.switches):
        for g in members:
            check(g, f"intranode.switches[{i}]")
    if isinstance(sketch.conn, dict):
        for s, dsts in sketch.conn.items():
            check(s, "internode.conn")
            for d in dsts:
                check(d, f"internode.conn[{s}]")
    for s, ranks in (sketch.relay_rev_map or {}).items():
        check(s, "internode.relay_of.rev_map")
        for r in ranks:
            check(r, f"internode.relay_of.rev_map[{s}]")
    for s in sketch.beta_split:
        check(s, "internode.beta_split")


def _check_conn_exists(sketch: Sketch, candidates: dict, gpus: int, nnodes: int, topology: Topology) -> None:
    """Every inter-node connection the sketch names must be a switch-only path of the physical topology."""
    if sketch.conn is None or nnodes < 2:
        return
    for i in range(nnodes):
        for j in range(nnodes):
            if i == j:
                continue
            for s in range(gpus):
                for d in range(gpus):
                    if sketch.allows_internode(s, d, gpus) and (i * gpus + s, j * gpus + d) not in candidates:
                        raise SketchError(
                            f"sketch {sketch.source}: field internode.conn: {i * gpus + s} -> {j * gpus + d} "
                            f"(local {s} -> {d}) is not a direct or switch-only path of {topology.name}")


def _policy_links(sketch: Sketch, links: list[LogicalLink], gpus: int) -> set[int]:
    if sketch.hyperedge_policy == "none":
        return set()
    chosen = set()
    sets = [set(s) for s in sketch.switches]
    for l in links:
        if not l.via_switch or l.internode:
            continue
        if sets and not any(l.src % gpus in s and l.dst % gpus in s for s in sets):
            continue
        chosen.add(l.index)
    return chosen
