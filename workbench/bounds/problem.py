"""The bounds of one problem, put together: which bound applies to which collective, and the LPs' time.

``lower_bounds`` computes every bound that applies (the enumerated cut and the LPs only where they
are cheap enough) into one ``Bounds``; ``problem_bounds`` is the yardstick of a problem (topology,
collective, size): the bounds of the collective without its chunking (``unchunked``), so every
schedule of the problem is measured against the same ``best`` whatever its chunk size.
``lp_seconds_within`` is how long a bound's LP may run inside a formulation's deadline.
"""

from __future__ import annotations

import time
from typing import Any

from workbench.model.collective import Collective
from workbench.kit.deadline import Deadline
from workbench.bounds.allreduce import allreduce_bounds
from workbench.bounds.cuts import alltoall_cut_bound, cut_bound
from workbench.bounds.flow_lp import flow_lp_bound, flow_lp_size
from workbench.bounds.ideal import tacos_ideal
from workbench.bounds.injection import injection_bound
from workbench.bounds.latency import latency_bound
from workbench.bounds.optimum_bound import optimum_bound
from workbench.bounds.record import Bounds
from workbench.topology import Topology

__all__ = ["lower_bounds", "problem_bounds", "unchunked", "lp_seconds_within"]


def lp_seconds_within(deadline: Deadline, share: float = 0.1, most: float = 30.0) -> float:
    """How long a bound's LP may run inside a formulation's ``deadline``: ``share`` of the time
    left, between 0.1 s and ``most``."""
    return max(0.1, min(most, share * deadline.remaining()))


def lower_bounds(topology: Topology, collective: Collective, chunk_bytes: float, *,
                 cut_max_nodes: int = 16, lp: bool = True, lp_time_limit: float = 10.0,
                 lp_max_variables: int = 1_000_000, alpha_beta: bool = True) -> Bounds:
    """All bounds for one problem (the enumerated cut and the LP only where they are cheap enough).

    Each holds for every chunking of the problem (they count bytes, not chunks); the workbench measures
    schedules with ``problem_bounds``, which also makes the numbers identical across chunkings.
    """
    size = collective.size_bytes(chunk_bytes)
    bounds = Bounds(
        injection=injection_bound(topology, collective, chunk_bytes),
        latency=latency_bound(topology, collective, chunk_bytes),
        cut=cut_bound(topology, collective, chunk_bytes, cut_max_nodes),
        ideal=tacos_ideal(topology, collective, size) if collective.num_ranks > 1 else 0.0,
    )
    optimum = optimum_bound(topology, collective, chunk_bytes)
    if optimum is not None:
        bounds.optimum, bounds.optimum_exact = optimum
        if not optimum[1]:
            bounds.notes["optimum"] = "bandwidths quantised: the cut is real, its maximality holds to the quantum"
    elif collective.kind == "allreduce":
        for key, value in allreduce_bounds(topology, collective, chunk_bytes).items():
            setattr(bounds, key, value)
    else:
        _flow_or_cuts(bounds, topology, collective, chunk_bytes, lp, lp_time_limit, lp_max_variables)
    if lp and alpha_beta:  # the time-expanded alpha-beta LP, within the LP time; it notes where it does not run
        _alpha_beta(bounds, topology, collective, chunk_bytes, lp_time_limit)
    return bounds


def _flow_or_cuts(bounds: Bounds, topology: Topology, collective: Collective, chunk_bytes: float,
                  lp: bool, lp_time_limit: float, lp_max_variables: int) -> None:
    """Where no max-flow optimum applies (All-to-All, custom demands): the flow LP when it is small
    enough and solves in time, else the sweep and group cuts, into ``bounds``."""
    if lp and flow_lp_size(topology, collective) <= lp_max_variables:
        started = time.perf_counter()
        bounds.flow_lp = flow_lp_bound(topology, collective, chunk_bytes, lp_time_limit, lp_max_variables)
        # None after most of the limit: not solved in time (None at once: it does not apply)
        bounds.cut_short = bounds.flow_lp is None and time.perf_counter() - started >= 0.9 * lp_time_limit
    unicast = all(len(post - pre) <= 1 for pre, post, _ in collective.groups())
    bounds.optimum_exact = bounds.flow_lp is not None and unicast and not collective.combining
    if bounds.flow_lp is None:
        from workbench.bounds.group_cuts import group_cut_bound

        sweep = alltoall_cut_bound(topology, collective, chunk_bytes)
        grouped = group_cut_bound(topology, collective, chunk_bytes)
        if sweep is not None or grouped is not None:
            bounds.cut = max(bounds.cut or 0.0, sweep or 0.0, grouped or 0.0)
            kind = "box and leaf-group cuts" if (grouped or 0.0) > (sweep or 0.0) else "sweep cuts"
            bounds.notes["cut"] = f"{kind} (the LP was too large or not run)"


def _alpha_beta(bounds: Bounds, topology: Topology, collective: Collective, chunk_bytes: float,
                lp_time_limit: float) -> None:
    """The time-expanded alpha-beta bound (``workbench.bounds.alpha_beta``) into ``bounds``, with
    its note where it did not run or did not finish."""
    from workbench.bounds.alpha_beta import alpha_beta_bound

    found = alpha_beta_bound(topology, collective, chunk_bytes, time_limit=lp_time_limit)
    bounds.alpha_beta = found.seconds
    bounds.cut_short = bounds.cut_short or not found.complete
    if found.note:
        bounds.notes["alpha_beta"] = found.note


def unchunked(collective: Collective) -> Collective:
    """The collective as a problem, without a schedule's chunking: a standard kind with one chunk
    per rank (its chunks per rank are how a schedule cuts the data, not what must move); a custom
    demand as given (its chunks are the demand)."""
    from workbench.model.collective import make_collective

    if collective.kind == "custom" or collective.chunks_per_rank == 1:
        return collective
    return make_collective(collective.kind, collective.num_ranks, 1, collective.root)


def problem_bounds(topology: Topology, collective: Collective, size_bytes: float, **options: Any) -> Bounds:
    """The yardstick of one problem (topology, collective, nccl-tests ``size_bytes``): ``lower_bounds``
    of the ``unchunked`` collective, so ``best`` is the same for every schedule of the problem
    whatever its chunk size (an LP too large at one chunking is not skipped at another). ``options``
    are ``lower_bounds``'s keywords."""
    problem = unchunked(collective)
    return lower_bounds(topology, problem, problem.chunk_bytes(size_bytes), **options)
