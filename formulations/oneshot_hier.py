"""One-pass hierarchical All-Reduce: a one-shot inside each box, then the box sums exchanged between boxes.

A flat one-shot (``oneshot``) brings every rank N - 1 whole vectors; on a fabric of boxes a slow
scale-out link carries the inputs of a whole box from each other box, where that box's sum would do.
Hierarchical runtimes reduce inside the scale-up domain first and cross it once per box (NCCL's
hierarchical algorithms: its tree runs a chain inside each node and a tree between nodes; its
one-shot symmetric-memory kernels inside a node), and a one-shot stage reads every peer's whole
vector and adds it locally (MSCCL++'s one-shot All-Reduce). Here both stages are one-shot, and each
reads an *earlier value* of its sender (``Transfer.read``, ``workbench.algorithm/4``), so a rank
that has already received another box's sum never sends it back. Method note:
``docs/methods/baselines.md`` section 12.

Symbols and names: N ranks (``n``) in B boxes (``layout.boxes``; box b's ranks in position order,
``layout.position``), G ranks per box where they are equal, M the vector's bytes (every chunk,
``chunks``), S_b the sum of box b's inputs, k_r the last transfer into rank r of the box stage
(``plan.into[r]``; a send of S_b reads ``read = k_r``, bound once the listing is final).

* **Boxes** (``find_boxes``): the first recorded dimension when the builder recorded two or more
  (``meta["dims"]``: a ``rails:`` box, a ``leafspine:`` leaf, an ``md:`` innermost dimension); else
  the coarsest partition of ``workbench.topology.structure.candidate_groups`` (components of the
  links at least each bandwidth fast, or left once a switch tier is removed) with at least two
  groups of at least two ranks each, every group connected inside itself; else one box, and the
  schedule is the flat one-shot. Positions follow the rails where ``boxes_and_rails`` finds them.
* **whole** (``across="whole"``): inside each box every input reaches every other rank of the box
  along a breadth-first tree over the box's ranks (relays add it and forward what they were
  brought, ``read_carried``), as ``oneshot`` does on the whole fabric; then S_b reaches every rank
  outside box b along a breadth-first tree from all of box b's ranks (on a rail fabric rank i of
  box b sends to rank i of every other box; on ``ndv2:`` the one cable's end relays it into its
  box). Each rank adds every S_b it gets: B - 1 messages of M bytes into each rank across boxes.
* **split** (``across="split"``, equal boxes): the chunks are cut into G parts P_i; rank i of a box
  gets P_i of every box-mate's input (a one-shot Reduce-Scatter inside the box), sends P_i of S_b
  to rank i of every other box (read = k_r) and adds what it gets, then copies the finished P_i to
  its box-mates: (B - 1) M / G bytes into each rank across boxes, one more stage of latency.
* **auto** (default): both are written and the one the simulator's default model times faster is
  kept (``meta.across``); the measurements behind it are in the method note.

A send of S_b waits for every box-stage transfer into its sender and its receiver (so no write into
either moves across the value read). The value after k_r is what the sender holds once *all* its
box-stage transfers have arrived only if k_r, the last listed, also arrives last: ``_bind_reads``
checks that on the simulated timeline and, where another arrives later, makes k_r wait for it
(``meta.snapshot_waits``). Messages between ranks joined by equally short routes through switches
name the one their busiest link loads least (``workbench.kit.spread_routes``, ``meta.routes_named``).
The planned listing and, below ``SETTLE_MOST`` transfers and 256 MB, its
list-scheduled one (``workbench.kit.schedule.settle_order``), each made consistent so, are both
timed and the faster is kept (``meta.listing``). Claimed time: the schedule's own time in the
simulator's default model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from workbench.checking.simulate import simulate
from workbench.kit.schedule import adapts_to_size, claim_in_model, settle_order
from workbench.kit.spread_routes import spread_routes
from workbench.model.algorithm import Algorithm, Transfer
from workbench.model.transfer import READ_INPUT, read_carried
from workbench.plugin.closed_form import require_kind
from workbench.plugin.formulation import Unsupported
from workbench.plugin.parameters import Options, option
from workbench.plugin.registry import Problem, SynthesisResult
from workbench.topology import Topology
from workbench.topology.structure import arrival_bandwidths, boxes_and_rails, candidate_groups, npu_neighbours, recorded_dims
from workbench.util.graphs import fastest_parent_tree, hop_distances

__all__ = ["OneShotHier", "OneShotHierOptions", "oneshot_hier_schedule", "find_boxes", "BoxLayout"]

ACROSS = ("auto", "whole", "split")
# chunk moves (messages x chunks) past which the rule refuses, as oneshot does: one pass is for
# small fabrics and sizes, and writing, verifying and simulating more takes minutes
MOST_MOVES = 20_000_000
# transfers: larger schedules keep their planned listing. List scheduling is Python and slow on
# these many-to-many stages (15 s for the 32k transfers of rails:64x8), and it rarely wins here
# (ndv2:2, dgx1, dgx2:2 at small sizes; never on the rail fabrics)
SETTLE_MOST = 5_000


@dataclass(frozen=True)
class BoxLayout:
    """``boxes[b]``: box b's ranks in position order; ``source``: ``"dims"``, ``"links"`` or
    ``"one box"``."""

    boxes: tuple[tuple[int, ...], ...]
    source: str

    @property
    def box_of(self) -> dict[int, int]:
        """Each rank's box."""
        return {r: b for b, box in enumerate(self.boxes) for r in box}

    @property
    def position(self) -> dict[int, int]:
        """Each rank's position in its box."""
        return {r: i for box in self.boxes for i, r in enumerate(box)}

    @property
    def equal(self) -> bool:
        """Whether every box holds as many ranks."""
        return len({len(box) for box in self.boxes}) == 1


def find_boxes(topology: Topology, n: int) -> BoxLayout:
    """The boxes of ranks ``0..n-1`` (module docstring): recorded dimensions, else the links, else one."""
    neighbours = _rank_neighbours(topology, n)
    dims = recorded_dims(topology)
    if dims and len(dims) >= 2 and dims[0][1] >= 2 and n % dims[0][1] == 0 and n > dims[0][1]:
        size = dims[0][1]
        boxes = [list(range(b * size, (b + 1) * size)) for b in range(n // size)]
        if all(_connected_inside(neighbours, box) for box in boxes):
            return BoxLayout(_in_rail_order(topology, boxes), "dims")
    best: list[list[int]] | None = None
    for labels in candidate_groups(topology):
        groups: dict[int, list[int]] = {}
        for rank in range(n):
            groups.setdefault(labels[rank], []).append(rank)
        boxes = sorted(groups.values())
        if len(boxes) < 2 or min(map(len, boxes)) < 2 or (best is not None and len(boxes) >= len(best)):
            continue
        if all(_connected_inside(neighbours, box) for box in boxes):
            best = boxes
    if best is not None:
        return BoxLayout(_in_rail_order(topology, best), "links")
    return BoxLayout((tuple(range(n)),), "one box")


def _rank_neighbours(topology: Topology, n: int) -> list[list[int]]:
    """For each rank, the ranks it reaches by a direct link or through switches only."""
    return [[v for v in near if v < n] for near in npu_neighbours(topology)[:n]]


def _connected_inside(neighbours: list[list[int]], box: list[int]) -> bool:
    """Whether every rank of ``box`` reaches every other through the box's ranks alone."""
    members = set(box)
    inside = [[v for v in near if v in members] if u in members else [] for u, near in enumerate(neighbours)]
    return all(min(hop_distances(inside, (origin,))[r] for r in box) >= 0 for origin in box)


def _in_rail_order(topology: Topology, boxes: list[list[int]]) -> tuple[tuple[int, ...], ...]:
    """The boxes with their ranks in rail position order where the fabric's rails say it (rank i of
    every box on rail i), else in id order."""
    found = boxes_and_rails(topology)
    if found is not None:
        by_set = {frozenset(box): box for box in found.boxes}
        if all(frozenset(box) in by_set for box in boxes):
            return tuple(tuple(by_set[frozenset(box)]) for box in boxes)
    return tuple(tuple(sorted(box)) for box in boxes)


@dataclass
class _Plan:
    """The transfers being written, and what binding the reads of box sums needs after listing."""

    transfers: list[Transfer] = field(default_factory=list)
    into: dict[int, list[Transfer]] = field(default_factory=dict)  # rank -> its box-stage receipts
    sums: list[Transfer] = field(default_factory=list)  # sends of the sender's box sum (read = k_r)
    steps: int = 0

    def add(self, chunks: tuple[int, ...], src: int, dst: int, op: str, deps: list[Transfer],
            read: int | None) -> Transfer:
        """Append a transfer after ``deps`` (each once)."""
        ids = tuple(sorted({d.id for d in deps}))
        transfer = Transfer(len(self.transfers), chunks, src, dst, op, ids, read=read)
        self.transfers.append(transfer)
        return transfer

    def received(self, rank: int) -> list[Transfer]:
        """Rank ``rank``'s box-stage receipts."""
        return self.into.get(rank, [])


def _one_shot_inside(plan: _Plan, topology: Topology, layout: BoxLayout, chunks: tuple[int, ...]) -> None:
    """Every input to every other rank of its box along a breadth-first tree over the box's ranks,
    added there; level by level, rank u to position u + r in rotation order r (as ``oneshot``)."""
    n = sum(map(len, layout.boxes))
    box_of, position = layout.box_of, layout.position
    near = _rank_neighbours(topology, n)
    inside = [[v for v in vs if box_of[v] == box_of[u]] for u, vs in enumerate(near)]
    incoming, arrival = arrival_bandwidths(topology, inside)
    hops = []
    for box in layout.boxes:
        for origin in box:
            parent, depth = fastest_parent_tree(incoming, inside, arrival, (origin,), lambda u, v, o=origin: (-((u - o - 1) % n),))
            if min(depth[c] for c in box) < 0:  # only a single box (the whole fabric) can be cut off
                raise Unsupported(f"oneshot-hier: a rank cannot be reached from rank {origin}")
            hops += [(depth[c], (position[c] - position[origin]) % len(box), origin, parent[c], c)
                     for c in box if c != origin]
    brought: dict[tuple[int, int], Transfer] = {}  # (origin, rank) -> the transfer that brought it origin's input
    for depth, _, origin, parent, child in sorted(hops):
        relay = brought.get((origin, parent))  # None: the origin itself sends its input
        read = READ_INPUT if relay is None else read_carried(relay.id)
        t = plan.add(chunks, parent, child, "reduce", [relay] if relay else [], read)
        brought[(origin, child)] = t
        plan.into.setdefault(child, []).append(t)
        plan.steps = max(plan.steps, depth)


def _whole_across(plan: _Plan, topology: Topology, layout: BoxLayout, chunks: tuple[int, ...]) -> None:
    """S_b to every rank outside box b along a breadth-first tree from all of box b's ranks; a
    parent in box b sends its value after k_r, a relay forwards what it was brought."""
    n = sum(map(len, layout.boxes))
    box_of, position = layout.box_of, layout.position
    near = _rank_neighbours(topology, n)
    incoming, arrival = arrival_bandwidths(topology, near)
    count = len(layout.boxes)

    def tie(u: int, v: int) -> tuple:  # the same position first (its rail), then in turn
        return (position[u] == position[v], -((u - v - 1) % n))

    hops = []
    for b, box in enumerate(layout.boxes):
        parent, depth = fastest_parent_tree(incoming, near, arrival, box, tie)
        if min(depth) < 0:
            raise Unsupported(f"oneshot-hier: rank {depth.index(-1)} cannot be reached from box {b}")
        hops += [(depth[v], (box_of[v] - b) % count, position[v], b, parent[v], v) for v in range(n) if box_of[v] != b]
    brought: dict[tuple[int, int], Transfer] = {}  # (box, rank) -> the transfer that brought it S_box
    deepest = 0
    for depth, _, _, b, parent, child in sorted(hops):
        relay = brought.get((b, parent))
        # after the receiver's box stage (its own box sum is read after it, so no S_b may land
        # before), and after what is read: the relay's carrier, or the sender's whole box stage
        waits = plan.received(child) + ([relay] if relay else plan.received(parent))
        t = plan.add(chunks, parent, child, "reduce", waits, None if relay is None else read_carried(relay.id))
        if relay is None:
            plan.sums.append(t)
        brought[(b, child)] = t
        deepest = max(deepest, depth)
    plan.steps += deepest


def _parts(chunks: tuple[int, ...], size: int) -> list[tuple[int, ...]]:
    """The chunks cut into ``size`` contiguous parts (some empty where there are fewer chunks)."""
    count = len(chunks)
    return [chunks[i * count // size:(i + 1) * count // size] for i in range(size)]


def _split(plan: _Plan, layout: BoxLayout, chunks: tuple[int, ...]) -> None:
    """P_i of every input to rank i of its box; P_i of S_b between the boxes' ranks i (read = k_r);
    the finished P_i copied from rank i to its box-mates. Routed, one message per part."""
    if not layout.equal:
        raise Unsupported("oneshot-hier: across=split needs boxes of equal size, these hold "
                          f"{sorted({len(box) for box in layout.boxes})} ranks")
    boxes, size = layout.boxes, len(layout.boxes[0])
    parts = _parts(chunks, size)
    for r in range(1, size):  # one-shot Reduce-Scatter inside each box
        for box in boxes:
            for i, src in enumerate(box):
                j = (i + r) % size
                if parts[j]:
                    t = plan.add(parts[j], src, box[j], "reduce", [], READ_INPUT)
                    plan.into.setdefault(box[j], []).append(t)
    arrived: dict[int, list[Transfer]] = {}
    for s in range(1, len(boxes)):  # P_i of S_b to rank i of box b + s
        for b, box in enumerate(boxes):
            for i, src in enumerate(box):
                dst = boxes[(b + s) % len(boxes)][i]
                if parts[i]:  # after both ends' box stage, as in the whole variant
                    t = plan.add(parts[i], src, dst, "reduce", plan.received(src) + plan.received(dst), None)
                    plan.sums.append(t)
                    arrived.setdefault(dst, []).append(t)
    for r in range(1, size):  # the finished P_i to the box-mates
        for box in boxes:
            for i, src in enumerate(box):
                if parts[i]:  # P_i is finished once every other box's share has arrived
                    plan.add(parts[i], src, box[(i + r) % size], "copy", arrived[src], None)
    plan.steps = 3


def _bind_reads(algorithm: Algorithm, plan: _Plan) -> int:
    """Give every send of a box sum ``read = k_r``, its sender's last listed box-stage receipt, and
    make the listing keep that snapshot whole: where another box-stage receipt into the sender
    arrives after k_r on the default timeline, k_r waits for it (then time again). Returns the waits
    added. A receipt listed before k_r that arrives at k_r's instant is replayed before it."""
    added = 0
    senders = {t.src for t in plan.sums}
    while senders:  # none with one box: the flat one-shot reads no box sum
        end = simulate(algorithm).end
        waits = 0
        for rank in senders:
            received = plan.received(rank)
            if not received:
                continue
            last = max(received, key=lambda t: t.id)
            late = [t.id for t in received if end[t.id] > end[last.id]]
            if late:
                last.deps = tuple(sorted(set(last.deps) | set(late)))
                waits += len(late)
        if not waits:
            break
        added += waits
    for t in plan.sums:
        received = plan.received(t.src)
        t.read = max(r.id for r in received) if received else READ_INPUT
    return added


def _written(problem: Problem, layout: BoxLayout, across: str, settle: bool) -> Algorithm:
    """The schedule for one across-box variant, planned or list-scheduled, its reads bound."""
    chunks = tuple(range(problem.collective.num_chunks))
    plan = _Plan()
    if across == "split":
        _split(plan, layout, chunks)
    else:
        _one_shot_inside(plan, problem.topology, layout, chunks)
        if len(layout.boxes) > 1:
            _whole_across(plan, problem.topology, layout, chunks)
    meta = {"boxes": len(layout.boxes), "box_sizes": sorted({len(box) for box in layout.boxes}),
            "boxes_from": layout.source, "across": across if len(layout.boxes) > 1 else "none", "steps": plan.steps,
            "routes_named": spread_routes(problem.topology, plan.transfers, problem.chunk_bytes)}
    algorithm = Algorithm(problem.topology, problem.collective, problem.chunk_bytes, plan.transfers, meta)
    if settle:
        algorithm = settle_order(algorithm)
    algorithm.meta.update(listing="settled" if settle else "planned", snapshot_waits=_bind_reads(algorithm, plan))
    claim_in_model(algorithm)
    return algorithm


def _moves(layout: BoxLayout, chunk_count: int) -> int:
    """Chunk moves of the whole variant (the larger): every input inside its box, every box sum outside it."""
    n = sum(map(len, layout.boxes))
    inside = sum(len(box) * (len(box) - 1) for box in layout.boxes)
    return (inside + (n * (len(layout.boxes) - 1) if len(layout.boxes) > 1 else 0)) * chunk_count


def oneshot_hier_schedule(problem: Problem, across: str = "auto") -> Algorithm:
    """The hierarchical one-shot (module docstring): with ``across="auto"`` both variants, the
    faster kept; each as planned and list-scheduled below 256 MB, the faster kept."""
    collective = problem.collective
    require_kind(collective, "oneshot-hier", ("allreduce",))
    n = collective.num_ranks
    if n < 2:
        raise Unsupported("oneshot-hier needs at least 2 ranks")
    layout = find_boxes(problem.topology, n)
    moves = _moves(layout, collective.num_chunks)
    if moves > MOST_MOVES:
        raise Unsupported(f"oneshot-hier: {moves:,} chunk moves (over {MOST_MOVES:,}); one pass is for small "
                          f"fabrics and sizes, a two-pass formulation fits this one")
    if len(layout.boxes) == 1:
        variants = ["whole"]  # one box: the flat one-shot
    elif across == "auto":
        variants = ["whole", "split"] if layout.equal else ["whole"]
    else:
        variants = [across]
    settle = adapts_to_size(problem.topology, problem.size_bytes)
    best: Algorithm | None = None
    for variant in variants:
        planned = _written(problem, layout, variant, settle=False)
        candidates = [planned]
        if settle and len(planned.transfers) <= SETTLE_MOST:
            candidates.append(_written(problem, layout, variant, settle=True))
        for candidate in candidates:  # the faster; on a tie the first (whole before split, planned first)
            if best is None or candidate.meta["claimed_time"] < best.meta["claimed_time"]:
                best = candidate
    return best


@dataclass(frozen=True)
class OneShotHierOptions(Options):
    """How the box sums cross between boxes."""

    across: str = option("auto", "how box sums cross between boxes: 'whole' (each box's sum to every rank "
                         "outside it, rank i to rank i along a rail), 'split' (part i of each box's sum between "
                         "the boxes' ranks i, then gathered inside the box), 'auto' (both written, the one that "
                         "simulates faster kept)", choices=ACROSS)


class OneShotHier:
    """One-shot inside each box, then the box sums across boxes (see the module docstring)."""

    name = "oneshot-hier"
    kind = "schedule"
    options = OneShotHierOptions

    def synthesize(self, problem: Problem, *, time_limit: float, seed: int, options: OneShotHierOptions,
                   on_incumbent: Callable[[Algorithm], None] | None = None) -> SynthesisResult:
        """The rule's schedule as a ``feasible`` result: a rule proves nothing; ``Unsupported``
        outside All-Reduce or past ``MOST_MOVES``. The seed draws nothing."""
        started = time.perf_counter()
        algorithm = oneshot_hier_schedule(problem, options.across)
        seconds = time.perf_counter() - started
        if on_incumbent is not None:
            on_incumbent(algorithm)
        return SynthesisResult([algorithm], "feasible", seconds, {"transfers": len(algorithm.transfers)})
