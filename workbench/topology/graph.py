"""Topologies: NPUs, optional switch nodes, directed links with alpha, bandwidth and overhead.

A ``Topology`` is an immutable directed graph. NPUs are nodes ``0..n-1`` (the
ranks); switch nodes follow them. Every link carries its own ``alpha`` (s),
``bandwidth`` (B/s, per link and per direction) and ``overhead`` (s a message occupies the
link beyond its bytes; 0 unless given, docs/cost-model.md). A bundle of parallel physical
links is one link with the summed bandwidth.

This module is the record: its nodes and links, checked, and the queries and transforms on them.
Its routes and distances are ``workbench.topology.routing``, switch unwinding
``workbench.topology.switches``, the ``{nodes, links}`` document ``workbench.topology.schema``, and
a link ``workbench.topology.link``; the builders behind spec strings are
``workbench.topology.builders``, and ``workbench.topology`` offers them under one name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from workbench.topology.abilities import FORWARDING, SwitchAbility
from workbench.topology.link import DEFAULT_ALPHA, DEFAULT_BANDWIDTH, Link, TopologyError
from workbench.topology.routing import Routes
from workbench.topology.schema import read_document, topology_document, write_document
from workbench.topology.switches import unwound_links

if TYPE_CHECKING:  # networkx and numpy cost ~0.15 s to import; only a few queries need them
    import networkx as nx
    import numpy as np

__all__ = [
    "Link",
    "Topology",
    "TopologyError",
    "topology_from_dict",
    "DEFAULT_ALPHA",
    "DEFAULT_BANDWIDTH",
]


@dataclass
class Topology:
    """A directed graph of NPUs and switches. Construct through builders or ``Topology.create``."""

    num_npus: int
    num_switches: int
    links: tuple[Link, ...]
    name: str = "custom"
    meta: dict[str, Any] = field(default_factory=dict)
    abilities: dict[int, SwitchAbility] = field(default_factory=dict)  # switches that reduce or do not multicast

    # ---------------------------------------------------------------- creation
    @classmethod
    def create(cls, num_npus: int, links: Iterable[Link | tuple], num_switches: int = 0, name: str = "custom",
               meta: dict[str, Any] | None = None, abilities: dict[int, SwitchAbility] | None = None) -> "Topology":
        """Build and validate; raises ``TopologyError`` naming the bad link or node. ``abilities``:
        the switches that reduce or do not multicast (``workbench.topology.abilities``)."""
        link_list = tuple(l if isinstance(l, Link) else Link(*l) for l in links)
        kept = {node: a for node, a in (abilities or {}).items() if a != FORWARDING}
        return cls(num_npus, num_switches, link_list, name, dict(meta or {}), kept)

    def __post_init__(self) -> None:
        self.links = tuple(sorted(self.links, key=lambda l: (l.src, l.dst)))
        self._index: dict[tuple[int, int], int] = {}
        self._out: list[list[int]] = []
        self._in: list[list[int]] = []
        self.validate()

    def validate(self) -> None:
        """Check node ids, self-links, duplicate pairs and every link's bandwidth, alpha and overhead
        (``TopologyError`` names the bad one), then rebuild the adjacency index."""
        if self.num_npus < 1:
            raise TopologyError(f"topology {self.name!r}: needs at least one NPU, got {self.num_npus}")
        if self.num_switches < 0:
            raise TopologyError(f"topology {self.name!r}: negative switch count")
        n = self.num_nodes
        seen: set[tuple[int, int]] = set()
        for link in self.links:
            where = f"topology {self.name!r}: link {link.src}->{link.dst}"
            for end in (link.src, link.dst):
                if not isinstance(end, int) or end < 0 or end >= n:
                    raise TopologyError(f"{where}: unknown node {end} (nodes are 0..{n - 1})")
            if link.src == link.dst:
                raise TopologyError(f"{where}: a link may not connect a node to itself")
            if (link.src, link.dst) in seen:
                raise TopologyError(f"{where}: duplicate link (merge parallel links into one with summed bandwidth)")
            seen.add((link.src, link.dst))
            if not (isinstance(link.bandwidth, (int, float)) and link.bandwidth > 0 and math.isfinite(link.bandwidth)):
                raise TopologyError(f"{where}: bandwidth must be positive, got {link.bandwidth!r}")
            if not (isinstance(link.alpha, (int, float)) and link.alpha >= 0 and math.isfinite(link.alpha)):
                raise TopologyError(f"{where}: alpha must be non-negative, got {link.alpha!r}")
            if not (isinstance(link.overhead, (int, float)) and link.overhead >= 0 and math.isfinite(link.overhead)):
                raise TopologyError(f"{where}: overhead must be non-negative, got {link.overhead!r}")
        for node in self.abilities:
            if not (isinstance(node, int) and self.num_npus <= node < n):
                raise TopologyError(f"topology {self.name!r}: node {node} declares switch abilities but is not a switch")
        self._build_index()

    def _build_index(self) -> None:
        n = self.num_nodes
        self._index = {(l.src, l.dst): i for i, l in enumerate(self.links)}
        self._out = [[] for _ in range(n)]
        self._in = [[] for _ in range(n)]
        for link in self.links:
            self._out[link.src].append(link.dst)
            self._in[link.dst].append(link.src)
        for neighbours in self._out:
            neighbours.sort()
        for neighbours in self._in:
            neighbours.sort()
        self._routes = Routes(self.num_npus, n, self.links, self._out, self._index)

    # ---------------------------------------------------------------- queries
    @property
    def num_nodes(self) -> int:
        """NPUs plus switches."""
        return self.num_npus + self.num_switches

    @property
    def npus(self) -> range:
        """The NPU ids, ``0 .. num_npus - 1`` (the ranks)."""
        return range(self.num_npus)

    @property
    def switches(self) -> range:
        """The switch ids, which follow the NPUs."""
        return range(self.num_npus, self.num_nodes)

    def is_switch(self, node: int) -> bool:
        """True for a switch node (any id from ``num_npus`` on)."""
        return node >= self.num_npus

    def kind(self, node: int) -> str:
        """``"switch"`` or ``"npu"``."""
        return "switch" if self.is_switch(node) else "npu"

    def ability(self, node: int) -> SwitchAbility:
        """What switch ``node`` does besides forwarding (``workbench.topology.abilities``; a plain
        multicasting switch unless declared)."""
        return self.abilities.get(node, FORWARDING)

    def reduces(self, node: int) -> bool:
        """True for a switch that sums what is reduced into it (NVLS, SHARP)."""
        return node in self.abilities and self.abilities[node].reduce

    def reducing_switches(self) -> list[int]:
        """The switches that reduce, by increasing id."""
        return sorted(node for node, a in self.abilities.items() if a.reduce)

    def link_index(self, src: int, dst: int) -> int:
        """Index of link ``src -> dst`` in ``links``; KeyError when absent."""
        return self._index[(src, dst)]

    def has_link(self, src: int, dst: int) -> bool:
        """True when the directed link ``src -> dst`` exists."""
        return (src, dst) in self._index

    def link(self, src: int, dst: int) -> Link:
        """The directed link ``src -> dst``; KeyError when absent."""
        return self.links[self._index[(src, dst)]]

    def out_neighbors(self, node: int) -> list[int]:
        """Nodes ``node`` has a link to, by increasing id (the index's own list: do not modify)."""
        return self._out[node]

    def in_neighbors(self, node: int) -> list[int]:
        """Nodes with a link to ``node``, by increasing id (the index's own list: do not modify)."""
        return self._in[node]

    def out_links(self, node: int) -> list[Link]:
        """The links leaving ``node``, by increasing destination."""
        return [self.links[self._index[(node, v)]] for v in self._out[node]]

    def in_links(self, node: int) -> list[Link]:
        """The links entering ``node``, by increasing source."""
        return [self.links[self._index[(u, node)]] for u in self._in[node]]

    def has_overhead(self) -> bool:
        """True when some link has a non-zero per-message overhead (its algorithm files are
        ``workbench.algorithm/2``)."""
        return any(l.overhead for l in self.links)

    def min_overhead(self) -> float:
        """The smallest per-message overhead of any link (0 without links): every message pays at
        least this once, which is what the lower bounds may count."""
        return min((l.overhead for l in self.links), default=0.0)

    def graph(self) -> nx.DiGraph:
        """A networkx view (node attribute ``kind``; edge attributes ``alpha``, ``bandwidth``, ``overhead``)."""
        import networkx as nx

        g = nx.DiGraph(name=self.name)
        for node in range(self.num_nodes):
            g.add_node(node, kind=self.kind(node))
        for link in self.links:
            g.add_edge(link.src, link.dst, alpha=link.alpha, bandwidth=link.bandwidth, overhead=link.overhead)
        return g

    # ---------------------------------------------------------------- routing (workbench.topology.routing)
    def route(self, src: int, dst: int) -> tuple[int, ...] | None:
        """The node path ``src .. dst`` the simulator uses, or None when unreachable.

        The direct link when one exists, otherwise the BFS shortest path of docs/cost-model.md ("The plan and the routes").
        """
        return self._routes.route(src, dst)

    def reachable(self, src: int, dst: int) -> bool:
        """True when links lead from ``src`` to ``dst`` (a node reaches itself)."""
        return self._routes.reachable(src, dst)

    def strong_components(self) -> list[int]:
        """A label per node; nodes with one label reach each other (strongly connected components)."""
        return self._routes.strong_components()

    def hop_distances(self) -> list[list[int]]:
        """Unweighted shortest-path hop counts between all nodes (-1 when unreachable)."""
        return self._routes.hop_distances()

    def alpha_distances(self) -> np.ndarray:
        """Shortest-path sums of alpha between all nodes (inf when unreachable), computed once."""
        return self._routes.alpha_distances()

    def message_distances(self) -> np.ndarray:
        """Shortest chains of messages between all nodes: each link weighs its alpha, and a link
        leaving an NPU its overhead too (inf when unreachable); ``alpha_distances`` without overheads."""
        return self._routes.message_distances()

    # ---------------------------------------------------------------- transforms
    def reversed(self) -> "Topology":
        """Every link turned around (same alpha, bandwidth and overhead)."""
        links = [Link(l.dst, l.src, l.alpha, l.bandwidth, l.overhead) for l in self.links]
        name = self.name[len("reversed("):-1] if self.name.startswith("reversed(") else f"reversed({self.name})"
        return Topology.create(self.num_npus, links, self.num_switches, name, dict(self.meta), dict(self.abilities))

    def unwind_switches(self, degree: int | None = None) -> "Topology":
        """Replace each switch by point-to-point links among its NPUs (TACOS section IV-G).

        The NPUs on a switch, in increasing id, are positions ``0..N-1``; position i gets links to
        positions ``i+1 .. i+d (mod N)`` with the NPU-to-NPU alpha through the switch unchanged and
        bandwidth divided by ``d`` (``workbench.topology.switches``). ``degree=None`` means ``N - 1``
        (fully connected).
        """
        if self.num_switches == 0:
            return self
        meta = dict(self.meta)
        meta["unwound_from"] = self.name
        meta["unwind_degree"] = degree
        return Topology.create(self.num_npus, unwound_links(self, degree), 0, f"{self.name}@unwound(d={degree})", meta)

    def with_uniform(self, alpha: float | None = None, bandwidth: float | None = None,
                     overhead: float | None = None) -> "Topology":
        """A copy with every link's alpha, bandwidth and/or overhead replaced."""
        links = [Link(l.src, l.dst, l.alpha if alpha is None else alpha,
                      l.bandwidth if bandwidth is None else bandwidth,
                      l.overhead if overhead is None else overhead) for l in self.links]
        return Topology.create(self.num_npus, links, self.num_switches, self.name, dict(self.meta),
                               dict(self.abilities))

    def with_abilities(self, abilities: dict[int, SwitchAbility]) -> "Topology":
        """A copy whose switches do what ``abilities`` says (the others: plain multicasting switches)."""
        return Topology.create(self.num_npus, self.links, self.num_switches, self.name, dict(self.meta), abilities)

    # ---------------------------------------------------------------- the document (workbench.topology.schema)
    def to_dict(self) -> dict[str, Any]:
        """The ``{nodes, links}`` document; ``overhead`` is written only on links that have one, so
        a topology without overhead gives the document it always gave."""
        return topology_document(self)

    def save(self, path: str | Path) -> None:
        """Write the {nodes, links} document: YAML for a .yaml/.yml name, else JSON (through
        ``workbench.util.files.write_output``: atomic, a character device written through)."""
        write_document(self.to_dict(), path)

    def describe(self) -> str:
        """A human summary: counts, degrees, bandwidth, alpha (and overhead) ranges, diameter."""
        npu_out = [len(self._out[u]) for u in self.npus]
        bws = sorted({l.bandwidth for l in self.links})
        alphas = sorted({l.alpha for l in self.links})
        hops = self.hop_distances()
        finite = [hops[u][v] for u in self.npus for v in self.npus if hops[u][v] > 0]
        disconnected = any(hops[u][v] < 0 for u in self.npus for v in self.npus)
        lines = [
            f"topology   {self.name}",
            f"npus       {self.num_npus}",
            f"switches   {self.num_switches}",
            f"links      {len(self.links)} (directed)",
            f"out-degree min {min(npu_out) if npu_out else 0}, max {max(npu_out) if npu_out else 0} (NPUs)",
            "bandwidth  " + ", ".join(f"{b / 1e9:g} GB/s" for b in bws[:8]) + (" ..." if len(bws) > 8 else ""),
            "alpha      " + ", ".join(f"{a * 1e6:g} us" for a in alphas[:8]) + (" ..." if len(alphas) > 8 else ""),
        ]
        if self.has_overhead():
            overheads = sorted({l.overhead for l in self.links})
            lines.append("overhead   " + ", ".join(f"{o * 1e6:g} us" for o in overheads[:8])
                         + (" ..." if len(overheads) > 8 else "") + " per message")
        reducing = self.reducing_switches()
        if reducing or self.abilities:
            lines.append(f"switches   {len(reducing)} reduce, "
                         f"{sum(1 for a in self.abilities.values() if not a.multicast)} do not multicast")
        lines += [
            f"diameter   {max(finite) if finite else 0} hops between NPUs"
            + (" (some NPU pairs are disconnected)" if disconnected else ""),
        ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Topology({self.name!r}, npus={self.num_npus}, switches={self.num_switches}, links={len(self.links)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Topology):
            return NotImplemented
        return ((self.num_npus, self.num_switches, self.links, self.abilities)
                == (other.num_npus, other.num_switches, other.links, other.abilities))

    __hash__ = None  # type: ignore[assignment]


def topology_from_dict(data: Any, source: str = "topology") -> Topology:
    """Parse the ``{nodes, links}`` schema (``workbench.topology.schema``); unit strings are accepted
    for alpha, bandwidth and the optional per-message ``overhead`` (default 0), and ``bidirectional``
    must be true or false (the string "no" is not read as true)."""
    return Topology.create(*read_document(data, source))
