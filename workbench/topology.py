"""Topologies: NPUs, optional switch nodes, directed links with alpha and bandwidth.

A ``Topology`` is an immutable directed graph. NPUs are nodes ``0..n-1`` (the
ranks); switch nodes follow them. Every link carries its own ``alpha`` (s) and
``bandwidth`` (B/s, per link and per direction). A bundle of parallel physical
links is one link with the summed bandwidth.

Builders are reached through spec strings (``ring:8``, ``md:R2,F4,S8``,
``dgx1`` ...) with :func:`build`, or through :func:`load_topology`, which also
accepts YAML/JSON files in the ``{nodes, links}`` schema.
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from workbench.units import UnitError, parse_bandwidth, parse_time

if TYPE_CHECKING:  # networkx and numpy cost ~0.15 s to import; only a few queries need them
    import networkx as nx
    import numpy as np

__all__ = [
    "Link",
    "Topology",
    "TopologyError",
    "build",
    "load_topology",
    "topology_from_dict",
    "BUILDERS",
    "DEFAULT_ALPHA",
    "DEFAULT_BANDWIDTH",
    "expand_per_npu",
]

DEFAULT_ALPHA = 0.5e-6  # TACOS paper default link latency
DEFAULT_BANDWIDTH = 50e9  # TACOS paper default link bandwidth (B/s)


class TopologyError(ValueError):
    """An invalid topology or spec; the message names the offending link, node or field."""


@dataclass(frozen=True)
class Link:
    src: int
    dst: int
    alpha: float
    bandwidth: float


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
    def create(
        cls,
        num_npus: int,
        links: Iterable[Link | tuple],
        num_switches: int = 0,
        name: str = "custom",
        meta: dict[str, Any] | None = None,
    ) -> "Topology":
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
        return self.num_npus + self.num_switches

    @property
    def npus(self) -> range:
        return range(self.num_npus)

    @property
    def switches(self) -> range:
        return range(self.num_npus, self.num_nodes)

    def is_switch(self, node: int) -> bool:
        return node >= self.num_npus

    def kind(self, node: int) -> str:
        return "switch" if self.is_switch(node) else "npu"

    def link_index(self, src: int, dst: int) -> int:
        """Index of link ``src -> dst`` in ``links``; KeyError when absent."""
        return self._index[(src, dst)]

    def has_link(self, src: int, dst: int) -> bool:
        return (src, dst) in self._index

    def link(self, src: int, dst: int) -> Link:
        return self.links[self._index[(src, dst)]]

    def out_neighbors(self, node: int) -> list[int]:
        return self._out[node]

    def in_neighbors(self, node: int) -> list[int]:
        return self._in[node]

    def out_links(self, node: int) -> list[Link]:
        return [self.links[self._index[(node, v)]] for v in self._out[node]]

    def in_links(self, node: int) -> list[Link]:
        return [self.links[self._index[(u, node)]] for u in self._in[node]]

    def graph(self) -> nx.DiGraph:
        """A networkx view (node attribute ``kind``; edge attributes ``alpha``, ``bandwidth``)."""
        import networkx as nx

        g = nx.DiGraph(name=self.name)
        for node in range(self.num_nodes):
            g.add_node(node, kind=self.kind(node))
        for link in self.links:
            g.add_edge(link.src, link.dst, alpha=link.alpha, bandwidth=link.bandwidth)
        return g

    # ---------------------------------------------------------------- routing
    def _parents_from(self, src: int) -> list[int]:
        """BFS from ``src`` over out-links, neighbours in increasing id, first parent kept."""
        parents = self._bfs_parents.get(src)
        if parents is None:
            parents = [-1] * self.num_nodes
            parents[src] = src
            queue = deque([src])
            out = self._out
            while queue:
                u = queue.popleft()
                for v in out[u]:
                    if parents[v] == -1:
                        parents[v] = u
                        queue.append(v)
            self._bfs_parents[src] = parents
        return parents

    def route(self, src: int, dst: int) -> tuple[int, ...] | None:
        """The node path ``src .. dst`` the simulator uses, or None when unreachable.

        The direct link when one exists, otherwise the BFS shortest path of DESIGN.md.
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
        return src == dst or self._parents_from(src)[dst] != -1

    def strong_components(self) -> list[int]:
        """A label per node; nodes with one label reach each other (strongly connected components).

        Kosaraju in plain Python up to 20,000 nodes (importing scipy's csgraph alone costs ~0.4 s,
        more than the search on any fabric of that size); scipy beyond.
        """
        if self.num_nodes <= 20_000:
            from workbench.graphs import strong_components

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
        result = []
        for src in range(self.num_nodes):
            dist = [-1] * self.num_nodes
            dist[src] = 0
            queue = deque([src])
            while queue:
                u = queue.popleft()
                for v in self._out[u]:
                    if dist[v] < 0:
                        dist[v] = dist[u] + 1
                        queue.append(v)
            result.append(dist)
        return result

    def alpha_distances(self) -> np.ndarray:
        """Shortest-path sums of alpha between all nodes (inf when unreachable), computed once."""
        import numpy as np

        if self._alpha is None and self.num_nodes * max(len(self.links), 1) <= 200_000:
            from workbench.graphs import all_pairs_dijkstra

            # small fabrics: no scipy import (~0.4 s) for a few ms of work
            self._alpha = all_pairs_dijkstra(self.num_nodes, [(l.src, l.dst, l.alpha + 1e-30) for l in self.links])
        if self._alpha is None:
            from scipy.sparse import csr_matrix
            from scipy.sparse.csgraph import dijkstra

            n = self.num_nodes
            # a tiny epsilon keeps zero-alpha links as edges of the sparse graph
            weights = np.array([l.alpha for l in self.links]) + 1e-30
            graph = csr_matrix((weights, ([l.src for l in self.links], [l.dst for l in self.links])), shape=(n, n))
            self._alpha = dijkstra(graph, directed=True)
        return self._alpha

    # ---------------------------------------------------------------- transforms
    def reversed(self) -> "Topology":
        """Every link turned around (same alpha and bandwidth)."""
        links = [Link(l.dst, l.src, l.alpha, l.bandwidth) for l in self.links]
        name = self.name[len("reversed("):-1] if self.name.startswith("reversed(") else f"reversed({self.name})"
        return Topology.create(self.num_npus, links, self.num_switches, name, dict(self.meta))

    def unwind_switches(self, degree: int | None = None) -> "Topology":
        """Replace each switch by point-to-point links among its NPUs (TACOS section IV-G).

        The NPUs on a switch, in increasing id, are positions ``0..N-1``; position i gets links to
        positions ``i+1 .. i+d (mod N)`` with the NPU-to-NPU alpha through the switch unchanged and
        bandwidth divided by ``d``. ``degree=None`` means ``N - 1`` (fully connected).
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
                    candidate = Link(u, v, up.alpha + down.alpha, bandwidth)
                    existing = links.get((u, v))
                    if existing is None:
                        links[(u, v)] = candidate
                    else:  # a direct link and a switch path: one bundle, summed bandwidth
                        links[(u, v)] = Link(u, v, min(existing.alpha, candidate.alpha),
                                             existing.bandwidth + candidate.bandwidth)
        meta = dict(self.meta)
        meta["unwound_from"] = self.name
        meta["unwind_degree"] = degree
        return Topology.create(self.num_npus, links.values(), 0, f"{self.name}@unwound(d={degree})", meta)

    def with_uniform(self, alpha: float | None = None, bandwidth: float | None = None) -> "Topology":
        """A copy with every link's alpha and/or bandwidth replaced."""
        links = [Link(l.src, l.dst, l.alpha if alpha is None else alpha,
                      l.bandwidth if bandwidth is None else bandwidth) for l in self.links]
        return Topology.create(self.num_npus, links, self.num_switches, self.name, dict(self.meta))

    # ---------------------------------------------------------------- (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "nodes": [{"id": node, "kind": self.kind(node)} for node in range(self.num_nodes)],
            "links": [{"src": l.src, "dst": l.dst, "alpha": l.alpha, "bandwidth": l.bandwidth} for l in self.links],
        }

    def save(self, path: str | Path) -> None:
        from workbench.files import write_atomic

        path = Path(path)
        data = self.to_dict()
        if path.suffix in (".yaml", ".yml"):
            import yaml

            write_atomic(path, yaml.safe_dump(data, sort_keys=False))
        else:
            write_atomic(path, json.dumps(data, indent=1))

    def describe(self) -> str:
        """A human summary: counts, degrees, bandwidth and alpha ranges, diameter."""
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
    """Parse the ``{nodes, links}`` schema; unit strings are accepted for alpha and bandwidth."""
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
        except UnitError as exc:
            raise TopologyError(f"{where}: {exc}") from None
        if bandwidth <= 0:
            raise TopologyError(f"{where} ({src}->{dst}): bandwidth must be positive")
        links.append(Link(src, dst, alpha, bandwidth))
        if entry.get("bidirectional", False):
            links.append(Link(dst, src, alpha, bandwidth))
    name = str(data.get("name", source))
    return Topology.create(len(npus), links, len(ids) - len(npus), name, data.get("meta") or {})


def load_topology(
    spec_or_path: str | Path,
    alpha: Sequence[float] | float | None = None,
    bandwidth: Sequence[float] | float | None = None,
) -> Topology:
    """A topology from a builder spec string or a YAML/JSON file path."""
    from workbench import size_guard

    text = str(spec_or_path)
    path = Path(text)
    if path.suffix.lower() in (".json", ".yaml", ".yml"):
        if not path.exists():
            raise TopologyError(f"{text}: no such topology file")
        if path.is_file():  # parsed text and built objects: ~30 bytes per byte of file
            _guard(size_guard, text, 30.0 * path.stat().st_size)
        try:
            raw = path.read_text()
            if path.suffix.lower() == ".json":
                data = json.loads(raw)
            else:
                import yaml

                data = yaml.safe_load(raw)
        except (json.JSONDecodeError, ValueError) as exc:
            raise TopologyError(f"{text}: malformed file: {str(exc).splitlines()[0]}") from None
        except Exception as exc:  # yaml.YAMLError and friends
            raise TopologyError(f"{text}: malformed file: {str(exc).splitlines()[0]}") from None
        return topology_from_dict(data, source=text)
    size = size_guard.spec_size(text)
    if size is not None:
        _guard(size_guard, text, size.bytes())
    return build(text, alpha=alpha, bandwidth=bandwidth)


def _guard(size_guard, what: str, needed: float) -> None:
    try:
        size_guard.check(what, needed)
    except size_guard.SizeError as exc:
        raise TopologyError(str(exc)) from None


# ====================================================================== builders
class _Edges:
    """Collects links; a link already present is kept (grids and rings of 2 meet the same pair twice)."""

    def __init__(self) -> None:
        self.links: dict[tuple[int, int], Link] = {}

    def add(self, u: int, v: int, alpha: float, bandwidth: float, both: bool = True) -> None:
        self.links.setdefault((u, v), Link(u, v, alpha, bandwidth))
        if both:
            self.links.setdefault((v, u), Link(v, u, alpha, bandwidth))


def _per_dim(values: Sequence[float] | float | None, dims: int, default: float, what: str) -> list[float]:
    if values is None:
        return [default] * dims
    if isinstance(values, (int, float)):
        return [float(values)] * dims
    values = [float(v) for v in values]
    if len(values) == 1:
        return values * dims
    if len(values) != dims:
        raise TopologyError(f"--{what}: expected 1 or {dims} values (one per dimension), got {len(values)}")
    return values


def _ring_edges(edges: _Edges, members: Sequence[int], alpha: float, bw: float, both: bool = True) -> None:
    n = len(members)
    if n < 2:
        return
    if n == 2:
        edges.add(members[0], members[1], alpha, bw, both=True)
        return
    for i in range(n):
        edges.add(members[i], members[(i + 1) % n], alpha, bw, both=both)


def _fc_edges(edges: _Edges, members: Sequence[int], alpha: float, bw: float) -> None:
    for u in members:
        for v in members:
            if u != v:
                edges.add(u, v, alpha, bw, both=False)


def _switch_edges(edges: _Edges, members: Sequence[int], switch: int, alpha: float, bw: float) -> None:
    for u in members:
        edges.add(u, switch, alpha / 2, bw, both=False)
        edges.add(switch, u, alpha / 2, bw, both=False)


def _unwound_edges(edges: _Edges, members: Sequence[int], degree: int, alpha: float, bw: float) -> None:
    n = len(members)
    d = min(degree, n - 1)
    for i, u in enumerate(members):
        for step in range(1, d + 1):
            edges.add(u, members[(i + step) % n], alpha, bw / d, both=False)


def _parse_int(text: str, spec: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise TopologyError(f"topology spec {spec!r}: {text!r} is not a positive integer")
    return int(text)


def _grid(spec: str, arg: str, wrap: bool, alpha, bandwidth) -> Topology:
    sizes = [_parse_int(s, spec) for s in arg.lower().split("x")]
    if len(sizes) not in (1, 2, 3):
        raise TopologyError(f"topology spec {spec!r}: expected AxB or AxBxC")
    alphas = _per_dim(alpha, len(sizes), DEFAULT_ALPHA, "alpha")
    bws = _per_dim(bandwidth, len(sizes), DEFAULT_BANDWIDTH, "bandwidth")
    n = math.prod(sizes)
    strides = [math.prod(sizes[:k]) for k in range(len(sizes))]
    edges = _Edges()
    for node in range(n):
        coords = [(node // strides[k]) % sizes[k] for k in range(len(sizes))]
        for k, size in enumerate(sizes):
            if size == 1:
                continue
            if coords[k] + 1 < size:
                edges.add(node, node + strides[k], alphas[k], bws[k])
            elif wrap and size > 2:
                edges.add(node, node - (size - 1) * strides[k], alphas[k], bws[k])
    kind = "torus" if wrap else "mesh"
    dims = [{"kind": "ring" if wrap else "line", "size": s} for s in sizes]
    return Topology.create(n, edges.links.values(), 0, f"{kind}:{arg}", {"dims": dims})


_DIM_TOKEN = re.compile(r"^([RFS])(\d+)(?:@(\d+))?$", re.IGNORECASE)


def _multi_dim(spec: str, tokens: Sequence[str], alpha, bandwidth, name: str) -> Topology:
    dims = []
    for token in tokens:
        match = _DIM_TOKEN.match(token.strip())
        if not match:
            raise TopologyError(f"topology spec {spec!r}: bad dimension {token!r} (use R<n>, F<n>, S<n> or S<n>@<d>)")
        kind = {"r": "ring", "f": "fc", "s": "switch"}[match.group(1).lower()]
        size = _parse_int(match.group(2), spec)
        degree = int(match.group(3)) if match.group(3) else None
        if degree is not None and (kind != "switch" or degree < 1):
            raise TopologyError(f"topology spec {spec!r}: '@d' applies to switch dimensions, with d >= 1")
        dims.append((kind, size, degree))
    sizes = [d[1] for d in dims]
    alphas = _per_dim(alpha, len(dims), DEFAULT_ALPHA, "alpha")
    bws = _per_dim(bandwidth, len(dims), DEFAULT_BANDWIDTH, "bandwidth")
    n = math.prod(sizes)
    strides = [math.prod(sizes[:k]) for k in range(len(sizes))]
    edges = _Edges()
    next_switch = n
    for k, (kind, size, degree) in enumerate(dims):
        if size == 1:
            continue
        for base in range(n):
            if (base // strides[k]) % size != 0:
                continue  # one group per base with coordinate k = 0
            members = [base + i * strides[k] for i in range(size)]
            if kind == "ring":
                _ring_edges(edges, members, alphas[k], bws[k])
            elif kind == "fc":
                _fc_edges(edges, members, alphas[k], bws[k])
            elif degree is not None:
                _unwound_edges(edges, members, degree, alphas[k], bws[k])
            else:
                _switch_edges(edges, members, next_switch, alphas[k], bws[k])
                next_switch += 1
    meta = {"dims": [{"kind": kind, "size": size, **({"degree": d} if d else {})} for kind, size, d in dims],
            "dim_alpha": alphas, "dim_bandwidth": bws}
    return Topology.create(n, edges.links.values(), next_switch - n, name, meta)


def _dragonfly(spec: str, arg: str, alpha, bandwidth) -> Topology:
    """``dragonfly:AxG``: G groups of A NPUs; dim 0 (intra-group) fully connected, dim 1 global links.

    TACOS's DragonFly 4x5 (ambiguity A8) is read as 5 groups of 4 NPUs. Global links: one
    bidirectional link between every pair of groups. Group g reaches group (g+o) mod G (offset
    o = 1..G-1) through its NPU (o-1) mod A, which lands on NPU (G-o-1) mod A of the other group,
    so with A = G-1 every NPU owns exactly one global link. The wiring is not vertex-transitive,
    which is what makes the topology asymmetric.
    """
    parts = arg.lower().split("x")
    if len(parts) != 2:
        raise TopologyError(f"topology spec {spec!r}: expected dragonfly:AxG (NPUs per group x groups)")
    per_group, groups = (_parse_int(p, spec) for p in parts)
    alphas = _per_dim(alpha, 2, DEFAULT_ALPHA, "alpha")
    bws = _per_dim(bandwidth, 2, DEFAULT_BANDWIDTH, "bandwidth")
    edges = _Edges()
    for g in range(groups):
        _fc_edges(edges, [g * per_group + i for i in range(per_group)], alphas[0], bws[0])
    for g in range(groups):
        for offset in range(1, groups):
            h = (g + offset) % groups
            u = g * per_group + (offset - 1) % per_group
            v = h * per_group + (groups - offset - 1) % per_group
            edges.add(u, v, alphas[1], bws[1], both=False)
    meta = {"dims": [{"kind": "fc", "size": per_group}, {"kind": "global", "size": groups}]}
    return Topology.create(per_group * groups, edges.links.values(), 0, f"dragonfly:{arg}", meta)


# DGX-1 NVLink multiplicities in the SCCL paper's numbering (spec sccl section 7.1).
_DGX1_SCCL = {
    (0, 1): 2, (0, 2): 1, (0, 3): 2, (0, 5): 1, (1, 2): 1, (1, 3): 1, (1, 4): 2, (2, 3): 2,
    (2, 7): 2, (3, 6): 1, (4, 5): 2, (4, 6): 1, (4, 7): 1, (5, 6): 2, (5, 7): 1, (6, 7): 2,
}
# msccl-tools / TACCL / TE-CCL numbering: swap labels 0<->1 and 6<->7.
_SCCL_TO_MSCCL = {0: 1, 1: 0, 2: 2, 3: 3, 4: 4, 5: 5, 6: 7, 7: 6}


def _dgx1_edges(numbering: str, per_nvlink: float, alpha: float, offset: int = 0) -> list[Link]:
    links = []
    for (u, v), multiplicity in _DGX1_SCCL.items():
        if numbering == "msccl":
            u, v = _SCCL_TO_MSCCL[u], _SCCL_TO_MSCCL[v]
        bw = multiplicity * per_nvlink
        links.append(Link(u + offset, v + offset, alpha, bw))
        links.append(Link(v + offset, u + offset, alpha, bw))
    return links


def _dgx1(spec: str, numbering: str, alpha, bandwidth) -> Topology:
    a = _per_dim(alpha, 1, DEFAULT_ALPHA, "alpha")[0]
    bw = _per_dim(bandwidth, 1, 25e9, "bandwidth")[0]
    meta = {"numbering": numbering, "per_nvlink_bandwidth": bw}
    return Topology.create(8, _dgx1_edges(numbering, bw, a), 0, spec, meta)


# Cost variants of the multi-node systems: TE-CCL spec 6.2 and TACCL spec 5.2 (1MB profile).
_COSTS = {
    "teccl": {"nvlink_alpha": 0.7e-6, "nvlink_double": 50e9, "nvlink_single": 25e9,
              "ib_alpha": 1.3e-6, "ib_bw": 12.5e9,
              "nvswitch_alpha": 0.35e-6, "nvswitch_bw": 125e9,
              "dgx2_ib_alpha": 2.6e-6, "dgx2_ib_bw": 12.5e9},
    "taccl": {"nvlink_alpha": 0.3e-6, "nvlink_double": 1e6 / 23e-6, "nvlink_single": 1e6 / 46e-6,
              "ib_alpha": 2.6e-6, "ib_bw": 1e6 / 105e-6,
              "nvswitch_alpha": 0.15e-6, "nvswitch_bw": 1e6 / 8e-6,
              "dgx2_ib_alpha": 2.6e-6, "dgx2_ib_bw": 1e6 / 105e-6},
}


def _ndv2(spec: str, chassis: int, variant: str) -> Topology:
    """NDv2: DGX-1 NVLink per chassis (msccl numbering); GPU 0 of each chassis -> IB -> GPU 1 of the others.

    Two chassis: direct links 0 -> 9 and 8 -> 1. Three or more: one switch node (id 8K) with
    half the IB alpha on each side.
    """
    c = _COSTS[variant]
    links: list[Link] = []
    for i in range(chassis):
        for link in _dgx1_edges("msccl", c["nvlink_single"], c["nvlink_alpha"], offset=8 * i):
            double = link.bandwidth > c["nvlink_single"] * 1.5
            bw = c["nvlink_double"] if double else c["nvlink_single"]
            links.append(Link(link.src, link.dst, link.alpha, bw))
    switches = 0
    if chassis == 2:
        links += [Link(0, 9, c["ib_alpha"], c["ib_bw"]), Link(8, 1, c["ib_alpha"], c["ib_bw"])]
    elif chassis >= 3:
        switch = 8 * chassis
        switches = 1
        for i in range(chassis):
            links.append(Link(8 * i, switch, c["ib_alpha"] / 2, c["ib_bw"]))
            links.append(Link(switch, 8 * i + 1, c["ib_alpha"] / 2, c["ib_bw"]))
    return Topology.create(8 * chassis, links, switches, spec, {"chassis": chassis, "costs": variant})


def _dgx2(spec: str, chassis: int, variant: str) -> Topology:
    """DGX-2: 16 GPUs on one NVSwitch node per chassis; odd GPU g sends over IB to GPU g-1 of every other chassis."""
    c = _COSTS[variant]
    edges = _Edges()
    n = 16 * chassis
    for i in range(chassis):
        members = [16 * i + g for g in range(16)]
        for u in members:
            edges.add(u, n + i, c["nvswitch_alpha"], c["nvswitch_bw"])
        for j in range(chassis):
            if i != j:
                for g in range(1, 16, 2):
                    edges.add(16 * i + g, 16 * j + g - 1, c["dgx2_ib_alpha"], c["dgx2_ib_bw"], both=False)
    return Topology.create(n, edges.links.values(), chassis, spec, {"chassis": chassis, "costs": variant})


def _nic_fabric(edges: "_Edges", nics: list[list[int]], first_free: int, alpha: float, bw: float) -> int:
    """IB between NIC nodes: ``nics[i][k]`` is NIC k of chassis i. Two chassis: NIC k <-> NIC k
    directly (alpha/2); more: every NIC on one IB switch (alpha/4 a side). Returns the switches added."""
    if len(nics) == 2:
        for a, b in zip(nics[0], nics[1]):
            edges.add(a, b, alpha / 2, bw)
        return 0
    if len(nics) > 2:
        for row in nics:
            for nic in row:
                edges.add(nic, first_free, alpha / 4, bw)
        return 1
    return 0


def _ndv2_nic(spec: str, chassis: int, variant: str) -> Topology:
    """NDv2 with its NIC as a switch node: all 8 GPUs of a chassis reach the IB NIC over PCIe.

    GPU <-> NIC costs IB alpha/4 at IB bandwidth, so any GPU can use the NIC and the GPUs of a
    chassis share it; NIC to NIC as in ``_nic_fabric``. Any inter-node sketch (TACCL ndv2-sk-1,
    -sk-2 fully connected, -sk-3 direct map) is a set of switch-only paths here.
    """
    c = _COSTS[variant]
    n = 8 * chassis
    links: list[Link] = []
    for i in range(chassis):
        for link in _dgx1_edges("msccl", c["nvlink_single"], c["nvlink_alpha"], offset=8 * i):
            double = link.bandwidth > c["nvlink_single"] * 1.5
            links.append(Link(link.src, link.dst, link.alpha, c["nvlink_double"] if double else c["nvlink_single"]))
    edges = _Edges()
    nics = [[n + i] for i in range(chassis)]
    for i in range(chassis):
        for g in range(8):
            edges.add(8 * i + g, n + i, c["ib_alpha"] / 4, c["ib_bw"])
    extra = _nic_fabric(edges, nics, n + chassis, c["ib_alpha"], c["ib_bw"])
    meta = {"chassis": chassis, "costs": variant, "nics_per_chassis": 1}
    return Topology.create(n, links + list(edges.links.values()), chassis + extra, spec, meta)


def _dgx2_nic(spec: str, chassis: int, variant: str) -> Topology:
    """DGX-2 with 8 NIC switch nodes per chassis, NIC k shared by GPUs 2k and 2k+1 (spec taccl 1.1).

    Node ids: GPUs, then one NVSwitch per chassis, then the NICs (so intra-chassis routes take the
    NVSwitch). GPU <-> NIC costs IB alpha/4 at IB bandwidth; NIC to NIC as in ``_nic_fabric``.
    """
    c = _COSTS[variant]
    n = 16 * chassis
    edges = _Edges()
    for i in range(chassis):
        for g in range(16):
            edges.add(16 * i + g, n + i, c["nvswitch_alpha"], c["nvswitch_bw"])
    nics = [[n + chassis + 8 * i + k for k in range(8)] for i in range(chassis)]
    for i in range(chassis):
        for k in range(8):
            for g in (2 * k, 2 * k + 1):
                edges.add(16 * i + g, nics[i][k], c["dgx2_ib_alpha"] / 4, c["dgx2_ib_bw"])
    extra = _nic_fabric(edges, nics, n + 9 * chassis, c["dgx2_ib_alpha"], c["dgx2_ib_bw"])
    meta = {"chassis": chassis, "costs": variant, "nics_per_chassis": 8}
    return Topology.create(n, edges.links.values(), 9 * chassis + extra, spec, meta)


# AMD chassis of the TE-CCL spec (section 6.2): neighbour -> weight, bandwidth = weight * 50 GB/s.
_AMD_CHASSIS = {
    0: {1: 4, 4: 2, 8: 1}, 1: {0: 4, 5: 1, 9: 1, 10: 1}, 2: {3: 4, 6: 1, 9: 1, 10: 1},
    3: {2: 4, 7: 2, 11: 1}, 4: {5: 4, 0: 2, 6: 1}, 5: {4: 4, 1: 1, 6: 1, 7: 1},
    6: {7: 4, 2: 1, 4: 1, 5: 1}, 7: {6: 4, 3: 2, 5: 1}, 8: {9: 4, 12: 2, 0: 1},
    9: {8: 4, 1: 1, 2: 1, 13: 1}, 10: {11: 4, 1: 1, 2: 1, 14: 1}, 11: {10: 4, 15: 2, 3: 1},
    12: {13: 4, 8: 2, 14: 1}, 13: {12: 4, 9: 1, 14: 1, 15: 1}, 14: {15: 4, 10: 1, 12: 1, 13: 1},
    15: {14: 4, 11: 2, 13: 1},
}


def _amd(spec: str, chassis: int, alpha) -> Topology:
    """AMD (TE-CCL): 16 GPUs per chassis; pairs (2k, 2k+1) on small switches; all small switches on one big switch.

    Alpha is not given by the paper; ``--alpha`` (default 0.5 us) applies to every GPU link and,
    halved, to each switch link. With one chassis there are no switches.
    """
    a = _per_dim(alpha, 1, DEFAULT_ALPHA, "alpha")[0]
    edges = _Edges()
    n = 16 * chassis
    for i in range(chassis):
        for u, neighbours in _AMD_CHASSIS.items():
            for v, weight in neighbours.items():
                edges.add(16 * i + u, 16 * i + v, a, weight * 50e9, both=False)
    switches = 0
    if chassis > 1:
        central = n + 8 * chassis
        for i in range(chassis):
            for k in range(8):
                small = n + 8 * i + k
                for g in (2 * k, 2 * k + 1):
                    edges.add(16 * i + g, small, a / 2, 25e9)
                edges.add(small, central, a / 2, 25e9)
        switches = 8 * chassis + 1
    return Topology.create(n, edges.links.values(), switches, spec, {"chassis": chassis})


_Z52_RING = [1, 0, 2, 3, 5, 4, 6, 7]  # spec sccl 7.2: guessed labelling


def _z52(spec: str, alpha, bandwidth) -> Topology:
    a = _per_dim(alpha, 1, DEFAULT_ALPHA, "alpha")[0]
    bw = _per_dim(bandwidth, 1, DEFAULT_BANDWIDTH, "bandwidth")[0]
    edges = _Edges()
    _ring_edges(edges, _Z52_RING, a, bw)
    return Topology.create(8, edges.links.values(), 0, spec, {"labelling": "guessed (spec sccl 7.2)"})


def _single_dim(spec: str, kind: str, arg: str, alpha, bandwidth) -> Topology:
    n = _parse_int(arg, spec)
    a = _per_dim(alpha, 1, DEFAULT_ALPHA, "alpha")[0]
    bw = _per_dim(bandwidth, 1, DEFAULT_BANDWIDTH, "bandwidth")[0]
    edges = _Edges()
    members = list(range(n))
    if kind == "ring":
        _ring_edges(edges, members, a, bw)
    elif kind == "uniring":
        _ring_edges(edges, members, a, bw, both=False)
    elif kind == "line":
        for i in range(n - 1):
            edges.add(i, i + 1, a, bw)
    elif kind == "fc":
        _fc_edges(edges, members, a, bw)
    return Topology.create(n, edges.links.values(), 0, spec, {"dims": [{"kind": kind, "size": n}]})


def _switch(spec: str, arg: str, alpha, bandwidth) -> Topology:
    size_text, _, degree_text = arg.partition("@")
    n = _parse_int(size_text, spec)
    a = _per_dim(alpha, 1, DEFAULT_ALPHA, "alpha")[0]
    bw = _per_dim(bandwidth, 1, DEFAULT_BANDWIDTH, "bandwidth")[0]
    edges = _Edges()
    if degree_text:
        _unwound_edges(edges, list(range(n)), _parse_int(degree_text, spec), a, bw)
        return Topology.create(n, edges.links.values(), 0, spec,
                               {"dims": [{"kind": "switch", "size": n, "degree": int(degree_text)}]})
    _switch_edges(edges, list(range(n)), n, a, bw)
    return Topology.create(n, edges.links.values(), 1, spec, {"dims": [{"kind": "switch", "size": n}]})


BUILDERS: dict[str, str] = {
    "ring:N": "bidirectional ring (a ring of 2 is one link each way)",
    "nvs-ib:K": "K boxes of 8 GPUs on an NVSwitch, a NIC switch per GPU, two IB switches joined by a trunk",
    "uniring:N": "unidirectional ring i -> i+1",
    "line:N": "path 0 - 1 - ... - N-1",
    "fc:N": "fully connected",
    "mesh:AxB[xC]": "2D/3D grid without wrap-around (TACOS's '3D hypercube')",
    "torus:AxB[xC]": "2D/3D grid with wrap-around",
    "switch:N[@d]": "N NPUs on one switch node; @d unwinds to degree d (bandwidth/d per link)",
    "md:R4,F8,S32[@d]": "multi-dimensional Ring/FullyConnected/Switch dims, dim 0 fastest",
    "rfs:AxBxC": "md:RA,FB,SC (TACOS 3D-RFS)",
    "dragonfly:AxG": "G groups of A fully connected NPUs, one global link per group pair",
    "dgx1": "DGX-1 in the SCCL paper's numbering; --bandwidth is per NVLink (default 25GB/s)",
    "dgx1-msccl": "DGX-1 in the msccl-tools / TACCL / TE-CCL numbering",
    "ndv2:K": "K NDv2 chassis, TE-CCL costs (NVLink 0.7us, IB 12.5GB/s 1.3us)",
    "ndv2-taccl:K": "K NDv2 chassis, TACCL profiled costs (1MB profile)",
    "dgx2:K": "K DGX-2 chassis, TE-CCL costs (NVSwitch 125GB/s 0.35us, IB 12.5GB/s 2.6us)",
    "dgx2-taccl:K": "K DGX-2 chassis, TACCL profiled costs (1MB profile)",
    "ndv2-nic:K, ndv2-taccl-nic:K": "NDv2 chassis with the IB NIC as a switch node every GPU reaches (any TACCL inter-node sketch)",
    "dgx2-nic:K, dgx2-taccl-nic:K": "DGX-2 chassis with 8 NIC switch nodes, each shared by GPUs 2k, 2k+1",
    "amd:K": "K AMD MI250 chassis of the TE-CCL paper",
    "amd-z52": "Gigabyte Z52 8-ring of the SCCL paper (guessed labelling)",
}


def build(
    spec: str,
    alpha: Sequence[float] | float | None = None,
    bandwidth: Sequence[float] | float | None = None,
) -> Topology:
    """Build a topology from a spec string (see ``BUILDERS``); alpha/bandwidth per dimension."""
    spec = spec.strip()
    kind, _, arg = spec.partition(":")
    kind = kind.lower()
    try:
        if kind in ("ring", "uniring", "line", "fc"):
            return _single_dim(spec, kind, arg, alpha, bandwidth)
        if kind in ("mesh", "torus"):
            return _grid(spec, arg, kind == "torus", alpha, bandwidth)
        if kind == "switch":
            return _switch(spec, arg, alpha, bandwidth)
        if kind == "md":
            return _multi_dim(spec, arg.split(","), alpha, bandwidth, spec)
        if kind == "rfs":
            sizes = arg.lower().split("x")
            if len(sizes) != 3:
                raise TopologyError(f"topology spec {spec!r}: expected rfs:AxBxC")
            tokens = [f"R{sizes[0]}", f"F{sizes[1]}", f"S{sizes[2]}"]
            return _multi_dim(spec, tokens, alpha, bandwidth, spec)
        if kind == "dragonfly":
            return _dragonfly(spec, arg, alpha, bandwidth)
        if kind in ("dgx1", "dgx1-msccl") and not arg:
            return _dgx1(spec, "sccl" if kind == "dgx1" else "msccl", alpha, bandwidth)
        if kind in ("ndv2", "ndv2-taccl", "dgx2", "dgx2-taccl", "amd", "ndv2-nic", "ndv2-taccl-nic", "dgx2-nic",
                    "dgx2-taccl-nic"):
            chassis = _parse_int(arg, spec) if arg else 1
            if kind != "amd" and (alpha is not None or bandwidth is not None):
                raise TopologyError(f"topology spec {spec!r}: fixed link costs; --alpha/--bandwidth do not apply")
            variant = "taccl" if "-taccl" in kind else "teccl"
            if kind.endswith("-nic"):
                return (_ndv2_nic if kind.startswith("ndv2") else _dgx2_nic)(spec, chassis, variant)
            if kind.startswith("ndv2"):
                return _ndv2(spec, chassis, variant)
            if kind.startswith("dgx2"):
                return _dgx2(spec, chassis, variant)
            return _amd(spec, chassis, alpha)
        if kind == "nvs-ib":
            from workbench.fabrics import nvs_ib_links

            if alpha is not None or bandwidth is not None:
                raise TopologyError(f"topology spec {spec!r}: fixed link costs; --alpha/--bandwidth do not apply")
            boxes = _parse_int(arg, spec) if arg else 2
            if boxes < 1:
                raise TopologyError(f"topology spec {spec!r}: needs at least one box")
            npus, switches, links, meta = nvs_ib_links(boxes)
            return Topology.create(npus, links, switches, spec, meta)
        if kind == "amd-z52" and not arg:
            return _z52(spec, alpha, bandwidth)
    except UnitError as exc:
        raise TopologyError(f"topology spec {spec!r}: {exc}") from None
    known = ", ".join(BUILDERS)
    raise TopologyError(f"unknown topology spec {spec!r} (known: {known}; or a .json/.yaml file)")


def expand_per_npu(spec: str, per_npu_bandwidths: Sequence[float]) -> list[float]:
    """Per-NPU dimension bandwidths (LIBRA's B_i) to the per-link values builders take.

    Ring: two links per NPU (one each way), each B/2 (a ring of 2 is one link each way: B);
    fully connected of n: n-1 links, each B/(n-1); switch: one port, B.
    """
    probe = build(spec)
    dims = probe.meta.get("dims")
    if not dims:
        raise TopologyError(f"topology spec {spec!r}: has no dimensions to expand per-NPU bandwidths onto")
    if len(per_npu_bandwidths) != len(dims):
        raise TopologyError(f"topology spec {spec!r}: {len(dims)} dimensions but {len(per_npu_bandwidths)} "
                            f"per-NPU bandwidths")
    result = []
    for dim, bandwidth in zip(dims, per_npu_bandwidths):
        size = dim["size"]
        if dim["kind"] == "ring":
            result.append(bandwidth if size <= 2 else bandwidth / 2)
        elif dim["kind"] == "fc":
            result.append(bandwidth / max(size - 1, 1))
        else:
            result.append(bandwidth)
    return result
