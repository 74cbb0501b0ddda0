"""Fabrics whose switches reduce: HGX boxes with NVLink SHARP, rail fabrics with InfiniBand SHARP,
and a GB200 NVL72 domain (docs/clusters.md, "Switches that reduce").

``hgx:K[,nvls=off][,sharp][,rate=R]`` is ``rails:Kx8`` with its defaults (450 GB/s per direction per
GPU on NVLink, a 50 GB/s NIC per GPU, rail leaves, spines past 32 boxes) whose scale-up switches
(third-generation NVSwitch) reduce: an NVLS load-reduce sums one slice of every GPU's buffer in
the switch and returns it to the GPU that issued it, and a multicast store writes one GPU's slice
to every GPU (NVIDIA, "NVIDIA NVLink and NVSwitch", H100 NVLink SHARP; the ``multimem``
instructions of the PTX ISA). ``rate=R`` caps the rate at which a switch port streams a sum's
inputs in and the sum out (a simulator parameter of the hardware, ``reduce_rate``; absent: the
links' own). ``nvls=off`` is the same box without reduction or multicast (an A100-era NVSwitch).
``sharp`` makes the rail leaves and spines InfiniBand SHARP aggregation switches (Mellanox SHARP,
R. L. Graham et al., "Scalable Hierarchical Aggregation Protocol (SHArP)", COMHPC 2016): they sum
what their ports reduce into them, send the result down the aggregation tree to every member
(``sum_fanout``), and run at most 2 reduction trees at once (``reduce_trees``).

``nvl72[:nvls=off]`` is one GB200 NVL72 NVLink domain: 72 GPUs on one reducing switch node at
900 GB/s per direction per GPU (NVLink5, 1.8 TB/s counting both directions) and the scale-up
alpha of the rails builders (0.35 us GPU to GPU).
"""

from __future__ import annotations

from typing import NamedTuple

from workbench.topology.abilities import SwitchAbility
from workbench.topology.clusters import BOXES_PER_LEAF, SCALE_UP_ALPHA, RailsShape, rails, rails_size
from workbench.topology.edge_lists import Edges, Size, parse_int, per_dim, switch_edges
from workbench.topology.graph import Topology
from workbench.topology.link import TopologyError

__all__ = ["HgxShape", "parse_hgx", "hgx_size", "hgx", "parse_nvl72", "nvl72_size", "nvl72", "GPUS_PER_HGX",
           "NVL72_GPUS", "NVL72_BANDWIDTH", "SHARP_TREES"]

GPUS_PER_HGX = 8
NVL72_GPUS = 72
NVL72_BANDWIDTH = 900e9  # NVLink5: 1.8 TB/s per GPU counting both directions
SHARP_TREES = 2  # reduction trees a SHARP switch runs at once
HGX_USAGE = "hgx:K[,nvls=off][,sharp][,rate=R]"


class HgxShape(NamedTuple):
    """A parsed ``hgx:`` spec."""

    boxes: int
    nvls: bool
    sharp: bool
    rate: float | None


def _fail(spec: str, message: str) -> TopologyError:
    return TopologyError(f"topology spec {spec!r}: {message}")


def _nvls(spec: str, value: str) -> bool:
    if value.lower() not in ("on", "off"):
        raise _fail(spec, f"nvls must be on or off, got {value!r}")
    return value.lower() == "on"


def parse_hgx(spec: str, arg: str) -> HgxShape:
    """``K[,nvls=off][,sharp][,rate=R]`` of ``hgx:``, each wrong part named in one line."""
    from workbench.util.units import UnitError, parse_bandwidth

    head, *items = arg.split(",")
    boxes = parse_int(head.strip(), spec) if head.strip() else 1
    nvls, sharp, rate, seen = True, False, None, set()
    for item in items:
        key, equals, value = (part.strip() for part in item.partition("="))
        key = key.lower()
        if key in seen:
            raise _fail(spec, f"option {key} is given twice")
        seen.add(key)
        if key == "sharp" and not equals:
            sharp = True
        elif key == "nvls" and value:
            nvls = _nvls(spec, value)
        elif key == "rate" and value:
            try:
                rate = parse_bandwidth(value)
            except UnitError as exc:
                raise _fail(spec, f"rate: {exc}") from None
            if rate <= 0:
                raise _fail(spec, "rate must be positive")
        else:
            raise _fail(spec, f"unknown option {item.strip()!r} (expected {HGX_USAGE})")
    if rate is not None and not nvls:
        raise _fail(spec, "rate is the NVLS reduction rate; it needs nvls=on")
    return HgxShape(boxes, nvls, sharp, rate)


def _rails_shape(shape: HgxShape) -> RailsShape:
    return RailsShape(shape.boxes, GPUS_PER_HGX, BOXES_PER_LEAF, GPUS_PER_HGX, 1.0)


def hgx_size(shape: HgxShape) -> Size:
    """Exact: the rails fabric's."""
    return rails_size(_rails_shape(shape))


def hgx(spec: str, shape: HgxShape, alpha=None, bandwidth=None, overhead=None) -> Topology:
    """``hgx:K[,nvls=off][,sharp][,rate=R]`` (module docstring), from its parsed shape."""
    base = rails(spec, _rails_shape(shape), alpha, bandwidth, overhead)
    cluster = base.meta["cluster"]
    first = cluster["first_node"]
    scale_up = range(first["scale_up"], first["scale_up"] + shape.boxes)
    nvswitch = (SwitchAbility(reduce=True, reduce_rate=shape.rate) if shape.nvls
                else SwitchAbility(multicast=False))
    abilities = {node: nvswitch for node in scale_up}
    if shape.sharp:
        aggregation = SwitchAbility(reduce=True, sum_fanout=True, reduce_trees=SHARP_TREES)
        abilities.update((node, aggregation) for node in range(first["leaf"], base.num_nodes))
    meta = dict(base.meta)
    meta["cluster"] = {**cluster, "family": "hgx", "nvls": shape.nvls, "sharp": shape.sharp,
                       "nvls_rate": shape.rate}
    return Topology.create(base.num_npus, base.links, base.num_switches, spec, meta, abilities)


def parse_nvl72(spec: str, arg: str) -> bool:
    """``nvl72[:nvls=off]``: whether the switch reduces."""
    if not arg:
        return True
    key, equals, value = (part.strip() for part in arg.partition("="))
    if key.lower() != "nvls" or not equals:
        raise _fail(spec, f"unknown option {arg!r} (expected nvl72 or nvl72:nvls=off)")
    return _nvls(spec, value)


def nvl72_size(_: bool) -> Size:
    """Exact: 72 GPUs, one switch, a link each way per GPU."""
    return Size(NVL72_GPUS, NVL72_GPUS + 1, 2 * NVL72_GPUS)


def nvl72(spec: str, nvls: bool, alpha=None, bandwidth=None, overhead=None) -> Topology:
    """``nvl72[:nvls=off]`` (module docstring)."""
    (a,), (bw,), (o,) = (per_dim(alpha, 1, SCALE_UP_ALPHA, "alpha"), per_dim(bandwidth, 1, NVL72_BANDWIDTH, "bandwidth"),
                         per_dim(overhead, 1, 0.0, "overhead"))
    edges = Edges()
    switch_edges(edges, list(range(NVL72_GPUS)), NVL72_GPUS, a, bw, overhead=o)
    ability = SwitchAbility(reduce=True) if nvls else SwitchAbility(multicast=False)
    meta = {"dims": [{"kind": "switch", "size": NVL72_GPUS}], "cluster": {"family": "nvl72", "nvls": nvls}}
    return Topology.create(NVL72_GPUS, edges.links.values(), 1, spec, meta, {NVL72_GPUS: ability})
