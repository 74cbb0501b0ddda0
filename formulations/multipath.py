"""Multipath: each rank's chunks split over the paths of the max-concurrent-flow LP and pipelined.

Paper: P. Basu, L. Zhao, J. Fantl, S. Pal, A. Krishnamurthy, J. Khoury, "Efficient All-to-All
Collective Communication Schedules for Direct-Connect Topologies" (HPDC 2024). Their method solves
the multi-commodity-flow (MCF) LP of the All-to-All, decomposes its flows into weighted paths and
turns those into a schedule. This formulation follows that route with the workbench's own pieces
and choices: the LP and its decomposition live in the workbench (``workbench.bounds.flow_routes``), and the
schedule is a pipeline of equal pieces, not the paper's time-stepped link schedule. Method note:
``docs/methods/baselines.md`` section 10.

Paper symbol -> code name:

==============================  ==================================================================
MCF LP, throughput ``T*``       ``workbench.bounds.flow_routes.flow_routes`` (stage 1); stage 2 keeps
                                ``T <= 1.01 T*`` and prefers short paths (its docstring)
path decomposition ``P_sd``     ``Routes.paths[(origins, d)]``: paths with the share of the demand
pieces per (s, d)               ``chunks``: the collective cut into ``k`` chunks per pair
==============================  ==================================================================

The schedule (our choice; the paper's link schedule is not public in full):

* the ``k`` pieces of a pair go to its paths in proportion to their shares (largest remainder,
  so with ``k`` = 1 every pair takes its widest path);
* a path is cut at the NPUs on it (they store and forward). A stretch through switches is one
  transfer where the simulator's route between its ends is that stretch (cut-through, one
  message); else every hop is its own transfer (a switch may hold and forward:
  docs/algorithm-format.md, "The transfers"), so the flow's choice of spine or plane is kept;
* transfers are listed by ``piece + hop`` (piece's position on its path, hop's position on the
  piece's way), a wavefront: every path starts at once and each piece follows the one before it
  one hop behind; every transfer waits for the one that brought its piece
  (``workbench.kit.schedule.DeliveryChain``). That plan is then re-listed by list scheduling
  (``workbench.kit.schedule.settle_order``: the transfer that can start first goes next): in the
  wavefront order a piece that waits for its previous hop holds back its links. The faster of the
  two listings is kept (``workbench.kit.schedule.claim_listing``).

``chunks`` (auto): the pieces per pair are chosen by simulation among ``CHOICES``, the fastest in
the default model kept (``meta.time_by_choice["chunks"]``); more pieces spread a pair over more paths and
pipeline deeper, fewer pay fewer alphas and per-message overheads. The choices stop where the
next would pass ``MAX_TRANSFERS`` or not fit what is left of the time limit. A given number is
used as is (a custom collective keeps its own chunks).

Collectives: All-to-All, scatter, gather and custom demands whose chunks each go to one rank (the
LP's flows add up per link). All-Gather, broadcast and reductions are refused (their copies and
sums do not add up per link).

Claimed time: the schedule's own time in the simulator's default model (``claim_in_model``).
``meta`` records the LP's throughput time (``flow_optimum``, without alpha), its status, the
paths per pair and the LP seconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from workbench.model.algorithm import Algorithm
from workbench.model.collective import Collective
from workbench.kit.deadline import Deadline
from workbench.bounds.flow_routes import Routes, RoutesError, flow_routes
from workbench.plugin.parameters import Options, option
from workbench.plugin.registry import Problem, SynthesisResult, Unsupported
from workbench.kit.schedule import DeliveryChain, claim_listing
from workbench.topology import Topology

__all__ = ["Multipath", "CHOICES", "build_schedule", "split_pieces"]

CHOICES = (1, 2, 4, 8, 16)  # pieces per pair tried by ``chunks="auto"``
MAX_TRANSFERS = 400_000  # a choice that would write more is skipped


def split_pieces(shares: list[float], pieces: int) -> list[int]:
    """Pieces per path in proportion to ``shares`` (largest remainder; ties to the earlier path)."""
    exact = [share * pieces for share in shares]
    counts = [int(x) for x in exact]
    order = sorted(range(len(shares)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[:pieces - sum(counts)]:
        counts[i] += 1
    return counts


def _stretches(topology: Topology, path: tuple[int, ...]) -> list[tuple[int, int]]:
    """The transfers that move a piece along ``path``: one per stretch between NPUs when the
    simulator routes it that way, else one per hop."""
    cuts = [i for i, node in enumerate(path) if not topology.is_switch(node)]
    moves: list[tuple[int, int]] = []
    for a, b in zip(cuts, cuts[1:]):
        stretch = path[a:b + 1]
        if len(stretch) == 2 or (topology.route(stretch[0], stretch[-1]) == stretch
                                 and len({topology.link(u, v).bandwidth for u, v in zip(stretch, stretch[1:])}) == 1):
            moves.append((stretch[0], stretch[-1]))
        else:
            moves.extend(zip(stretch, stretch[1:]))
    return moves


def build_schedule(topology: Topology, collective: Collective, chunk_bytes: float, routes: Routes) -> Algorithm:
    """The pipelined schedule of the module docstring for ``collective`` (any chunks per pair)."""
    chunks_of: dict[tuple[frozenset, int], list[int]] = {}
    for chunk, (pre, post) in enumerate(zip(collective.pre, collective.post)):
        for rank in sorted(post - pre):
            chunks_of.setdefault((frozenset(pre), rank), []).append(chunk)
    n = collective.num_ranks
    moves: list[tuple[tuple[int, int, int, int], int, int, int]] = []  # (key, chunk, src, dst)
    for (pre, rank), chunks in chunks_of.items():
        found = routes.paths.get((pre, rank))
        if not found:
            raise RoutesError(f"no route for the chunks {sorted(pre)} -> {rank}")
        counts = split_pieces([share for _, share in found], len(chunks))
        taken = 0
        for (path, _), count in zip(found, counts):
            steps = _stretches(topology, path)
            for position, chunk in enumerate(chunks[taken:taken + count]):
                for hop, (u, v) in enumerate(steps):
                    moves.append(((position + hop, hop, (rank - path[0]) % n, path[0]), chunk, u, v))
            taken += count
    moves.sort()
    chain = DeliveryChain()
    for _, chunk, u, v in moves:
        chain.send(chunk, u, v)
    return chain.build(topology, collective, chunk_bytes)


@dataclass(frozen=True)
class MultipathOptions(Options):
    """How finely each rank pair's data is cut over its paths."""

    chunks: int | str = option("auto", "pieces per rank pair ('auto': the fastest of "
                               f"{', '.join(map(str, CHOICES))} by simulation)", choices=("auto",), minimum=1)

    def estimate(self, problem: Any) -> list[tuple[str, float]]:
        """A given ``chunks``: the collective cut into that many pieces per pair, listed twice and
        simulated (``workbench.util.size_guard``, ``BYTES_PER_LISTED_TRANSFER``); "auto" stops within
        ``MAX_TRANSFERS`` by itself."""
        if self.chunks == "auto" or problem.kind == "custom":
            return []
        return [("chunks", problem.listed_bytes(int(self.chunks)))]


class Multipath:
    """Multipath schedules from the flow LP's paths (module docstring)."""

    name = "multipath"
    kind = "schedule"
    options = MultipathOptions

    def synthesize(self, problem: Problem, *, time_limit: float, seed: int, options: MultipathOptions,
                   on_incumbent: Callable[[Algorithm], None] | None = None) -> SynthesisResult:
        """The fastest of the chunkings tried (module docstring); ``Unsupported`` where the flow
        LP's routes cannot carry the collective."""
        chunks = options.chunks
        started = time.perf_counter()
        deadline = Deadline(time_limit)
        base = problem.with_chunks(1 if chunks == "auto" else int(chunks))
        try:
            routes = flow_routes(base.topology, base.collective, base.chunk_bytes, deadline.limit(floor=0.05))
        except RoutesError as exc:
            raise Unsupported(f"multipath: {exc}") from None
        except TimeoutError as exc:
            return SynthesisResult([], "timeout", time.perf_counter() - started, message=f"multipath: {exc}")
        choices = CHOICES if chunks == "auto" and problem.collective.kind != "custom" else (None,)
        longest = max((len(p) for found in routes.paths.values() for p, _ in found), default=2)
        best: Algorithm | None = None
        timed: dict[str, float] = {}
        last = 0.0  # seconds the previous choice took: the next takes about twice as long
        for pieces in choices:
            refined = base if pieces is None else problem.with_chunks(pieces)
            pairs = sum(len(post - pre) for pre, post in zip(refined.collective.pre, refined.collective.post))
            if best is not None and (pairs * (longest - 1) > MAX_TRANSFERS
                                     or (not deadline.unlimited and deadline.remaining() < 2.5 * last)):
                break  # more pieces would not fit the transfer budget or what is left of the time limit
            began = time.perf_counter()
            planned = build_schedule(refined.topology, refined.collective, refined.chunk_bytes, routes)
            # the wavefront or its list-scheduled listing, the faster (at every size)
            algorithm = claim_listing(planned, seconds_left=None if deadline.unlimited else deadline.remaining())
            last = time.perf_counter() - began
            timed[str(refined.collective.chunks_per_rank)] = algorithm.meta["claimed_time"]
            if best is None or algorithm.meta["claimed_time"] < best.meta["claimed_time"]:
                best = algorithm
                if on_incumbent is not None:
                    on_incumbent(algorithm)
        assert best is not None
        best.meta.update({"flow_optimum": routes.optimum_seconds, "routes_status": routes.status,
                          "lp_seconds": routes.lp_seconds, "time_by_choice": {"chunks": timed},
                          "paths_per_pair": max((len(p) for p in routes.paths.values()), default=0)})
        return SynthesisResult([best], "feasible", time.perf_counter() - started,
                               {"transfers": len(best.transfers), "lp_seconds": routes.lp_seconds})
