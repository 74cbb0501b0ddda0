"""TACOS's "Ideal" under its own name: ``size * factor / min_N BW_N + diameter`` (docs/methods/tacos.md 4.1).

Not a valid bound under pipelining, so ``Bounds.best`` never uses it; it is reported beside the
bounds for comparison with the paper.
"""

from __future__ import annotations

from workbench.util.lazy import lazy_module
from workbench.model.collective import Collective, bus_factor
from workbench.topology import Topology

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["tacos_ideal", "ideal_factor"]


def ideal_factor(kind: str, num_ranks: int) -> float:
    """The bandwidth factor of TACOS's Ideal: all-reduce 2(n-1)/n, all-gather and kin (n-1)/n.

    These are the nccl-tests bus-bandwidth factors, so the two stay one definition.
    """
    return bus_factor(kind, num_ranks)


def tacos_ideal(topology: Topology, collective: Collective, size_bytes: float,
                bandwidth_rule: str = "links") -> float | None:
    """TACOS's Ideal: ``size * factor / min_N BW_N + alpha-only diameter`` between NPUs (ranks).

    ``bandwidth_rule="links"`` (docs/methods/tacos.md 4.1, our reading): BW_N = min(total ingress,
    total egress) link bandwidth of NPU N (a switch port counts once). ``"dimensions"``: BW_N = the
    sum over dimensions of one link's bandwidth (ASTRA-sim's per-dimension bandwidth; ambiguity
    A13), None for a topology not built from dimensions.
    """
    ranks = range(collective.num_ranks)
    if bandwidth_rule == "dimensions":
        dims = topology.meta.get("dims")
        per_dim = topology.meta.get("dim_bandwidth")
        if not dims or not per_dim:
            return None
        per_npu = [sum(bw for dim, bw in zip(dims, per_dim) if dim["size"] > 1)]
    else:
        per_npu = [min(sum(l.bandwidth for l in topology.in_links(r)),
                       sum(l.bandwidth for l in topology.out_links(r))) for r in ranks]
    dist = topology.alpha_distances()[: collective.num_ranks, : collective.num_ranks]
    diameter = float(np.max(dist)) if collective.num_ranks > 1 else 0.0
    return size_bytes * ideal_factor(collective.kind, collective.num_ranks) / min(per_npu) + diameter
