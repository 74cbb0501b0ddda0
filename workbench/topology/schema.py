"""The ``{nodes, links}`` document of a topology: written as JSON or YAML, read back with every field checked.

A document has ``nodes`` (``{id, kind}``, kind ``npu`` or ``switch``; NPUs numbered first, ids
``0..n-1`` without gaps; a switch may declare that it reduces or does not multicast:
``workbench.topology.abilities``, written only where declared), ``links`` (``{src, dst, alpha, bandwidth}``, an optional per-message
``overhead`` and ``bidirectional``; unit strings accepted), and optionally ``name`` and ``meta``
(``meta.dims``: docs/clusters.md). ``overhead`` is written only on links that have one, so a
topology without overhead gives the document it always gave. ``Topology.to_dict``, ``Topology.save``
and ``topology_from_dict`` (``workbench.topology.graph``) are these.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

from workbench.util import fastjson
from workbench.util.units import UnitError, parse_bandwidth, parse_time
from workbench.topology.abilities import SwitchAbility, abilities_from_nodes, ability_fields
from workbench.topology.link import Link, TopologyError

__all__ = ["TopologyFields", "topology_document", "write_document", "read_document"]


class TopologyFields(NamedTuple):
    """What a document says, in the order ``Topology.create`` takes it."""

    num_npus: int
    links: list[Link]
    num_switches: int
    name: str
    meta: dict[str, Any]
    abilities: dict[int, SwitchAbility]


def topology_document(topology: Any) -> dict[str, Any]:
    """The ``{nodes, links}`` document of ``topology`` (a ``Topology``)."""
    return {
        "name": topology.name,
        "nodes": [{"id": node, "kind": topology.kind(node), **ability_fields(topology.ability(node))}
                  for node in range(topology.num_nodes)],
        "links": [{"src": l.src, "dst": l.dst, "alpha": l.alpha, "bandwidth": l.bandwidth,
                   **({"overhead": l.overhead} if l.overhead else {})} for l in topology.links],
    }


def write_document(data: dict[str, Any], path: str | Path) -> None:
    """Write a document: YAML for a .yaml/.yml name, else JSON (through
    ``workbench.util.files.write_output``: atomic, a character device written through)."""
    from workbench.util.files import write_output

    path = Path(path)
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        write_output(path, yaml.safe_dump(data, sort_keys=False))
    else:
        write_output(path, fastjson.text(data, indent=1))


def _field(entry: dict, key: str, where: str) -> Any:
    if not isinstance(entry, dict):
        raise TopologyError(f"{where}: expected a mapping, got {type(entry).__name__}")
    if key not in entry:
        raise TopologyError(f"{where}: missing field {key!r}")
    return entry[key]


def read_document(data: Any, source: str = "topology") -> TopologyFields:
    """Parse a decoded document; ``TopologyError`` names what is wrong in ``source``. Unit strings
    are accepted for alpha, bandwidth and the optional per-message ``overhead`` (default 0), and
    ``bidirectional`` must be true or false (the string "no" is not read as true)."""
    if not isinstance(data, dict):
        raise TopologyError(f"{source}: expected a mapping with 'nodes' and 'links'")
    nodes = _field(data, "nodes", source)
    links_data = _field(data, "links", source)
    if not isinstance(nodes, list) or not nodes:
        raise TopologyError(f"{source}: 'nodes' must be a non-empty list")
    if not isinstance(links_data, list):
        raise TopologyError(f"{source}: 'links' must be a list")
    kinds = _node_kinds(nodes, source)
    num_npus = sum(1 for kind in kinds.values() if kind == "npu")
    links = _links(links_data, kinds, source)
    name = str(data.get("name", source))
    meta = data.get("meta") or {}
    if not isinstance(meta, dict):
        raise TopologyError(f"{source}: meta: expected a mapping, got {type(meta).__name__}")
    _check_dims(meta.get("dims"), num_npus, source)
    return TopologyFields(num_npus, links, len(kinds) - num_npus, name, meta, abilities_from_nodes(nodes, kinds, source))


def _node_kinds(nodes: list, source: str) -> dict[int, str]:
    """Node id to ``npu`` or ``switch``: ids ``0..n-1`` without gaps, NPUs before every switch."""
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
    return kinds


def _links(links_data: list, kinds: dict[int, str], source: str) -> list[Link]:
    """Every link entry as a ``Link`` (a bidirectional entry as two), its units parsed."""
    from workbench.util.safe_load import boolean

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
    return links


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
