"""Regular fabrics made of dimensions: rings, lines, fully connected groups, grids, switches, the
multi-dimensional ``md:``/``rfs:`` fabrics and the dragonfly. For each shape: ``parse_*`` reads the
argument of its spec (the part after ``kind:``) into typed values or raises a one-line
``TopologyError``; ``*_size`` bounds its NPUs, nodes and links from above before anything is built
(``workbench.util.size_guard``); the builder makes the ``Topology`` from the parsed values. The builder
table (``workbench.topology.builder_table``) ties them to their spec names.

Alpha, bandwidth and overhead are per dimension (``per_dim``: one value for all, or one each).
"""

from __future__ import annotations

import math
import re
from typing import Sequence

from workbench.topology.edge_lists import (Edges, Size, fc_edges, parse_int, per_dim, ring_edges, switch_edges,
                                           unwound_edges)
from workbench.topology.graph import DEFAULT_ALPHA, DEFAULT_BANDWIDTH, Topology, TopologyError

__all__ = ["Dim", "dim_costs", "parse_count", "single_dim", "single_dim_size", "parse_grid", "grid", "grid_size", "parse_switch",
           "switch", "switch_size", "parse_md", "parse_rfs", "multi_dim", "multi_dim_size", "parse_dragonfly",
           "dragonfly", "dragonfly_size"]

Dim = tuple[str, int, "int | None"]  # (kind: ring, fc or switch; size; switch degree when unwound)
Costs = Sequence[float] | float | None


def dim_costs(dims: int, alpha: Costs, bandwidth: Costs, overhead: Costs) -> tuple[list[float], list[float], list[float]]:
    """Alpha, bandwidth and overhead per dimension from the values given (the builders' defaults
    where none are)."""
    return (per_dim(alpha, dims, DEFAULT_ALPHA, "alpha"), per_dim(bandwidth, dims, DEFAULT_BANDWIDTH, "bandwidth"),
            per_dim(overhead, dims, 0.0, "overhead"))


def parse_count(spec: str, arg: str) -> int:
    """``N`` of ``ring:N``, ``uniring:N``, ``line:N`` and ``fc:N``."""
    return parse_int(arg, spec)


def single_dim_size(kind: str, n: int) -> Size:
    """Upper bounds for one dimension of ``n`` NPUs: two links per NPU, all pairs when fully connected."""
    return Size(n, n, n * max(n - 1, 0)) if kind == "fc" else Size(n, n, 2 * n)


def single_dim(kind: str, spec: str, n: int, alpha: Costs, bandwidth: Costs, overhead: Costs) -> Topology:
    """A ring (a ring of 2 is one link each way), one-way ring, line or fully connected group of ``n``."""
    (a,), (bw,), (o,) = dim_costs(1, alpha, bandwidth, overhead)
    edges = Edges()
    members = list(range(n))
    if kind == "ring":
        ring_edges(edges, members, a, bw, overhead=o)
    elif kind == "uniring":
        ring_edges(edges, members, a, bw, both=False, overhead=o)
    elif kind == "line":
        for i in range(n - 1):
            edges.add(i, i + 1, a, bw, overhead=o)
    elif kind == "fc":
        fc_edges(edges, members, a, bw, overhead=o)
    return Topology.create(n, edges.links.values(), 0, spec, {"dims": [{"kind": kind, "size": n}]})


def parse_grid(spec: str, arg: str) -> list[int]:
    """``AxB[xC]`` of ``mesh:`` and ``torus:``: one to three sizes."""
    sizes = [parse_int(s, spec) for s in arg.lower().split("x")]
    if len(sizes) not in (1, 2, 3):
        raise TopologyError(f"topology spec {spec!r}: expected AxB or AxBxC")
    return sizes


def grid_size(sizes: Sequence[int]) -> Size:
    """Upper bounds for a grid: two links per NPU and dimension."""
    n = math.prod(sizes)
    return Size(n, n, 2 * len(sizes) * n)


def grid(wrap: bool, spec: str, sizes: Sequence[int], alpha: Costs, bandwidth: Costs, overhead: Costs) -> Topology:
    """A mesh (``wrap`` False) or torus; dimension 0 fastest. Named ``mesh:``/``torus:`` and the
    argument as written."""
    alphas, bws, overheads = dim_costs(len(sizes), alpha, bandwidth, overhead)
    n = math.prod(sizes)
    strides = [math.prod(sizes[:k]) for k in range(len(sizes))]
    edges = Edges()
    for node in range(n):
        coords = [(node // strides[k]) % sizes[k] for k in range(len(sizes))]
        for k, size in enumerate(sizes):
            if size == 1:
                continue
            if coords[k] + 1 < size:
                edges.add(node, node + strides[k], alphas[k], bws[k], overhead=overheads[k])
            elif wrap and size > 2:
                edges.add(node, node - (size - 1) * strides[k], alphas[k], bws[k], overhead=overheads[k])
    kind = "torus" if wrap else "mesh"
    dims = [{"kind": "ring" if wrap else "line", "size": s} for s in sizes]
    return Topology.create(n, edges.links.values(), 0, f"{kind}:{spec.partition(':')[2]}", {"dims": dims})


def parse_switch(spec: str, arg: str) -> tuple[int, int | None]:
    """``N[@d]`` of ``switch:``: NPUs and, when unwound, the degree."""
    size_text, _, degree_text = arg.partition("@")
    n = parse_int(size_text, spec)
    return n, parse_int(degree_text, spec) if degree_text else None


def switch_size(shape: tuple[int, int | None]) -> Size:
    """Upper bounds for one switch: the switch node and 2 x degree links per NPU."""
    n, degree = shape
    return Size(n, n + 1, 2 * n * (degree or 1))


def switch(spec: str, shape: tuple[int, int | None], alpha: Costs, bandwidth: Costs, overhead: Costs) -> Topology:
    """N NPUs on one switch node, or with ``@d`` the switch unwound to direct links of degree d."""
    n, degree = shape
    (a,), (bw,), (o,) = dim_costs(1, alpha, bandwidth, overhead)
    edges = Edges()
    if degree is not None:
        unwound_edges(edges, list(range(n)), degree, a, bw, overhead=o)
        return Topology.create(n, edges.links.values(), 0, spec,
                               {"dims": [{"kind": "switch", "size": n, "degree": degree}]})
    switch_edges(edges, list(range(n)), n, a, bw, overhead=o)
    return Topology.create(n, edges.links.values(), 1, spec, {"dims": [{"kind": "switch", "size": n}]})


_DIM_TOKEN = re.compile(r"^([RFS])(\d+)(?:@(\d+))?$", re.IGNORECASE)


def _dims(spec: str, tokens: Sequence[str]) -> list[Dim]:
    dims: list[Dim] = []
    for token in tokens:
        match = _DIM_TOKEN.match(token.strip())
        if not match:
            raise TopologyError(f"topology spec {spec!r}: bad dimension {token!r} (use R<n>, F<n>, S<n> or S<n>@<d>)")
        kind = {"r": "ring", "f": "fc", "s": "switch"}[match.group(1).lower()]
        size = parse_int(match.group(2), spec)
        degree = int(match.group(3)) if match.group(3) else None
        if degree is not None and (kind != "switch" or degree < 1):
            raise TopologyError(f"topology spec {spec!r}: '@d' applies to switch dimensions, with d >= 1")
        dims.append((kind, size, degree))
    return dims


def parse_md(spec: str, arg: str) -> list[Dim]:
    """``R4,F8,S32[@d]`` of ``md:``: the dimensions, dimension 0 first (fastest)."""
    return _dims(spec, arg.split(","))


def parse_rfs(spec: str, arg: str) -> list[Dim]:
    """``AxBxC`` of ``rfs:``: read as ``md:RA,FB,SC``."""
    sizes = arg.lower().split("x")
    if len(sizes) != 3:
        raise TopologyError(f"topology spec {spec!r}: expected rfs:AxBxC")
    return _dims(spec, [f"R{sizes[0]}", f"F{sizes[1]}", f"S{sizes[2]}"])


def multi_dim_size(dims: Sequence[Dim]) -> Size:
    """Upper bounds: at most one switch per NPU, and per NPU 2 ring links, size-1 fully connected
    links or 2 x degree switch links for each dimension."""
    n = math.prod(size for _, size, _ in dims)
    per_npu = sum({"ring": 2, "fc": max(size - 1, 1), "switch": 2 * (degree or 1)}[kind]
                  for kind, size, degree in dims)
    return Size(n, 2 * n, per_npu * n)


def multi_dim(spec: str, dims: Sequence[Dim], alpha: Costs, bandwidth: Costs, overhead: Costs) -> Topology:
    """A fabric of ring, fully connected and switch dimensions, dimension 0 fastest; a switch
    dimension has one switch node per group unless unwound (``S<n>@<d>``)."""
    sizes = [d[1] for d in dims]
    alphas, bws, overheads = dim_costs(len(dims), alpha, bandwidth, overhead)
    n = math.prod(sizes)
    strides = [math.prod(sizes[:k]) for k in range(len(sizes))]
    edges = Edges()
    next_switch = n
    for k, (kind, size, degree) in enumerate(dims):
        if size == 1:
            continue
        for base in range(n):
            if (base // strides[k]) % size != 0:
                continue  # one group per base with coordinate k = 0
            members = [base + i * strides[k] for i in range(size)]
            if kind == "ring":
                ring_edges(edges, members, alphas[k], bws[k], overhead=overheads[k])
            elif kind == "fc":
                fc_edges(edges, members, alphas[k], bws[k], overhead=overheads[k])
            elif degree is not None:
                unwound_edges(edges, members, degree, alphas[k], bws[k], overhead=overheads[k])
            else:
                switch_edges(edges, members, next_switch, alphas[k], bws[k], overhead=overheads[k])
                next_switch += 1
    meta = {"dims": [{"kind": kind, "size": size, **({"degree": d} if d else {})} for kind, size, d in dims],
            "dim_alpha": alphas, "dim_bandwidth": bws}
    return Topology.create(n, edges.links.values(), next_switch - n, spec, meta)


def parse_dragonfly(spec: str, arg: str) -> tuple[int, int]:
    """``AxG`` of ``dragonfly:``: NPUs per group and groups."""
    parts = arg.lower().split("x")
    if len(parts) != 2:
        raise TopologyError(f"topology spec {spec!r}: expected dragonfly:AxG (NPUs per group x groups)")
    per_group, groups = (parse_int(p, spec) for p in parts)
    return per_group, groups


def dragonfly_size(shape: tuple[int, int]) -> Size:
    """Upper bounds: A links out of each NPU inside its group, G^2 global links."""
    per_group, groups = shape
    n = per_group * groups
    return Size(n, n, n * per_group + groups ** 2)


def dragonfly(spec: str, shape: tuple[int, int], alpha: Costs, bandwidth: Costs, overhead: Costs) -> Topology:
    """``dragonfly:AxG``: G groups of A NPUs; dim 0 (intra-group) fully connected, dim 1 global links.

    TACOS's DragonFly 4x5 (ambiguity A8) is read as 5 groups of 4 NPUs. Global links: one
    bidirectional link between every pair of groups. Group g reaches group (g+o) mod G (offset
    o = 1..G-1) through its NPU (o-1) mod A, which lands on NPU (G-o-1) mod A of the other group,
    so with A = G-1 every NPU owns exactly one global link. The wiring is not vertex-transitive,
    which is what makes the topology asymmetric.
    """
    per_group, groups = shape
    alphas, bws, overheads = dim_costs(2, alpha, bandwidth, overhead)
    edges = Edges()
    for g in range(groups):
        fc_edges(edges, [g * per_group + i for i in range(per_group)], alphas[0], bws[0], overhead=overheads[0])
    for g in range(groups):
        for offset in range(1, groups):
            h = (g + offset) % groups
            u = g * per_group + (offset - 1) % per_group
            v = h * per_group + (groups - offset - 1) % per_group
            edges.add(u, v, alphas[1], bws[1], both=False, overhead=overheads[1])
    meta = {"dims": [{"kind": "fc", "size": per_group}, {"kind": "global", "size": groups}]}
    return Topology.create(per_group * groups, edges.links.values(), 0, f"dragonfly:{spec.partition(':')[2]}", meta)
