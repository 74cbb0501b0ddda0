"""What TACOS's two matching engines share (note 2.4): the fabric in array form, the result, the
femtosecond time grid, the tie tolerance and the errors. ``engines`` chooses and runs one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.util.lazy import lazy_module
from workbench.model.collective import Collective
from workbench.topology import Topology, TopologyError

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

TIE = 1e-15  # seconds; the reference's 1e-9 us tie tolerance
REPLACEMENT_MODES = ("causal", "reference", "off")


class OutOfTime(Exception):
    """The run's deadline passed before the matching finished; ``done`` of ``total`` deliveries were
    made by then (how far it got)."""

    def __init__(self, done: int = 0, total: int = 0) -> None:
        super().__init__(f"out of time after {done:,} of {total:,} deliveries")
        self.done = done
        self.total = total


def end_time(t: float, cost: float) -> float:
    """When a transfer started at ``t`` over a link of cost ``cost`` ends, on a femtosecond grid.

    Arrivals closer than the grid are one event, as with the reference's tie tolerance. The
    rounding is plain IEEE arithmetic (round-half-even of ``x * 1e15``, then a division), so the
    compiled engine computes the very same float.
    """
    return round((t + cost) * 1e15) / 1e15


@dataclass
class MatchResult:
    """One greedy run: the claimed time and the useful matches, one array entry per delivery.

    ``src[i] -> dst[i]`` carried ``chunk[i]`` from ``started[i]`` to ``ended[i]``, listed in
    arrival order. Runs that do not record the schedule (``record=False``) have empty arrays.
    """

    claimed_time: float
    src: np.ndarray
    dst: np.ndarray
    chunk: np.ndarray
    started: np.ndarray
    ended: np.ndarray
    deliveries: int
    wasted: int
    events: int
    engine: str

    def __len__(self) -> int:
        return self.deliveries


@dataclass
class Fabric:
    """The view's links and the collective's conditions in array form, for either engine."""

    num_npus: int
    num_chunks: int
    src: list[int]
    dst: list[int]
    cost: list[float]
    in_links: list[list[int]]   # per destination, ascending link index (= ascending source)
    out_nodes: list[list[int]]
    pre: list[frozenset[int]]
    post: list[frozenset[int]]
    deliveries: int             # (chunk, rank) pairs in post and not in pre

    @classmethod
    def of(cls, view: Topology, collective: Collective, chunk_bytes: float) -> "Fabric":
        """The fabric of a switchless ``view``: a link's cost is one chunk's time on it (alpha plus bytes
        over bandwidth); ``TopologyError`` when the view has switches."""
        if view.num_switches:
            raise TopologyError("the TACOS engine needs a switchless view (unwind the switches first)")
        n = view.num_npus
        links = view.links
        in_links: list[list[int]] = [[] for _ in range(n)]
        for e, link in enumerate(links):
            in_links[link.dst].append(e)  # links are sorted by (src, dst): ascending source
        pre, post = list(collective.pre), list(collective.post)
        return cls(n, len(pre), [l.src for l in links], [l.dst for l in links],
                   [l.alpha + chunk_bytes / l.bandwidth for l in links], in_links,
                   [list(view.out_neighbors(u)) for u in range(n)], pre, post, deliveries(collective))


def deliveries(collective: Collective) -> int:
    """(chunk, rank) pairs a run delivers: post and not pre; a reduction counts as its dual gather.

    ``len(needers) - len(holders & needers)`` rather than a set difference: the intersection
    walks the smaller set, so an All-Gather on N ranks costs O(N), not O(N^2).
    """
    if collective.combining:
        n, k = collective.num_ranks, collective.chunks_per_rank
        return (n - 1) * k if collective.kind == "reduce" else n * (n - 1) * k
    return sum(len(needers) - len(holders & needers) for holders, needers in zip(collective.pre, collective.post))


# Where every link costs the same, every flight started at an event ends at the next one (one end
# time, one calendar entry), and all of them are delivered before anyone is matched again. So a rank,
# matched at most once per event, is matched with all its in-links free and nothing in flight to it;
# its match never draws a chunk twice, nor one it holds (offers are ``held[src] & need[dst]``). No
# chunk can reach a rank twice there, and the engines keep no arrival times for causal replacement: a
# duplicate would be a bug in the engine, not a case to handle.
DUPLICATE_ON_ONE_COST = "TACOS engine: a chunk arrived twice on a fabric of one link cost, which cannot happen"


def unreachable(rank: int, chunk: int) -> TopologyError:
    """The error for a ``chunk`` that ``rank`` needs and no sequence of TACOS sends can bring."""
    return TopologyError(f"rank {rank} can never receive chunk {chunk}: TACOS sends a chunk only to ranks that "
                         f"need it, so a chunk that must be relayed through other ranks (All-to-All, Scatter on a "
                         f"sparse topology) cannot arrive")


def empty_matches() -> dict[str, Any]:
    """The record of a run with no matches: empty ``src``, ``dst``, ``chunk``, ``started``, ``ended``."""
    return {"src": np.zeros(0, np.int64), "dst": np.zeros(0, np.int64), "chunk": np.zeros(0, np.int64),
            "started": np.zeros(0), "ended": np.zeros(0)}
