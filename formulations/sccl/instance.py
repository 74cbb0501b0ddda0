"""SCCL's instance: bandwidth groups, the step and bandwidth lower bounds, the encodings' solve and
the decoding of a solution into the workbench IR (see the package docstring for the symbols)."""

from __future__ import annotations

from fractions import Fraction

from workbench.model.algorithm import Algorithm
from workbench.bounds import lower_bounds
from workbench.model.collective import Collective, make_collective
from workbench.kit.deadline import Deadline
from workbench.kit.schedule import DeliveryChain
from workbench.topology import Topology
from workbench.plugin.registry import Unsupported

from . import check_groups
from .encoding import Group, _CpSatModel, _Z3Model

__all__ = ["bandwidth_groups", "step_bound", "bandwidth_bound", "solve_instance", "reject_by_bounds", "InstanceResult",
           "Group"]


# ----------------------------------------------------------------------------------- the instance
def bandwidth_groups(topology: Topology, extra: list | None = None) -> list[Group]:
    """One group per directed link with b = bandwidth / slowest bandwidth (must be near-integral)."""
    if topology.num_switches:
        raise Unsupported("sccl needs a switchless topology (model a switch as a shared-bus group instead)")
    slowest = min(l.bandwidth for l in topology.links)
    groups: list[Group] = []
    for link in topology.links:
        ratio = link.bandwidth / slowest
        b = round(ratio)
        if abs(ratio - b) > 0.05 * ratio:
            raise Unsupported(f"sccl: link {link.src}->{link.dst}: bandwidth {link.bandwidth:g} is not a whole multiple "
                             f"of the slowest link's {slowest:g}; SCCL needs integral chunks per round")
        groups.append((((link.src, link.dst),), b))
    check_groups(extra)  # the shape, named, for a caller that did not pass through the parameter checks
    for i, entry in enumerate(extra or []):
        pairs, b = entry
        pairs = tuple((int(u), int(v)) for u, v in pairs)
        for u, v in pairs:
            if not topology.has_link(u, v):
                raise ValueError(f"groups[{i}]: ({u}, {v}) is not a link of the topology")
        groups.append((pairs, int(b)))
    return groups


def _unit_topology(topology: Topology, groups: list[Group]) -> Topology:
    """The topology with each link's bandwidth = its chunks per round (b), alpha 0: bounds in rounds."""
    b_of = {pairs[0]: b for pairs, b in groups if len(pairs) == 1}
    links = [(l.src, l.dst, 0.0, float(b_of[(l.src, l.dst)])) for l in topology.links]
    return Topology.create(topology.num_npus, links, 0, f"{topology.name} (chunks per round)")


def step_bound(topology: Topology, collective: Collective) -> int:
    """a_l: max over needed (c, n) of the hop distance from the nearest holder (spec 4)."""
    hops = topology.hop_distances()
    worst = 0
    for chunk, needers in enumerate(collective.post):
        holders = collective.pre[chunk]
        for n in needers:
            if n in holders:
                continue
            distances = [hops[h][n] for h in holders if hops[h][n] >= 0]
            if not distances:
                return 10**9
            worst = max(worst, min(distances))
    return worst


def bandwidth_bound(topology: Topology, collective: Collective, groups: list[Group], lp_seconds: float = 30.0) -> Fraction:
    """b_l in rounds per chunk (R/C) from the exact max-flow optimum (All-Gather and kin), the flow LP
    (All-to-All, at most ``lp_seconds``) and the enumerated cut on the one-chunk-per-node instance."""
    unit = _unit_topology(topology, groups)
    per_node = _sccl_chunks(collective)
    bounds = lower_bounds(unit, collective, 1.0, lp_time_limit=lp_seconds, alpha_beta=False)  # bandwidth alone
    values = [v for v in (bounds.cut, bounds.flow_lp, bounds.optimum) if v is not None]
    best = max(values) if values else 0.0
    return Fraction(best / per_node).limit_denominator(64)


def _sccl_chunks(collective: Collective) -> int:
    """SCCL's per-node C for a workbench collective."""
    if collective.kind == "alltoall":
        return collective.num_ranks * collective.chunks_per_rank
    return collective.chunks_per_rank


def _collective_for(kind: str, n: int, sccl_c: int, root: int | None) -> Collective:
    if kind == "alltoall":
        if sccl_c % n:
            raise ValueError(f"All-to-All needs C to be a multiple of P = {n}, got {sccl_c}")
        return make_collective(kind, n, sccl_c // n)
    return make_collective(kind, n, sccl_c, root)


# ----------------------------------------------------------------------------------- solving and decoding
class InstanceResult:
    def __init__(self, answer: str, seconds: float, algorithm: Algorithm | None, note: str = "") -> None:
        self.answer = answer  # sat | unsat | unknown | bound
        self.seconds = seconds
        self.algorithm = algorithm
        self.note = note


def _decode(topology: Topology, collective: Collective, chunk_bytes: float, solution, steps: int) -> Algorithm:
    """(Q, T) -> transfers in step order with deps on the delivery of each sent chunk."""
    times, sends, rounds = solution
    real = [(u, c, v) for u, c, v in sends if 1 <= times[c][v] <= steps]  # phantom sends dropped
    real.sort(key=lambda s: (times[s[1]][s[2]], s[0], s[2], s[1]))
    chain = DeliveryChain()
    for u, c, v in real:
        chain.send(c, u, v)
    return chain.build(topology, collective, chunk_bytes, {"rounds_per_step": rounds})


# the claim's model (meta["claim_model"]): SCCL's own step cost, which no simulator model reproduces
CLAIM_MODEL = "sccl-steps"


def _sccl_cost(topology: Topology, steps: int, rounds: int, chunk_bytes: float) -> float:
    """T = S*alpha + (R/C)*L*beta with L/C = one chunk and beta of the slowest (b = 1) link."""
    alpha = max(l.alpha for l in topology.links)
    slowest = min(l.bandwidth for l in topology.links)
    return steps * alpha + rounds * chunk_bytes / slowest


def reject_by_bounds(topology: Topology, collective: Collective, steps: int, rounds: int, groups: list[Group],
                     bounds: tuple[int, Fraction] | None = None) -> tuple[InstanceResult | None, int, Fraction]:
    """An instance the step or bandwidth bound rules out ("bound", no solver call), else None; with the bounds."""
    a_l, b_l = bounds if bounds is not None else (step_bound(topology, collective),
                                                  bandwidth_bound(topology, collective, groups))
    c = _sccl_chunks(collective)
    if rounds < steps:
        return InstanceResult("bound", 0.0, None, f"R = {rounds} < S = {steps}: every step needs a round"), a_l, b_l
    if steps < a_l:
        return InstanceResult("bound", 0.0, None, f"S = {steps} is below the step bound {a_l}"), a_l, b_l
    if Fraction(rounds, c) < b_l:
        return (InstanceResult("bound", 0.0, None, f"R/C = {Fraction(rounds, c)} is below the bandwidth bound {b_l}"),
                a_l, b_l)
    return None, a_l, b_l


def solve_instance(topology: Topology, collective: Collective, chunk_bytes: float, steps: int, rounds: int,
                   seconds: float, backend: str = "z3", groups: list[Group] | None = None, seed: int = 0,
                   bounds: tuple[int, Fraction] | None = None) -> InstanceResult:
    """One SYNCOLL instance (non-combining collective) on one backend; bound-rejected without a solve."""
    groups = groups if groups is not None else bandwidth_groups(topology)
    rejected, a_l, b_l = reject_by_bounds(topology, collective, steps, rounds, groups, bounds)
    if rejected is not None:
        return rejected
    c = _sccl_chunks(collective)
    deadline = Deadline(seconds)  # building the model counts against the call's seconds
    pre, post = list(collective.pre), list(collective.post)
    if backend in ("z3", "z3-auto"):
        model = _Z3Model(topology.num_npus, pre, post, groups, steps, rounds, "QF_LIA" if backend == "z3" else "auto")
    elif backend == "cpsat":
        model = _CpSatModel(topology.num_npus, pre, post, groups, steps, rounds, seed)
    else:
        raise ValueError(f"sccl: backend must be 'z3', 'z3-auto' or 'cpsat' ('race' is race.race_instance), "
                         f"got {backend!r}")
    answer, solution = model.solve(deadline.limit(floor=0.05))
    elapsed = deadline.elapsed()
    if answer != "sat":
        return InstanceResult(answer, elapsed, None)
    algorithm = _decode(topology, collective, chunk_bytes, solution, steps)
    algorithm.meta.update(steps=steps, rounds=rounds, sccl_chunks=c, engine=backend,
                          claimed_time=_sccl_cost(topology, steps, rounds, chunk_bytes), claim_model=CLAIM_MODEL,
                          latency_optimal=steps == a_l, bandwidth_optimal=Fraction(rounds, c) == b_l)
    return InstanceResult("sat", elapsed, algorithm)
