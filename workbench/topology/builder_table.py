"""The builder table: every topology spec kind (``ring:8``, ``md:R2,F4,S8``, ``ndv2:4``,
``rails:64x8`` ...) as one ``Builder`` entry holding its names, its usage and help line, its parser
(the argument after ``kind:`` to typed values, or a one-line ``TopologyError`` naming what is
wrong), its size estimate (NPUs, nodes and links before anything is built) and its build.

Everything that reads a spec reads it here: ``workbench.topology.builders`` builds through
``parse_spec``, ``spec_size`` prices ``estimate`` as the size guard's ``Estimate`` (so an oversized
request is refused before it eats memory), the config checks build through ``load_topology``, and
``workbench builders`` lists ``help_lines``. A new builder is one more entry.

Size estimates are upper bounds (the clusters' are exact, marked ``exact``); vendor systems of a
fixed size have none. An omitted chassis count is estimated as 2 chassis, above the 1 that is
built, as ``nvs-ib``'s default of 2 boxes is.

Vendor systems and ``nvs-ib`` have fixed link costs: ``--alpha``/``--bandwidth`` are refused
(AMD's chassis take an alpha), and one ``overhead`` applies to every link.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Sequence

from workbench.topology import clusters, reducing, shapes
from workbench.topology.edge_lists import Size, check_spec_numbers, parse_int, per_dim
from workbench.topology.graph import Topology, TopologyError
from workbench.topology.systems import amd, dgx1, dgx2, dgx2_nic, ndv2, ndv2_nic, z52
from workbench.util.size_guard import Estimate
from workbench.util.units import UnitError

__all__ = ["Builder", "ParsedSpec", "Size", "TABLE", "parse_spec", "estimate", "spec_size", "help_lines",
           "known_names"]

Costs = Sequence[float] | float | None


@dataclass(frozen=True)
class Builder:
    """One spec kind. ``parse(spec, arg)`` gives the typed arguments ``build(spec, args, alpha,
    bandwidth, overhead)`` and ``size(args)`` take; ``names`` are the kinds it answers to (lower
    case), ``usage`` and ``help`` its line in ``workbench builders``; ``examples`` are specs it
    builds (the tests build each and compare with ``size``)."""

    names: tuple[str, ...]
    usage: str
    help: str
    parse: Callable[[str, str], Any]
    build: Callable[..., Topology]
    size: Callable[[Any], Size] | None
    examples: tuple[str, ...]
    exact: bool = False  # the size is the built topology's, not only a bound


@dataclass(frozen=True)
class ParsedSpec:
    """A spec read by its builder: ``spec`` stripped, as topologies are named after it."""

    spec: str
    builder: Builder
    args: Any

    def size(self) -> Size | None:
        """The builder's estimate for these arguments (None for a fixed-size system)."""
        return None if self.builder.size is None else self.builder.size(self.args)

    def build(self, alpha: Costs = None, bandwidth: Costs = None, overhead: Costs = None) -> Topology:
        """The topology; alpha/bandwidth/overhead per dimension (one overhead for every link of a
        vendor system)."""
        try:
            return self.builder.build(self.spec, self.args, alpha, bandwidth, overhead)
        except UnitError as exc:
            raise TopologyError(f"topology spec {self.spec!r}: {exc}") from None


# ------------------------------------------------------------------ vendor systems and nvs-ib
def _no_argument(spec: str, arg: str) -> None:
    """A system of a fixed size takes nothing after its name (``dgx1:`` is ``dgx1``)."""
    if arg:
        kind = spec.partition(":")[0].lower()
        raise TopologyError(f"topology spec {_shown(spec)}: {kind} is one fixed system and takes no ':' argument "
                            f"(see `workbench builders`)")


def _optional_count(spec: str, arg: str) -> int | None:
    """``K`` of ``ndv2:K`` and the like; None when omitted."""
    return parse_int(arg, spec) if arg else None


def _chassis_size(count: int | None) -> Size:
    """Upper bounds for K chassis (or boxes): 16 NPUs, 34 nodes and 600 links each, and K^2 for
    the fabric between them."""
    k = 2 if count is None else count
    return Size(16 * k, 34 * k + 2, 600 * k + 16 * k * k)


def _fixed_costs(spec: str, alpha: Costs, bandwidth: Costs) -> None:
    if alpha is not None or bandwidth is not None:
        raise TopologyError(f"topology spec {spec!r}: fixed link costs; --alpha/--bandwidth do not apply")


def _uniform_overhead(topology: Topology, overhead: Costs) -> Topology:
    """A vendor system with one per-message overhead on every link (none given: unchanged)."""
    value = per_dim(overhead, 1, 0.0, "overhead")[0]
    return topology.with_uniform(overhead=value) if value else topology


def _dgx1(numbering: str, spec: str, _: None, alpha: Costs, bandwidth: Costs, overhead: Costs) -> Topology:
    return _uniform_overhead(dgx1(spec, numbering, alpha, bandwidth), overhead)


def _z52(spec: str, _: None, alpha: Costs, bandwidth: Costs, overhead: Costs) -> Topology:
    return _uniform_overhead(z52(spec, alpha, bandwidth), overhead)


_CHASSIS = {"ndv2": ndv2, "dgx2": dgx2, "ndv2-nic": ndv2_nic, "dgx2-nic": dgx2_nic}


def _chassis(family: str, variant: str, spec: str, count: int | None, alpha: Costs, bandwidth: Costs,
             overhead: Costs) -> Topology:
    """K chassis of ``family`` with TE-CCL's (``teccl``) or TACCL's (``taccl``) link costs."""
    _fixed_costs(spec, alpha, bandwidth)
    return _uniform_overhead(_CHASSIS[family](spec, count or 1, variant), overhead)


def _amd(spec: str, count: int | None, alpha: Costs, bandwidth: Costs, overhead: Costs) -> Topology:
    """AMD chassis take an alpha; their bandwidths are the paper's (a given one is not used)."""
    return _uniform_overhead(amd(spec, count or 1, alpha), overhead)


def _nic(family: str, spec: str, count: int | None, alpha: Costs, bandwidth: Costs, overhead: Costs) -> Topology:
    """``ndv2-nic``/``dgx2-nic`` and their ``-taccl-`` variants: the cost variant is in the name."""
    variant = "taccl" if "-taccl" in spec.partition(":")[0].lower() else "teccl"
    return _chassis(family, variant, spec, count, alpha, bandwidth, overhead)


def _nvs_ib(spec: str, count: int | None, alpha: Costs, bandwidth: Costs, overhead: Costs) -> Topology:
    from workbench.topology.fabrics import nvs_ib_links

    _fixed_costs(spec, alpha, bandwidth)
    npus, switches, links, meta = nvs_ib_links(2 if count is None else count)
    return _uniform_overhead(Topology.create(npus, links, switches, spec, meta), overhead)


# ------------------------------------------------------------------ the table
def _single(kind: str, usage: str, text: str, examples: tuple[str, ...]) -> Builder:
    return Builder((kind,), usage, text, shapes.parse_count, partial(shapes.single_dim, kind),
                   partial(shapes.single_dim_size, kind), examples)


def _vendor(family: str, variant: str, names: tuple[str, ...], usage: str, text: str,
            examples: tuple[str, ...]) -> Builder:
    return Builder(names, usage, text, _optional_count, partial(_chassis, family, variant), _chassis_size, examples)


# Listed in the order ``workbench builders`` prints them.
TABLE: tuple[Builder, ...] = (
    _single("ring", "ring:N", "bidirectional ring (a ring of 2 is one link each way)", ("ring:1", "ring:2", "ring:8")),
    Builder(("nvs-ib",), "nvs-ib:K", "K boxes of 8 GPUs on an NVSwitch, a NIC switch per GPU, two IB switches "
            "joined by a trunk", _optional_count, _nvs_ib, _chassis_size, ("nvs-ib", "nvs-ib:1", "nvs-ib:3")),
    _single("uniring", "uniring:N", "unidirectional ring i -> i+1", ("uniring:2", "uniring:7")),
    _single("line", "line:N", "path 0 - 1 - ... - N-1", ("line:1", "line:6")),
    _single("fc", "fc:N", "fully connected", ("fc:1", "fc:5")),
    Builder(("mesh",), "mesh:AxB[xC]", "2D/3D grid without wrap-around (TACOS's '3D hypercube')", shapes.parse_grid,
            partial(shapes.grid, False), shapes.grid_size, ("mesh:4", "mesh:2x3", "mesh:2x3x4")),
    Builder(("torus",), "torus:AxB[xC]", "2D/3D grid with wrap-around", shapes.parse_grid, partial(shapes.grid, True),
            shapes.grid_size, ("torus:4", "torus:2x2", "torus:3x3", "torus:1x5x3")),
    Builder(("switch",), "switch:N[@d]", "N NPUs on one switch node; @d unwinds to degree d (bandwidth/d per link)",
            shapes.parse_switch, shapes.switch, shapes.switch_size, ("switch:1", "switch:6", "switch:6@2",
                                                                     "switch:4@9")),
    Builder(("md",), "md:R4,F8,S32[@d]", "multi-dimensional Ring/FullyConnected/Switch dims, dim 0 fastest",
            shapes.parse_md, shapes.multi_dim, shapes.multi_dim_size, ("md:R4", "md:R2,F4,S8", "md:r2,f3,s4@2",
                                                                         "md:R1,S1")),
    Builder(("rfs",), "rfs:AxBxC", "md:RA,FB,SC (TACOS 3D-RFS)", shapes.parse_rfs, shapes.multi_dim,
            shapes.multi_dim_size, ("rfs:2x3x2",)),
    Builder(("dragonfly",), "dragonfly:AxG", "G groups of A fully connected NPUs, one global link per group pair",
            shapes.parse_dragonfly, shapes.dragonfly, shapes.dragonfly_size, ("dragonfly:4x5", "dragonfly:3x1")),
    Builder(("dgx1",), "dgx1", "DGX-1 in the SCCL paper's numbering; --bandwidth is per NVLink (default 25GB/s)",
            _no_argument, partial(_dgx1, "sccl"), None, ("dgx1",)),
    Builder(("dgx1-msccl",), "dgx1-msccl", "DGX-1 in the msccl-tools / TACCL / TE-CCL numbering", _no_argument,
            partial(_dgx1, "msccl"), None, ("dgx1-msccl",)),
    _vendor("ndv2", "teccl", ("ndv2",), "ndv2:K", "K NDv2 chassis, TE-CCL costs (NVLink 0.7us, IB 12.5GB/s 1.3us)",
            ("ndv2", "ndv2:2", "ndv2:3")),
    _vendor("ndv2", "taccl", ("ndv2-taccl",), "ndv2-taccl:K", "K NDv2 chassis, TACCL profiled costs (1MB profile)",
            ("ndv2-taccl:2",)),
    _vendor("dgx2", "teccl", ("dgx2",), "dgx2:K",
            "K DGX-2 chassis, TE-CCL costs (NVSwitch 125GB/s 0.35us, IB 12.5GB/s 2.6us)", ("dgx2", "dgx2:2")),
    _vendor("dgx2", "taccl", ("dgx2-taccl",), "dgx2-taccl:K", "K DGX-2 chassis, TACCL profiled costs (1MB profile)",
            ("dgx2-taccl:3",)),
    Builder(("ndv2-nic", "ndv2-taccl-nic"), "ndv2-nic:K, ndv2-taccl-nic:K",
            "NDv2 chassis with the IB NIC as a switch node every GPU reaches (any TACCL inter-node sketch)",
            _optional_count, partial(_nic, "ndv2-nic"), _chassis_size,
            ("ndv2-nic:1", "ndv2-nic:3", "ndv2-taccl-nic:2")),
    Builder(("dgx2-nic", "dgx2-taccl-nic"), "dgx2-nic:K, dgx2-taccl-nic:K",
            "DGX-2 chassis with 8 NIC switch nodes, each shared by GPUs 2k, 2k+1", _optional_count,
            partial(_nic, "dgx2-nic"), _chassis_size,
            ("dgx2-nic:1", "dgx2-nic:2", "dgx2-taccl-nic:2")),
    Builder(("amd",), "amd:K", "K AMD MI250 chassis of the TE-CCL paper", _optional_count, _amd, _chassis_size,
            ("amd", "amd:2", "amd:3")),
    Builder(("amd-z52",), "amd-z52", "Gigabyte Z52 8-ring of the SCCL paper (guessed labelling)", _no_argument, _z52,
            None, ("amd-z52",)),
    Builder(("rails",), "rails:BxG[,leaf=L][,spines=S][,over=R]", "B boxes of G GPUs, a scale-up switch per box, "
            "GPU i on rail i's leaf; past L=32 boxes leaf groups under S=G spines, R:1", clusters.parse_rails,
            clusters.rails, clusters.rails_size, ("rails:4x8", "rails:1x8", "rails:3x1", "rails:33x2",
                                                  "rails:40x8,leaf=16,spines=4", "rails:5x2,LEAF=2,Spines=3,over=1.5"),
            exact=True),
    Builder(("fattree",), "fattree:K[,over=R]", "three-tier k-ary fat tree: K pods, K^3/4 NPUs, (K/2)^2 cores; "
            "R:1 above the edge", clusters.parse_fattree, clusters.fattree, clusters.fattree_size,
            ("fattree:2", "fattree:4", "fattree:6,over=2"), exact=True),
    Builder(("leafspine",), "leafspine:LxPxS[,over=R]", "L leaves of P NPUs, every leaf on each of S spines "
            "(R:1 oversubscribed)", clusters.parse_leafspine, clusters.leafspine, clusters.leafspine_size,
            ("leafspine:4x4x2", "leafspine:3x2x1,over=2"), exact=True),
    Builder(("hgx",), reducing.HGX_USAGE, "rails:Kx8 whose NVSwitches reduce (NVLS; rate=R caps a port's sum rate); "
            "nvls=off: no reduction or multicast; sharp: leaves and spines aggregate (SHARP)", reducing.parse_hgx,
            reducing.hgx, reducing.hgx_size, ("hgx:1", "hgx:2,nvls=off", "hgx:4,sharp", "hgx:1,rate=315GB/s",
                                              "hgx:33,sharp"), exact=True),
    Builder(("nvl72",), "nvl72:[nvls=off]", "one GB200 NVL72 domain: 72 GPUs on a reducing NVSwitch at 900 GB/s",
            reducing.parse_nvl72, reducing.nvl72, reducing.nvl72_size, ("nvl72", "nvl72:nvls=off"), exact=True),
)


_BY_NAME: dict[str, Builder] = {name: builder for builder in TABLE for name in builder.names}


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 60 else repr(text[:50] + "...")


def known_names() -> list[str]:
    """Every spec kind the table answers to, in table order."""
    return list(_BY_NAME)


def help_lines() -> dict[str, str]:
    """Usage -> one line of description, for ``workbench builders`` and the unknown-spec message."""
    return {builder.usage: builder.help for builder in TABLE}


def parse_spec(spec: str) -> ParsedSpec:
    """Read a spec with its builder: numbers of more than 12 digits, an unknown kind and a
    malformed argument are each a one-line ``TopologyError``."""
    spec = spec.strip()
    check_spec_numbers(spec)
    kind, _, arg = spec.partition(":")
    builder = _BY_NAME.get(kind.lower())
    if builder is None:
        known = ", ".join(builder.usage for builder in TABLE)
        raise TopologyError(f"unknown topology spec {_shown(spec)} (known: {known}; or a .json/.yaml file)")
    return ParsedSpec(spec, builder, builder.parse(spec, arg))


def estimate(spec: str) -> Size | None:
    """NPUs, nodes and links of a spec before it is built; None when the spec does not parse (its
    error comes with the build) or names a fixed-size system."""
    try:
        return parse_spec(spec).size()
    except TopologyError:
        return None


def spec_size(spec: str) -> Estimate | None:
    """``estimate`` as the size guard's ``Estimate`` (which prices it in bytes); None as ``estimate``."""
    size = estimate(spec)
    return None if size is None else Estimate(*size)
