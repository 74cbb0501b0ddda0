"""Topologies: NPUs, optional switch nodes, directed links with alpha, bandwidth and overhead.

A ``Topology`` is an immutable directed graph. NPUs are nodes ``0..n-1`` (the
ranks); switch nodes follow them. Every link carries its own ``alpha`` (s),
``bandwidth`` (B/s, per link and per direction) and ``overhead`` (s a message occupies the
link beyond its bytes; 0 unless given, docs/cost-model.md). A bundle of parallel physical
links is one link with the summed bandwidth.

This module is the graph and its ``{nodes, links}`` file schema; the builders behind spec strings
are in ``workbench.topology.builders``, and ``workbench.topology`` offers both under one name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from workbench.util import fastjson
from workbench.util.units import UnitError, parse_bandwidth, parse_time

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

DEFAULT_ALPHA = 0.5e-6  # TACOS paper default link latency
DEFAULT_BANDWIDTH = 50e9  # TACOS paper default link bandwidth (B/s)


class TopologyError(ValueError):
    """An invalid topology or spec; the message names the offending link, node or field."""


@dataclass(frozen=True)
class Link:
    """One directed link. ``alpha``: latency (s); ``bandwidth``: B/s; ``overhead``: seconds each
    message occupies the link beyond its bytes (LogGP's gap), 0 by default."""

    src: int
    dst: int
    alpha: float
    bandwidth: float
    overhead: float = 0.0

    def bundled(self, other: "Link") -> "Link":
        """This link and a parallel one (same endpoints) as one bundle: bandwidths add, the
        smaller alpha and overhead (what a direct link and an unwound switch path become)."""
        return Link(self.src, self.dst, min(self.alpha, other.alpha), self.bandwidth + other.bandwidth,
                    min(self.overhead, other.overhead))


@dataclass
class Topology:
    """A directed graph of NPUs and switches. Construct through builders or ``Topology.create``."""

    num_npus: int
    num_switches: int
    links: tuple[Link, ...]
    name: str = "custom"
    meta: dict[str, Any] = field(default_factory=dict)

    # ---------------------------------------------------------------- creation
    @classmethod
    def create(cls, num_npus: int, links: Iterable[Link | tuple], num_switches: int = 0, name: str = "custom",
               meta: dict[str, Any] | None = None) -> "Topology":
        """Build and validate; raises ``TopologyError`` naming the bad link or node."""
        link_list = tuple(l if isinstance(l, Link) else Link(*l) for l in links)
        return cls(num_npus, num_switches, link_list, name, dict(meta or {}))

    def __post_init__(self) -> None:
        self.links = tuple(sorted(self.links, key=lambda l: (l.src, l.dst)))
        self._index: dict[tuple[int, int], int] = {}
        self._out: list[list[int]] = []
        self._in: list[list[int]] = []
        self._bfs_parents: dict[int, list[int]] = {}
        self._path_cache: dict[tuple[int, int], tuple[int, ...] | None] = {}
        self._alpha = None
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
        self._bfs_parents = {}
        self._path_cache = {}
        self._alpha = None

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

    # ---------------------------------------------------------------- routing
    def _parents_from(self, src: int) -> list[int]:
        """BFS from ``src`` over out-links, neighbours in increasing id, first parent kept."""
        parents = self._bfs_parents.get(src)
        if parents is None:
            from workbench.util.graphs import bfs

            parents = self._bfs_parents[src] = bfs(self._out, (src,)).parent
        return parents

    def route(self, src: int, dst: int) -> tuple[int, ...] | None:
        """The node path ``src .. dst`` the simulator uses, or None when unreachable.

        The direct link when one exists, otherwise the BFS shortest path of docs/cost-model.md ("The plan and the routes").
        """
        key = (src, dst)
        cached = self._path_cache.get(key, False)
        if cached is not False:
            return cached  # type: ignore[return-value]
        if (src, dst) in self._index:
            path: tuple[int, ...] | None = (src, dst)
        else:
            parents = self._parents_from(src)
            if parents[dst] == -1:
                path = None
            else:
                nodes = [dst]
                while nodes[-1] != src:
                    nodes.append(parents[nodes[-1]])
                path = tuple(reversed(nodes))
        self._path_cache[key] = path
        return path

    def reachable(self, src: int, dst: int) -> bool:
        """True when links lead from ``src`` to ``dst`` (a node reaches itself)."""
        return src == dst or self._parents_from(src)[dst] != -1

    def strong_components(self) -> list[int]:
        """A label per node; nodes with one label reach each other (strongly connected components).

        Kosaraju in plain Python up to 20,000 nodes (importing scipy's csgraph alone costs ~0.4 s,
        more than the search on any fabric of that size); scipy beyond.
        """
        if self.num_nodes <= 20_000:
            from workbench.util.graphs import strong_components

            return strong_components(self.num_nodes, [(l.src, l.dst) for l in self.links])
        import numpy as np
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import connected_components

        src = np.fromiter((l.src for l in self.links), dtype=np.int64, count=len(self.links))
        dst = np.fromiter((l.dst for l in self.links), dtype=np.int64, count=len(self.links))
        graph = csr_matrix((np.ones(len(self.links), dtype=np.int8), (src, dst)),
                           shape=(self.num_nodes, self.num_nodes))
        _, labels = connected_components(graph, directed=True, connection="strong")
        return labels.tolist()

    def hop_distances(self) -> list[list[int]]:
        """Unweighted shortest-path hop counts between all nodes (-1 when unreachable)."""
        from workbench.util.graphs import all_pairs_hops

        return all_pairs_hops(self._out)

    def alpha_distances(self) -> np.ndarray:
        """Shortest-path sums of alpha between all nodes (inf when unreachable), computed once.

        Plain Python on small fabrics (no scipy import, ~0.4 s, for a few ms of work), scipy beyond
        (``workbench.util.graphs.all_pairs_shortest``).
        """
        if self._alpha is None:
            from workbench.util.graphs import all_pairs_shortest

            # the 1e-30 on every alpha is kept from when the scipy twin needed non-zero weights:
            # zero-alpha fabrics then keep their distances, and bounds built on them, unchanged
            self._alpha = all_pairs_shortest(self.num_nodes, [(l.src, l.dst, l.alpha + 1e-30) for l in self.links])
        return self._alpha

    def message_distances(self) -> np.ndarray:
        """Shortest chains of messages between all nodes: each link weighs its alpha, and a link
        leaving an NPU its overhead too (inf when unreachable).

        A segment leaves an NPU and arrives after its alphas plus its serialisation, which is at
        least the overhead of its first link (docs/cost-model.md); a chain of transfers from one
        NPU to another pays that for every segment, so no chunk arrives sooner than this. Equal to
        ``alpha_distances`` where every overhead is 0.
        """
        if not any(l.overhead for l in self.links):
            return self.alpha_distances()
        from workbench.util.graphs import all_pairs_shortest

        return all_pairs_shortest(self.num_nodes, [
            (l.src, l.dst, l.alpha + (0.0 if self.is_switch(l.src) else l.overhead) + 1e-30) for l in self.links])

    # ---------------------------------------------------------------- transforms
    def reversed(self) -> "Topology":
        """Every link turned around (same alpha, bandwidth and overhead)."""
        links = [Link(l.dst, l.src, l.alpha, l.bandwidth, l.overhead) for l in self.links]
        name = self.name[len("reversed("):-1] if self.name.startswith("reversed(") else f"reversed({self.name})"
        return Topology.create(self.num_npus, links, self.num_switches, name, dict(self.meta))

    def unwind_switches(self, degree: int | None = None) -> "Topology":
        """Replace each switch by point-to-point links among its NPUs (TACOS section IV-G).

        The NPUs on a switch, in increasing id, are positions ``0..N-1``; position i gets links to
        positions ``i+1 .. i+d (mod N)`` with the NPU-to-NPU alpha through the switch unchanged and
        bandwidth divided by ``d``; its overhead is the larger of the two switch links' (what a
        message through the switch pays). ``degree=None`` means ``N - 1`` (fully connected).
        """
        if self.num_switches == 0:
            return self
        links: dict[tuple[int, int], Link] = {}
        for link in self.links:
            if not self.is_switch(link.src) and not self.is_switch(link.dst):
                links[(link.src, link.dst)] = link
        for switch in self.switches:
            members = sorted(set(u for u in self._in[switch] if not self.is_switch(u)))
            if any(self.is_switch(v) for v in self._out[switch]) or any(self.is_switch(u) for u in self._in[switch]):
                raise TopologyError(f"topology {self.name!r}: switch {switch} connects to another switch; cannot unwind")
            if set(members) != set(self._out[switch]):
                raise TopologyError(f"topology {self.name!r}: switch {switch} is not symmetric; cannot unwind")
            size = len(members)
            d = size - 1 if degree is None else min(int(degree), size - 1)
            if d < 1:
                continue
            for i, u in enumerate(members):
                up = self.link(u, switch)
                for step in range(1, d + 1):
                    v = members[(i + step) % size]
                    down = self.link(switch, v)
                    bandwidth = min(up.bandwidth, down.bandwidth) / d
                    candidate = Link(u, v, up.alpha + down.alpha, bandwidth, max(up.overhead, down.overhead))
                    existing = links.get((u, v))  # a direct link and a switch path: one bundle
                    links[(u, v)] = candidate if existing is None else existing.bundled(candidate)
        meta = dict(self.meta)
        meta["unwound_from"] = self.name
        meta["unwind_degree"] = degree
        return Topology.create(self.num_npus, links.values(), 0, f"{self.name}@unwound(d={degree})", meta)

    def with_uniform(self, alpha: float | None = None, bandwidth: float | None = None,
                     overhead: float | None = None) -> "Topology":
        """A copy with every link's alpha, bandwidth and/or overhead replaced."""
        links = [Link(l.src, l.dst, l.alpha if alpha is None else alpha,
                      l.bandwidth if bandwidth is None else bandwidth,
                      l.overhead if overhead is None else overhead) for l in self.links]
        return Topology.create(self.num_npus, links, self.num_switches, self.name, dict(self.meta))

    # ---------------------------------------------------------------- (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        """The ``{nodes, links}`` document; ``overhead`` is written only on links that have one, so
        a topology without overhead gives the document it always gave."""
        return {
            "name": self.name,
            "nodes": [{"id": node, "kind": self.kind(node)} for node in range(self.num_nodes)],
            "links": [{"src": l.src, "dst": l.dst, "alpha": l.alpha, "bandwidth": l.bandwidth,
                       **({"overhead": l.overhead} if l.overhead else {})} for l in self.links],
        }

    def save(self, path: str | Path) -> None:
        """Write the {nodes, links} document: YAML for a .yaml/.yml name, else JSON (through
        ``workbench.util.files.write_output``: atomic, a character device written through)."""
        from workbench.util.files import write_output

        path = Path(path)
        data = self.to_dict()
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            write_output(path, yaml.safe_dump(data, sort_keys=False))
        else:
            write_output(path, fastjson.text(data, indent=1))

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
        return (self.num_npus, self.num_switches, self.links) == (other.num_npus, other.num_switches, other.links)

    __hash__ = None  # type: ignore[assignment]


# ====================================================================== schema loading
def _field(entry: dict, key: str, where: str) -> Any:
    if not isinstance(entry, dict):
        raise TopologyError(f"{where}: expected a mapping, got {type(entry).__name__}")
    if key not in entry:
        raise TopologyError(f"{where}: missing field {key!r}")
    return entry[key]


def topology_from_dict(data: Any, source: str = "topology") -> Topology:
    """Parse the ``{nodes, links}`` schema; unit strings are accepted for alpha, bandwidth and the
    optional per-message ``overhead`` (default 0), and ``bidirectional`` must be true or false (the
    string "no" is not read as true)."""
    from workbench.util.safe_load import boolean

    if not isinstance(data, dict):
        raise TopologyError(f"{source}: expected a mapping with 'nodes' and 'links'")
    nodes = _field(data, "nodes", source)
    links_data = _field(data, "links", source)
    if not isinstance(nodes, list) or not nodes:
        raise TopologyError(f"{source}: 'nodes' must be a non-empty list")
    if not isinstance(links_data, list):
        raise TopologyError(f"{source}: 'links' must be a list")
    kinds: dict[int, str] = {}
    for i, node in enumerate(nodes):
        where = f"{source}: nodes[{i}]"
        node_id = _field(node, "id", where)
        kind = node.get("kind", "npu")
        if not isinstance(node_id, int) or isinstance(node_id, bool):
            raise TopologyError(f"{where}.id: expected an integer, got {node_id!r}")
        if kind not in ("npu", "switch"):
            raise TopologyError(f"{where}.kind: expected 'npu' or 'switch', got {kind!r}")
        if node_id in kinds:
            raise TopologyError(f"{where}.id: duplicate node id {node_id}")
        kinds[node_id] = kind
    ids = sorted(kinds)
    if ids != list(range(len(ids))):
        raise TopologyError(f"{source}: node ids must be 0..{len(ids) - 1} without gaps")
    npus = [i for i in ids if kinds[i] == "npu"]
    if npus != list(range(len(npus))):
        raise TopologyError(f"{source}: NPUs must be numbered 0..{len(npus) - 1}, before every switch")
    links: list[Link] = []
    for i, entry in enumerate(links_data):
        where = f"{source}: links[{i}]"
        src = _field(entry, "src", where)
        dst = _field(entry, "dst", where)
        for name, value in (("src", src), ("dst", dst)):
            if not isinstance(value, int) or isinstance(value, bool) or value not in kinds:
                raise TopologyError(f"{where}.{name}: unknown node {value!r}")
        try:
            alpha = parse_time(entry.get("alpha", 0.0))
            bandwidth = parse_bandwidth(_field(entry, "bandwidth", where))
            overhead = parse_time(entry.get("overhead", 0.0))
        except UnitError as exc:
            raise TopologyError(f"{where}: {exc}") from None
        if bandwidth <= 0:
            raise TopologyError(f"{where} ({src}->{dst}): bandwidth must be positive")
        links.append(Link(src, dst, alpha, bandwidth, overhead))
        if boolean(entry.get("bidirectional", False), f"{where}.bidirectional", TopologyError):
            links.append(Link(dst, src, alpha, bandwidth, overhead))
    name = str(data.get("name", source))
    meta = data.get("meta") or {}
    if not isinstance(meta, dict):
        raise TopologyError(f"{source}: meta: expected a mapping, got {type(meta).__name__}")
    _check_dims(meta.get("dims"), len(npus), source)
    return Topology.create(len(npus), links, len(ids) - len(npus), name, meta)


def _check_dims(dims: Any, num_npus: int, source: str) -> None:
    """``meta.dims`` (docs/clusters.md): a list of ``{kind, size}``, sizes multiplying to the NPUs."""
    if dims is None:
        return
    if not isinstance(dims, list) or not dims:
        raise TopologyError(f"{source}: meta.dims: expected a non-empty list of {{kind, size}}")
    for i, dim in enumerate(dims):
        size = dim.get("size") if isinstance(dim, dict) else None
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise TopologyError(f"{source}: meta.dims[{i}].size: expected a positive integer, got {size!r}")
        if not isinstance(dim.get("kind"), str):
            raise TopologyError(f"{source}: meta.dims[{i}].kind: expected a name such as 'ring' or 'switch'")
    if math.prod(d["size"] for d in dims) != num_npus:
        raise TopologyError(f"{source}: meta.dims: sizes multiply to {math.prod(d['size'] for d in dims):,}, "
                            f"not the {num_npus:,} NPUs")
