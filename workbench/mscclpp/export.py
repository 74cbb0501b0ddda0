"""Lowering an algorithm into an MSCCL++ execution plan (JSON, the executor's schema of mscclpp 0.9).

The plan names, per GPU, its buffers (``input_chunks``, ``output_chunks``, ``scratch_chunks``), its
channels (``memory`` to GPUs of its node, ``port`` to other nodes; one channel per peer), the peer
buffers it writes (``remote_buffers``) and its threadblocks, each a list of operations.

Lowering, per transfer ``t`` (src ``s``, dst ``d``) in plan order:

* ``s``: one ``put`` per contiguous run from its slot into ``d``'s slot (a reduction's partial sum
  into fresh scratch on ``d``), then ``signal`` on the channel to ``d`` (and ``flush`` on a port
  channel, so the proxy has finished reading ``s``'s buffer);
* ``d``: ``wait`` on the channel from ``s``, and for a reduction one ``re`` per run adding the
  landed partial sum into its slot (``dst = dst + landed``), placed just before the first of
  ``d``'s operations that needs them (a send depending on ``t``, or one touching its slots).

Buffers follow NCCL's rank-major layout (``workbench.msccl.layout``), own input chunks that must be
in the output are copied first (``copy``), and a reduction whose output slot is not its working slot
(Reduce-Scatter's o[j]) is copied out last. Every GPU runs one threadblock that executes its
operations in plan order (waits deferred as above, never reordered among themselves): the k-th
``wait`` on a channel pairs with the k-th ``signal``, and since plan order is a topological order of
the transfers, a GPU blocked on a wait only waits for operations earlier in that order, so the plan
cannot deadlock. The price is that a GPU's sends to
different peers do not overlap (they do across GPUs); ``workbench interpret`` checks the plan for
races and runs it.
"""

from __future__ import annotations

from typing import Any

from workbench.model.algorithm import Algorithm
from workbench.model.transfer import read_target
from workbench.msccl.common import MscclError
from workbench.msccl.kept import ScratchPlaces
from workbench.msccl.layout import contiguous_runs, working_slots

__all__ = ["export_plan", "check_expansion", "PLAN_SCHEMA"]

PLAN_SCHEMA = "mscclpp 0.9 execution plan (src/core/executor/execution_plan.cc)"
_COLLECTIVES = {"allgather": "allgather", "reducescatter": "reducescatter", "allreduce": "allreduce",
                "alltoall": "alltoall", "broadcast": "broadcast", "reduce": "reduce", "gather": "gather",
                "scatter": "scatter"}


def _buffer(buf: str, index: int, size: int) -> dict[str, Any]:
    return {"type": buf, "index": index, "size": size}


def check_expansion(algorithm: Algorithm, source: str = "algorithm") -> None:
    """``SizeError`` (``workbench.util.size_guard``, exit 2) naming ``period.repeat`` when a periodic
    algorithm written out as a plan could not fit the budget: every transfer of the expansion with
    its operations, the plan's text and the interpreter's run of it
    (``BYTES_PER_EXPORTED_TRANSFER``), and the whole collective's layout; asked before anything is
    expanded. Nothing for a plain algorithm (its transfers are in memory already)."""
    period = algorithm.period
    if period is None:
        return
    from workbench.util import size_guard

    c = algorithm.collective
    transfers = size_guard.as_float(period.repeat) * len(algorithm.transfers)
    size_guard.check_declared(source, [(f"period.repeat={period.repeat} ({transfers:,.0f} transfers written out)",
                                        size_guard.BYTES_PER_EXPORTED_TRANSFER * transfers + size_guard.BYTES_PER_SLOT
                                        * size_guard.collective_pairs(c.kind, c.num_ranks, c.chunks_per_rank))])


def _written_out(algorithm: Algorithm, source: str) -> Algorithm:
    """A periodic schedule expanded in full once the size guard has priced it; others as they are."""
    if algorithm.period is None:
        return algorithm
    from workbench.model.periodic import PeriodError
    from workbench.util.size_guard import SizeError

    try:
        check_expansion(algorithm, source)
        return algorithm.expanded()
    except (PeriodError, SizeError) as exc:
        raise MscclError(str(exc)) from None


def _check_plan_options(algorithm: Algorithm, protocol: str, gpus_per_node: int | None, per_node: int) -> None:
    """A standard collective, the Simple protocol, at least one GPU per node, GPUs at both ends of
    every transfer."""
    collective = algorithm.collective
    if collective.kind not in _COLLECTIVES:
        raise MscclError(f"MSCCL++ plans cover the standard collectives, not {collective.kind!r}")
    if protocol != "Simple":  # LL plans use packet operations (ppkt, upkt, ...), which are not written
        raise MscclError(f"--proto for an MSCCL++ plan must be Simple, got {protocol!r}")
    if per_node < 1:
        raise MscclError(f"--gpus-per-node must be at least 1, got {gpus_per_node}")
    topology = algorithm.topology
    for t in algorithm.transfers:
        for end in (t.src, t.dst):
            if topology.is_switch(end):
                raise MscclError(f"transfer {t.id}: node {end} is a switch; MSCCL++ addresses GPUs only")


class _PlanWriter:
    """The operations, peers and remote buffers of every GPU being written from an algorithm.

    A receiver's wait (and the adds of a reduction) is placed lazily: just before the first of its
    operations that needs the data (a send that depends on it, or one touching those slots), so a
    GPU does not stop for data it does not need yet. Waits keep their plan order.
    """

    def __init__(self, algorithm: Algorithm, per_node: int) -> None:
        self.algorithm = algorithm
        self.per_node = per_node
        n = self.n = algorithm.collective.num_ranks
        (self.location, self.copies_in, self.copies_out, s_chunks, self.inputs, self.outputs,
         self.i_chunks, self.o_chunks) = working_slots(algorithm)
        self.peers: list[dict[str, list[int]]] = [{"memory": [], "port": []} for _ in range(n)]
        for t in algorithm.transfers:
            for a, b in ((t.src, t.dst), (t.dst, t.src)):
                if b not in self.peers[a][self.kind_of(a, b)]:
                    self.peers[a][self.kind_of(a, b)].append(b)
        for p in self.peers:
            p["memory"].sort()
            p["port"].sort()
        self.remote: list[list[tuple[int, str, str]]] = [[] for _ in range(n)]  # (rank, buffer, channel type)
        self.ops: list[list[dict[str, Any]]] = [[] for _ in range(n)]
        self.pending: list[list[tuple[int, list[dict[str, Any]]]]] = [[] for _ in range(n)]
        self.writer: dict[tuple[int, int], int] = {}  # (rank, chunk) -> index of the last transfer writing it
        self.places = ScratchPlaces(algorithm, self.location, self.outputs, self.copies_in, s_chunks)

    def keep(self, rank: int, sources: list[tuple[int, tuple[str, int]]], tag: tuple) -> list[dict[str, Any]]:
        """``copy`` operations of (chunk, place) pairs into fresh contiguous scratch
        (``ScratchPlaces.keep``)."""
        return [{"name": "copy", "src_buff": [_buffer(*source, count)], "dst_buff": [_buffer(*target, count)]}
                for source, target, count in self.places.keep(rank, sources, tag)]

    def kind_of(self, a: int, b: int) -> str:
        return "memory" if a // self.per_node == b // self.per_node else "port"

    def remote_id(self, rank: int, peer: int, buf: str) -> int:
        """Position of (peer, buf) among ``rank``'s remote buffers reached over that channel type."""
        key = (peer, buf, self.kind_of(rank, peer))
        if key not in self.remote[rank]:
            self.remote[rank].append(key)
        return [r for r in self.remote[rank] if r[2] == key[2]].index(key)

    def flush(self, rank: int, upto: int) -> None:
        pending = self.pending[rank]
        while pending and pending[0][0] <= upto:
            self.ops[rank].extend(pending.pop(0)[1])

    def copy_inputs(self) -> None:
        for rank, chunk in self.copies_in:
            buf, off = self.location[(rank, chunk)]
            self.ops[rank].append({"name": "copy", "src_buff": [_buffer("i", self.inputs[(rank, chunk)], 1)],
                                   "dst_buff": [_buffer(buf, off, 1)]})
        by_rank: dict[int, list[int]] = {}
        for rank, chunk in sorted(self.places.kept.input_copies):  # kept before anything can overwrite them
            by_rank.setdefault(rank, []).append(chunk)
        for rank, chunks in by_rank.items():
            sources = sorted(((c, ("i", self.inputs[(rank, c)])) for c in chunks), key=lambda p: p[1])
            self.ops[rank].extend(self.keep(rank, sources, ("input", rank)))

    def needed_before_send(self, t) -> int:
        """The last transfer the sender must have waited for: a dependency arriving at it, or the last
        write of a chunk it sends."""
        s, d = t.src, t.dst
        needed = -1
        for dep in t.deps:
            before = self.algorithm.transfers[dep]
            if before.dst == s:
                needed = max(needed, dep)
            elif s not in (before.src, before.dst) and d not in (before.src, before.dst):
                raise MscclError(f"transfer {t.id}: its dependency on transfer {dep} ({before.src} -> {before.dst}) "
                                 f"involves neither rank {s} nor rank {d}; a GPU can only wait for its own channels")
        target = read_target(t.read)  # a kept value: there once that transfer has landed
        return max([needed, -1 if target is None else target] + [self.writer.get((s, c), -1) for c in t.chunks])

    def lower(self, i: int, t) -> None:
        s, d = t.src, t.dst
        self.flush(s, self.needed_before_send(t))
        self.flush(d, max([-1] + [self.writer.get((d, c), -1) for c in t.chunks]))
        channel = self.kind_of(s, d)
        peers, ops = self.peers, self.ops
        src_places = [self.places.read_place(t, c) for c in t.chunks]
        dst_places = [self.location[(d, c)] for c in t.chunks]
        arrival: list[dict[str, Any]] = [{"name": "wait", "channel_type": channel,
                                          "channel_ids": [peers[d][channel].index(s)]}]
        for first, count in contiguous_runs(src_places, dst_places):
            (sbuf, soff), (dbuf, doff) = src_places[first], dst_places[first]
            if t.op == "reduce":  # the partial sum lands apart; d adds it once it has waited
                target = ("s", self.places.take(d, count))
                for j, c in enumerate(t.chunks[first:first + count]):  # what t brought, kept where it landed
                    self.places.at[("carried", t.id, c)] = ("s", target[1] + j)
                arrival.append({"name": "re", "src_buff": [_buffer(dbuf, doff, count), _buffer(*target, count)],
                                "dst_buff": [_buffer(dbuf, doff, count)]})
            else:
                target = (dbuf, doff)
            ops[s].append({"name": "put", "src_buff": [_buffer(sbuf, soff, count)],
                           "dst_buff": [{"buffer_id": self.remote_id(s, d, target[0]), "index": target[1],
                                         "size": count}],
                           "channel_type": channel, "channel_ids": [peers[s][channel].index(d)]})
        ops[s].append({"name": "signal", "channel_type": channel, "channel_ids": [peers[s][channel].index(d)]})
        if channel == "port":
            ops[s].append({"name": "flush", "channel_type": channel, "channel_ids": [peers[s][channel].index(d)]})
        if t.id in self.places.kept.after:  # what a later put reads as "after t", once t has been added
            arrival.extend(self.keep(d, sorted(((c, self.location[(d, c)]) for c in self.places.kept.after[t.id]),
                                               key=lambda p: p[1]), ("after", t.id)))
        self.pending[d].append((i, arrival))
        for c in t.chunks:
            self.writer[(d, c)] = i

    def copy_outputs(self) -> None:
        for rank, chunk in self.copies_out:
            buf, off = self.location[(rank, chunk)]
            self.ops[rank].append({"name": "copy", "src_buff": [_buffer(buf, off, 1)],
                                   "dst_buff": [_buffer("o", self.outputs[(rank, chunk)], 1)]})

    def gpu(self, rank: int) -> dict[str, Any]:
        """The plan's entry for one GPU: its one threadblock, channels and remote buffers."""
        peers, remote = self.peers[rank], self.remote[rank]
        kinds = [k for k in ("memory", "port") if peers[k]]
        block = {
            "id": 0, "ops": self.ops[rank],
            "channels": [{"channel_type": k, "channel_ids": list(range(len(peers[k])))} for k in kinds],
            "remote_buffer_refs": [{"access_channel_type": k, "remote_buffer_ids":
                                    [i for i, r in enumerate(remote) if r[2] == k]}
                                   for k in kinds if any(r[2] == k for r in remote)],
        }
        return {
            "id": rank, "input_chunks": self.i_chunks, "output_chunks": self.o_chunks,
            "scratch_chunks": self.places.top[rank],
            "threadblocks": [block],
            "channels": [{"channel_type": k, "connected_to": peers[k]} for k in kinds],
            "remote_buffers": [{"rank": p, "type": buf, "access_channel_types": [k]} for p, buf, k in remote],
            "semaphores": [],
        }


def export_plan(algorithm: Algorithm, gpus_per_node: int | None = None, name: str | None = None,
                protocol: str = "Simple", min_message_size: int = 0,
                max_message_size: int = 2**64 - 1, source: str = "algorithm", in_place: bool = False) -> dict[str, Any]:
    """The execution plan of the module docstring (a JSON-ready dict), for messages of
    ``min_message_size..max_message_size`` bytes (both inclusive; default every size). A periodic
    schedule is written out in full (a plan lists every operation; it has no loop of its own), once
    the size guard has priced its expansion (``check_expansion``; ``source`` names the algorithm; over
    the budget it does not lower: ``MscclError``, as an expansion past ``MAX_EXPANDED_TRANSFERS``).
    The plan is valid in place and out of place alike (kept values and overwritten inputs in scratch,
    ``workbench.msccl.kept``); ``in_place`` sets the ``inplace`` field the executor matches calls by."""
    algorithm = _written_out(algorithm, source)
    collective = algorithm.collective
    n = collective.num_ranks
    per_node = gpus_per_node or n
    _check_plan_options(algorithm, protocol, gpus_per_node, per_node)
    writer = _PlanWriter(algorithm, per_node)
    writer.copy_inputs()
    for i, t in enumerate(algorithm.transfers):
        writer.lower(i, t)
    for rank in range(n):
        writer.flush(rank, len(algorithm.transfers))
    writer.copy_outputs()
    gpus = [writer.gpu(rank) for rank in range(n)]
    return {
        "name": (name or f"{algorithm.meta.get('formulation', 'workbench')}_{collective.kind}_{n}"),
        "collective": _COLLECTIVES[collective.kind], "protocol": protocol, "inplace": in_place,
        "reuse_resources": False, "gpus": gpus, "num_threads_per_block": 1024,
        "use_double_scratch_buffer": False, "buffer_alignment": 16, "min_message_size": int(min_message_size),
        "max_message_size": int(max_message_size),
    }
