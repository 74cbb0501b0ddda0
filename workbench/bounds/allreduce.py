"""All-Reduce's bounds (no exact optimum is known on general fabrics) and its RS* + AG* throughput figure.

``splitting_cut``: every output byte outside a set S of NPUs depends on inputs inside it, so M bytes
cross every cut that splits the NPUs, in both directions: ``M / min_S min(B+(S), B-(S))`` (+ the
cut's smallest alpha). ``gossip``: ``2(N-1) M / (sum over NPUs of their in-link bandwidths)``
(``gossip_bound``); ``group_gossip`` the same with groups of NPUs as the parties
(``workbench.bounds.group_gossip``); ``two_hop`` raw inputs through each NPU's in-links or two
deliveries in a row (``workbench.bounds.two_hop``). ``egress``: each NPU's whole input leaves it
and the last of it still travels to the farthest NPU (``workbench.bounds.egress``).
``rs_ag_throughput`` = RS* + AG*, the Reduce-Scatter and All-Gather throughput optima (each with its
cut's alpha) in sequence, is not a bound and not a time known to be reached: at small sizes it lies
below the bounds.

Switches that reduce (NVLS, SHARP: ``workbench.topology.abilities``) void the bounds whose proof
counts deliveries that end at NPUs, since a switch can sum contributions on the way: ``gossip``
where a reducing switch is reached by two NPUs, ``group_gossip`` for each partition where one is
reached by two groups, and ``two_hop`` on any fabric with a reducing switch; each is None there.
``splitting_cut`` and ``egress`` are information arguments that do not ask where values are summed,
and hold on every fabric (docs/bounds.md, "Switches that reduce").
"""

from __future__ import annotations

from workbench.model.collective import Collective
from workbench.topology import Topology

__all__ = ["allreduce_bounds", "gossip_bound"]


def allreduce_bounds(topology: Topology, collective: Collective, chunk_bytes: float) -> dict[str, float | None]:
    """All-Reduce: the ``splitting_cut``, ``gossip``, ``group_gossip``, ``two_hop`` and ``egress``
    bounds and the ``rs_ag_throughput`` figure (module docstring), in seconds; None where one does
    not apply (on fabrics whose switches reduce, the gossip and two-hop bounds do not)."""
    from workbench.bounds.egress import egress_bound
    from workbench.bounds.group_gossip import group_gossip_bound
    from workbench.bounds.optimum import allgather_cut_ratio, reducescatter_cut_ratio, smallest_splitting_cut
    from workbench.bounds.two_hop import two_hop_bound

    n = collective.num_ranks
    result: dict[str, float | None] = {"splitting_cut": None, "gossip": None, "group_gossip": None,
                                       "two_hop": None, "egress": None, "rs_ag_throughput": None}
    if collective.kind != "allreduce" or n != topology.num_npus or n < 2:
        return result
    size = collective.size_bytes(chunk_bytes)
    bandwidth, _, alpha = smallest_splitting_cut(topology)
    result["splitting_cut"] = size / bandwidth * (1 - 1e-12) + alpha + topology.min_overhead()
    result["gossip"] = gossip_bound(topology, collective, chunk_bytes)
    result["group_gossip"] = group_gossip_bound(topology, collective, chunk_bytes)
    result["two_hop"] = two_hop_bound(topology, collective, chunk_bytes)
    result["egress"] = egress_bound(topology, collective, chunk_bytes)
    rs, ag = reducescatter_cut_ratio(topology), allgather_cut_ratio(topology)
    result["rs_ag_throughput"] = size / n * (rs.seconds_per_byte + ag.seconds_per_byte) + rs.alpha + ag.alpha
    return result


def gossip_bound(topology: Topology, collective: Collective, chunk_bytes: float) -> float | None:
    """All-Reduce over every NPU: ``2(N-1) M / (sum of the NPUs' in-link bandwidths)`` plus the
    smallest alpha of those links; None for another collective, or where a switch that reduces is
    reached through switches by two NPUs (it could sum two NPUs' values into one delivery).

    Every byte position needs at least ``2(N-1)`` one-way transmissions between NPUs (one-way
    gossip: N-1 deliveries before any NPU can hold the whole sum, then one more into each of the
    other N-1), and each delivery ends at an NPU over one of its in-links, which serialise the
    bytes; in every simulator model a link is occupied at least ``bytes / bandwidth`` per message
    and the last delivery still pays an alpha. Valid while no switch sums what two NPUs send (the
    verifier refuses a reduce into a switch that does not declare ``reduce``); a switch that does
    voids it (one delivery per NPU would do: an NVLS All-Reduce on ``hgx:1`` takes 2.74 ms at 1 GiB
    against the 3.76 ms this would say). A reducing switch that one NPU alone reaches is part of
    that NPU (``group_gossip.sums_across``). Switches may copy here (a chunk sent into a switch may
    leave it for several NPUs), which voids the out-link form (``sum of the NPUs' out-link
    bandwidths``), so it is not used; on a fabric without switches both sums are every link.
    """
    from workbench.bounds.group_gossip import sums_across

    n = collective.num_ranks
    if collective.kind != "allreduce" or n != topology.num_npus or n < 2:
        return None
    if sums_across(topology, list(range(n))):  # every NPU its own party
        return None
    into_npus = [l for rank in range(n) for l in topology.in_links(rank)]
    total = sum(l.bandwidth for l in into_npus)
    return (2 * (n - 1) * collective.size_bytes(chunk_bytes) / total * (1 - 1e-12)
            + min(l.alpha for l in into_npus) + topology.min_overhead())
