"""Classic collective algorithms, emitted in the common IR and timed by the shared simulator.

Definitions follow ``docs/methods/tacos.md`` section 4.1 (the TACOS paper's baselines) and
``docs/methods/baselines.md``; the alpha-beta costs there (its section 2) are the closed forms the
tests check on topologies where the algorithm runs contention-free.

* ``ring``: logical ring over the ranks in id order (routed onto the physical topology).
  Reduce-scatter then all-gather, n-1 steps each. Bidirectional (the TACOS paper's "Ring"):
  chunks with even index j travel clockwise, odd j counter-clockwise, so it needs k >= 2 chunks
  per rank to use both directions; with k = 1 it is the unidirectional ring (``bidirectional``
  parameter, default true).
* ``direct``: every rank sends each shard straight to its owner (reduce-scatter), then every
  owner sends its reduced shard to every rank (all-gather); one message per (source, destination)
  pair, routed (multi-hop on sparse topologies, hence contention). All-to-all: NCCL's peer-to-peer
  exchange, each source's pieces for a destination in one message.
* ``rhd``: recursive halving (reduce-scatter, partner distance n/2, n/4, ..., 1) then recursive
  doubling (all-gather, distance 1, 2, ..., n/2); one message per step. Any rank count, by the
  non-power-of-two fix of R. Thakur, R. Rabenseifner, W. Gropp, "Optimization of collective
  communication operations in MPICH", IJHPCA 19(1), 2005: with p the largest power of two <= n and
  r = n - p, rank 2i (i < r) first sends its data to 2i+1 (reduced in, for a reduce-scatter or
  all-reduce) and sits out; the p others halve and double, each carrying its pair's blocks; at the
  end 2i+1 sends 2i its result. Two steps more than a power of two, none for one.
* ``dbt``: NCCL's double binary tree for all-reduce: tree 1 is NCCL's btree (odd ranks are
  leaves), tree 2 its mirror (r -> n-1-r; a shift by one for odd n), so a rank is interior in at
  most one tree. Even-numbered chunks use tree 1, odd ones tree 2; each chunk is reduced up its tree
  and broadcast down, chunks pipelined.
* ``hierarchical``: BlueConnect's multi-dimensional (multi-rail) all-reduce: ring reduce-scatter
  inside each dimension from dim 0 up, then ring all-gather from the last dimension down. The k chunks
  per rank are pipelined through the dimensions (stage s of chunk j is planned at wavefront j + s, so
  the dimensions work on different chunks at once), alternating ring directions when k >= 2. Needs a topology built
  from dimensions (``md:``, ``rfs:``, ``mesh:``, ``torus:``).

Dependencies come from buffer accesses (``workbench.kit.schedule.ScheduleBuilder``); transfers are
listed by planned step, which is the order each link serves them in the default model.

Claimed time: the schedule's own time in the simulator's default model (``meta.claim_model`` =
``pipelined/in-order/cut-through``; ``workbench.kit.schedule.claim_in_model``), not the alpha-beta
closed forms above, which hold only where the algorithm runs without contention. It is simulated
after the schedule is built and not counted in the synthesis seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from workbench.model.algorithm import Algorithm
from workbench.plugin.closed_form import ClosedForm, require_kind
from workbench.plugin.formulation import Unsupported
from workbench.model.collective import Collective
from workbench.plugin.parameters import Options, option
from workbench.plugin.registry import Problem
from workbench.kit.schedule import ScheduleBuilder
from workbench.topology.structure import boxes_and_rails

__all__ = ["Ring", "Direct", "RecursiveHalvingDoubling", "DoubleBinaryTree", "Hierarchical"]


def _owner_chunks(collective: Collective, owner: int) -> list[int]:
    n = collective.num_ranks
    return [j * n + owner for j in range(collective.chunks_per_rank)]


def _phases(collective: Collective, supported: tuple[str, ...], name: str) -> tuple[bool, bool]:
    """(reduce-scatter phase?, all-gather phase?) for the collective."""
    require_kind(collective, name, supported)
    return collective.kind in ("reducescatter", "allreduce"), collective.kind in ("allgather", "allreduce")


# ---------------------------------------------------------------------------------------- ring
def ring_schedule(problem: Problem, bidirectional: bool = True) -> Algorithm:
    """Ring Reduce-Scatter, All-Gather or All-Reduce (RS then AG) over ranks in id order, n-1 steps
    per phase; ``bidirectional``: with two or more chunks per rank, alternate chunks go the other way."""
    collective = problem.collective
    rs, ag = _phases(collective, ("allgather", "reducescatter", "allreduce"), "ring")
    n, k = collective.num_ranks, collective.chunks_per_rank
    builder = ScheduleBuilder(problem.topology, collective, problem.chunk_bytes)
    plan: list[tuple[int, int, int, int, int, str]] = []  # (step, j, position, chunk, dst, op) as sends
    for j in range(k):
        direction = -1 if (bidirectional and j % 2 == 1) else 1
        if rs:
            for step in range(n - 1):
                for p in range(n):
                    owner = (p - direction * (step + 1)) % n
                    plan.append((step, j, p, j * n + owner, (p + direction) % n, "reduce"))
        if ag:
            offset = n - 1 if rs else 0
            for step in range(n - 1):
                for p in range(n):
                    owner = (p - direction * step) % n
                    plan.append((offset + step, j, p, j * n + owner, (p + direction) % n, "copy"))
    for step, j, p, chunk, dst, op in sorted(plan):
        builder.add(chunk, p, dst, op)
    return builder.build({"bidirectional": bidirectional and k >= 2})


# ---------------------------------------------------------------------------------------- direct
def direct_schedule(problem: Problem) -> Algorithm:
    """Direct exchange: All-to-All as one message per (source, destination) pair; Reduce-Scatter as
    every rank sending each owner its contribution, All-Gather as every owner sending its chunks to
    every rank (All-Reduce: both), in n-1 rounds of rotating offset."""
    collective = problem.collective
    if collective.kind == "alltoall":
        return _direct_alltoall(problem)
    rs, ag = _phases(collective, ("allgather", "reducescatter", "allreduce", "alltoall"), "direct")
    n = collective.num_ranks
    builder = ScheduleBuilder(problem.topology, collective, problem.chunk_bytes)
    if rs:
        for offset in range(1, n):
            for src in range(n):
                dst = (src + offset) % n
                builder.add(_owner_chunks(collective, dst), src, dst, "reduce")
    if ag:
        for offset in range(1, n):
            for src in range(n):
                builder.add(_owner_chunks(collective, src), src, (src + offset) % n, "copy")
    return builder.build()


def _direct_alltoall(problem: Problem) -> Algorithm:
    """NCCL's all-to-all: every source sends each destination its pieces as one message (peer to peer)."""
    collective = problem.collective
    n = collective.num_ranks
    builder = ScheduleBuilder(problem.topology, collective, problem.chunk_bytes)
    for offset in range(1, n):
        for src in range(n):
            dst = (src + offset) % n
            pieces = [c for c in range(collective.num_chunks) if src in collective.pre[c] and dst in collective.post[c]]
            builder.add(pieces, src, dst, "copy")
    return builder.build()


# ---------------------------------------------------------------------------------------- rhd
def rhd_schedule(problem: Problem) -> Algorithm:
    """Recursive halving (Reduce-Scatter) and doubling (All-Gather), log2 n steps each, for a
    power-of-two rank count."""
    collective = problem.collective
    rs, ag = _phases(collective, ("allgather", "reducescatter", "allreduce"), "rhd")
    n = collective.num_ranks
    # the non-power-of-two fix: the first 2*extra ranks pair up (2i, 2i+1); 2i folds into 2i+1
    # and sits out, so p = 2^floor(log2 n) survivors halve and double, each for its group
    p = 1 << (n.bit_length() - 1)
    extra = n - p
    survivors = [2 * i + 1 if i < extra else i + extra for i in range(p)]
    groups = [[2 * i, 2 * i + 1] if i < extra else [i + extra] for i in range(p)]
    everything = [c for o in range(n) for c in _owner_chunks(collective, o)]
    bits = p.bit_length() - 1
    builder = ScheduleBuilder(problem.topology, collective, problem.chunk_bytes)

    def chunks_of(members) -> list[int]:
        return [c for i in members for o in groups[i] for c in _owner_chunks(collective, o)]

    for i in range(extra):  # fold: the partner takes the sitting-out rank's data
        builder.add(everything if rs else _owner_chunks(collective, 2 * i), 2 * i, 2 * i + 1,
                    "reduce" if rs else "copy")
    if rs:
        for level in range(bits - 1, -1, -1):  # distance p/2, p/4, ..., 1
            mask = 1 << level
            high = ~((mask << 1) - 1)  # bits already halved
            for r in range(p):
                partner = r ^ mask
                members = [o for o in range(p) if (o & high) == (r & high) and (o & mask) == (partner & mask)]
                builder.add(chunks_of(members), survivors[r], survivors[partner], "reduce")
    if ag:
        for level in range(bits):  # distance 1, 2, ..., p/2
            mask = 1 << level
            keep = ~(mask - 1)
            for r in range(p):
                members = [o for o in range(p) if (o & keep) == (r & keep)]
                builder.add(chunks_of(members), survivors[r], survivors[r ^ mask], "copy")
    for i in range(extra):  # unfold: the sitting-out rank gets its result from its partner
        own = set(_owner_chunks(collective, 2 * i))
        result = own if not ag else (everything if rs else [c for c in everything if c not in own])
        builder.add(sorted(result), 2 * i + 1, 2 * i, "copy")
    return builder.build({"sitting_out": extra})


# ---------------------------------------------------------------------------------------- dbt
def nccl_btree(n: int, rank: int) -> tuple[int, list[int]]:
    """NCCL's binary tree (src/graph/trees.cc): (parent or -1, children)."""
    bit = 1
    while bit < n:
        if bit & rank:
            break
        bit <<= 1
    if rank == 0:
        return -1, ([bit >> 1] if n > 1 else [])
    parent = (rank ^ bit) | (bit << 1)
    if parent >= n:
        parent = rank ^ bit
    low = bit >> 1
    children = []
    if low:
        children.append(rank - low)
        down = rank + low
        while low and down >= n:
            low >>= 1
            down = rank + low
        if low:
            children.append(down)
    return parent, children


def _tree(n: int, which: int) -> tuple[list[int], list[list[int]]]:
    """Parents and children of tree 1 (btree) or tree 2 (mirror for even n, shift for odd n)."""
    def relabel(r: int) -> int:
        if which == 0:
            return r
        return n - 1 - r if n % 2 == 0 else (r + 1) % n
    parents = [-1] * n
    children: list[list[int]] = [[] for _ in range(n)]
    for rank in range(n):
        parent, kids = nccl_btree(n, rank)
        node = relabel(rank)
        parents[node] = -1 if parent < 0 else relabel(parent)
        children[node] = [relabel(kid) for kid in kids]
    return parents, children


def dbt_schedule(problem: Problem) -> Algorithm:
    """NCCL's double binary tree All-Reduce: two complementary trees, each reducing then
    broadcasting half of the data."""
    collective = problem.collective
    require_kind(collective, "dbt", ("allreduce",))
    n = collective.num_ranks
    builder = ScheduleBuilder(problem.topology, collective, problem.chunk_bytes)
    plan = []
    for which in (0, 1):
        parents, children = _tree(n, which)
        root = parents.index(-1)
        height = [0] * n
        depth = [0] * n

        def measure(node: int, d: int) -> int:
            depth[node] = d
            height[node] = 1 + max((measure(kid, d + 1) for kid in children[node]), default=-1)
            return height[node]

        tree_height = measure(root, 0)
        chunks = [c for c in range(collective.num_chunks) if c % 2 == which]
        for q, chunk in enumerate(chunks):
            for node in range(n):
                if parents[node] >= 0:  # reduce up: after all of node's subtree arrived
                    plan.append((q + height[node], which, node, chunk, node, parents[node], "reduce"))
                    plan.append((q + tree_height + depth[node], which, node, chunk, parents[node], node, "copy"))
    for step, which, node, chunk, src, dst, op in sorted(plan):
        builder.add(chunk, src, dst, op)
    return builder.build()


# ---------------------------------------------------------------------------------------- hierarchical
def hierarchical_schedule(problem: Problem) -> Algorithm:
    """Rings dimension by dimension on a topology built from dimensions: Reduce-Scatter from the
    first dimension up, All-Gather from the last down; with two or more chunks per rank, alternate
    chunks go round the rings in opposite directions."""
    collective = problem.collective
    rs, ag = _phases(collective, ("allgather", "reducescatter", "allreduce"), "hierarchical")
    n = collective.num_ranks
    sizes, rank_at = _dimensions(problem.topology, n)
    strides = [math.prod(sizes[:i]) for i in range(len(sizes))]

    def coordinate(rank: int, dim: int) -> int:
        return (rank // strides[dim]) % sizes[dim]

    def group(rank: int, dim: int) -> list[int]:
        base = rank - coordinate(rank, dim) * strides[dim]
        return [base + i * strides[dim] for i in range(sizes[dim])]

    def above(low: int, dim: int) -> list[int]:
        """Positions whose coordinates on dims <= ``dim`` are ``low``'s, any above it (ascending)."""
        step = strides[dim] * sizes[dim]
        return list(range(low, n, step))

    builder = ScheduleBuilder(problem.topology, collective, problem.chunk_bytes)
    k = collective.chunks_per_rank
    bidirectional = k >= 2
    plan = []  # (wavefront, j, stage, order, chunks, src, dst, op): chunk j enters stage s at wavefront j' + s
    for j in range(k):
        direction = -1 if (bidirectional and j % 2 == 1) else 1
        wave = j // 2 if bidirectional else j
        stage = 0
        if rs:
            for dim in range(len(sizes)):
                m = sizes[dim]
                for step in range(m - 1):
                    for r in range(n):
                        members = group(r, dim)
                        p = coordinate(r, dim)
                        target = members[(p - direction * (step + 1)) % m]
                        # chunks whose owners agree with r on dims < dim and with target on dim
                        owners = above(r % strides[dim] + coordinate(target, dim) * strides[dim], dim)
                        plan.append((wave + stage, j, stage, r, [j * n + rank_at[o] for o in owners], rank_at[r],
                                     rank_at[members[(p + direction) % m]], "reduce"))
                    stage += 1
        if ag:
            for dim in range(len(sizes) - 1, -1, -1):
                m = sizes[dim]
                for step in range(m - 1):
                    for r in range(n):
                        members = group(r, dim)
                        p = coordinate(r, dim)
                        source = members[(p - direction * step) % m]
                        # what source held entering this dim: owners agreeing with it on dims <= dim
                        owners = above(source % (strides[dim] * m), dim)
                        plan.append((wave + stage, j, stage, r, [j * n + rank_at[o] for o in owners], rank_at[r],
                                     rank_at[members[(p + direction) % m]], "copy"))
                    stage += 1
    # planned start order: a wavefront over chunks, so the dimensions work on different chunks at once
    for _, _, _, _, chunks, src, dst, op in sorted(plan, key=lambda e: e[:4]):
        builder.add(chunks, src, dst, op)
    return builder.build()


def _dimensions(topology, n: int) -> tuple[list[int], list[int]]:
    """(sizes, rank at each mixed-radix position): the builder's recorded ``dims`` (positions are
    ranks), else the boxes-by-rails structure found in the links (``workbench.topology.structure``)."""
    dims = topology.meta.get("dims")
    if dims and math.prod(d["size"] for d in dims) == n:
        return [d["size"] for d in dims], list(range(n))
    found = boxes_and_rails(topology) if n == topology.num_npus else None
    if found is None:
        raise Unsupported("hierarchical needs a topology built from dimensions (md:, rfs:, mesh:, torus:, "
                                    "rails:) or boxes and rails it can find in the links")
    return [found.per_box, found.num_boxes], found.order()


# ---------------------------------------------------------------------------------------- formulations
@dataclass(frozen=True)
class RingOptions(Options):
    """The ring's one choice."""

    bidirectional: bool = option(True, "two rings, one each way, half the data each")


class Ring(ClosedForm):
    name = "ring"
    builder = staticmethod(ring_schedule)
    options = RingOptions


class Direct(ClosedForm):
    name = "direct"
    builder = staticmethod(direct_schedule)


class RecursiveHalvingDoubling(ClosedForm):
    name = "rhd"
    builder = staticmethod(rhd_schedule)


class DoubleBinaryTree(ClosedForm):
    name = "dbt"
    builder = staticmethod(dbt_schedule)


class Hierarchical(ClosedForm):
    name = "hierarchical"
    builder = staticmethod(hierarchical_schedule)
