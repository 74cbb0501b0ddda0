"""NVLS: All-Reduce, Reduce-Scatter and All-Gather summed inside switches that reduce (NVLink SHARP in
the box; InfiniBand SHARP, or NPUs, across boxes), pipelined over pieces.

The method is NCCL's NVLS and NVLS-Tree algorithms (NVIDIA NCCL 2.17+, ``src/device/all_reduce.h``:
each GPU load-reduces its slice of every peer's buffer through the NVSwitch, ``multimem.ld_reduce``,
and stores the result to every peer with one multicast, ``multimem.st``; across nodes NVLS-Tree
runs a tree between the boxes) and CollNet over SHARP (R. L. Graham et al., "Scalable Hierarchical
Aggregation Protocol (SHArP): A Hardware Architecture for Efficient Data Reduction", COMHPC 2016:
switches sum the members' messages up an aggregation tree and send the result down it). Here,
on B boxes of G NPUs, each box one switch that reduces (``Topology.reduces``), NPU position i of
every box forming rail i:

1. ``box-reduce``: every NPU of box b reduces its copy of slice i into the box switch, for every
   position i (the load-reduce's reads; the issuer's own copy is read through the switch too, as
   the hardware does), and ``box-load``: the switch sends the sum to position i, which issued it;
2. across the boxes, on rail i, only when B > 1: where every rail-i NPU hangs off switches that
   reduce and lead to one common reducing switch (a rail leaf; or the leaves and one spine, the
   spine picked by the rail), ``sharp``: each NPU reduces its box sum into its leaf, a leaf reduces
   into the spine above several leaves, and the result comes down the same tree (every member for
   All-Reduce, the owner for Reduce-Scatter); otherwise ``direct``: each NPU reduces its box sum of
   the slice owned by rank (b', i) into that rank, which copies the result back to the rail, in
   rounds that are permutations of the rail (round o: member m to member m + o), so no NIC receives
   from two at once;
3. ``box-store``: position i copies the result into the box switch, and ``box-multicast``: the
   switch writes it to every other NPU of the box.

Reduce-Scatter runs 1 and the Reduce-Scatter half of 2 (the owner (b', i) ends with its chunk);
All-Gather runs the All-Gather half of 2 (the owner's chunk to rail i) and 3.

Symbols and code names: B ``len(domains.boxes)``, G ``domains.per_box``, S_b the switch of box b
(``domains.switches[b]``), P ``pieces``. A piece is the collective with one chunk per rank (chunk r
owned by rank r, the slice of rail ``position(r)``); ``workbench.model.periodic.repeated`` runs P of
them, each stage lagging the one before by whole periods so that the stages of successive pieces
overlap (``_lags``). P is the power of two whose simulated time is least, within
``max_transfers`` and half the time limit, doubling while a doubling gains at least 0.2%
(``pieces="auto"``), or given. Claimed time: the schedule's own time in the
simulator's default model. Method note: ``docs/methods/nvls.md``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

from workbench.checking.simulate import simulate
from workbench.kit.deadline import Deadline
from workbench.kit.schedule import ScheduleBuilder, claim_in_model
from workbench.model.algorithm import Algorithm
from workbench.model.collective import make_collective
from workbench.model.periodic import repeated
from workbench.plugin.closed_form import require_kind
from workbench.plugin.formulation import Unsupported
from workbench.plugin.parameters import Options, option
from workbench.plugin.registry import Problem, SynthesisResult
from workbench.topology import Topology

__all__ = ["Nvls", "NvlsOptions", "Domains", "find_domains", "piece_schedule"]

KINDS = ("allreduce", "reducescatter", "allgather")
GAIN = 0.002  # 'auto' pieces stop doubling once a doubling shortens the simulated time by less than this
Move = tuple[tuple[int, ...], int, int, str]  # (chunks, src, dst, op)


@dataclass(frozen=True)
class NvlsOptions(Options):
    """The pipeline's pieces and the budget that bounds them, and how the file is written."""

    pieces: int | str = option("auto", "P: pieces the buffer is cut into and pipelined ('auto': the power of two "
                               "the simulator times fastest, within max_transfers)", choices=("auto",), minimum=1)
    max_transfers: int = option(400_000, "transfers of the whole schedule that 'auto' pieces stay within", minimum=1)
    across: str = option("auto", "between boxes: 'sharp' (switches that reduce), 'direct' (NPUs), 'auto' (sharp "
                         "where every rail has an aggregation tree)", choices=("auto", "sharp", "direct"))
    periodic: bool = option(True, "write one period and its repeat count (workbench.algorithm/3)")


@dataclass(frozen=True)
class Domains:
    """``boxes[b]``: box b's NPUs by id (position i is rail i); ``switches[b]``: its reducing switch;
    ``trees[i]``: rail i's aggregation tree as (NPU -> leaf, leaf -> spine or None), or None."""

    boxes: tuple[tuple[int, ...], ...]
    switches: tuple[int, ...]
    trees: tuple[tuple[dict[int, int], dict[int, int | None]] | None, ...]

    @property
    def per_box(self) -> int:
        """G: NPUs a box (and rails)."""
        return len(self.boxes[0])


def _npu_members(topology: Topology, switch: int) -> list[int]:
    """The NPUs with a link into and out of ``switch``."""
    into = set(topology.in_neighbors(switch))
    return sorted(v for v in topology.out_neighbors(switch) if v < topology.num_npus and v in into)


def find_domains(topology: Topology, n: int) -> Domains | None:
    """The boxes (module docstring): the reducing switches whose NPU links are the fastest, each NPU
    on exactly one, all boxes of one size; None where they do not cover ranks ``0..n-1`` so."""
    candidates = [(s, _npu_members(topology, s)) for s in topology.reducing_switches()]
    candidates = [(s, m) for s, m in candidates if len(m) >= 2]
    if not candidates:
        return None
    speed = {s: max(topology.link(m[0], s).bandwidth, 0) for s, m in candidates}
    fastest = max(speed.values())
    boxes = [(tuple(m), s) for s, m in candidates if speed[s] == fastest]
    covered = sorted(r for box, _ in boxes for r in box)
    if covered != list(range(n)) or len({len(box) for box, _ in boxes}) != 1:
        return None
    boxes.sort()
    box_switches = {s for _, s in boxes}
    per_box = len(boxes[0][0])
    trees = tuple(_rail_tree(topology, [box[i] for box, _ in boxes], box_switches) for i in range(per_box))
    return Domains(tuple(box for box, _ in boxes), tuple(s for _, s in boxes), trees)


def _rail_tree(topology: Topology, rail: list[int], box_switches: set[int]):
    """Rail ``rail``'s aggregation tree: each member's reducing leaf (not a box switch), and each
    leaf's reducing spine (None with one leaf); None where there is none."""
    if len(rail) < 2:
        return None
    leaf_of: dict[int, int] = {}
    for r in rail:
        leaves = [s for s in topology.out_neighbors(r) if topology.reduces(s) and s not in box_switches
                  and topology.has_link(s, r)]
        if not leaves:
            return None
        leaf_of[r] = leaves[0]
    leaves = sorted(set(leaf_of.values()))
    if len(leaves) == 1:
        return leaf_of, {leaves[0]: None}
    common = set.intersection(*({s for s in topology.out_neighbors(leaf) if topology.reduces(s)
                                 and topology.has_link(s, leaf)} for leaf in leaves))
    if not common:
        return None
    spines = sorted(common)
    spine = spines[rail[0] % len(spines)]  # the rails spread over the spines: one tree each where they suffice
    return leaf_of, {leaf: spine for leaf in leaves}


def _box_stage(d: Domains, kind: str, half: str) -> list[list[Move]]:
    """The box stages of one piece: the load-reduce (``reduce``: box-reduce, box-load) or the
    multicast store (``store``: box-store, box-multicast), every box and position."""
    steps: list[list[Move]] = [[], []]
    for box, switch in zip(d.boxes, d.switches):
        for i, issuer in enumerate(box):
            slice_ = tuple(other[i] for other in d.boxes)  # the chunks rail i owns
            if half == "reduce":
                steps[0].extend((slice_, member, switch, "reduce") for member in box)
                steps[1].append((slice_, switch, issuer, "copy"))
            else:
                steps[0].append((slice_, issuer, switch, "copy"))
                steps[1].extend((slice_, switch, member, "copy") for member in box if member != issuer)
    return steps


def _across(d: Domains, kind: str, sharp: bool) -> list[list[Move]]:
    """The stages between the boxes on every rail (module docstring, step 2)."""
    if len(d.boxes) == 1:
        return []
    rails = [[box[i] for box in d.boxes] for i in range(d.per_box)]
    if sharp:
        return _sharp(d, kind, rails)
    up: list[Move] = []
    down: list[Move] = []
    for rail in rails:  # round o: member m and member m + o, a permutation a round (no incast)
        for o in range(1, len(rail)):
            for m, sender in enumerate(rail):
                peer = rail[(m + o) % len(rail)]
                if kind != "allgather":
                    up.append(((peer,), sender, peer, "reduce"))
                if kind != "reducescatter":
                    down.append(((sender,), sender, peer, "copy"))
    return [step for step in (up, down) if step]


def _sharp(d: Domains, kind: str, rails: list[list[int]]) -> list[list[Move]]:
    """Up the aggregation tree (reduce; for All-Gather the owner's copy) and down it to the NPUs that
    want the result: every member for All-Reduce (the rail's chunks in one message), the owner for
    Reduce-Scatter (which adds the other members' sum to its own box sum), the others for All-Gather."""
    steps: list[list[Move]] = [[], [], [], []]  # npu->leaf, leaf->spine, spine->leaf, leaf->npu
    op = "copy" if kind == "allgather" else "reduce"
    for i, rail in enumerate(rails):
        leaf_of, spine_of = d.trees[i]
        if kind == "allreduce":
            plans = [(tuple(rail), rail, rail)]
        elif kind == "reducescatter":  # the owner adds the others' sum to its own
            plans = [((owner,), [r for r in rail if r != owner], [owner]) for owner in rail]
        else:
            plans = [((owner,), [owner], [r for r in rail if r != owner]) for owner in rail]
        for chunks, senders, wanted in plans:
            steps[0].extend((chunks, r, leaf_of[r], op) for r in senders)
            spine = next(iter(spine_of.values()))
            if spine is not None:
                steps[1].extend((chunks, leaf, spine, op) for leaf in sorted({leaf_of[r] for r in senders}))
                steps[2].extend((chunks, spine, leaf, "copy") for leaf in sorted({leaf_of[r] for r in wanted}))
            steps[3].extend((chunks, leaf_of[r], r, "reduce" if kind == "reducescatter" else "copy") for r in wanted)
    return [step for step in steps if step]


def piece_moves(d: Domains, kind: str, sharp: bool) -> list[list[Move]]:
    """The steps of one piece (chunk r owned by rank r), in order."""
    box_reduce = _box_stage(d, kind, "reduce") if kind != "allgather" else []
    box_store = _box_stage(d, kind, "store") if kind != "reducescatter" else []
    return box_reduce + _across(d, kind, sharp) + box_store


def piece_schedule(topology: Topology, d: Domains, kind: str, sharp: bool, chunk_bytes: float):
    """One piece as a plain algorithm and each transfer's step (dependencies from buffer accesses)."""
    n = sum(len(box) for box in d.boxes)
    builder = ScheduleBuilder(topology, make_collective(kind, n, 1), chunk_bytes)
    step_of: list[int] = []
    copied: dict[tuple[int, int], int] = {}  # (node, chunk) -> the last copy into it
    for step, moves in enumerate(piece_moves(d, kind, sharp)):
        for chunks, src, dst, op in moves:
            # a reduce adds to what a copy put there (Reduce-Scatter's owner: its box sum, then the
            # rail's), so it waits for that copy, which the builder leaves to the caller
            after = {copied[(dst, c)] for c in chunks if (dst, c) in copied} if op == "reduce" else ()
            tid = builder.add(chunks, src, dst, op, extra_deps=after)
            if op == "copy":
                copied.update(((dst, c), tid) for c in chunks)
            step_of.append(step)
    return builder.build(), step_of


def _lags(piece: Algorithm, step_of: list[int]) -> list[int]:
    """Each transfer's lag in periods: a step lags the one before by one period plus its alpha in
    periods, the period being the busiest link's time for one piece."""
    topology = piece.topology
    busy: dict[int, float] = {}
    alpha = [0.0] * (max(step_of) + 1)
    for t, step in zip(piece.transfers, step_of):
        link = topology.link(t.src, t.dst) if topology.has_link(t.src, t.dst) else None
        if link is None:
            continue
        busy[(t.src, t.dst)] = busy.get((t.src, t.dst), 0.0) + piece.chunk_bytes * len(t.chunks) / link.bandwidth
        alpha[step] = max(alpha[step], link.alpha)
    tau = max(busy.values(), default=0.0)
    lag = [0]
    for step in range(1, len(alpha)):
        lag.append(lag[-1] + 1 + (math.ceil(alpha[step - 1] / tau) if tau > 0 else 0))
    return [lag[step] for step in step_of]


def _pipelined(piece: Algorithm, lags: list[int], pieces: int, whole_chunk: float, periodic: bool) -> Algorithm:
    algorithm = repeated(piece, pieces, lags, chunk_bytes=whole_chunk / pieces)
    return algorithm if periodic else algorithm.expanded()


class Nvls:
    """NVLS and SHARP All-Reduce, Reduce-Scatter and All-Gather (module docstring)."""

    name = "nvls"
    kind = "schedule"
    options = NvlsOptions
    collectives = "AR, RS, AG on switches that reduce"
    paper = "NCCL NVLS / NVLS-Tree; R. L. Graham et al., SHArP (COMHPC 2016)"

    def synthesize(self, problem: Problem, *, time_limit: float, seed: int, options: NvlsOptions,
                   on_incumbent: Callable | None = None) -> SynthesisResult:
        """The pipelined schedule (module docstring) as ``feasible``: a rule proves nothing."""
        started = time.perf_counter()
        topology, collective = problem.topology, problem.collective
        require_kind(collective, "nvls", KINDS)
        d = find_domains(topology, collective.num_ranks)
        if d is None:
            raise Unsupported("nvls needs boxes of equal size, each on a switch that reduces (reduce: true; "
                              "hgx:K, nvl72); this fabric has none")
        sharp = _choose_across(d, options.across)
        whole_chunk = problem.size_bytes / collective.num_ranks
        piece, step_of = piece_schedule(topology, d, collective.kind, sharp, whole_chunk)
        lags = _lags(piece, step_of)
        candidates = [int(options.pieces)] if options.pieces != "auto" else \
            [1 << k for k in range(30) if (1 << k) * len(piece.transfers) <= max(options.max_transfers,
                                                                                 len(piece.transfers))]
        search = Deadline(time_limit).share(0.5)  # the rest: the runner's verification and simulation
        best, best_time, best_pieces, tried = None, math.inf, 0, {}
        for pieces in candidates:
            if best is not None and search.expired:
                break  # the least so far is kept; meta.tried_pieces says how far the search got
            algorithm = _pipelined(piece, lags, pieces, whole_chunk, options.periodic)
            seconds = simulate(algorithm).collective_time
            tried[pieces] = seconds
            if seconds < best_time:
                gain = best_time - seconds
                best, best_time, best_pieces = algorithm, seconds, pieces
                if options.pieces == "auto" and gain < GAIN * seconds:
                    break  # doubling again would buy less than GAIN for twice the transfers
            elif options.pieces == "auto":
                break  # past the least: more pieces only add per-piece latency
        best.meta.update({"boxes": len(d.boxes), "per_box": d.per_box, "pieces": best_pieces, "tried_pieces": tried,
                          "across": "sharp" if sharp else ("direct" if len(d.boxes) > 1 else "none")})
        synthesis = time.perf_counter() - started
        claim_in_model(best)
        if on_incumbent is not None:
            on_incumbent(best)
        return SynthesisResult([best], "feasible", synthesis, {"transfers": best.total_transfers})


def _choose_across(d: Domains, across: str) -> bool:
    """Whether the boxes are joined by SHARP trees (``across`` option)."""
    has_trees = len(d.boxes) > 1 and all(tree is not None for tree in d.trees)
    if across == "sharp" and len(d.boxes) > 1 and not has_trees:
        raise Unsupported("nvls: across=sharp needs every rail on switches that reduce (hgx:K,sharp)")
    return has_trees if across == "auto" else across == "sharp"
