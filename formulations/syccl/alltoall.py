"""All-to-All by two-hop sketches (SyCCL section 4.3), balanced by an LP and chosen by simulation.

A piece from ``s`` to ``d`` in another box and at another position crosses both dimensions once,
in either order: ``rail>box`` (over ``s``'s rail to the GPU of ``d``'s box at ``s``'s position,
then inside that box) or ``box>rail`` (inside ``s``'s box to the GPU at ``d``'s position, then
over that rail). Pieces within a box, or on one rail, take their one hop. The balancing LP
(``balance.balance``) weighs the two sketches by their per-dimension loads; the shares cut the
rail steps of every round between them (``chunk_split``).

Rail traffic follows the shift permutation of its group (step ``r`` sends every GPU's pieces to
the box ``r`` further on), so in every step each leaf port carries one message: the classic
contention-free exchange on a switch, which is the solution of the group's max-concurrent-flow
LP on a star. ``merge`` sends everything one hop carries between two GPUs in a step as one
message (the box's pieces for one rail peer travel together); otherwise one transfer per piece.
Rounds (chunk indices) follow each other; candidates (depth x combination x merge) are
simulated and the fastest kept, as for the All-Gather.
"""

from __future__ import annotations

from typing import Any, Callable

from formulations.syccl.balance import balance, chunk_split
from formulations.syccl.selection import Selection, depths
from formulations.syccl.sketches import Sketch, Stage
from workbench.kit.decomposition import Decomposition, Send, stitch
from workbench.plugin.registry import SynthesisResult, Unsupported

__all__ = ["alltoall_candidates", "alltoall_sends"]



def _sketches(decomposition: Decomposition, bandwidth: dict[str, float]) -> list[Sketch]:
    """The two two-hop sketches with their sends per GPU in each dimension for one chunk round."""
    box, rail = decomposition.dimension("box"), decomposition.dimension("rail")
    g, b = box.group_size, rail.group_size
    two_hop = (g - 1) * (b - 1)  # pieces per source that cross both dimensions
    sends = {"box": (g - 1) + two_hop, "rail": (b - 1) + two_hop}
    seconds = max(sends[d] / bandwidth[d] for d in sends)
    return [Sketch((Stage("rail", "all"), Stage("box", "all")), dict(sends), seconds),
            Sketch((Stage("box", "all"), Stage("rail", "all")), dict(sends), seconds)]


def alltoall_sends(decomposition: Decomposition, num_ranks: int, k: int, chunk_bytes: float,
                   rail_first: list[bool], bandwidth: dict[str, float], merge: bool) -> list[Send]:
    """Every send of the stitched All-to-All: ``rail_first[r - 1]`` says which sketch rail step
    ``r`` of each round takes (module docstring)."""
    n = num_ranks
    box, rail = decomposition.dimension("box"), decomposition.dimension("rail")
    g, b = box.group_size, rail.group_size
    t_rail = g * chunk_bytes / bandwidth["rail"]  # a step moves one box's worth of pieces per GPU
    t_box = chunk_bytes / bandwidth["box"]
    sends: list[Send] = []

    def add(at: float, stage: int, src: int, dst: int, chunks: list[int]) -> None:
        if merge:
            sends.append(Send(at, stage, src, dst, tuple(chunks)))
        else:
            sends.extend(Send(at, stage, src, dst, (c,)) for c in chunks)

    def npu(box_index: int, position: int) -> int:
        return box.groups[box_index][position]

    for j in range(k):
        base = j * (b - 1) * t_rail
        for s in range(n):
            sb, sp = box.locate(s)
            for shift in range(1, g):  # inside the box, one position further each step
                d = npu(sb, (sp + shift) % g)
                add(base + (shift - 1) * t_box, 0, s, d, [(j * n + s) * n + d])
            for r in range(1, b):
                db = (sb + r) % b
                at = base + (r - 1) * t_rail
                if rail_first[r - 1]:
                    relay = npu(db, sp)
                    add(at, 1, s, relay, [(j * n + s) * n + npu(db, p) for p in range(g)])
                    for shift in range(1, g):
                        d = npu(db, (sp + shift) % g)
                        add(at + t_rail + (shift - 1) * t_box, 2, relay, d, [(j * n + s) * n + d])
                else:
                    for shift in range(1, g):
                        p = (sp + shift) % g
                        add(at - t_box * (g - shift), 0, s, npu(sb, p), [(j * n + s) * n + npu(db, p)])
                    # this GPU carries its box-mates' pieces for the GPU at its own position in box db
                    add(at, 1, s, npu(db, sp), [(j * n + npu(sb, p)) * n + npu(db, sp) for p in range(g)])
    return sends


def alltoall_candidates(problem: Any, decomposition: Decomposition, bandwidth: dict[str, float], options: Any,
                        deadline: Any, started: float, summary: dict, say: Callable[[str], None],
                        on_incumbent: Callable | None) -> SynthesisResult:
    """Build, simulate and keep the fastest All-to-All candidate (module docstring)."""
    if {d.name for d in decomposition.dimensions} != {"box", "rail"}:
        raise Unsupported("syccl's All-to-All needs both a box and a rail dimension")
    sketches = _sketches(decomposition, bandwidth)
    shares, _, lp_status = balance(sketches, bandwidth, deadline.limit(cap=10.0, floor=0.5))
    steps = decomposition.dimension("rail").group_size - 1
    combos = {"balanced": shares, "rail>box": [1.0, 0.0], "box>rail": [0.0, 1.0]}
    say("all-to-all sketches rail>box, box>rail; balanced shares " + ", ".join(f"{x:.2f}" for x in shares))
    selection = Selection(problem, on_incumbent)
    n = problem.collective.num_ranks
    for k in depths(options.depths, problem, 8):
        if deadline.expired:
            break
        if n * n * k * 2 > options.max_transfers:
            selection.stopped = (f"depth {k} would list about {n * n * k * 2:,} transfers, above max_transfers "
                                 f"({options.max_transfers:,})")
            break
        sized = problem.with_chunks(k)
        seen = set()
        for name, combo in combos.items():
            counts = chunk_split(combo, steps)
            rail_first = [True] * counts[0] + [False] * counts[1]
            if tuple(rail_first) in seen:
                continue
            seen.add(tuple(rail_first))
            for merge in (False, True):
                sends = alltoall_sends(decomposition, n, k, sized.chunk_bytes, rail_first, bandwidth, merge)
                selection.consider(stitch(problem.topology, sized.collective, sized.chunk_bytes, sends),
                                   deadline.remaining(), chunks=k, combination=name, merge=merge)
        say(f"depth {k}: best so far {selection.best[0] * 1e6:.4g} us")
        if selection.depth_done(options.depths == "auto"):
            break
    return selection.result(started, deadline.expired, {
        "decomposition": summary, "sketches": {"kept": 2, "names": [s.name for s in sketches]},
        "balance": {"status": lp_status, "shares": shares}}, {})
