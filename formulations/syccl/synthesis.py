"""SyCCL's pipeline: decompose, explore sketches, balance, solve one sub-model per class, stitch,
and keep the candidate the simulator times fastest (the module docstring of ``formulations.syccl``)."""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from formulations.syccl.balance import balance, chunk_split
from formulations.syccl.selection import Selection, depths
from formulations.syccl.options import SycclOptions
from formulations.syccl.sketches import Sketch, explore
from formulations.syccl.stitching import Round, allgather_sends
from formulations.syccl.submodel import Pattern, broadcast_pattern
from workbench.kit.deadline import Deadline
from workbench.kit.decomposition import Decomposition, decompose, stitch
from workbench.kit.duality import by_duality_phases
from workbench.model.algorithm import Algorithm
from workbench.model.collective import make_collective
from workbench.plugin.registry import Problem, SynthesisResult, Unsupported

__all__ = ["synthesize", "tier_bandwidth"]

KINDS = ("allgather", "reducescatter", "allreduce", "alltoall")


def _say(message: str) -> None:
    print(f"syccl: {message}", file=sys.stderr, flush=True)


def tier_bandwidth(decomposition: Decomposition) -> dict[str, float]:
    """A GPU's egress bandwidth in each dimension's tier (its links out in the group fabric)."""
    out = {}
    for dim in decomposition.dimensions:
        sub = dim.fabrics[0].topology
        out[dim.name] = sum(l.bandwidth for l in sub.links if l.src == 0)
    return out


class _Solved:
    """Sub-model solutions by (view, dimension, piece bytes): one solve per isomorphism class,
    reused by every group of the class and every candidate of that piece size."""

    def __init__(self, options: SycclOptions, deadline: Deadline, seed: int) -> None:
        self.options, self.deadline, self.seed = options, deadline, seed
        self.patterns: dict[tuple, Pattern] = {}
        self.solves = 0
        self.reuses = 0
        self.statuses: dict[str, int] = {}

    def get(self, view: str, decomposition: Decomposition, piece: float) -> dict[str, Pattern]:
        """The broadcast pattern of every dimension's class for ``piece`` bytes."""
        missing = [d for d in decomposition.dimensions if (view, d.name, piece) not in self.patterns]
        limit = self.deadline.limit(cap=self.options.milp_seconds, floor=0.5) if missing else 0.0
        with ThreadPoolExecutor(max_workers=2) as pool:  # the two classes' models solve side by side
            futures = {d.name: pool.submit(broadcast_pattern, d.fabrics[0], piece, min(limit, max(
                0.5, self.deadline.remaining() / 5)), self.options.max_model_columns, self.seed) for d in missing}
            for name, future in futures.items():
                pattern = future.result()
                self.patterns[(view, name, piece)] = pattern
                self.solves += 1
                self.statuses[pattern.status] = self.statuses.get(pattern.status, 0) + 1
        out = {}
        for d in decomposition.dimensions:
            out[d.name] = self.patterns[(view, d.name, piece)]
            self.reuses += sum(len(c) for c in d.classes) - 1  # every other group takes the class's solution
        return out


def synthesize(formulation: Any, problem: Problem, *, time_limit: float, seed: int,
               on_incumbent: Callable | None, options: SycclOptions) -> SynthesisResult:
    """The fastest stitched candidate as a ``feasible`` result; ``Unsupported`` where the fabric has
    no symmetric decomposition or the collective is not one SyCCL defines."""
    started = time.perf_counter()
    deadline = Deadline(time_limit)
    collective = problem.collective
    if collective.kind not in KINDS:
        raise Unsupported(f"syccl defines {', '.join(KINDS)}, not {collective.kind}")
    decomposition = decompose(problem.topology)
    if decomposition is None or any(len(d.classes) != 1 for d in decomposition.dimensions):
        raise Unsupported("syccl needs equal boxes joined by rails (a rails: cluster, or a grid whose last dimension "
                          "is switched) whose translations verify (workbench.kit.decomposition); this fabric has none")
    summary = decomposition.summary()
    _say("decomposition: " + ", ".join(f"{d['name']} {d['groups']} groups of {d['group_size']} "
                                       f"({d['classes']} class)" for d in summary["dimensions"]))
    bandwidth = tier_bandwidth(decomposition)
    solved = _Solved(options, deadline, seed)
    if collective.kind == "alltoall":
        from formulations.syccl.alltoall import alltoall_candidates
        return alltoall_candidates(problem, decomposition, bandwidth, options, deadline, started, summary, _say,
                                   on_incumbent)
    exploration = explore(decomposition, bandwidth, options.max_stages, options.prune_ratio)
    sketches = exploration.kept[: options.max_sketches]
    shares, balanced, lp_status = balance(sketches, bandwidth, deadline.limit(cap=10.0, floor=0.5))
    _say(f"sketches: {exploration.counts['stage_sequences']} stage sequences, {exploration.counts['kept']} kept; "
         f"balanced mix " + ", ".join(f"{s.name} {x:.2f}" for s, x in zip(sketches, shares) if x > 1e-6))
    combos = {"balanced": shares}
    best_single = [1.0 if i == 0 else 0.0 for i in range(len(sketches))]
    if any(abs(a - b) > 1e-3 for a, b in zip(shares, best_single)):
        combos["best sketch"] = best_single
    build = _candidate_builder(problem, decomposition, sketches, bandwidth, solved)
    selection = Selection(problem, on_incumbent)
    for k in depths(options.depths, problem, 10):
        if deadline.expired:
            break
        listed = _transfer_estimate(collective, k, sketches)
        if listed > options.max_transfers:
            selection.stopped = (f"depth {k} would list about {listed:,} transfers, above max_transfers "
                                 f"({options.max_transfers:,})")
            break
        for combo_name, combo in combos.items():
            for merge in (False, True):
                if deadline.remaining() < 1.0 and selection.best is not None:
                    break
                selection.consider(build(k, combo, merge), deadline.remaining(), chunks=k, combination=combo_name,
                                   merge=merge)
        best = selection.best
        _say(f"depth {k}: best so far {best[0] * 1e6:.4g} us ({best[2]['combination']}, "
             f"{'merged' if best[2]['merge'] else 'per chunk'}, {best[2]['chunks']} chunks)")
        if selection.depth_done(options.depths == "auto"):
            break
    meta = _metadata(summary, exploration.counts, sketches, shares, lp_status, balanced, solved)
    return selection.result(started, deadline.expired, meta,
                            {"sketches_kept": exploration.counts["kept"], "sub_models": solved.solves})


def _candidate_builder(problem: Problem, decomposition: Decomposition, sketches: list[Sketch], bandwidth,
                       solved: _Solved) -> Callable[[int, list[float], bool], Algorithm]:
    """``build(k, combo, merge)``: the stitched algorithm with ``k`` chunks per rank, the sketches mixed
    by ``combo``; each phase's All-Gather on the forward or reversed view (decomposed once, on first use)."""
    collective = problem.collective
    views: dict[str, Decomposition] = {"forward": decomposition}

    def build(k: int, combo: list[float], merge: bool) -> Algorithm:
        target = problem.with_chunks(k).collective

        def gather(view_topology, gather_collective, chunk_bytes, phase) -> Algorithm:
            key = "reversed" if phase.reversed else "forward"
            if key not in views:
                found = decompose(view_topology)
                if found is None:
                    raise ValueError("the reversed fabric has no symmetric decomposition")
                views[key] = found
            view = views[key]
            patterns = solved.get(key, view, chunk_bytes)
            counts = chunk_split(combo, k)
            rounds = [Round(j, sketch) for j, sketch in enumerate(_spread(sketches, counts))]
            sends = allgather_sends(view, collective.num_ranks, chunk_bytes, rounds, patterns, bandwidth, merge)
            return stitch(view_topology, gather_collective, chunk_bytes, sends, spread=not phase.reversed)

        return by_duality_phases(problem.topology, target, target.chunk_bytes(problem.size_bytes), gather)

    return build


def _metadata(summary: dict, counts: dict, sketches: list[Sketch], shares: list[float], lp_status: str,
              balanced: float, solved: _Solved) -> dict:
    """The result's metadata: decomposition, sketches kept with their shares, balance LP, sub-models."""
    return {"decomposition": summary, "sketches": counts,
            "kept": [{"sketch": s.name, "share": round(x, 6), "sends": s.sends} for s, x in zip(sketches, shares)],
            "balance": {"status": lp_status, "seconds_per_byte": balanced},
            "sub_models": {"solved": solved.solves, "reused": solved.reuses, "statuses": solved.statuses,
                           "patterns": {f"{v}/{d}/{p:g}": {"status": pat.status, **pat.stats}
                                        for (v, d, p), pat in solved.patterns.items()}}}


def _spread(sketches: list[Sketch], counts: list[int]) -> list[Sketch]:
    """One sketch per chunk index, the sketches' counts interleaved (rounds of each mix alternate)."""
    order: list[Sketch] = []
    left = list(counts)
    while any(left):
        for i, c in enumerate(left):
            if c:
                order.append(sketches[i])
                left[i] -= 1
    return order


def _transfer_estimate(collective, k: int, sketches: list[Sketch]) -> int:
    """Transfers of a per-chunk listing with ``k`` chunks per rank (the larger of the sketches')."""
    n = collective.num_ranks
    per_chunk = max(sum(s.sends.values()) for s in sketches)
    return n * k * per_chunk * (2 if collective.kind == "allreduce" else 1)
