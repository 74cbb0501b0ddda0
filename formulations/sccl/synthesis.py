"""The sccl formulation's implementation (the package docstring maps the paper to it): ``synthesize``
and what it uses, loaded when a synthesis runs, not when the formulation is listed."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable

from workbench.model.algorithm import Algorithm, Transfer
from workbench.model.collective import Collective, make_collective
from workbench.kit.duality import by_duality
from workbench.kit.deadline import Deadline
from workbench.plugin.registry import Problem, SynthesisResult, Unsupported
from workbench.bounds import lp_seconds_within
from workbench.kit.solvers import smt_status
from workbench.topology import Topology

from . import race
from .options import INSTALL_CPSAT, ScclOptions
from .race import race_instance
from .instance import (InstanceResult, _collective_for, _sccl_chunks, bandwidth_bound, bandwidth_groups,
                       solve_instance, step_bound)

__all__ = ["synthesize", "bandwidth_groups", "step_bound", "bandwidth_bound", "solve_instance", "InstanceResult"]


# ----------------------------------------------------------------------------------- the formulation
_DUALS = {"reducescatter": "allgather", "reduce": "broadcast"}
_NATIVE = ("allgather", "broadcast", "gather", "scatter", "alltoall")


def synthesize(formulation: Any, problem: Problem, *, time_limit: float, seed: int,
               on_incumbent: Callable[[Algorithm], None] | None, options: ScclOptions) -> SynthesisResult:
    """SCCL for ``problem``: mode "instance" solves the given (steps, rounds), "least-steps" finds the
    fewest steps, "pareto" the steps/bandwidth frontier up to ``max_steps`` and ``max_chunks``."""
    deadline = Deadline(time_limit)
    kind = problem.collective.kind
    if kind not in _NATIVE + tuple(_DUALS) + ("allreduce",):
        raise Unsupported(f"sccl: {kind} is not supported")
    search = _Search(problem, options.groups, options.backend, seed, deadline, on_incumbent, options.call_limit)
    if options.mode == "instance":  # steps and rounds are given (ScclOptions.validate)
        outcome = search.instance(problem.collective.chunks_per_rank if kind != "alltoall"
                                  else _sccl_chunks(problem.collective), options.steps, options.rounds)
    elif options.mode == "least-steps":
        outcome = search.least_steps(_sccl_chunks(problem.collective) if kind == "alltoall"
                                     else problem.collective.chunks_per_rank, options.k, options.max_steps)
    else:
        outcome = search.pareto(options.k, options.max_steps, options.max_chunks)
    status, algorithms, message, stats = outcome
    seconds = deadline.elapsed()
    backend, note = options.backend, None
    if backend == "race" and not race.cpsat_available():  # the race is z3-auto alone (race.race_instance)
        backend, note = "z3-auto", f"CP-SAT (OR-Tools) is not installed, so the race backend ran z3-auto alone; " \
                                   f"{INSTALL_CPSAT} adds it"
    for algorithm in algorithms:
        algorithm.meta.update(backend=backend,
                              label=f"(C,S,R)=({algorithm.meta['sccl_chunks']},{algorithm.meta['steps']},"
                                    f"{algorithm.meta['rounds']})")
        if note is not None:
            algorithm.meta.update(backend_requested=options.backend, backend_note=note)
        if status == "optimal":  # proven in the (C, S, R) step model; the workbench judges the simulated time
            algorithm.meta["model_optimal"] = "sccl-steps"
    return SynthesisResult(algorithms, status, seconds, stats, message=message)


class _Search:
    """Instance, least-steps and Pareto searches, with the combining collectives by duality."""

    def __init__(self, problem: Problem, groups, backend: str, seed: int, deadline: Deadline,
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
            raise Unsupported("sccl: all-reduce as RS + AG needs a topology equal to its reverse (symmetric links)")
        self.groups = bandwidth_groups(self.solve_topology, _reversed_groups(groups) if self.reverse else groups)
        probe = _collective_for(base, self.n, self.n if base == "alltoall" else 1, self.root)
        self.a_l = step_bound(self.solve_topology, probe)
        # the bound's LP (All-to-All) runs inside the deadline
        self.b_l = bandwidth_bound(self.solve_topology, probe, self.groups, lp_seconds_within(deadline))
        self.calls: list[dict[str, Any]] = []

    # the size is fixed by the problem; the chunk size follows C
    def _chunk_bytes(self, collective: Collective) -> float:
        return collective.chunk_bytes(self.problem.size_bytes)

    def _run(self, c: int, steps: int, rounds: int) -> InstanceResult:
        collective = _collective_for(self.base_kind, self.n, c, self.root)
        if self.deadline.remaining() <= 0:
            return InstanceResult("unknown", 0.0, None, "time budget spent")
        remaining = self.deadline.limit(cap=self.call_limit)
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
        """Map a solved base algorithm back to the requested collective (spec 2.2) by the workbench's duality.

        Every gather run the duality asks for is the one base solve: RS is the base all-gather (solved
        on the reversed topology) run backwards, and AR's all-gather half is that same all-gather,
        valid on the original links because the topology is symmetric. One solve serves both halves.
        """
        if not self.reverse:
            return algorithm
        base = algorithm

        def solved(view: Topology, target: Collective, chunk_bytes: float) -> Algorithm:
            if target != base.collective:
                raise AssertionError(f"sccl: duality asked for {target}, the search solved {base.collective}")
            transfers = [Transfer(t.id, t.chunks, t.src, t.dst, t.op, t.deps) for t in base.transfers]
            return Algorithm(view, base.collective, base.chunk_bytes, transfers, dict(base.meta))

        c = base.collective
        requested = make_collective(self.kind, c.num_ranks, c.chunks_per_rank, c.root)
        mapped = by_duality(self.topology, requested, base.chunk_bytes, solved)
        meta = dict(base.meta)
        if self.kind == "allreduce":  # (P*C, 2S, 2R), claiming the sum of its halves
            meta.update(steps=2 * meta["steps"], rounds=2 * meta["rounds"], sccl_chunks=self.n * meta["sccl_chunks"],
                        claimed_time=mapped.meta["claimed_time"])
        mapped.meta.update(meta)
        return mapped

    def _status_for(self, result: InstanceResult) -> str:
        """sat / unsat / unknown as every SMT answer (``smt_status``); an instance the bounds rule out
        ("bound") is unsat without a solver call."""
        if result.answer == "sat":
            meta = result.algorithm.meta
            return smt_status("sat", proven_optimal=bool(meta.get("latency_optimal") and meta.get("bandwidth_optimal")))
        return smt_status("unsat" if result.answer == "bound" else result.answer)

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
                    if self.call_limit is not None and not self.deadline.expired:
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
