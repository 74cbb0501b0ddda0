"""Topologies under one name: the graph (``workbench.topology.graph``; its routes, switch unwinding and
``{nodes, links}`` document in ``routing``, ``switches`` and ``schema``) and the builders behind spec
strings and files (``workbench.topology.builders``).

A ``Topology`` is an immutable directed graph. NPUs are nodes ``0..n-1`` (the ranks); switch nodes
follow them. Every link carries its own ``alpha`` (s), ``bandwidth`` (B/s, per link and per
direction) and per-message ``overhead`` (s, 0 unless given). ``build("ring:8")`` makes one from a
spec string; ``load_topology`` also accepts YAML/JSON files in the ``{nodes, links}`` schema.
"""

from workbench.topology.builders import BUILDERS, build, expand_per_npu, load_topology
from workbench.topology.graph import DEFAULT_ALPHA, DEFAULT_BANDWIDTH, Link, Topology, TopologyError, topology_from_dict

__all__ = ["Link", "Topology", "TopologyError", "build", "load_topology", "topology_from_dict", "BUILDERS",
           "DEFAULT_ALPHA", "DEFAULT_BANDWIDTH", "expand_per_npu"]
