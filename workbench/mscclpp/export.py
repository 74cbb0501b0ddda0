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

Transfers through an NVLS switch (an NVSwitch that reduces) become ``switch`` channel operations
(``workbench.mscclpp.nvls``): a whole-group load-reduce followed by the issuer's multicast store of
the sum is one ``glres`` (load-reduce over the group, store to every GPU's slot); a load-reduce
alone a ``glres`` into scratch reserved on every GPU of the group, then the issuer's ``copy`` of the
sum to its slot; a multicast store alone a ``gstore``. Each contributor ``signal``s the issuer once
its value is in place and the issuer ``wait``s for all of them first; after a store the issuer
signals every GPU it wrote, which waits (lazily, as for a put) before using the chunk. ``nop``
(a threadblock barrier) separates those waits, the multimem operation and those signals, as
mscclpp's DSL does. Any other transfer at a switch (SHARP, a subset of the group, a partial
multicast, a plain switch) is refused in one line.

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
from workbench.mscclpp.nvls import NvlsUnit, plan_nvls

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
    """A standard collective, the Simple protocol, at least one GPU per node (the transfers at
    switches are checked by ``nvls.plan_nvls``)."""
    collective = algorithm.collective
    if collective.kind not in _COLLECTIVES:
        raise MscclError(f"MSCCL++ plans cover the standard collectives, not {collective.kind!r}")
    if protocol != "Simple":  # LL plans use packet operations (ppkt, upkt, ...), which are not written
        raise MscclError(f"--proto for an MSCCL++ plan must be Simple, got {protocol!r}")
    if per_node < 1:
        raise MscclError(f"--gpus-per-node must be at least 1, got {gpus_per_node}")


class _PlanWriter:
    """The operations, peers and remote buffers of every GPU being written from an algorithm.

    A receiver's wait (and the adds of a reduction) is placed lazily: just before the first of its
    operations that needs the data (a send that depends on it, or one touching those slots), so a
    GPU does not stop for data it does not need yet. Waits keep their plan order: every wait is
    pending under the index of the transfer whose processing emitted its signal, so on every channel
    the k-th wait pairs with the k-th signal.
    """

    def __init__(self, algorithm: Algorithm, per_node: int) -> None:
        self.algorithm = algorithm
        self.per_node = per_node
        n = self.n = algorithm.collective.num_ranks
        (self.location, self.copies_in, self.copies_out, s_chunks, self.inputs, self.outputs,
         self.i_chunks, self.o_chunks) = working_slots(algorithm)
        if not any(place[0] == "s" for (rank, _), place in self.location.items() if rank < n):
            s_chunks = 0  # only a switch's chunks (which no GPU holds) were laid out in scratch
        self.places = ScratchPlaces(algorithm, self.location, self.outputs, self.copies_in, s_chunks)
        self.nvls = plan_nvls(algorithm, self.location, self.inputs, self.places.read_place)
        pairs = [(t.src, t.dst) for t in algorithm.transfers if t.src < n and t.dst < n]
        pairs += [(u.issuer, g) for u in self.nvls.units for g in u.group if g != u.issuer]
        self.peers: list[dict[str, list[int]]] = [{"memory": [], "port": []} for _ in range(n)]
        for s, d in pairs:
            for a, b in ((s, d), (d, s)):
                if b not in self.peers[a][self.kind_of(a, b)]:
                    self.peers[a][self.kind_of(a, b)].append(b)
        for p in self.peers:
            p["memory"].sort()
            p["port"].sort()
        self.remote: list[list[tuple[int, str, str]]] = [[] for _ in range(n)]  # (rank, buffer, channel type)
        self.ops: list[list[dict[str, Any]]] = [[] for _ in range(n)]
        self.pending: list[list[tuple[int, list[dict[str, Any]]]]] = [[] for _ in range(n)]
        self.writer: dict[tuple[int, int], int] = {}  # (rank, chunk) -> index of the last transfer writing it
        self.reserved_refs: list[tuple[dict[str, Any], int]] = []  # scratch refs past a switch's base, patched last

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

    def channel_op(self, name: str, rank: int, peer: int) -> dict[str, Any]:
        kind = self.kind_of(rank, peer)
        return {"name": name, "channel_type": kind, "channel_ids": [self.peers[rank][kind].index(peer)]}

    def barrier(self, rank: int) -> None:
        """A ``nop`` (the threadblock's barrier: the executor's threads stride over every operation and
        only one waits or signals), unless one already stands after the last data operation or wait."""
        for op in reversed(self.ops[rank]):
            if op["name"] == "nop":
                return
            if op["name"] not in ("signal", "flush"):
                break
        self.ops[rank].append({"name": "nop"})

    def signal(self, rank: int, peer: int) -> None:
        """``signal`` to ``peer`` (and ``flush`` on a port channel)."""
        self.ops[rank].append(self.channel_op("signal", rank, peer))
        if self.kind_of(rank, peer) == "port":
            self.ops[rank].append(self.channel_op("flush", rank, peer))

    def switch_ref(self, rank: int, unit: NvlsUnit, place: tuple[str, int], count: int) -> dict[str, Any]:
        return {"switch_channel_id": self.nvls.channels[rank].index((unit.switch, place[0])), "index": place[1],
                "size": count}

    def lower_switch(self, i: int, t) -> None:
        """A transfer at an NVLS switch (``nvls.plan_nvls``): a contributor's readiness signal, the
        operation itself at its trigger, nothing for the rest of its transfers."""
        unit, role = self.nvls.role[i]
        if role == "contribute":  # j's value is in place: j signals the issuer, which waits before loading
            j = t.src
            self.flush(j, self.needed_before_send(t))
            if j != unit.issuer:
                self.barrier(j)
                self.signal(j, unit.issuer)
                self.pending[unit.issuer].append((i, [self.channel_op("wait", unit.issuer, j)]))
        elif role == "run" and unit.kind == "reduce":
            self.load_reduce(i, unit)
        elif role == "run":
            self.multicast(i, t, unit)

    def load_reduce(self, i: int, unit: NvlsUnit) -> None:
        """The issuer waits for every contributor (their pending waits), then one ``glres`` per
        contiguous run: stored where the group works on the chunks (fused with its multicast, which
        every GPU then waits for) or into the group's reserved scratch, copied from there to the
        issuer's slot."""
        me, ops, others = unit.issuer, self.ops[unit.issuer], [g for g in unit.group if g != unit.issuer]
        self.flush(me, max(unit.writers + [self.writer.get((me, c), -1) for c in unit.chunks]))
        self.barrier(me)
        fused = unit.store is not None
        dst = unit.dst if fused else [("s", unit.reserved + k) for k in range(len(unit.chunks))]
        for first, count in contiguous_runs(unit.src, dst):
            target = self.switch_ref(me, unit, dst[first], count)
            op = {"name": "glres", "src_buff": [self.switch_ref(me, unit, unit.src[first], count)],
                  "dst_buff": [target], "channel_type": "switch", "reduce_op": "sum"}
            ops.append(op)
            if not fused:
                self.reserved_refs.append((target, unit.switch))
        self.barrier(me)
        if fused:
            for j in others:
                self.signal(me, j)
                self.pending[j].append((i, [self.channel_op("wait", j, me), {"name": "nop"}]))
            for g in unit.group:
                for c in unit.chunks:
                    self.writer[(g, c)] = i
            return
        mine = [self.location[(me, c)] for c in unit.chunks]
        for first, count in contiguous_runs(dst, mine):
            source = {"type": "s", "index": dst[first][1], "size": count}
            self.reserved_refs.append((source, unit.switch))
            ops.append({"name": "copy", "src_buff": [source], "dst_buff": [_buffer(*mine[first], count)]})
        for c in unit.chunks:
            self.writer[(me, c)] = i

    def multicast(self, i: int, t, unit: NvlsUnit) -> None:
        """A multicast store alone: one ``gstore`` per contiguous run from the issuer's slot, then a
        signal to every GPU it wrote."""
        me, others = unit.issuer, [g for g in unit.group if g != unit.issuer]
        self.flush(me, self.needed_before_send(t))
        for j in others:
            self.flush(j, max([-1] + [self.writer.get((j, c), -1) for c in unit.chunks]))
        ops = self.ops[me]
        self.barrier(me)
        for first, count in contiguous_runs(unit.src, unit.dst):
            ops.append({"name": "gstore", "src_buff": [_buffer(*unit.src[first], count)],
                        "dst_buff": [self.switch_ref(me, unit, unit.dst[first], count)], "channel_type": "switch"})
        self.barrier(me)
        for j in others:
            self.signal(me, j)
            self.pending[j].append((i, [self.channel_op("wait", j, me), {"name": "nop"}]))
            for c in unit.chunks:
                self.writer[(j, c)] = i

    def reserve_scratch(self) -> None:
        """Place each switch's reserved scratch past every member's own scratch, at one offset for all."""
        base: dict[int, int] = {}
        for switch, count in sorted(self.nvls.reserved.items()):
            group = self.nvls.groups[switch]
            base[switch] = max(self.places.top[g] for g in group)
            for g in group:
                self.places.top[g] = base[switch] + count
        for ref, switch in self.reserved_refs:
            ref["index"] += base[switch]

    def lower(self, i: int, t) -> None:
        if i in self.nvls.role:
            self.lower_switch(i, t)
            return
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
        switches = self.nvls.channels.get(rank, [])
        groups = [{"channel_type": "switch", "buffer_type": buf, "rank_groups": [
            {"size": len(self.nvls.groups[switch]), "ranks": self.nvls.groups[switch]}]} for switch, buf in switches]
        block = {
            "id": 0, "ops": self.ops[rank],
            "channels": [{"channel_type": k, "channel_ids": list(range(len(peers[k])))} for k in kinds]
            + ([{"channel_type": "switch", "channel_ids": list(range(len(switches)))}] if switches else []),
            "remote_buffer_refs": [{"access_channel_type": k, "remote_buffer_ids":
                                    [i for i, r in enumerate(remote) if r[2] == k]}
                                   for k in kinds if any(r[2] == k for r in remote)],
        }
        return {
            "id": rank, "input_chunks": self.i_chunks, "output_chunks": self.o_chunks,
            "scratch_chunks": self.places.top[rank],
            "threadblocks": [block],
            "channels": [{"channel_type": k, "connected_to": peers[k]} for k in kinds] + groups,
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
    writer.reserve_scratch()
    gpus = [writer.gpu(rank) for rank in range(n)]
    return {
        "name": (name or f"{algorithm.meta.get('formulation', 'workbench')}_{collective.kind}_{n}"),
        "collective": _COLLECTIVES[collective.kind], "protocol": protocol, "inplace": in_place,
        "reuse_resources": False, "gpus": gpus, "num_threads_per_block": 1024,
        "use_double_scratch_buffer": False, "buffer_alignment": 16, "min_message_size": int(min_message_size),
        "max_message_size": int(max_message_size),
    }
