"""One piece of the two-level schedule, stage by stage, and the pipelined schedule of P pieces.

A piece is the collective of one chunk per rank: chunk ``r`` is the shard rank ``r`` owns after the
Reduce-Scatter. Its stages:

* ``box-rs``: a Reduce-Scatter among the G ranks of each box, share i being the B chunks of rail i
  (owned at position i of every box): rank (b, i) ends with box b's sum of them (scale-up links);
* ``rail-rs``: a Reduce-Scatter along each rail inside each leaf group, among its Q ranks, share p
  being the g chunks owned at place p of every group (the NICs);
* ``cross-rs``: across groups, each rank sends the one chunk owned by the rank at its own place and
  rail in each other group: g - 1 messages of one chunk;
* ``cross-ag``, ``rail-ag``, ``box-ag``: the All-Gathers of the same shares, in reverse order.

Reduce-Scatter is the first three stages, All-Gather the last three, All-Reduce all six. The box and
rail exchanges are ``direct`` or ``halving-doubling`` (``exchange``), each round a permutation of
the ranks it joins, so a switch sees each of its links once a round.

**Through the spines** (``_routed``). A message whose route climbs to a spine (``layout.rail_path``)
is stored and forwarded at each switch of its way, one transfer a hop, through a spine it names:
a cut-through message holds every link of its way at its slowest link's rate, so a leaf's fat
up-link would carry one NIC's message at a time and the NICs behind it would queue. A switch keeps
one value of a chunk, and a step's transfers all come before the next step's, so two partial sums
of one chunk never share a switch in one round: a message that would is put in a later round (for
``cross-rs``: one round per other group, since every group's partial enters the owner's leaf).
Copies of one sum share their hops (multicast from the leaf and the spine).

**Pipeline.** A step (one hop of one round of a stage; a level of halving-doubling with no stored
hop shares its stage's step) lags the one before it by whole periods (how many is the cost
model's, ``cost.step_lags``), so in steady state the scale-up links work on the newest piece while
the NICs work on older ones. Dependencies come from buffer accesses (``ScheduleBuilder``) over one
piece in step order; pieces use disjoint chunks, so the same dependencies hold for every piece.
Within a period the transfers are listed by slot (``Slot``): the box exchanges' rounds, Reduce-
Scatter and All-Gather in turn, then the rail exchanges' rounds likewise, then the cross hops.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterator

from formulations.two_level.exchange import pattern
from formulations.two_level.layout import Layout, rail_path
from workbench.kit.schedule import ScheduleBuilder
from workbench.model.algorithm import Algorithm
from workbench.model.collective import make_collective
from workbench.model.periodic import repeated
from workbench.topology import Topology

__all__ = ["Move", "STAGES", "stages_of", "piece_moves", "piece_schedule", "pipelined"]

Move = tuple[tuple[int, ...], int, int, str]  # (chunks, src, dst, op)
Slot = tuple[int, int]  # (block, round): where in a period a transfer is listed, then by its step
Planned = tuple[Move, int, Slot]  # a move, the salt that picks its spine, its slot
STAGES = ("box-rs", "rail-rs", "cross-rs", "cross-ag", "rail-ag", "box-ag")


def stages_of(kind: str) -> tuple[str, ...]:
    """The stages a collective runs (module docstring)."""
    return {"reducescatter": STAGES[:3], "allgather": STAGES[3:], "allreduce": STAGES}[kind]


@dataclass(frozen=True)
class _Grid:
    """The ranks by box, position, leaf group and place in the group."""

    layout: Layout

    def rail(self, i: int) -> list[int]:
        """The owners on rail ``i``: position ``i`` of every box."""
        return [box[i] for box in self.layout.boxes]

    def at(self, group: int, place: int, i: int) -> int:
        """The rank at position ``i`` of the box at ``place`` of leaf group ``group``."""
        return self.layout.boxes[self.layout.groups[group][place]][i]

    def across(self, place: int, i: int) -> list[int]:
        """The ranks at ``place`` and position ``i`` of every group (one rank's share after rail-rs)."""
        return [self.at(h, place, i) for h in range(self.layout.num_groups)]


Team = tuple[list[int], list[tuple[int, ...]], Callable[[int, int], int]]  # members, shares, salt of a pair


def _teams(grid: _Grid, level: str) -> list[Team]:
    """The exchanges of one level: each box (members by position, share i the chunks of rail i), or
    each rail of each leaf group (members by place, share p the chunks owned at place p of every
    group; the salt picks a spine where a group's rail still climbs to one, as on a leaf-spine
    fabric, whose boxes are its leaves)."""
    layout = grid.layout
    if level == "box":
        shares = [tuple(grid.rail(i)) for i in range(layout.per_box)]
        return [(list(box), shares, lambda a, b: 0) for box in layout.boxes]
    return [([grid.at(h, p, i) for p in range(layout.per_group)],
             [tuple(grid.across(p, i)) for p in range(layout.per_group)], lambda a, b, i=i: a + b + i)
            for h in range(layout.num_groups) for i in range(layout.per_box)]


def _level_moves(grid: _Grid, level: str, op: str, how: str) -> list[list[Planned]]:
    """One stage of a level (box or rail) as the exchange ``how`` (``exchange.pattern``), one list of
    moves per dependent level of the pattern, every team's sends of a round together. A level's
    Reduce-Scatter and All-Gather share a block of slots, round for round in turn: where a round
    waits for the one before it (halving-doubling), the other stage's round fills the link meanwhile."""
    teams = _teams(grid, level)
    q = len(teams[0][0])
    block = 0 if level == "box" else 1
    steps = []
    for depth, rounds in enumerate(pattern(q, op == "reduce", how)):
        moves: list[Planned] = []
        for r, sends in enumerate(rounds):
            slot = (block, 2 * (1 + depth * q + r) + (op == "copy"))
            for members, shares, salt in teams:
                for a, b, sent in sends:
                    chunks = tuple(c for x in sent for c in shares[x])
                    moves.append(((chunks, members[a], members[b], op), salt(a, b), slot))
        steps.append(moves)
    return steps


def _cross_moves(grid: _Grid, op: str) -> Iterator[Planned]:
    """cross-rs (reduce) or cross-ag (copy): the one owned chunk between groups, with the salt that
    picks its spine (distinct for the groups sending one chunk, so each partial sum takes its own
    spine; a copy's salt leaves out the receiving group, so one spine carries the sum to every
    group). Listed after the rail exchanges' rounds."""
    layout = grid.layout
    g = layout.num_groups
    block, turn = 1, (1 << 30) + (op == "copy")
    for offset in range(1, g):
        for h in range(g):
            h2 = (h + offset) % g
            for p in range(layout.per_group):
                for i in range(layout.per_box):
                    src, dst = grid.at(h, p, i), grid.at(h2, p, i)
                    owner, salt = (dst, p + h + h2) if op == "reduce" else (src, p + h)
                    yield ((owner,), src, dst, op), salt, (block, turn)


def piece_moves(topology: Topology, layout: Layout, kind: str,
                exchanges: dict[str, str]) -> list[tuple[str, list[tuple[Move, Slot]]]]:
    """The transfers of one piece as steps, each named by its stage, each transfer with its slot;
    ``exchanges``: the pattern of the box and of the rail level (``exchange.EXCHANGES``)."""
    grid = _Grid(layout)
    steps: list[tuple[str, list[tuple[Move, Slot]]]] = []
    for stage in stages_of(kind):
        op = "reduce" if stage.endswith("-rs") else "copy"
        level = stage.split("-")[0]
        if level == "cross" and layout.num_groups > 1:
            steps.extend((stage, hops) for hops in _routed(topology, _cross_moves(grid, op)))
        elif level in exchanges:  # the rail level is absent with one box a group
            routed = [_routed(topology, iter(moves)) for moves in _level_moves(grid, level, op, exchanges[level])]
            if all(len(hops) == 1 for hops in routed):  # one hop a message: the levels share a step
                routed = [[[move for hops in routed for move in hops[0]]]]
            steps.extend((stage, step) for hops in routed for step in hops)
    return [(stage, moves) for stage, moves in steps if moves]


def _routed(topology: Topology, moves: Iterator[Planned]) -> list[list[tuple[Move, Slot]]]:
    """Moves as steps of hops (module docstring, "Through the spines"): each move in the first
    round where no switch of its way keeps another partial sum of its chunks, its hops in
    consecutive steps ending at the round's last step, hops already taken by a copy of the same
    chunks shared."""
    rounds: list[dict[tuple[int, tuple[int, ...]], int]] = []  # per round: (switch, chunks) -> sender
    placed = []
    depth = 1
    for (chunks, src, dst, op), salt, slot in moves:
        path = rail_path(topology, src, dst, salt)
        origin = src if op == "reduce" else -1  # every copy carries the one final sum
        r = 0
        while r < len(rounds) and any(rounds[r].get((v, chunks), origin) != origin for v in path[1:-1]):
            r += 1
        if r == len(rounds):
            rounds.append({})
        rounds[r].update(((v, chunks), origin) for v in path[1:-1])
        placed.append((r, path, chunks, op, slot))
        depth = max(depth, len(path) - 1)
    steps: list[list[tuple[Move, Slot]]] = [[] for _ in range(len(rounds) * depth)]
    taken: set[tuple[int, int, int, tuple[int, ...]]] = set()
    for r, path, chunks, op, slot in placed:
        hops = len(path) - 1
        for k, (a, b) in enumerate(zip(path, path[1:])):
            step = (r + 1) * depth - hops + k
            if k < hops - 1 and (step, a, b, chunks) in taken:
                continue  # this copy is on its way there already
            taken.add((step, a, b, chunks))
            steps[step].append(((chunks, a, b, op if k == hops - 1 else "copy"), slot))
    return steps


def piece_schedule(topology: Topology, layout: Layout, kind: str, exchanges: dict[str, str],
                   chunk_bytes: float) -> tuple[Algorithm, list[int], list[str]]:
    """One piece as a plain algorithm (one chunk per rank) listed by slot, each transfer's step and
    each step's stage. Dependencies come from the buffer accesses in step order (the order one
    piece runs in); the slots then interleave the steps, which changes only the order in which a
    link serves the pieces in flight."""
    builder = ScheduleBuilder(topology, make_collective(kind, topology.num_npus, 1), chunk_bytes)
    steps: list[int] = []
    slots: list[Slot] = []
    names: list[str] = []
    for step, (stage, moves) in enumerate(piece_moves(topology, layout, kind, exchanges)):
        names.append(stage)
        for (chunks, src, dst, op), slot in moves:
            builder.add(chunks, src, dst, op)
            steps.append(step)
            slots.append(slot)
    # by slot, then step: a step's transfers stay in the order they were added (rounds in turn), so
    # the buffer dependencies inside a step still point back
    order = sorted(range(len(slots)), key=lambda t: (slots[t][0], slots[t][1], steps[t]))
    position = {old: new for new, old in enumerate(order)}
    transfers = [replace(builder.transfers[old], id=new, deps=tuple(sorted(position[d] for d in
                                                                            builder.transfers[old].deps)))
                 for new, old in enumerate(order)]
    return Algorithm(topology, builder.collective, chunk_bytes, transfers, {}), [steps[i] for i in order], names


def pipelined(piece: Algorithm, lags: list[int], pieces: int, periodic: bool) -> Algorithm:
    """``pieces`` copies of ``piece``, each transfer lagging as ``lags`` says: a period
    (``workbench.algorithm/3``) or, when not ``periodic``, written out."""
    algorithm = repeated(piece, pieces, lags)
    return algorithm if periodic else replace(algorithm.expanded(), meta=dict(piece.meta))
