"""Vendor systems as topologies: DGX-1 (SCCL's and msccl-tools' numbering), NDv2 and DGX-2 chassis
(TE-CCL's and TACCL's link costs, with or without NIC switch nodes), AMD MI250 chassis and the
Gigabyte Z52 ring, each as the paper that uses it describes it (sections of the method notes in docs/methods/ cited per table).
"""

from __future__ import annotations

from workbench.topology.edge_lists import Edges, per_dim, ring_edges
from workbench.topology.graph import DEFAULT_ALPHA, DEFAULT_BANDWIDTH, Link, Topology

__all__ = ["dgx1", "ndv2", "dgx2", "ndv2_nic", "dgx2_nic", "amd", "z52"]


# DGX-1 NVLink multiplicities in the SCCL paper's numbering (docs/methods/sccl.md section 7.1).
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


def dgx1(spec: str, numbering: str, alpha, bandwidth) -> Topology:
    """DGX-1: 8 GPUs joined by NVLink (``numbering`` ``"sccl"`` or ``"msccl"``); a link's bandwidth is its
    NVLink count times ``bandwidth`` (B/s per NVLink, 25e9 by default)."""
    a = per_dim(alpha, 1, DEFAULT_ALPHA, "alpha")[0]
    bw = per_dim(bandwidth, 1, 25e9, "bandwidth")[0]
    meta = {"numbering": numbering, "per_nvlink_bandwidth": bw}
    return Topology.create(8, _dgx1_edges(numbering, bw, a), 0, spec, meta)


# Cost variants of the multi-node systems: docs/methods/teccl.md 6.2 and docs/methods/taccl.md 5.2 (1MB profile).
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


def ndv2(spec: str, chassis: int, variant: str) -> Topology:
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


def dgx2(spec: str, chassis: int, variant: str) -> Topology:
    """DGX-2: 16 GPUs on one NVSwitch node per chassis; odd GPU g sends over IB to GPU g-1 of every other chassis."""
    c = _COSTS[variant]
    edges = Edges()
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


def _nic_fabric(edges: "Edges", nics: list[list[int]], first_free: int, alpha: float, bw: float) -> int:
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


def ndv2_nic(spec: str, chassis: int, variant: str) -> Topology:
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
    edges = Edges()
    nics = [[n + i] for i in range(chassis)]
    for i in range(chassis):
        for g in range(8):
            edges.add(8 * i + g, n + i, c["ib_alpha"] / 4, c["ib_bw"])
    extra = _nic_fabric(edges, nics, n + chassis, c["ib_alpha"], c["ib_bw"])
    meta = {"chassis": chassis, "costs": variant, "nics_per_chassis": 1}
    return Topology.create(n, links + list(edges.links.values()), chassis + extra, spec, meta)


def dgx2_nic(spec: str, chassis: int, variant: str) -> Topology:
    """DGX-2 with 8 NIC switch nodes per chassis, NIC k shared by GPUs 2k and 2k+1 (docs/methods/taccl.md 1.1).

    Node ids: GPUs, then one NVSwitch per chassis, then the NICs (so intra-chassis routes take the
    NVSwitch). GPU <-> NIC costs IB alpha/4 at IB bandwidth; NIC to NIC as in ``_nic_fabric``.
    """
    c = _COSTS[variant]
    n = 16 * chassis
    edges = Edges()
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


# AMD chassis of TE-CCL (docs/methods/teccl.md 6.2): neighbour -> weight, bandwidth = weight * 50 GB/s.
_AMD_CHASSIS = {
    0: {1: 4, 4: 2, 8: 1}, 1: {0: 4, 5: 1, 9: 1, 10: 1}, 2: {3: 4, 6: 1, 9: 1, 10: 1},
    3: {2: 4, 7: 2, 11: 1}, 4: {5: 4, 0: 2, 6: 1}, 5: {4: 4, 1: 1, 6: 1, 7: 1},
    6: {7: 4, 2: 1, 4: 1, 5: 1}, 7: {6: 4, 3: 2, 5: 1}, 8: {9: 4, 12: 2, 0: 1},
    9: {8: 4, 1: 1, 2: 1, 13: 1}, 10: {11: 4, 1: 1, 2: 1, 14: 1}, 11: {10: 4, 15: 2, 3: 1},
    12: {13: 4, 8: 2, 14: 1}, 13: {12: 4, 9: 1, 14: 1, 15: 1}, 14: {15: 4, 10: 1, 12: 1, 13: 1},
    15: {14: 4, 11: 2, 13: 1},
}


def amd(spec: str, chassis: int, alpha) -> Topology:
    """AMD (TE-CCL): 16 GPUs per chassis; pairs (2k, 2k+1) on small switches; all small switches on one big switch.

    Alpha is not given by the paper; ``--alpha`` (default 0.5 us) applies to every GPU link and,
    halved, to each switch link. With one chassis there are no switches.
    """
    a = per_dim(alpha, 1, DEFAULT_ALPHA, "alpha")[0]
    edges = Edges()
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


_Z52_RING = [1, 0, 2, 3, 5, 4, 6, 7]  # docs/methods/sccl.md section 7.2: guessed labelling


def z52(spec: str, alpha, bandwidth) -> Topology:
    """Gigabyte Z52: 8 GPUs on one bidirectional ring, in a guessed labelling, uniform alpha and bandwidth."""
    a = per_dim(alpha, 1, DEFAULT_ALPHA, "alpha")[0]
    bw = per_dim(bandwidth, 1, DEFAULT_BANDWIDTH, "bandwidth")[0]
    edges = Edges()
    ring_edges(edges, _Z52_RING, a, bw)
    return Topology.create(8, edges.links.values(), 0, spec, {"labelling": "guessed (spec sccl 7.2)"})
