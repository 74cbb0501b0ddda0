"""SCCL: k-synchronous collective algorithms by QF_LIA SMT synthesis, and their Pareto frontier.

Paper: Z. Cai et al., "Synthesizing Optimal Collective Algorithms" (PPoPP 2021); spec
``../shared/spec/sccl.md`` (section numbers below).

Paper symbol -> code name:

* P nodes, bandwidth relation B = {(L, b)}  -> ``bandwidth_groups(topology)``: one group per directed
  link with b = its bandwidth / the slowest link's (DGX-1: 1 or 2 NVLinks), plus optional extra
  groups (``groups`` parameter: per-node aggregate limits, shared buses); E = pairs in a group with
  b > 0 (spec 1.1, erratum 2)
* G global chunks, pre/post relations (All, Root, Scattered, Transpose; spec 2.1)  -> the workbench
  collective's explicit pre/post (our chunk ids j*n + r are SCCL's i*P + n); SCCL's per-node C is
  chunks per rank k (n*k for All-to-All, which needs C a multiple of P)
* S steps, R rounds, r_s rounds of step s, k-synchronous R <= S + k  -> ``steps``, ``rounds``,
  ``r[s]``, ``k``
* time[c,n] (Int), snd[n,c,n'] (Bool)  -> ``time[c][n]``, ``snd[(n, c, n2)]`` (spec 3.2)
* constraints C1-C6 (spec 3.3, typos fixed: C4 over every c and (n,n') in E; decode with the
  destination's time)  -> ``_Z3Model`` (C5 as pseudo-Boolean with a case split on r_s, encoding (a))
  and ``_CpSatModel`` (the same model on OR-Tools CP-SAT with one-hot arrival steps); ``backend`` is
  ``z3`` (``SolverFor("QF_LIA")``), ``z3-auto`` (z3's default tactic selection) or ``cpsat``
* decoding (spec 3.4): Q = (r_1..r_S), T = {(c, n, n', t) : snd and time[c,n'] = t+1}  -> ``_decode``;
  phantom sends (destination never reached) are dropped
* cost T(L) = S*alpha + (R/C)*L*beta  -> ``meta["claimed_time"]`` with beta of the slowest link
* lower bounds a_l (collective-aware step bound) and b_l (exact max-flow optimum, flow-LP and cut bounds of
  ``workbench.bounds`` in rounds per chunk; spec 4)  -> ``step_bound``, ``bandwidth_bound``
* combining collectives (spec 2.2): Reduce / Reduce-Scatter are Broadcast / All-Gather on the
  reversed topology run backwards (``Algorithm.reverse``); All-Reduce = RS then AG,
  (P*C, 2S, 2R)
* Pareto synthesis (Algorithm 1, spec 3.8): for S = a_l, a_l+1, ...: the (R, C) with
  S <= R <= S+k, R/C >= b_l in ascending R/C (smaller C first); the first SAT is the frontier point
  at S; stop when R/C = b_l, at ``max_steps`` or when the time budget is spent

Modes: ``instance`` (one (C, S, R): C is the problem's chunks per rank), ``pareto`` (C varies;
one algorithm per frontier point) and ``least-steps`` (the smallest S for the problem's C with
R = S + k). Status by DESIGN.md's SMT rule: sat -> feasible (optimal when the bounds prove both
S = a_l and R/C = b_l, or a Pareto search completes at b_l), unsat -> infeasible (also when a
bound rejects the instance without calling the solver), unknown -> timeout.
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any, Callable

from workbench.algorithm import Algorithm, Transfer
from workbench.bounds import lower_bounds
from workbench.collective import Collective, make_collective
from workbench.registry import Problem, SynthesisResult
from workbench.topology import Topology
from workbench.parameters import Parameter

__all__ = ["Sccl", "bandwidth_groups", "step_bound", "bandwidth_bound", "solve_instance", "InstanceResult"]

Group = tuple[tuple[tuple[int, int], ...], int]


# ----------------------------------------------------------------------------------- the instance
def bandwidth_groups(topology: Topology, extra: list | None = None) -> list[Group]:
    """One group per directed link with b = bandwidth / slowest bandwidth (must be near-integral)."""
    if topology.num_switches:
        raise ValueError("sccl needs a switchless topology (model a switch as a shared-bus group instead)")
    slowest = min(l.bandwidth for l in topology.links)
    groups: list[Group] = []
    for link in topology.links:
        ratio = link.bandwidth / slowest
        b = round(ratio)
        if abs(ratio - b) > 0.05 * ratio:
            raise ValueError(f"link {link.src}->{link.dst}: bandwidth {link.bandwidth:g} is not a whole multiple "
                             f"of the slowest link's {slowest:g}; SCCL needs integral chunks per round")
        groups.append((((link.src, link.dst),), b))
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


def bandwidth_bound(topology: Topology, collective: Collective, groups: list[Group]) -> Fraction:
    """b_l in rounds per chunk (R/C) from the exact max-flow optimum (All-Gather and kin), the flow LP
    (All-to-All) and the enumerated cut on the one-chunk-per-node instance."""
    unit = _unit_topology(topology, groups)
    per_node = _sccl_chunks(collective)
    bounds = lower_bounds(unit, collective, 1.0, lp_time_limit=30.0)
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


# ----------------------------------------------------------------------------------- the encodings
class _Z3Model:
    """C1-C6 in z3 (QF_LIA; C5 pseudo-Boolean with a case split on r_s)."""

    def __init__(self, n: int, pre, post, groups: list[Group], steps: int, rounds: int, logic: str = "QF_LIA") -> None:
        import z3

        self.z3 = z3
        # "QF_LIA" fixes the logic as the paper did; "auto" lets z3 pick its tactic, which is several
        # times faster on the hard bandwidth-optimal instances here (its pseudo-Boolean handling)
        self.solver = z3.SolverFor("QF_LIA") if logic == "QF_LIA" else z3.Solver()
        g = len(pre)
        edges = sorted({pair for pairs, b in groups if b > 0 for pair in pairs})
        self.edges = edges
        self.time = [[z3.Int(f"t_{c}_{v}") for v in range(n)] for c in range(g)]
        self.snd = {(u, c, v): z3.Bool(f"s_{u}_{c}_{v}") for c in range(g) for u, v in edges}
        self.r = [z3.Int(f"r_{s}") for s in range(1, steps + 1)]
        add = self.solver.add
        into = {v: [u for u, w in edges if w == v] for v in range(n)}
        for c in range(g):
            for v in range(n):
                t = self.time[c][v]
                add(t >= 0, t <= steps + 1)  # any value above S means "never"; S + 1 stands for all of them
                if v in pre[c]:
                    add(t == 0)  # C1
                else:
                    add(z3.Implies(t <= steps, z3.PbEq([(self.snd[(u, c, v)], 1) for u in into[v]], 1)
                                   if into[v] else z3.BoolVal(False)))  # C3
                if v in post[c]:
                    add(t <= steps)  # C2
            for u, v in edges:
                add(z3.Implies(self.snd[(u, c, v)], self.time[c][u] < self.time[c][v]))  # C4
        k = rounds - steps
        for s_index, r_s in enumerate(self.r):
            step = s_index + 1
            add(r_s >= 1)
            for pairs, b in groups:
                terms = [(z3.And(self.snd[(u, c, v)], self.time[c][v] == step), 1)
                         for c in range(g) for u, v in pairs if (u, c, v) in self.snd]
                if not terms:
                    continue
                for extra in range(1, k + 2):  # C5, case split (every r_s <= k + 1)
                    add(z3.Implies(r_s == extra, z3.PbLe(terms, b * extra)))
        add(z3.Sum(self.r) == rounds)  # C6

    def solve(self, seconds: float) -> tuple[str, Any]:
        self.solver.set("timeout", max(1, int(seconds * 1000)))
        answer = self.solver.check()
        if str(answer) != "sat":
            return str(answer), None
        model = self.solver.model()
        times = [[model.eval(t, model_completion=True).as_long() for t in row] for row in self.time]
        sends = [key for key, var in self.snd.items() if self.z3.is_true(model.eval(var, model_completion=True))]
        rounds = [model.eval(r, model_completion=True).as_long() for r in self.r]
        return "sat", (times, sends, rounds)


class _CpSatModel:
    """The same instance on OR-Tools CP-SAT: one-hot arrival step y[c,n,s], s in 0..S or never."""

    def __init__(self, n: int, pre, post, groups: list[Group], steps: int, rounds: int, seed: int) -> None:
        from ortools.sat.python import cp_model

        self.cp_model = cp_model
        model = cp_model.CpModel()
        self.model = model
        self.seed = seed
        g = len(pre)
        never = steps + 1
        edges = sorted({pair for pairs, b in groups if b > 0 for pair in pairs})
        self.edges = edges
        self.time = [[model.NewIntVar(0, never, f"t_{c}_{v}") for v in range(n)] for c in range(g)]
        self.y = {}
        for c in range(g):
            for v in range(n):
                ys = [model.NewBoolVar(f"y_{c}_{v}_{s}") for s in range(never + 1)]
                model.AddExactlyOne(ys)
                model.Add(self.time[c][v] == sum(s * y for s, y in enumerate(ys)))
                self.y[(c, v)] = ys
                if v in pre[c]:
                    model.Add(ys[0] == 1)  # C1
                else:
                    model.Add(ys[0] == 0)
                if v in post[c]:
                    model.Add(ys[never] == 0)  # C2
        self.snd = {(u, c, v): model.NewBoolVar(f"s_{u}_{c}_{v}") for c in range(g) for u, v in edges}
        into = {v: [u for u, w in edges if w == v] for v in range(n)}
        for c in range(g):
            for v in range(n):
                if v in pre[c]:
                    continue
                incoming = [self.snd[(u, c, v)] for u in into[v]]
                # C3 (phantom sends forbidden, which keeps feasibility): exactly one sender iff it arrives
                model.Add(sum(incoming) == 1 - self.y[(c, v)][never])
            for u, v in edges:
                model.Add(self.time[c][u] < self.time[c][v]).OnlyEnforceIf(self.snd[(u, c, v)])  # C4
        self.r = [model.NewIntVar(1, rounds - steps + 1, f"r_{s}") for s in range(1, steps + 1)]
        for step in range(1, steps + 1):
            for pairs, b in groups:
                terms = []
                for c in range(g):
                    for u, v in pairs:
                        if (u, c, v) not in self.snd:
                            continue
                        z = model.NewBoolVar("")
                        model.AddBoolAnd([self.snd[(u, c, v)], self.y[(c, v)][step]]).OnlyEnforceIf(z)
                        model.AddBoolOr([self.snd[(u, c, v)].Not(), self.y[(c, v)][step].Not()]).OnlyEnforceIf(
                            z.Not())
                        terms.append(z)
                if terms:
                    model.Add(sum(terms) <= b * self.r[step - 1])  # C5
        model.Add(sum(self.r) == rounds)  # C6

    def solve(self, seconds: float) -> tuple[str, Any]:
        solver = self.cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = max(0.05, seconds)
        solver.parameters.num_workers = 2
        solver.parameters.random_seed = self.seed
        name = solver.StatusName(solver.Solve(self.model))
        if name not in ("OPTIMAL", "FEASIBLE"):  # a feasibility model: any solution is the answer
            return ("unsat" if name == "INFEASIBLE" else "unknown"), None
        times = [[solver.Value(t) for t in row] for row in self.time]
        sends = [key for key, var in self.snd.items() if solver.Value(var)]
        rounds = [solver.Value(r) for r in self.r]
        return "sat", (times, sends, rounds)


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
    delivered: dict[tuple[int, int], int] = {}
    transfers = []
    for u, c, v in real:
        dep = delivered.get((u, c))
        tid = len(transfers)
        transfers.append(Transfer(tid, (c,), u, v, "copy", () if dep is None else (dep,)))
        delivered[(v, c)] = tid
    algorithm = Algorithm(topology, collective, chunk_bytes, transfers, {"rounds_per_step": rounds})
    return algorithm


def _sccl_cost(topology: Topology, steps: int, rounds: int, chunk_bytes: float) -> float:
    """T = S*alpha + (R/C)*L*beta with L/C = one chunk and beta of the slowest (b = 1) link."""
    alpha = max(l.alpha for l in topology.links)
    slowest = min(l.bandwidth for l in topology.links)
    return steps * alpha + rounds * chunk_bytes / slowest


def solve_instance(topology: Topology, collective: Collective, chunk_bytes: float, steps: int, rounds: int,
                   seconds: float, backend: str = "z3", groups: list[Group] | None = None, seed: int = 0,
                   bounds: tuple[int, Fraction] | None = None) -> InstanceResult:
    """One SYNCOLL instance (non-combining collective) on one backend; bound-rejected without a solve."""
    groups = groups if groups is not None else bandwidth_groups(topology)
    if rounds < steps:
        return InstanceResult("bound", 0.0, None, f"R = {rounds} < S = {steps}: every step needs a round")
    a_l, b_l = bounds if bounds is not None else (step_bound(topology, collective),
                                                  bandwidth_bound(topology, collective, groups))
    c = _sccl_chunks(collective)
    if steps < a_l:
        return InstanceResult("bound", 0.0, None, f"S = {steps} is below the step bound {a_l}")
    if Fraction(rounds, c) < b_l:
        return InstanceResult("bound", 0.0, None, f"R/C = {Fraction(rounds, c)} is below the bandwidth bound {b_l}")
    started = time.perf_counter()
    pre, post = list(collective.pre), list(collective.post)
    if backend in ("z3", "z3-auto"):
        model = _Z3Model(topology.num_npus, pre, post, groups, steps, rounds, "QF_LIA" if backend == "z3" else "auto")
    elif backend == "cpsat":
        model = _CpSatModel(topology.num_npus, pre, post, groups, steps, rounds, seed)
    else:
        raise ValueError(f"sccl: backend must be 'z3', 'z3-auto' or 'cpsat', got {backend!r}")
    remaining = max(0.05, seconds - (time.perf_counter() - started))
    answer, solution = model.solve(remaining)
    elapsed = time.perf_counter() - started
    if answer != "sat":
        return InstanceResult(answer, elapsed, None)
    algorithm = _decode(topology, collective, chunk_bytes, solution, steps)
    algorithm.meta.update(steps=steps, rounds=rounds, sccl_chunks=c,
                          claimed_time=_sccl_cost(topology, steps, rounds, chunk_bytes),
                          latency_optimal=steps == a_l, bandwidth_optimal=Fraction(rounds, c) == b_l)
    return InstanceResult("sat", elapsed, algorithm)


# ----------------------------------------------------------------------------------- the formulation
_DUALS = {"reducescatter": "allgather", "reduce": "broadcast"}
_NATIVE = ("allgather", "broadcast", "gather", "scatter", "alltoall")


class Sccl:
    """SCCL synthesis (see the module docstring)."""

    name = "sccl"
    kind = "schedule"
    parameters = (
        Parameter("mode", ("str",), "instance", "one (C,S,R) instance, the fewest steps, or the Pareto frontier",
                  choices=("instance", "least-steps", "pareto")),
        Parameter("steps", ("int", "none"), None, "S: synchronous steps (instance mode)", minimum=1),
        Parameter("rounds", ("int", "none"), None, "R: rounds, bandwidth units over all steps", minimum=1),
        Parameter("k", ("int",), 0, "extra rounds beyond the step count searched (least-steps, pareto)", minimum=0),
        Parameter("backend", ("str",), "z3", "z3 (QF_LIA, the paper's), z3-auto or cpsat",
                  choices=("z3", "z3-auto", "cpsat")),
        Parameter("max_steps", ("int", "none"), None, "largest step count searched", minimum=1),
        Parameter("max_chunks", ("int",), 64, "largest chunk count searched (pareto)", minimum=1),
        Parameter("groups", ("list", "none"), None, "extra bandwidth groups: [[[src, dst], ...], bandwidth]"),
        Parameter("call_limit", ("float", "none"), None, "seconds per solver call", minimum=0),
    )

    def synthesize(self, problem: Problem, *, time_limit: float, seed: int,
                   on_incumbent: Callable[[Algorithm], None] | None = None, mode: str = "instance",
                   steps: int | None = None, rounds: int | None = None, k: int = 0, backend: str = "z3",
                   max_steps: int | None = None, max_chunks: int = 64, groups: list | None = None,
                   call_limit: float | None = None, **params: Any) -> SynthesisResult:
        if params:
            raise ValueError(f"sccl: unknown parameters {sorted(params)}")
        started = time.perf_counter()
        deadline = started + time_limit
        kind = problem.collective.kind
        if kind not in _NATIVE + tuple(_DUALS) + ("allreduce",):
            raise ValueError(f"sccl: {kind} is not supported")
        search = _Search(problem, groups, backend, seed, deadline, on_incumbent, call_limit)
        if mode == "instance":
            if steps is None or rounds is None:
                raise ValueError("sccl: mode 'instance' needs steps and rounds (e.g. --set steps=3 --set rounds=7)")
            outcome = search.instance(problem.collective.chunks_per_rank if kind != "alltoall"
                                      else _sccl_chunks(problem.collective), steps, rounds)
        elif mode == "least-steps":
            outcome = search.least_steps(_sccl_chunks(problem.collective) if kind == "alltoall"
                                         else problem.collective.chunks_per_rank, k, max_steps)
        elif mode == "pareto":
            outcome = search.pareto(k, max_steps, max_chunks)
        else:
            raise ValueError(f"sccl: mode must be instance, least-steps or pareto, got {mode!r}")
        status, algorithms, message, stats = outcome
        seconds = time.perf_counter() - started
        for algorithm in algorithms:
            algorithm.meta.update(formulation=self.name, seed=seed, synthesis_seconds=seconds, backend=backend,
                                  label=f"(C,S,R)=({algorithm.meta['sccl_chunks']},{algorithm.meta['steps']},"
                                        f"{algorithm.meta['rounds']})")
        return SynthesisResult(algorithms, status, seconds, stats, message=message)


class _Search:
    """Instance, least-steps and Pareto searches, with the combining collectives by duality."""

    def __init__(self, problem: Problem, groups, backend: str, seed: int, deadline: float,
                 on_incumbent, call_limit: float | None = None) -> None:
        self.call_limit = call_limit
        self.unproven = False
        self.problem = problem
        self.topology = problem.topology
        self.kind = problem.collective.kind
        self.n = problem.collective.num_ranks
        self.root = problem.collective.root
        self.backend = backend
        self.seed = seed
        self.deadline = deadline
        self.on_incumbent = on_incumbent
        base = _DUALS.get(self.kind, "allgather" if self.kind == "allreduce" else self.kind)
        self.base_kind = base
        self.reverse = self.kind in _DUALS or self.kind == "allreduce"
        self.solve_topology = self.topology.reversed() if self.reverse else self.topology
        if self.kind == "allreduce" and self.solve_topology != self.topology:
            raise ValueError("sccl: all-reduce as RS + AG needs a topology equal to its reverse (symmetric links)")
        self.groups = bandwidth_groups(self.solve_topology, _reversed_groups(groups) if self.reverse else groups)
        probe = _collective_for(base, self.n, self.n if base == "alltoall" else 1, self.root)
        self.a_l = step_bound(self.solve_topology, probe)
        self.b_l = bandwidth_bound(self.solve_topology, probe, self.groups)
        self.calls: list[dict[str, Any]] = []

    # the size is fixed by the problem; the chunk size follows C
    def _chunk_bytes(self, collective: Collective) -> float:
        return collective.chunk_bytes(self.problem.size_bytes)

    def _run(self, c: int, steps: int, rounds: int) -> InstanceResult:
        collective = _collective_for(self.base_kind, self.n, c, self.root)
        remaining = self.deadline - time.perf_counter()
        if remaining <= 0:
            return InstanceResult("unknown", 0.0, None, "time budget spent")
        if self.call_limit is not None:
            remaining = min(remaining, self.call_limit)
        result = solve_instance(self.solve_topology, collective, self._chunk_bytes(collective), steps, rounds,
                                remaining, self.backend, self.groups, self.seed, (self.a_l, self.b_l))
        self.calls.append({"C": c, "S": steps, "R": rounds, "answer": result.answer,
                           "seconds": round(result.seconds, 4), "note": result.note})
        if result.algorithm is not None:
            result.algorithm = self._finish(result.algorithm)
            if self.on_incumbent is not None:
                self.on_incumbent(result.algorithm)
        return result

    def _finish(self, algorithm: Algorithm) -> Algorithm:
        """Map a solved base algorithm back to the requested collective (spec 2.2)."""
        if not self.reverse:
            return algorithm
        meta = dict(algorithm.meta)
        reduced = algorithm.reverse(self.topology)
        if self.kind == "allreduce":
            # RS = the base all-gather (solved on the reversed topology) run backwards; the AG phase is
            # that same all-gather, valid on the original links because the topology is symmetric
            gather = Algorithm(self.topology, algorithm.collective, algorithm.chunk_bytes,
                               [Transfer(t.id, t.chunks, t.src, t.dst, t.op, t.deps) for t in algorithm.transfers],
                               {})
            combined = reduced.concat(gather)
            meta.update(steps=2 * meta["steps"], rounds=2 * meta["rounds"],
                        sccl_chunks=self.n * meta["sccl_chunks"], claimed_time=2 * meta["claimed_time"])
            combined.meta.update(meta)
            return combined
        reduced.meta.update(meta)
        return reduced

    def _status_for(self, result: InstanceResult) -> str:
        if result.answer == "sat":
            meta = result.algorithm.meta
            return "optimal" if meta.get("latency_optimal") and meta.get("bandwidth_optimal") else "feasible"
        return {"unsat": "infeasible", "bound": "infeasible", "unknown": "timeout"}.get(result.answer, "error")

    def _stats(self, **extra) -> dict[str, Any]:
        return {"step_bound": self.a_l, "bandwidth_bound": str(self.b_l), "calls": self.calls, **extra}

    def instance(self, c: int, steps: int, rounds: int):
        result = self._run(c, steps, rounds)
        message = result.note or {"unsat": "unsat: no k-synchronous algorithm with these (C, S, R)",
                                  "unknown": "unknown: the solver's time limit ended the search"}.get(result.answer, "")
        algorithms = [result.algorithm] if result.algorithm is not None else []
        return self._status_for(result), algorithms, message, self._stats()

    def least_steps(self, c: int, k: int, max_steps: int | None):
        limit = max_steps or self.a_l + 8
        for steps in range(self.a_l, limit + 1):
            for rounds in range(steps, steps + k + 1):
                result = self._run(c, steps, rounds)
                if result.answer == "sat":
                    status = "optimal" if steps == self.a_l else "feasible"
                    return status, [result.algorithm], f"least steps: S = {steps}", self._stats()
                if result.answer == "unknown":
                    return "timeout", [], "time budget spent before a SAT instance", self._stats()
        return "infeasible", [], f"no SAT instance up to S = {limit}", self._stats()

    def pareto(self, k: int, max_steps: int | None, max_chunks: int):
        limit = max_steps or self.a_l + 8
        frontier: list[Algorithm] = []
        reason = f"max_steps {limit} reached"
        status = "feasible"
        step_multiple = self.n if self.base_kind == "alltoall" else 1
        for steps in range(self.a_l, limit + 1):
            candidates = []
            for rounds in range(steps, steps + k + 1):
                top = min(max_chunks, int(rounds / self.b_l) if self.b_l > 0 else max_chunks)
                for c in range(step_multiple, top + 1, step_multiple):
                    if Fraction(rounds, c) >= self.b_l:
                        candidates.append((Fraction(rounds, c), c, rounds))
            found = None
            for ratio, c, rounds in sorted(candidates):
                result = self._run(c, steps, rounds)
                if result.answer == "sat":
                    found = (ratio, result.algorithm)
                    break
                if result.answer == "unknown":
                    if self.call_limit is not None and time.perf_counter() < self.deadline:
                        self.unproven = True  # skip this candidate: the point found at S is not proven minimal
                        continue
                    status, reason = "timeout", "time budget spent"
                    break
            if status == "timeout":
                break
            if found is not None:
                ratio, algorithm = found
                if not any(Fraction(a.meta["rounds"], a.meta["sccl_chunks"]) <= ratio for a in frontier):
                    frontier.append(algorithm)  # non-dominance: a smaller S with the same ratio wins
                if ratio == self.b_l:
                    status = "feasible" if self.unproven else "optimal"
                    reason = f"bandwidth bound {self.b_l} reached at S = {steps}"
                    break
        if self.unproven:
            reason += "; some candidates hit call_limit, so the frontier is not proven minimal"
        return status, frontier, reason, self._stats(stop_reason=reason)


def _reversed_groups(groups: list | None) -> list | None:
    if not groups:
        return groups
    return [([(v, u) for u, v in pairs], b) for pairs, b in groups]
