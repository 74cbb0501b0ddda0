"""Sub-schedules stitched into one All-Gather (SyCCL section 5.2's combination of sub-schedules).

Chunk ``j`` of every rank follows the sketch its round was given (``Round``): stage by stage,
every GPU holding the chunk runs its group's sub-schedule translated to its own local index
(an ``all`` stage: the class's ``Pattern``; a ``one`` stage: a send to the next group member;
several holders in one group: the missing members split among them, sent directly). A round
starts when the previous round's busiest dimension has done its share (its bandwidth time per
chunk), so rounds pipeline. Planned times only order the listing
(``workbench.kit.decomposition.stitch``); every send waits for its chunks' delivery to its sender,
and the simulator times what really happens.

With ``merge`` a holder forwards everything one stage gave it in a round as one message (the
chunks of a rail's sources leave for the box together): fewer messages, so less alpha and
per-message overhead at small sizes, at the cost of waiting for the last of them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from formulations.syccl.sketches import Sketch
from formulations.syccl.submodel import Pattern
from workbench.kit.decomposition import Decomposition, Send

__all__ = ["Round", "allgather_sends"]


@dataclass(frozen=True)
class Round:
    """Chunk index ``j`` of every rank, sent along ``sketch``."""

    j: int
    sketch: Sketch


def allgather_sends(decomposition: Decomposition, num_ranks: int, chunk_bytes: float, rounds: list[Round],
                    patterns: dict[str, Pattern], bandwidth: dict[str, float], merge: bool) -> list[Send]:
    """Every send of the stitched All-Gather (module docstring)."""
    sends: list[Send] = []
    start = 0.0
    for round_ in rounds:
        _one_round(decomposition, num_ranks, chunk_bytes, round_, start, patterns, bandwidth, merge, sends)
        start += max(round_.sketch.sends[d] * chunk_bytes / bandwidth[d] for d in round_.sketch.sends)
    return sends


def _one_round(decomposition: Decomposition, n: int, chunk_bytes: float, round_: Round, start: float,
               patterns: dict[str, Pattern], bandwidth: dict[str, float], merge: bool, sends: list[Send]) -> None:
    holders: dict[int, set[int]] = {round_.j * n + s: {s} for s in range(n)}  # chunk -> NPUs holding it
    arrived: dict[int, list[tuple[int, float]]] = {s: [(round_.j * n + s, start)] for s in range(n)}
    for index, stage in enumerate(round_.sketch.stages):
        dim = decomposition.dimension(stage.dimension)
        serial = chunk_bytes / bandwidth[stage.dimension]
        gained: dict[int, list[tuple[int, float]]] = defaultdict(list)
        for npu, items in arrived.items():
            group, local = dim.locate(npu)
            members = dim.groups[group]
            holding_of = {c: _locals(holders[c], dim, group) for c, _ in items}
            alone = [(c, t) for c, t in items if holding_of[c] == [local]]
            shared = [(c, t) for c, t in items if holding_of[c] != [local]]
            bundles = ([alone] if merge and alone else [[item] for item in alone])
            for bundle in bundles:
                chunks = tuple(c for c, _ in bundle)
                ready = max(t for _, t in bundle)
                if stage.fanout == "one":
                    dst = members[(local + 1) % len(members)]
                    sends.append(Send(ready, index, npu, dst, chunks))
                    for c in chunks:
                        gained[dst].append((c, ready + serial * len(chunks)))
                    continue
                pattern = patterns[stage.dimension]
                image = dim.fabrics[dim.class_of(group)].translations[local]
                for a, b, t in pattern.sends:
                    src, dst = members[int(image[a])], members[int(image[b])]
                    sends.append(Send(ready + t * pattern.tau * len(chunks), index, src, dst, chunks))
                for b, epochs in pattern.arrival.items():
                    dst = members[int(image[b])]
                    for c in chunks:
                        gained[dst].append((c, ready + epochs * pattern.tau * len(chunks)))
            for c, ready in shared:  # several holders in the group: the missing members split among them
                holding = holding_of[c]
                if local != holding[0]:
                    continue  # the first holder plans the whole split
                missing = [m for m in range(len(members)) if m not in holding]
                for i, m in enumerate(missing):
                    src = members[holding[i % len(holding)]]
                    at = ready + (i // len(holding)) * serial
                    sends.append(Send(at, index, src, members[m], (c,)))
                    gained[members[m]].append((c, at + serial))
        for npu, items in gained.items():
            for c, _ in items:
                holders[c].add(npu)
            arrived.setdefault(npu, []).extend(items)  # old holders keep sending in the next stage


def _locals(npus: set[int], dim, group: int) -> list[int]:
    """The local indices, sorted, of the NPUs of ``npus`` in ``group`` of ``dim`` (by the
    dimension's own lookup: a chunk has few holders, a group many members)."""
    places = [dim.locate(v) for v in npus]
    return sorted(a for g, a in places if g == group)
