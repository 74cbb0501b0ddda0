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
  ``race`` (default: ``cpsat`` and ``z3-auto`` in two processes, the first sat/unsat wins, ``race.py``),
  ``z3`` (``SolverFor("QF_LIA")``, the paper's setting), ``z3-auto`` (z3's default tactic selection)
  or ``cpsat``
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
from workbench.collective import Collective
from workbench.registry import Problem, SynthesisResult
from workbench.parameters import Parameter

from .race import race_instance
from .instance import (InstanceResult, _collective_for, _sccl_chunks, bandwidth_bound, bandwidth_groups,
                       solve_instance, step_bound)

__all__ = ["Sccl", "bandwidth_groups", "step_bound", "bandwidth_bound", "solve_instance", "InstanceResult"]


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
        Parameter("backend", ("str",), "race", "race (CP-SAT and z3-auto in two processes, the first answer "
                  "wins), z3 (QF_LIA, the paper's), z3-auto or cpsat", choices=("race", "z3", "z3-auto", "cpsat")),
        Parameter("max_steps", ("int", "none"), None, "largest step count searched", minimum=1),
        Parameter("max_chunks", ("int",), 64, "largest chunk count searched (pareto)", minimum=1),
        Parameter("groups", ("list", "none"), None, "extra bandwidth groups: [[[src, dst], ...], bandwidth]"),
        Parameter("call_limit", ("float", "none"), None, "seconds per solver call", minimum=0),
    )

    def synthesize(self, problem: Problem, *, time_limit: float, seed: int,
                   on_incumbent: Callable[[Algorithm], None] | None = None, mode: str = "instance",
                   steps: int | None = None, rounds: int | None = None, k: int = 0, backend: str = "race",
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
        args = (self.solve_topology, collective, self._chunk_bytes(collective), steps, rounds, remaining)
        if self.backend == "race":
            result = race_instance(*args, self.groups, self.seed, (self.a_l, self.b_l))
        else:
            result = solve_instance(*args, self.backend, self.groups, self.seed, (self.a_l, self.b_l))
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
