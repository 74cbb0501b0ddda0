"""Topology builders: spec strings (``ring:8``, ``mesh:4x4``, ``md:R2,F4,S8``, ``dgx1``, ``ndv2:4``,
``rails:64x8`` ...) to ``Topology`` objects, and ``load_topology`` for a spec or a ``{nodes, links}`` file.

Every spec kind is one entry of the builder table (``workbench.topology.builder_table``): its parser,
size estimate, build and help line. ``BUILDERS`` is the table's help, one line per kind (``workbench
builders``). Vendor systems follow the papers that describe them (DGX-1 in SCCL's and msccl-tools'
numbering; NDv2, DGX-2 and AMD MI250 with TE-CCL's and TACCL's link costs). Every request passes the
size guard before it is built. Regular fabrics are in ``workbench.topology.shapes``; clusters as they
are built (rail-optimized GPU clusters, fat trees) in ``workbench.topology.clusters``, which take
alpha, bandwidth and overhead per switch tier.

A per-message ``overhead`` (docs/cost-model.md) is given like ``alpha``, per dimension; it defaults
to 0. A switch dimension gives both links of an NPU-switch-NPU path the whole overhead (a message
pays the larger of its segment's links', once), where alpha is halved between them. Builders
without dimensions (the vendor systems) take one overhead for every link.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from workbench.topology.builder_table import help_lines, parse_spec
from workbench.topology.graph import Topology, TopologyError, topology_from_dict

__all__ = ["build", "load_topology", "BUILDERS", "expand_per_npu"]

BUILDERS: dict[str, str] = help_lines()  # usage -> description, in the table's order


def load_topology(
    spec_or_path: str | Path,
    alpha: Sequence[float] | float | None = None,
    bandwidth: Sequence[float] | float | None = None,
    overhead: Sequence[float] | float | None = None,
) -> Topology:
    """A topology from a builder spec string or a YAML/JSON file path (a file carries its own link
    costs; ``alpha``, ``bandwidth`` and ``overhead`` apply to specs)."""
    from workbench.util import size_guard

    text = str(spec_or_path)
    path = Path(text)
    if path.suffix.lower() in (".json", ".yaml", ".yml"):
        from workbench.util.safe_load import load_file

        if path.is_file():  # parsed text and built objects: ~30 bytes per byte of file
            _guard(size_guard, text, 30.0 * path.stat().st_size)
        # a FIFO, folder or device, a binary file, duplicate keys, an alias bomb: one line each
        data = load_file(path, "topology file", TopologyError)
        if isinstance(data, dict) and isinstance(data.get("nodes"), list):  # node pairs grow as its nodes squared
            nodes, links = len(data["nodes"]), len(data["links"]) if isinstance(data.get("links"), list) else 0
            _guard(size_guard, f"{text}: {nodes:,} nodes and {links:,} links",
                   size_guard.Estimate(nodes, nodes, 2 * links).bytes())  # 2: a link may be bidirectional
        return topology_from_dict(data, source=text)
    parsed = parse_spec(text)  # a 100,000-digit size or a malformed spec is one line, before any estimate
    size = parsed.size()
    if size is not None:
        _guard(size_guard, text, size_guard.Estimate(*size).bytes())
    return parsed.build(alpha, bandwidth, overhead)


def _guard(size_guard, what: str, needed: float) -> None:
    """The size guard's refusal as a ``TopologyError`` (one line, estimate and budget)."""
    try:
        size_guard.check(what, needed)
    except size_guard.SizeError as exc:
        raise TopologyError(str(exc)) from None


def build(
    spec: str,
    alpha: Sequence[float] | float | None = None,
    bandwidth: Sequence[float] | float | None = None,
    overhead: Sequence[float] | float | None = None,
) -> Topology:
    """Build a topology from a spec string (see ``BUILDERS``); alpha/bandwidth/overhead per
    dimension (one overhead for every link of a vendor system). A bad spec is one ``TopologyError``
    line naming what is wrong."""
    return parse_spec(spec).build(alpha, bandwidth, overhead)


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
