"""What the switches that declare abilities hold, operation by operation (docs/verifier.md, "Switches
that reduce"; the abilities: ``workbench.topology.abilities``).

A switch keeps nothing between operations. At a switch that reduces or does not multicast, the
transfers into one buffer (switch, chunk) form **operations** in file order: a run of writes (the
contributions reduced into it, or one copy), then the run of transfers that read it. The buffer is
cleared when the last of those readers starts, so the next operation's reduces start from nothing.
The rules an operation must keep:

* a switch with ``multicast: false`` sends each value it holds at most once;
* a sum (an operation with a reduce among its writes) leaves a switch without ``sum_fanout`` once:
  an NVSwitch load-reduce returns the sum to the GPU that issued it;
* a switch with ``reduce_trees: k`` keeps at most k distinct trees open at once on the default
  timeline, a tree being the set of ports a sum is reduced from and sent to (a SHARP group),
  open from its first contribution's start to its last reader's start.

``SwitchValues`` holds the operations, says which transfers' links at a switch run at its
``reduce_rate`` (``rated``; the simulator's rule, docs/cost-model.md) and counts each operation's
readers down as a replay starts them (``started``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

__all__ = ["Operation", "SwitchValues", "tracked_switches", "rated_transfers", "rated_segments", "too_many_trees"]


@dataclass
class Operation:
    """One value a switch holds: the transfers that write it and those that read it, in file order."""

    switch: int
    chunk: int
    index: int  # its place in ``SwitchValues.operations``
    writers: list[int] = field(default_factory=list)
    readers: list[int] = field(default_factory=list)
    is_sum: bool = False

    def tree(self, transfers: list) -> frozenset:
        """The reduction tree it belongs to, as the switch sees it: the ports its contributions come
        from and its sum leaves by (a SHARP group: a member that adds nothing still belongs to it)."""
        return frozenset([transfers[w].src for w in self.writers] + [transfers[r].dst for r in self.readers])


def tracked_switches(topology: Any) -> set[int]:
    """The switches whose buffers the replays follow: those that reduce or do not multicast."""
    return {node for node, ability in topology.abilities.items() if ability.reduce or not ability.multicast}


class SwitchValues:
    """The operations of an algorithm's tracked switches (module docstring), found in file order."""

    def __init__(self, algorithm: Any) -> None:
        topology = algorithm.topology
        self.tracked = tracked_switches(topology)
        self.operations: list[Operation] = []
        self.reads: dict[int, list[int]] = {}  # transfer -> the operations it reads
        current: dict[tuple[int, int], Operation] = {}
        for t in algorithm.transfers if self.tracked else ():
            if t.src in self.tracked:
                for c in t.chunks:
                    op = current.get((t.src, c))
                    if op is not None:
                        op.readers.append(t.id)
                        self.reads.setdefault(t.id, []).append(op.index)
            if t.dst in self.tracked:
                for c in t.chunks:
                    op = current.get((t.dst, c))
                    if op is None or op.readers:
                        op = Operation(t.dst, c, len(self.operations))
                        self.operations.append(op)
                        current[(t.dst, c)] = op
                    op.writers.append(t.id)
                    op.is_sum = op.is_sum or t.op == "reduce"
        self.left = [len(op.readers) for op in self.operations]

    def fan_out(self, topology: Any) -> tuple[Operation, int, str] | None:
        """The first operation read more often than its switch allows, the transfer that reads it
        once too often and why; None when every operation keeps the rules."""
        worst = None
        for op in self.operations:
            if len(op.readers) < 2:
                continue
            ability = topology.ability(op.switch)
            if not ability.multicast:
                why = f"switch {op.switch} does not multicast (multicast: false)"
            elif op.is_sum and not ability.sum_fanout:
                why = (f"switch {op.switch} sends a sum it made to one destination (the NPU that loads it; "
                       f"sum_fanout: false)")
            else:
                continue
            if worst is None or op.readers[1] < worst[1]:
                worst = (op, op.readers[1], why)
        return worst

    def started(self, tid: int) -> list[Operation]:
        """Transfer ``tid`` has started reading: the operations whose last reader it is (their
        buffers are cleared now)."""
        done = []
        for index in self.reads.get(tid, ()):
            self.left[index] -= 1
            if self.left[index] == 0:
                done.append(self.operations[index])
        return done

    def reset(self) -> None:
        """Every reader still to start (before another replay)."""
        self.left = [len(op.readers) for op in self.operations]

    def rated(self, topology: Any) -> set[int]:
        """The transfers whose link at a switch with a ``reduce_rate`` runs at that rate: the reduces
        into it, and the transfers that take a sum from it."""
        found: set[int] = set()
        for op in self.operations:
            if op.is_sum and topology.ability(op.switch).reduce_rate is not None:
                found.update(op.readers)
                found.update(op.writers)
        return found


def rated_transfers(algorithm: Any) -> set[int]:
    """``SwitchValues(algorithm).rated``, without the work where no switch has a ``reduce_rate``."""
    topology = algorithm.topology
    if not any(a.reduce_rate is not None for a in topology.abilities.values()):
        return set()
    return SwitchValues(algorithm).rated(topology)


def rated_segments(topology: Any, transfer: Any, segments: Iterable[tuple]) -> list[tuple]:
    """``segments`` of ``transfer`` with the one that ends at (a reduce into) or starts from (a sum
    out of) a switch with a ``reduce_rate`` slowed to that rate (docs/cost-model.md)."""
    segments = list(segments)
    if transfer.op == "reduce" and topology.reduces(transfer.dst):
        rate, where = topology.ability(transfer.dst).reduce_rate, len(segments) - 1
    else:
        rate, where = topology.ability(transfer.src).reduce_rate, 0
    if rate is None or not segments:
        return segments
    links, alpha, bandwidth, overhead = segments[where]
    segments[where] = (links, alpha, min(bandwidth, rate), overhead)
    return segments


def too_many_trees(topology: Any, transfers: list, switches: SwitchValues,
                   start_of: Iterable) -> tuple[int, float, int] | None:
    """(switch, time, trees) where a switch with ``reduce_trees`` first keeps more trees open than
    it runs at once; None when none does. ``start_of``: per copy of the schedule (a periodic one's
    pieces; else one), a function from a transfer id to its start on the timeline."""
    limits = {node: a.reduce_trees for node, a in topology.abilities.items() if a.reduce_trees is not None}
    events = []  # (time, 0 = close before 1 = open, switch, tree)
    for start in start_of:
        for op in switches.operations:
            if op.switch in limits and op.is_sum and op.readers:
                tree = op.tree(transfers)
                events.append((min(start(w) for w in op.writers), 1, op.switch, tree))
                events.append((max(start(r) for r in op.readers), 0, op.switch, tree))
    events.sort(key=lambda e: (e[0], e[1]))
    open_trees: dict[int, dict[Any, int]] = {}
    for time, opening, switch, tree in events:
        trees = open_trees.setdefault(switch, {})
        if opening:
            trees[tree] = trees.get(tree, 0) + 1
            if len(trees) > limits[switch]:
                return switch, time, len(trees)
        else:
            trees[tree] -= 1
            if not trees[tree]:
                del trees[tree]
    return None
