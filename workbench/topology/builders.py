"""Topology builders: spec strings (``ring:8``, ``mesh:4x4``, ``md:R2,F4,S8``, ``dgx1``, ``ndv2:4``,
``rails:64x8`` ...) to ``Topology`` objects, and ``load_topology`` for a spec or a ``{nodes, links}`` file.

``BUILDERS`` lists every spec with one line of description (``workbench builders``). Vendor systems
follow the papers that describe them (DGX-1 in SCCL's and msccl-tools' numbering; NDv2, DGX-2 and
AMD MI250 with TE-CCL's and TACCL's link costs). Every request passes the size guard before it is
built. Clusters as they are built (rail-optimized GPU clusters, fat trees) are in
``workbench.topology.clusters``; they take alpha, bandwidth and overhead per switch tier.

A per-message ``overhead`` (docs/cost-model.md) is given like ``alpha``, per dimension; it defaults
to 0. A switch dimension gives both links of an NPU-switch-NPU path the whole overhead (a message
pays the larger of its segment's links', once), where alpha is halved between them. Builders
without dimensions (the vendor systems) take one overhead for every link.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Sequence

from workbench.topology.edge_lists import (Edges, check_spec_numbers, fc_edges, parse_int, per_dim, ring_edges,
                                           switch_edges, unwound_edges)
from workbench.topology.systems import amd, dgx1, dgx2, dgx2_nic, ndv2, ndv2_nic, z52
from workbench.topology.graph import DEFAULT_ALPHA, DEFAULT_BANDWIDTH, Topology, TopologyError, topology_from_dict
from workbench.units import UnitError

__all__ = ["build", "load_topology", "BUILDERS", "expand_per_npu"]


def load_topology(
    spec_or_path: str | Path,
    alpha: Sequence[float] | float | None = None,
    bandwidth: Sequence[float] | float | None = None,
    overhead: Sequence[float] | float | None = None,
) -> Topology:
    """A topology from a builder spec string or a YAML/JSON file path (a file carries its own link
    costs; ``alpha``, ``bandwidth`` and ``overhead`` apply to specs)."""
    from workbench import size_guard

    text = str(spec_or_path)
    path = Path(text)
    if path.suffix.lower() in (".json", ".yaml", ".yml"):
        from workbench.safe_load import load_file

        if path.is_file():  # parsed text and built objects: ~30 bytes per byte of file
            _guard(size_guard, text, 30.0 * path.stat().st_size)
        # a FIFO, folder or device, a binary file, duplicate keys, an alias bomb: one line each
        data = load_file(path, "topology file", TopologyError)
        if isinstance(data, dict) and isinstance(data.get("nodes"), list):  # node pairs grow as its nodes squared
            nodes, links = len(data["nodes"]), len(data["links"]) if isinstance(data.get("links"), list) else 0
            _guard(size_guard, f"{text}: {nodes:,} nodes and {links:,} links",
                   size_guard.Estimate(nodes, nodes, 2 * links).bytes())  # 2: a link may be bidirectional
        return topology_from_dict(data, source=text)
    check_spec_numbers(text)  # before the size guard reads them: a 100,000-digit size is one line
    size = size_guard.spec_size(text)
    if size is not None:
        _guard(size_guard, text, size.bytes())
    return build(text, alpha=alpha, bandwidth=bandwidth, overhead=overhead)


def _guard(size_guard, what: str, needed: float) -> None:
    try:
        size_guard.check(what, needed)
    except size_guard.SizeError as exc:
        raise TopologyError(str(exc)) from None


def _grid(spec: str, arg: str, wrap: bool, alpha, bandwidth, overhead) -> Topology:
    sizes = [parse_int(s, spec) for s in arg.lower().split("x")]
    if len(sizes) not in (1, 2, 3):
        raise TopologyError(f"topology spec {spec!r}: expected AxB or AxBxC")
    alphas = per_dim(alpha, len(sizes), DEFAULT_ALPHA, "alpha")
    bws = per_dim(bandwidth, len(sizes), DEFAULT_BANDWIDTH, "bandwidth")
    overheads = per_dim(overhead, len(sizes), 0.0, "overhead")
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
    return Topology.create(n, edges.links.values(), 0, f"{kind}:{arg}", {"dims": dims})


_DIM_TOKEN = re.compile(r"^([RFS])(\d+)(?:@(\d+))?$", re.IGNORECASE)


def _multi_dim(spec: str, tokens: Sequence[str], alpha, bandwidth, overhead, name: str) -> Topology:
    dims = []
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
    sizes = [d[1] for d in dims]
    alphas = per_dim(alpha, len(dims), DEFAULT_ALPHA, "alpha")
    bws = per_dim(bandwidth, len(dims), DEFAULT_BANDWIDTH, "bandwidth")
    overheads = per_dim(overhead, len(dims), 0.0, "overhead")
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
    return Topology.create(n, edges.links.values(), next_switch - n, name, meta)


def _dragonfly(spec: str, arg: str, alpha, bandwidth, overhead) -> Topology:
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
    per_group, groups = (parse_int(p, spec) for p in parts)
    alphas = per_dim(alpha, 2, DEFAULT_ALPHA, "alpha")
    bws = per_dim(bandwidth, 2, DEFAULT_BANDWIDTH, "bandwidth")
    overheads = per_dim(overhead, 2, 0.0, "overhead")
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
    return Topology.create(per_group * groups, edges.links.values(), 0, f"dragonfly:{arg}", meta)


def _single_dim(spec: str, kind: str, arg: str, alpha, bandwidth, overhead) -> Topology:
    n = parse_int(arg, spec)
    a = per_dim(alpha, 1, DEFAULT_ALPHA, "alpha")[0]
    bw = per_dim(bandwidth, 1, DEFAULT_BANDWIDTH, "bandwidth")[0]
    o = per_dim(overhead, 1, 0.0, "overhead")[0]
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


def _switch(spec: str, arg: str, alpha, bandwidth, overhead) -> Topology:
    size_text, _, degree_text = arg.partition("@")
    n = parse_int(size_text, spec)
    a = per_dim(alpha, 1, DEFAULT_ALPHA, "alpha")[0]
    bw = per_dim(bandwidth, 1, DEFAULT_BANDWIDTH, "bandwidth")[0]
    o = per_dim(overhead, 1, 0.0, "overhead")[0]
    edges = Edges()
    if degree_text:
        unwound_edges(edges, list(range(n)), parse_int(degree_text, spec), a, bw, overhead=o)
        return Topology.create(n, edges.links.values(), 0, spec,
                               {"dims": [{"kind": "switch", "size": n, "degree": int(degree_text)}]})
    switch_edges(edges, list(range(n)), n, a, bw, overhead=o)
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
    "rails:BxG[,leaf=L][,spines=S][,over=R]": "B boxes of G GPUs, a scale-up switch per box, GPU i on rail i's "
                                              "leaf; past L=32 boxes leaf groups under S=G spines, R:1",
    "fattree:K[,over=R]": "three-tier k-ary fat tree: K pods, K^3/4 NPUs, (K/2)^2 cores; R:1 above the edge",
    "leafspine:LxPxS[,over=R]": "L leaves of P NPUs, every leaf on each of S spines (R:1 oversubscribed)",
}


def build(
    spec: str,
    alpha: Sequence[float] | float | None = None,
    bandwidth: Sequence[float] | float | None = None,
    overhead: Sequence[float] | float | None = None,
) -> Topology:
    """Build a topology from a spec string (see ``BUILDERS``); alpha/bandwidth/overhead per
    dimension (one overhead for every link of a vendor system)."""
    spec = spec.strip()
    check_spec_numbers(spec)
    kind, _, arg = spec.partition(":")
    kind = kind.lower()
    try:
        if kind in ("ring", "uniring", "line", "fc"):
            return _single_dim(spec, kind, arg, alpha, bandwidth, overhead)
        if kind in ("mesh", "torus"):
            return _grid(spec, arg, kind == "torus", alpha, bandwidth, overhead)
        if kind == "switch":
            return _switch(spec, arg, alpha, bandwidth, overhead)
        if kind == "md":
            return _multi_dim(spec, arg.split(","), alpha, bandwidth, overhead, spec)
        if kind == "rfs":
            sizes = arg.lower().split("x")
            if len(sizes) != 3:
                raise TopologyError(f"topology spec {spec!r}: expected rfs:AxBxC")
            tokens = [f"R{sizes[0]}", f"F{sizes[1]}", f"S{sizes[2]}"]
            return _multi_dim(spec, tokens, alpha, bandwidth, overhead, spec)
        if kind == "dragonfly":
            return _dragonfly(spec, arg, alpha, bandwidth, overhead)
        if kind in ("dgx1", "dgx1-msccl") and not arg:
            return _uniform_overhead(dgx1(spec, "sccl" if kind == "dgx1" else "msccl", alpha, bandwidth), overhead)
        if kind in ("ndv2", "ndv2-taccl", "dgx2", "dgx2-taccl", "amd", "ndv2-nic", "ndv2-taccl-nic", "dgx2-nic",
                    "dgx2-taccl-nic"):
            chassis = parse_int(arg, spec) if arg else 1
            if kind != "amd" and (alpha is not None or bandwidth is not None):
                raise TopologyError(f"topology spec {spec!r}: fixed link costs; --alpha/--bandwidth do not apply")
            variant = "taccl" if "-taccl" in kind else "teccl"
            if kind.endswith("-nic"):
                system = (ndv2_nic if kind.startswith("ndv2") else dgx2_nic)(spec, chassis, variant)
            elif kind.startswith("ndv2"):
                system = ndv2(spec, chassis, variant)
            elif kind.startswith("dgx2"):
                system = dgx2(spec, chassis, variant)
            else:
                system = amd(spec, chassis, alpha)
            return _uniform_overhead(system, overhead)
        if kind == "nvs-ib":
            from workbench.topology.fabrics import nvs_ib_links

            if alpha is not None or bandwidth is not None:
                raise TopologyError(f"topology spec {spec!r}: fixed link costs; --alpha/--bandwidth do not apply")
            boxes = parse_int(arg, spec) if arg else 2
            if boxes < 1:
                raise TopologyError(f"topology spec {spec!r}: needs at least one box")
            npus, switches, links, meta = nvs_ib_links(boxes)
            return _uniform_overhead(Topology.create(npus, links, switches, spec, meta), overhead)
        if kind == "amd-z52" and not arg:
            return _uniform_overhead(z52(spec, alpha, bandwidth), overhead)
        if kind in ("rails", "fattree", "leafspine"):
            from workbench.topology import clusters

            return getattr(clusters, kind)(spec, arg, alpha, bandwidth, overhead)
    except UnitError as exc:
        raise TopologyError(f"topology spec {spec!r}: {exc}") from None
    known = ", ".join(BUILDERS)
    shown = spec if len(spec) <= 60 else spec[:50] + "..."
    raise TopologyError(f"unknown topology spec {shown!r} (known: {known}; or a .json/.yaml file)")


def _uniform_overhead(topology: Topology, overhead: Sequence[float] | float | None) -> Topology:
    """A vendor system with one per-message overhead on every link (none given: unchanged)."""
    value = per_dim(overhead, 1, 0.0, "overhead")[0]
    return topology.with_uniform(overhead=value) if value else topology


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
