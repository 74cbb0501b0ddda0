"""One-pass All-Reduce: every rank sums whole vectors it receives, with no Reduce-Scatter then All-Gather.

Two-pass schedules (ring, RHD, the synthesizers' RS + AG) cost two latency chains; at small sizes
the latency is the time, and runtimes send whole vectors instead (MSCCL++'s and TensorRT-LLM's
one-shot All-Reduce; NCCL's symmetric-memory one-shot kernels). Both rules read an *earlier value*
of the sender (``Transfer.read``, ``workbench.algorithm/4``): a runtime keeps it in scratch, and
without it a rank that has already received would pass its partners' contributions back to them.
Method note: ``docs/methods/baselines.md`` section 12.

* ``oneshot``: every rank's input reaches every other rank once, along a breadth-first tree from
  it over the NPUs (direct links, or paths through switches only), and is added there. The first
  hop reads the input (``read`` = input); a relay forwards what the hop before brought it
  (``read_carried``), so it adds the input and passes it on unchanged. A rank's parent is the
  neighbour one level up whose route into it ends on the fastest link (on a rail fabric: along the
  rail first, then inside the box, so the slow links carry each input once), ties taken in turn by
  the trees of different origins. Hops go level by level, rank u to u + r in rotation order r. On a switch every
  tree is a star: N - 1 messages of M bytes into every rank, the two-hop bound's raw term
  (``workbench.bounds.two_hop``); on a ring each input goes both ways, N/2 hops.
* ``rd``: recursive doubling of whole vectors (R. Thakur, R. Rabenseifner, W. Gropp, "Optimization
  of Collective Communication Operations in MPICH", IJHPCA 19(1), 2005, section 4.4). With p the
  largest power of two <= N, rank r in 0..p-1 exchanges with r XOR d for d = 1, 2, ..., p/2,
  sending what it held after its last receipt (``read`` = that transfer; its input at first) and
  adding what it gets: log2 p steps of M bytes. The N - p extra ranks first add their inputs into
  ranks 0..N-p-1 and at the end receive the sum back from them (the paper's non-power-of-two fix).

A rule writes the whole vector as one message of all its chunks, and where equally short routes
through switches join two ranks (the spines of a leaf-spine fabric), each message names the one its
busiest link would load least (``workbench.kit.spread_routes``; ``meta.routes_named`` counts them).
Claimed time: the schedule's own time in the simulator's default model
(``workbench.plugin.closed_form``).
"""

from __future__ import annotations

from workbench.model.algorithm import Algorithm, Transfer
from workbench.kit.spread_routes import spread_routes
from workbench.model.transfer import READ_INPUT, read_carried
from workbench.plugin.closed_form import ClosedForm, require_kind
from workbench.plugin.formulation import Unsupported
from workbench.plugin.registry import Problem
from workbench.topology.structure import arrival_bandwidths, npu_neighbours
from workbench.util.graphs import fastest_parent_tree

__all__ = ["OneShot", "RecursiveDoubling", "oneshot_schedule", "rd_schedule"]


def _whole_vector(problem: Problem, name: str) -> tuple[int, tuple[int, ...]]:
    """The rank count and every chunk (one message carries the whole vector); All-Reduce only."""
    collective = problem.collective
    require_kind(collective, name, ("allreduce",))
    if collective.num_ranks < 2:
        raise Unsupported(f"{name} needs at least 2 ranks")
    return collective.num_ranks, tuple(range(collective.num_chunks))


# chunk moves (messages x chunks) past which oneshot refuses: 256 ranks of one chunk each are
# 16.7 million and take about 20 s to write, verify and simulate; 512 would take minutes
ONESHOT_MOST_MOVES = 20_000_000


def oneshot_schedule(problem: Problem) -> Algorithm:
    """Every input to every other rank along a breadth-first tree from it (module docstring)."""
    n, chunks = _whole_vector(problem, "oneshot")
    moves = n * (n - 1) * len(chunks)
    if moves > ONESHOT_MOST_MOVES:
        raise Unsupported(f"oneshot: {n} ranks send {n * (n - 1):,} whole vectors of {len(chunks)} chunks "
                          f"({moves:,} chunk moves, over {ONESHOT_MOST_MOVES:,}); one pass is for small "
                          f"fabrics and sizes, a two-pass formulation fits this one")
    neighbours = [[v for v in near if v < n] for near in npu_neighbours(problem.topology)[:n]]
    incoming, arrival = arrival_bandwidths(problem.topology, neighbours)
    hops: list[tuple[int, int, int, int, int]] = []  # (depth, position, origin, parent, child)
    for origin in range(n):
        parent, depth = _tree(incoming, neighbours, arrival, origin)
        for child in range(n):
            if child != origin:
                hops.append((depth[child], (child - origin) % n, origin, parent[child], child))
    transfers: list[Transfer] = []
    into: dict[tuple[int, int], int] = {}  # (origin, rank) -> the transfer that brought it the origin's input
    for _, _, origin, parent, child in sorted(hops):
        if parent == origin:
            read, deps = READ_INPUT, ()
        else:
            relay = into[(origin, parent)]
            read, deps = read_carried(relay), (relay,)
        into[(origin, child)] = len(transfers)
        transfers.append(Transfer(len(transfers), chunks, parent, child, "reduce", deps, read=read))
    routed = spread_routes(problem.topology, transfers, problem.chunk_bytes)
    return Algorithm(problem.topology, problem.collective, problem.chunk_bytes, transfers,
                     {"passes": 1, "steps": max(h[0] for h in hops), "routes_named": routed})


def _tree(incoming: list[list[int]], neighbours: list[list[int]], arrival: dict[tuple[int, int], float],
          origin: int) -> tuple[list[int], list[int]]:
    """A breadth-first tree of the ranks from ``origin``: parent and depth per rank. A rank's parent
    is, among its neighbours one level up, the one whose route into it ends on the fastest link
    (on a rail fabric: along the rail first, then inside the box), then the first after ``origin``
    in id order (wrapping), so trees from different origins spread over equally good parents."""
    n = len(neighbours)
    parent, depth = fastest_parent_tree(incoming, neighbours, arrival, (origin,),
                                        lambda u, v: (-((u - origin - 1) % n),))
    if min(depth) < 0:
        raise Unsupported(f"oneshot: rank {depth.index(-1)} cannot be reached from rank {origin}")
    return parent, depth


def rd_schedule(problem: Problem) -> Algorithm:
    """Recursive doubling of whole vectors, extra ranks folded in and out (module docstring)."""
    n, chunks = _whole_vector(problem, "rd")
    p = 1 << (n.bit_length() - 1)
    transfers: list[Transfer] = []
    last: dict[int, int] = {}  # rank -> the transfer it received last

    def send(src: int, dst: int, op: str, read: int | None) -> None:
        # after the sender's last receipt (what it reads), and after the last write into the
        # receiver, so relisting never moves a write across the snapshot another send reads
        deps = tuple(sorted({last[r] for r in (src, dst) if r in last}))
        transfers.append(Transfer(len(transfers), chunks, src, dst, op, deps, read=read))

    for extra in range(p, n):  # the extras' inputs into their partners
        send(extra, extra - p, "reduce", READ_INPUT)
        last[extra - p] = len(transfers) - 1
    distance = 1
    while distance < p:
        sent = {}
        for r in range(p):
            send(r, r ^ distance, "reduce", last.get(r, READ_INPUT))
            sent[r ^ distance] = len(transfers) - 1
        last.update(sent)
        distance *= 2
    for extra in range(p, n):  # the sum back to the extras, over their inputs
        send(extra - p, extra, "copy", last.get(extra - p, READ_INPUT))
    routed = spread_routes(problem.topology, transfers, problem.chunk_bytes)
    return Algorithm(problem.topology, problem.collective, problem.chunk_bytes, transfers,
                     {"passes": 1, "steps": (n > p) * 2 + (p.bit_length() - 1), "routes_named": routed})


class OneShot(ClosedForm):
    """Every input to every rank, reduced on arrival (see the module docstring)."""

    name = "oneshot"
    builder = staticmethod(oneshot_schedule)


class RecursiveDoubling(ClosedForm):
    """Recursive doubling of whole vectors (see the module docstring)."""

    name = "rd"
    builder = staticmethod(rd_schedule)
