"""Tree counts from the throughput optimum: ``k`` trees per root and ``U`` tree-units per capacity unit.

Everything is in the integer capacity units of ``workbench.kit.maxflow.integer_capacities`` (link e
has ``c_e`` units of ``unit`` B/s). A *tree-unit* is one tree's share of the data; link e may carry
``U * c_e`` tree-units, every root owns ``k`` of them.

* Auto mode (spec forestcoll 1.5, last bullet): the exact optimum ``y = max |S ∩ C| / B+(S) = p/q``
  (``workbench.bounds.optimum.allgather_cut_ratio``), ``g = gcd(q, every c_e)``, ``U = p/g``, ``k = q/g``.
  Then ``U/k = y`` and every budget ``U * c_e = p * c_e / g`` is an integer; ``k`` is the smallest
  count with that property. The All-Gather then takes ``M * U / (N * k * unit)`` = T*.
* Fixed ``k`` (spec 3, "Fixed-k"): the smallest rational ``U`` such that budgets ``floor(U * c_e)``
  still give every NPU a flow of ``N * k`` from a super-source with ``k`` per NPU. The test only
  changes where some ``U * c_e`` crosses an integer, so the search walks the step points ``a / c_e``
  exactly (bisection on Fractions, then snapping to step points): no float decides anything.
* Broadcast: ``lambda`` = the root's smallest max-flow to an NPU; ``lambda`` trees from the root,
  budget ``c_e`` each (``U = 1``, ``k = lambda``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from workbench.kit.deadline import Deadline, DeadlineExpired
from workbench.util.lazy import lazy_module
from workbench.kit.maxflow import FlowNetwork, IntegerCapacities
from workbench.bounds.optimum import allgather_cut_ratio, broadcast_cut
from workbench.topology import Topology

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["TreeUnits", "auto_units", "fixed_k_units", "broadcast_units", "Timeout"]


Timeout = DeadlineExpired  # the time limit ran out inside the tree construction


def check_clock(deadline: Deadline | None) -> None:
    """Raise ``Timeout`` when ``deadline`` has passed (None: never)."""
    if deadline is not None:
        deadline.check()


@dataclass(frozen=True)
class TreeUnits:
    """What the forest must achieve, in integer tree-units.

    ``budgets[i]``: tree-units link ``topology.links[i]`` may carry; ``supply[v]``: trees rooted at
    NPU v (``k`` for every NPU in an All-Gather, ``lambda`` at the root of a broadcast); ``demand``:
    the flow every NPU must be able to receive (``N * k``, or ``lambda``). ``U`` and ``k`` as in
    the module docstring; ``ratio`` = ``U / k`` in capacity units; ``optimal`` says ``U / k``
    equals the exact optimum (and the capacities are exact).
    """

    k: int
    U: Fraction
    ratio: Fraction
    budgets: np.ndarray
    supply: np.ndarray
    demand: int
    capacities: IntegerCapacities
    optimal: bool
    optimum_ratio: Fraction

    def seconds_per_byte(self) -> float:
        """Bandwidth term per byte of one tree-unit's data times ``k``: ``U / (k * unit)`` (s/B)."""
        return float(self.ratio) / self.capacities.unit


def auto_units(topology: Topology) -> TreeUnits:
    """``k`` and ``U`` from the exact All-Gather optimum (module docstring)."""
    cut = allgather_cut_ratio(topology)
    caps = cut.capacities
    y = cut.ratio
    g = y.denominator
    for c in np.unique(caps.values):
        g = math.gcd(g, int(c))
    U = Fraction(y.numerator, g)
    k = y.denominator // g
    budgets = np.array([int(U * int(c)) for c in caps.values], dtype=np.int64)
    supply = np.full(topology.num_npus, k, dtype=np.int64)
    return TreeUnits(k, U, y, budgets, supply, topology.num_npus * k, caps, caps.exact, y)


def _all_gather_passes(template: FlowNetwork, budgets: np.ndarray, k: int, n_npus: int,
                       deadline: Deadline | None) -> bool:
    """Does every NPU receive ``N * k`` from a super-source with ``k`` per NPU? (N max-flows)."""
    capacities = np.concatenate([budgets, np.full(n_npus, k, dtype=np.int64)])
    source = template.num_nodes - 1
    for v in range(n_npus):
        check_clock(deadline)
        if template.value(capacities, source, v) < n_npus * k:
            return False
    return True


def fixed_k_units(topology: Topology, k: int, deadline: Deadline | None = None) -> TreeUnits:
    """The smallest ``U`` for exactly ``k`` trees per root with integral budgets ``floor(U c_e)``."""
    if k < 1:
        raise ValueError(f"forestcoll: k must be a positive integer, got {k}")
    optimum = allgather_cut_ratio(topology)
    caps = optimum.capacities
    cap = caps.values
    n = topology.num_npus
    source = topology.num_nodes
    template = FlowNetwork(topology.num_nodes + 1, [l.src for l in topology.links] + [source] * n,
                            [l.dst for l in topology.links] + list(range(n)))
    distinct = sorted({int(c) for c in cap})

    def budgets_at(U: Fraction) -> np.ndarray:
        return np.array([math.floor(U * int(c)) for c in cap], dtype=np.int64)

    def passes(U: Fraction) -> bool:
        return _all_gather_passes(template, budgets_at(U), k, n, deadline)

    def snap_down(U: Fraction) -> Fraction:
        """The largest step point <= U (same budgets as U)."""
        return max(Fraction(math.floor(U * c), c) for c in distinct)

    def next_step(U: Fraction) -> Fraction:
        """The smallest step point > U."""
        return min(Fraction(math.floor(U * c) + 1, c) for c in distinct)

    lo = optimum.ratio * k  # U / k can never beat the optimum
    hi = snap_down(Fraction((n - 1) * k))  # every cut has B+ >= 1 unit, so this passes
    if passes(lo):
        hi = lo  # k trees per root already reach the optimum (then lo is a step point: the bound is tight)
    else:
        while next_step(lo) < hi:
            mid = snap_down((lo + hi) / 2)
            if mid <= lo:
                mid = next_step(lo)
            if passes(mid):
                hi = mid
            else:
                lo = mid
    budgets = budgets_at(hi)
    supply = np.full(n, k, dtype=np.int64)
    return TreeUnits(k, hi, hi / k, budgets, supply, n * k, caps, caps.exact and hi / k == optimum.ratio,
                     optimum.ratio)


def broadcast_units(topology: Topology, root: int) -> TreeUnits:
    """``lambda`` arborescences from ``root`` with budget ``c_e`` per link."""
    cut = broadcast_cut(topology, root)
    caps = cut.capacities
    lam = cut.ratio.denominator  # ratio = 1 / lambda
    supply = np.zeros(topology.num_npus, dtype=np.int64)
    supply[root] = lam
    return TreeUnits(lam, Fraction(1), cut.ratio, caps.values.astype(np.int64), supply, lam, caps, caps.exact,
                     cut.ratio)
