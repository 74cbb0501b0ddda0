"""Clusters as they are built: rail-optimized GPU clusters, the k-ary fat tree and the two-tier
leaf-spine (docs/clusters.md).

``rails:BxG[,leaf=L][,spines=S][,over=R]``: B boxes of G GPUs. Every box has one scale-up switch
(NVSwitch) that all its GPUs reach (tier 0). Each GPU has its own NIC, and the NIC of local GPU i
of every box goes to a leaf of rail i (tier 1): the rail-optimized wiring of the NVIDIA DGX
SuperPOD reference architecture (RA-11333-001, DGX H100), where GPU i of every node of a scalable
unit shares one leaf. Up to L boxes (default 32, the reference architecture's scalable unit of 32
nodes) there is one leaf per rail and no spine; past L the boxes are cut into leaf groups of L
consecutive boxes (the last may be smaller), each group with its own G rail leaves, and every leaf
goes to each of S spines (tier 2; default S = G) with bandwidth (GPUs under the leaf x NIC
bandwidth) / (S x R): R = 1 is non-blocking, as the reference architecture's fat tree is (it
cables as many leaf-spine links as node-leaf links); ``over=2`` is 2:1. Parallel cables between a
leaf and a spine are one link with their summed bandwidth (as everywhere here), so S sets the path
diversity, not the capacity. Nothing assumes G = 8: ``rails:16x72`` is sixteen 72-GPU NVLink
domains in the style of GB200 NVL72 with rails between them.

``fattree:K[,over=R]``: the three-tier k-ary fat tree of Al-Fares, Loukissas and Vahdat, "A
Scalable, Commodity Data Center Network Architecture" (SIGCOMM 2008): K pods of K/2 edge and K/2
aggregation switches, (K/2)^2 core switches, K^3/4 hosts; ``over=R`` divides the edge-aggregation
and aggregation-core bandwidths by R. ``leafspine:LxPxS[,over=R]``: L leaves of P NPUs, every leaf
to every one of S spines at P x NPU bandwidth / (S x R).

Default link costs. Bandwidths are per link and per direction. Scale-up 450 GB/s: NVLink4 gives a
DGX H100 GPU 900 GB/s counting both directions (18 links of 50 GB/s). NIC 50 GB/s: one ConnectX-7
port at 400 Gb/s per GPU. The fat trees default to 50 GB/s on every tier (a 400 Gb/s port). Give
``--bandwidth`` for other parts (GB200 NVL72's NVLink5: 1.8 TB/s per GPU both ways, so 900 GB/s).

Alphas are ours, round figures rather than measurements: a tier's alpha is what a path through a
switch of that tier adds, split in half over the path's two links of the tier (as ``switch_edges``
does), and each link carries the tier's whole overhead (a message pays the larger of its segment's
links', once). Scale-up 0.35 us per GPU-NVSwitch-GPU path (the NVSwitch alpha the DGX-2 builders
already use). NIC tier 1 us per GPU-leaf-GPU path: two NICs (PCIe and the NIC's pipeline, a few
hundred ns each) and a cut-through switch hop. Each further switch tier 0.5 us per up-and-down
crossing: one more cut-through switch and two cables. A rails path between groups thus costs
0.5 + 0.5 (to and from the leaves) + 0.25 + 0.25 (leaf-spine-leaf) = 1.5 us; a fat tree path
between pods 1 + 0.5 + 0.5 = 2 us.

Node ids: NPUs first (rails: rank = box x G + local GPU; fat trees: leaf- or edge-major), then the
switches tier by tier: rails: the B scale-up switches, the leaves (group-major, then rail), the
spines; fattree: edge (pod-major), aggregation (pod-major), core (aggregation index-major);
leafspine: leaves, spines. ``meta["dims"]`` gives the mixed-radix NPU layout (dim 0 fastest),
``meta["dim_alpha"]`` / ``meta["dim_bandwidth"]`` the tiers' alpha and link bandwidth, and
``meta["cluster"]`` every parameter the build used.

Each family has a parser (``parse_rails`` ...: the spec's argument to a shape, every wrong part
named in one line), an exact size (``rails_size`` ...: what the size guard weighs before building)
and its build; the builder table (``workbench.topology.builder_table``) holds them together.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

from workbench.topology.edge_lists import Edges, Size, parse_int, switch_edges
from workbench.topology.graph import Topology, TopologyError

__all__ = ["rails", "fattree", "leafspine", "parse_rails", "parse_fattree", "parse_leafspine", "rails_size",
           "fattree_size", "leafspine_size", "RailsShape", "FatTreeShape", "LeafSpineShape", "BOXES_PER_LEAF", "SCALE_UP_BANDWIDTH", "NIC_BANDWIDTH",
           "FABRIC_BANDWIDTH", "SCALE_UP_ALPHA", "NIC_ALPHA", "SWITCH_TIER_ALPHA"]

BOXES_PER_LEAF = 32  # DGX SuperPOD scalable unit: 32 DGX H100 nodes under one set of rail leaves
SCALE_UP_BANDWIDTH = 450e9  # NVLink4: 900 GB/s per H100 GPU counting both directions
NIC_BANDWIDTH = 50e9  # ConnectX-7, 400 Gb/s per GPU
FABRIC_BANDWIDTH = 50e9  # a 400 Gb/s port on every fat-tree tier
SCALE_UP_ALPHA = 0.35e-6  # per GPU-NVSwitch-GPU path
NIC_ALPHA = 1.0e-6  # per NPU-NIC-leaf-NIC-NPU path
SWITCH_TIER_ALPHA = 0.5e-6  # per crossing of a further switch tier (up and down)

RAILS_TIERS = ("scale-up", "nic-leaf", "leaf-spine")
FATTREE_TIERS = ("host-edge", "edge-agg", "agg-core")
LEAFSPINE_TIERS = ("npu-leaf", "leaf-spine")


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 58 else repr(text[:50]) + "..."


def _fail(spec: str, message: str) -> TopologyError:
    return TopologyError(f"topology spec {_shown(spec)}: {message}")


def _options(spec: str, arg: str, allowed: tuple[str, ...], usage: str) -> tuple[str, dict[str, str]]:
    """The head of ``kind:head[,key=value...]`` and its options; unknown, repeated or malformed
    options are refused naming the option."""
    head, *items = arg.split(",")
    found: dict[str, str] = {}
    for item in items:
        key, equals, value = item.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not equals or not key or not value:
            raise _fail(spec, f"option {_shown(item)} is not key=value (expected {usage})")
        if key not in allowed:
            raise _fail(spec, f"unknown option {_shown(key)} (expected one of: {', '.join(allowed)})")
        if key in found:
            raise _fail(spec, f"option {key} is given twice")
        found[key] = value
    return head.strip(), found


def _count(spec: str, field: str, text: str) -> int:
    try:
        return parse_int(text, spec)
    except TopologyError:
        raise _fail(spec, f"{field} must be a positive integer, got {_shown(text)}") from None


def _sizes(spec: str, head: str, fields: Sequence[str], usage: str) -> list[int]:
    parts = head.lower().split("x")
    if len(parts) != len(fields):
        raise _fail(spec, f"expected {usage}")
    return [_count(spec, field, part.strip()) for field, part in zip(fields, parts)]


def _oversubscription(spec: str, options: dict[str, str]) -> float:
    text = options.get("over")
    if text is None:
        return 1.0
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 1):
        raise _fail(spec, f"over (oversubscription) must be a number >= 1 (2 for 2:1), got {_shown(text)}")
    return value


def _checked(spec: str, values: list, tiers: Sequence[str], what: str) -> list:
    for tier, value in zip(tiers, values):
        if value is None:
            continue
        if what == "bandwidth" and not (math.isfinite(value) and value > 0):
            raise _fail(spec, f"--bandwidth of the {tier} tier must be positive, got {value!r}")
        if what != "bandwidth" and not (math.isfinite(value) and value >= 0):
            raise _fail(spec, f"--{what} of the {tier} tier must be non-negative, got {value!r}")
    return values


def _tiers(spec: str, values: Sequence[float] | float | None, tiers: Sequence[str], defaults: Sequence[float | None],
           what: str, strict: bool = False) -> list[float | None]:
    """Per-tier values: none given: ``defaults``; one: every tier but a computed one (default
    None); more: the first tiers, the rest keep their defaults (``strict``: one or all, as
    ``per_dim`` asks of dimensions)."""
    if values is None:
        return _checked(spec, list(defaults), tiers, what)
    given = [float(values)] if isinstance(values, (int, float)) else [float(v) for v in values]
    if not 1 <= len(given) <= len(tiers) or (strict and len(given) not in (1, len(tiers))):
        counts = f"1 or {len(tiers)}" if strict else f"1 to {len(tiers)}"
        raise _fail(spec, f"--{what}: expected {counts} values ({', '.join(tiers)}), got {len(given)}")
    if len(given) == 1:
        result = [given[0] if default is not None else None for default in defaults]
    else:
        result = given + list(defaults[len(given):])
    return _checked(spec, result, tiers, what)


class RailsShape(NamedTuple):
    """A parsed ``rails:`` spec: ``spines`` as given or defaulted (G), before the build drops it
    for a single leaf group."""

    boxes: int
    gpus: int
    per_leaf: int
    spines: int
    over: float


class FatTreeShape(NamedTuple):
    """A parsed ``fattree:`` spec."""

    k: int
    over: float


class LeafSpineShape(NamedTuple):
    """A parsed ``leafspine:`` spec."""

    leaves: int
    per_leaf: int
    spines: int
    over: float


def parse_rails(spec: str, arg: str) -> RailsShape:
    """``BxG[,leaf=L][,spines=S][,over=R]`` of ``rails:``, each wrong part named in one line."""
    usage = "rails:BxG[,leaf=L][,spines=S][,over=R]"
    head, options = _options(spec, arg, ("leaf", "spines", "over"), usage)
    boxes, gpus = _sizes(spec, head, ("boxes (B)", "GPUs per box (G)"), f"{usage} (boxes x GPUs per box)")
    per_leaf = _count(spec, "leaf (boxes per leaf)", options["leaf"]) if "leaf" in options else BOXES_PER_LEAF
    spines = _count(spec, "spines", options["spines"]) if "spines" in options else gpus
    return RailsShape(boxes, gpus, per_leaf, spines, _oversubscription(spec, options))


def rails_size(shape: RailsShape) -> Size:
    """Exact NPUs, nodes and links: scale-up switches, G leaves per group, spines only past one
    group; 4 links per GPU and 2 per leaf-spine pair."""
    boxes, gpus, per_leaf, spines, _ = shape
    groups = -(-boxes // per_leaf)
    spines = spines if groups > 1 else 0
    n = boxes * gpus
    return Size(n, n + boxes + groups * gpus + spines, 4 * n + 2 * groups * gpus * spines)


def rails(spec: str, shape: RailsShape, alpha=None, bandwidth=None, overhead=None) -> Topology:
    """``rails:BxG[,leaf=L][,spines=S][,over=R]`` (module docstring), from its parsed shape."""
    boxes, gpus, per_leaf, spines, over = shape
    alphas = _tiers(spec, alpha, RAILS_TIERS, (SCALE_UP_ALPHA, NIC_ALPHA, SWITCH_TIER_ALPHA), "alpha")
    bws = _tiers(spec, bandwidth, RAILS_TIERS, (SCALE_UP_BANDWIDTH, NIC_BANDWIDTH, None), "bandwidth")
    overheads = _tiers(spec, overhead, RAILS_TIERS, (0.0, 0.0, 0.0), "overhead")
    groups = -(-boxes // per_leaf)
    layered = groups > 1  # more boxes than one leaf takes: leaf groups under a spine tier
    group_boxes = [min(per_leaf, boxes - g * per_leaf) for g in range(groups)]
    if not layered:
        spines, over = 0, 1.0
    n = boxes * gpus
    first_leaf = n + boxes
    first_spine = first_leaf + groups * gpus
    uplinks = [bws[2] if bws[2] is not None else size * bws[1] / (spines * over) for size in group_boxes] \
        if layered else []
    edges = Edges()
    for box in range(boxes):
        switch_edges(edges, range(box * gpus, (box + 1) * gpus), n + box, alphas[0], bws[0], overheads[0])
    for g, size in enumerate(group_boxes):
        members = range(g * per_leaf, g * per_leaf + size)
        for rail in range(gpus):
            leaf = first_leaf + g * gpus + rail
            switch_edges(edges, [box * gpus + rail for box in members], leaf, alphas[1], bws[1], overheads[1])
            for s in range(spines):
                edges.add(leaf, first_spine + s, alphas[2] / 2, uplinks[g], overhead=overheads[2])
    built = len(RAILS_TIERS) if layered else 2
    tier_bandwidth = [bws[0], bws[1]] + uplinks[:1]
    cluster = {
        "family": "rails", "npus": n, "boxes": boxes, "gpus_per_box": gpus, "rails": gpus,
        "boxes_per_leaf": per_leaf, "leaf_groups": groups, "group_boxes": group_boxes, "leaves": groups * gpus,
        "spines": spines, "oversubscription": over, "scale_up_switches": boxes,
        "tiers": list(RAILS_TIERS[:built]),
        "tier_bandwidth": dict(zip(RAILS_TIERS, tier_bandwidth)),
        "tier_alpha": dict(zip(RAILS_TIERS[:built], alphas)),
        "tier_overhead": dict(zip(RAILS_TIERS[:built], overheads)),
        "leaf_spine_bandwidth": uplinks, "leaf_spine_bandwidth_given": layered and bws[2] is not None,
        "first_node": {"scale_up": n, "leaf": first_leaf, **({"spine": first_spine} if layered else {})},
    }
    meta = {"dims": [{"kind": "switch", "size": gpus}, {"kind": "rail", "size": boxes}],
            "dim_alpha": alphas[:built], "dim_bandwidth": tier_bandwidth, "cluster": cluster}
    return Topology.create(n, edges.links.values(), first_spine + spines - n, spec, meta)


def parse_fattree(spec: str, arg: str) -> FatTreeShape:
    """``K[,over=R]`` of ``fattree:``; K must be even."""
    head, options = _options(spec, arg, ("over",), "fattree:K[,over=R]")
    (k,) = _sizes(spec, head, ("K (ports per switch)",), "fattree:K[,over=R]")
    if k % 2:
        raise _fail(spec, f"K (ports per switch) must be even (K/2 ports down, K/2 up), got {k}")
    return FatTreeShape(k, _oversubscription(spec, options))


def fattree_size(shape: FatTreeShape) -> Size:
    """Exact: K^3/4 hosts, K^2 edge and aggregation and (K/2)^2 core switches; host-edge,
    edge-aggregation and aggregation-core give 2 links per host each."""
    k = shape.k
    n = k * (k // 2) ** 2
    return Size(n, n + k * k + (k // 2) ** 2, 6 * n)


def fattree(spec: str, shape: FatTreeShape, alpha=None, bandwidth=None, overhead=None) -> Topology:
    """``fattree:K[,over=R]``: the three-tier k-ary fat tree (module docstring), from its parsed shape."""
    k, over = shape
    alphas = _tiers(spec, alpha, FATTREE_TIERS, (NIC_ALPHA, SWITCH_TIER_ALPHA, SWITCH_TIER_ALPHA), "alpha", True)
    given = _tiers(spec, bandwidth, FATTREE_TIERS, (FABRIC_BANDWIDTH,) * 3, "bandwidth", True)
    overheads = _tiers(spec, overhead, FATTREE_TIERS, (0.0,) * 3, "overhead", True)
    bws = [given[0], given[1] / over, given[2] / over]
    half = k // 2
    n = k * half * half  # K^3/4 hosts
    edge = lambda pod, e: n + pod * half + e  # noqa: E731 - node-id helpers read better inline
    agg = lambda pod, a: n + k * half + pod * half + a  # noqa: E731
    core = lambda a, j: n + k * k + a * half + j  # noqa: E731
    edges = Edges()
    for pod in range(k):
        for e in range(half):
            hosts = range((pod * half + e) * half, (pod * half + e + 1) * half)
            switch_edges(edges, hosts, edge(pod, e), alphas[0], bws[0], overheads[0])
            for a in range(half):
                edges.add(edge(pod, e), agg(pod, a), alphas[1] / 2, bws[1], overhead=overheads[1])
        for a in range(half):
            for j in range(half):
                edges.add(agg(pod, a), core(a, j), alphas[2] / 2, bws[2], overhead=overheads[2])
    cluster = {
        "family": "fattree", "npus": n, "k": k, "pods": k, "hosts_per_edge": half, "edge_per_pod": half,
        "aggregation_per_pod": half, "edge_switches": k * half, "aggregation_switches": k * half,
        "core_switches": half * half, "oversubscription": over, "tiers": list(FATTREE_TIERS),
        "tier_bandwidth": dict(zip(FATTREE_TIERS, bws)), "tier_alpha": dict(zip(FATTREE_TIERS, alphas)),
        "tier_overhead": dict(zip(FATTREE_TIERS, overheads)),
        "first_node": {"edge": n, "aggregation": n + k * half, "core": n + k * k},
    }
    meta = {"dims": [{"kind": "switch", "size": half}, {"kind": "pod_edge", "size": half},
                     {"kind": "pod", "size": k}],
            "dim_alpha": alphas, "dim_bandwidth": bws, "cluster": cluster}
    return Topology.create(n, edges.links.values(), k * k + half * half, spec, meta)


def parse_leafspine(spec: str, arg: str) -> LeafSpineShape:
    """``LxPxS[,over=R]`` of ``leafspine:``."""
    usage = "leafspine:LxPxS[,over=R]"
    head, options = _options(spec, arg, ("over",), usage)
    leaves, per_leaf, spines = _sizes(spec, head, ("leaves (L)", "NPUs per leaf (P)", "spines (S)"),
                                      f"{usage} (leaves x NPUs per leaf x spines)")
    return LeafSpineShape(leaves, per_leaf, spines, _oversubscription(spec, options))


def leafspine_size(shape: LeafSpineShape) -> Size:
    """Exact: L leaves and S spines; 2 links per NPU and per leaf-spine pair."""
    leaves, per_leaf, spines, _ = shape
    n = leaves * per_leaf
    return Size(n, n + leaves + spines, 2 * n + 2 * leaves * spines)


def leafspine(spec: str, shape: LeafSpineShape, alpha=None, bandwidth=None, overhead=None) -> Topology:
    """``leafspine:LxPxS[,over=R]``: a two-tier fat tree (module docstring), from its parsed shape."""
    leaves, per_leaf, spines, over = shape
    alphas = _tiers(spec, alpha, LEAFSPINE_TIERS, (NIC_ALPHA, SWITCH_TIER_ALPHA), "alpha")
    bws = _tiers(spec, bandwidth, LEAFSPINE_TIERS, (FABRIC_BANDWIDTH, None), "bandwidth")
    overheads = _tiers(spec, overhead, LEAFSPINE_TIERS, (0.0, 0.0), "overhead")
    uplink = bws[1] if bws[1] is not None else per_leaf * bws[0] / (spines * over)
    n = leaves * per_leaf
    edges = Edges()
    for leaf in range(leaves):
        switch_edges(edges, range(leaf * per_leaf, (leaf + 1) * per_leaf), n + leaf, alphas[0], bws[0], overheads[0])
        for s in range(spines):
            edges.add(n + leaf, n + leaves + s, alphas[1] / 2, uplink, overhead=overheads[1])
    cluster = {
        "family": "leafspine", "npus": n, "leaves": leaves, "npus_per_leaf": per_leaf, "spines": spines,
        "oversubscription": over, "tiers": list(LEAFSPINE_TIERS),
        "tier_bandwidth": dict(zip(LEAFSPINE_TIERS, [bws[0], uplink])),
        "tier_alpha": dict(zip(LEAFSPINE_TIERS, alphas)), "tier_overhead": dict(zip(LEAFSPINE_TIERS, overheads)),
        "leaf_spine_bandwidth_given": bws[1] is not None, "first_node": {"leaf": n, "spine": n + leaves},
    }
    meta = {"dims": [{"kind": "switch", "size": per_leaf}, {"kind": "leaves", "size": leaves}],
            "dim_alpha": alphas, "dim_bandwidth": [bws[0], uplink], "cluster": cluster}
    return Topology.create(n, edges.links.values(), leaves + spines, spec, meta)
