"""Which transfers through switches an MSCCL++ plan can run as NVLS operations, and how.

An NVSwitch that reduces (``reduce`` without ``sum_fanout``: docs/cost-model.md, "Switches that
reduce") is an NVLS switch: mscclpp reaches it through a ``switch`` channel, a multicast object
bound to one buffer type (``i``, ``o`` or ``s``) of every GPU of a rank group, on which a GPU issues

* ``glres``: multimem load-reduce of a range (the sum of that range over every GPU of the group)
  and multimem store of the sum to a range of every GPU of the group (the issuer included);
* ``gstore``: multimem store of a local range to a range of every GPU of the group (mscclpp 0.10
  on; 0.9 has switch channels and ``glres`` only).

The executor has no load-reduce that keeps the sum local (the DSL's ``glre`` is only ever fused
into ``glres``), so every load-reduce is a ``glres``. The transfers at a switch form operations in
file order (``workbench.checking.switch_values``: a run of writes, then the run of reads); each
operation must be one of two whole-group shapes, with the switch's **group** being the GPUs linked to
it both ways:

* a **load-reduce** of chunk c by GPU i: ``j -> S, reduce`` for every GPU j of the group (i
  included), then the one ``S -> i, copy``;
* a **multicast store** of chunk c from GPU i: ``i -> S, copy``, then ``S -> j, copy`` for every
  other GPU j of the group.

Operations with the same transfers (several chunks each) form one unit. A load-reduce followed by a
multicast store of the same chunks by the same GPU, with nothing in between touching those chunks
on a GPU of the group, is **fused**: one ``glres`` whose store writes the sum where every GPU works
on the chunk (the load-reduce's result at the issuer and the multicast in one operation). A
load-reduce alone (Reduce-Scatter's, or one whose sum goes on elsewhere first) is a ``glres``
whose store lands in scratch slots reserved on every GPU of the group (a second switch channel over
scratch), the issuer then copying the sum to its own slot: the other GPUs' copies are written and
never read, so the plan moves more data down than the algorithm does. A multicast store alone is a
``gstore`` from the issuer's slot. Multimem operations address one offset on every GPU, so a chunk
must work at one (buffer, offset) on every GPU of the group (or, for a load-reduce, still be every
GPU's untouched input at one offset).

Anything else at a switch is refused in one line naming the transfer (``MscclError``): a transfer
between two switches; a switch that does not reduce (no NVLS) or whose sums fan out (a SHARP
switch: SHARP reductions are not expressible in MSCCL++ plans); a reduction over a subset of the
group; a multicast to part of it; a mixed or unread operation; a ``read`` of an earlier value at a
switch; a chunk at different offsets across the group; another transfer touching the chunk on a
GPU of the group while the operation is open (a multimem operation does the operation's every read
and write at once).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from workbench.model.transfer import read_target
from workbench.msccl.common import MscclError

__all__ = ["NvlsUnit", "NvlsPlan", "plan_nvls"]


@dataclass
class NvlsUnit:
    """One NVLS operation (module docstring) on ``chunks``: a load-reduce (``kind`` "reduce") or a
    multicast store ("store") through ``switch`` by ``issuer``, over ``group``."""

    kind: str
    switch: int
    chunks: list[int]
    issuer: int
    group: list[int]
    writers: list[int]
    readers: list[int]
    src: list[tuple[str, int]] = field(default_factory=list)  # per chunk: where the group's values are read
    dst: list[tuple[str, int]] = field(default_factory=list)  # per chunk: where the sum / value is stored
    store: "NvlsUnit | None" = None  # a load-reduce's fused multicast store
    fused_into: "NvlsUnit | None" = None  # a multicast store fused into this load-reduce
    reserved: int = -1  # a lone load-reduce: its first scratch slot past the switch's base

    @property
    def trigger(self) -> int:
        """The transfer at which the issuer runs the operation: a load-reduce's read, a store's write."""
        return self.readers[0] if self.kind == "reduce" else self.writers[0]

    def own(self) -> set[int]:
        """The transfers of the unit and of the store fused into it."""
        mine = set(self.writers) | set(self.readers)
        return mine | (self.store.own() if self.store is not None else set())

    def channels(self) -> set[tuple[int, str]]:
        """The (switch, buffer type) channels its operation uses (a store's source is local)."""
        if self.kind == "store":
            return {(self.switch, b) for b, _ in self.dst}
        used = {(self.switch, b) for b, _ in self.src + self.dst}
        return used | ({(self.switch, "s")} if self.store is None else set())


@dataclass
class NvlsPlan:
    """The units, each switch transfer's role (``role[index]``: (unit, "contribute" | "run" |
    "skip")), the channels per GPU (sorted (switch, buffer type)) and the scratch slots reserved per
    switch."""

    units: list[NvlsUnit] = field(default_factory=list)
    role: dict[int, tuple[NvlsUnit, str]] = field(default_factory=dict)
    channels: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    reserved: dict[int, int] = field(default_factory=dict)
    groups: dict[int, list[int]] = field(default_factory=dict)


def _name(t: Any) -> str:
    chunks = ",".join(map(str, t.chunks))
    return f"transfer {t.id} ({t.src} -> {t.dst}, {t.op}, chunk {chunks})"


def _group(topology: Any, switch: int) -> list[int]:
    """The GPUs linked to ``switch`` both ways; a switch with a switch neighbour is not a box switch."""
    outs = set(topology.out_neighbors(switch))
    ins = {link.src for link in topology.links if link.dst == switch}
    if any(topology.is_switch(v) for v in outs | ins):
        return []
    return sorted(outs & ins)


def _check_switch(topology: Any, t: Any, groups: dict[int, list[int]]) -> int:
    """The switch end of ``t`` once it is an NVLS switch (a refusal naming ``t`` otherwise)."""
    if topology.is_switch(t.src) and topology.is_switch(t.dst):
        raise MscclError(f"{_name(t)}: runs between two switches; MSCCL++ plans address GPUs and NVLS switch "
                         "groups only")
    s = t.dst if topology.is_switch(t.dst) else t.src
    ability = topology.ability(s)
    if ability.reduce and ability.sum_fanout:
        what = "reductions are" if t.op == "reduce" else "operations (reductions, their multicast down the tree) are"
        raise MscclError(f"{_name(t)}: switch {s} is a SHARP switch (its sums fan out); SHARP {what} not "
                         "expressible in MSCCL++ plans, which reach switches only through NVLS switch channels")
    if not ability.reduce:
        raise MscclError(f"{_name(t)}: switch {s} does not reduce, so it is no NVLS switch; MSCCL++ addresses GPUs "
                         "only (route through the switch as GPU-to-GPU transfers)")
    if s not in groups:
        groups[s] = _group(topology, s)
    if not groups[s]:
        raise MscclError(f"{_name(t)}: switch {s} links to other switches, so it is no NVLS box switch; MSCCL++ "
                         "plans address GPUs and NVLS switch groups only")
    if t.read is not None:
        raise MscclError(f"{_name(t)}: reads an earlier value at an NVLS switch, which an MSCCL++ plan cannot keep")
    return s


def _operations(algorithm: Any) -> tuple[list[tuple[int, int, list[int], list[int]]], dict[int, list[int]]]:
    """(switch, chunk, writers, readers) per operation, in file order, and the switches' groups."""
    topology, transfers = algorithm.topology, algorithm.transfers
    groups: dict[int, list[int]] = {}
    ops: list[tuple[int, int, list[int], list[int]]] = []
    current: dict[tuple[int, int], int] = {}
    for t in transfers:
        if not (topology.is_switch(t.src) or topology.is_switch(t.dst)):
            continue
        s = _check_switch(topology, t, groups)
        for c in t.chunks:
            if s == t.src:
                k = current.get((s, c))
                if k is None:
                    raise MscclError(f"{_name(t)}: reads chunk {c} from switch {s}, which holds none of it")
                ops[k][3].append(t.id)
            else:
                k = current.get((s, c))
                if k is None or ops[k][3]:
                    current[(s, c)] = k = len(ops)
                    ops.append((s, c, [], []))
                ops[k][2].append(t.id)
    return ops, groups


def _classify(algorithm: Any, op: tuple[int, int, list[int], list[int]], group: list[int]) -> tuple[str, int]:
    """("reduce" | "store", issuer) of a whole-group operation; a refusal naming a transfer otherwise."""
    transfers = algorithm.transfers
    s, c, writers, readers = op
    first = transfers[writers[0]]
    if not readers:
        raise MscclError(f"{_name(first)}: the value of chunk {c} at switch {s} is never read")
    kinds = {transfers[w].op for w in writers}
    if kinds == {"reduce"}:
        sources = [transfers[w].src for w in writers]
        if len(set(sources)) != len(sources):
            twice = next(w for w in writers if sources.count(transfers[w].src) > 1)
            raise MscclError(f"{_name(transfers[twice])}: GPU {transfers[twice].src} is reduced into switch {s} "
                             f"twice for one load-reduce of chunk {c}")
        if sorted(sources) != group:
            missing = [g for g in group if g not in sources]
            raise MscclError(f"{_name(first)}: the reduction of chunk {c} into switch {s} sums GPUs {sorted(sources)} "
                             f"only, not all of its group {group} (missing {missing}); an NVLS load-reduce (glres) "
                             "sums every GPU of the switch's group")
        reader = transfers[readers[0]]
        if len(readers) != 1 or reader.op != "copy" or reader.dst not in group:
            raise MscclError(f"{_name(transfers[readers[-1]])}: the sum of chunk {c} at switch {s} leaves it "
                             f"{len(readers)} time(s) ({reader.op}); an NVLS load-reduce returns it once, by copy, "
                             "to the GPU that issued it")
        return "reduce", reader.dst
    if kinds != {"copy"} or len(writers) != 1:
        raise MscclError(f"{_name(first)}: chunk {c} at switch {s} is written by {len(writers)} transfers "
                         f"({'/'.join(sorted(kinds))}); NVLS has a load-reduce of the whole group or a store from "
                         "one GPU")
    issuer = first.src
    targets = [transfers[r].dst for r in readers]
    others = [g for g in group if g != issuer]
    bad = next((r for r in readers if transfers[r].op != "copy"), None)
    if bad is not None:
        raise MscclError(f"{_name(transfers[bad])}: reduces out of switch {s}; an NVLS multicast store copies")
    if sorted(targets) != others:
        missing = [g for g in others if g not in targets]
        raise MscclError(f"{_name(first)}: the multicast of chunk {c} from GPU {issuer} through switch {s} reaches "
                         f"GPUs {sorted(targets)}, not every other GPU of its group {group} (missing {missing}); an "
                         "NVLS multicast store (gstore) writes the whole group")
    return "store", issuer


class _Touches:
    """Per (GPU, chunk), the transfers reading it at the GPU (sends) and writing it (arrivals), sorted."""

    def __init__(self, algorithm: Any) -> None:
        topology = algorithm.topology
        self.reads: dict[tuple[int, int], list[int]] = {}
        self.writes: dict[tuple[int, int], list[int]] = {}
        for t in algorithm.transfers:
            for c in t.chunks:
                if not topology.is_switch(t.src):
                    self.reads.setdefault((t.src, c), []).append(t.id)
                if not topology.is_switch(t.dst):
                    self.writes.setdefault((t.dst, c), []).append(t.id)

    def between(self, rank: int, chunk: int, lo: int, hi: int, own: set[int], writes_only: bool = False) -> int | None:
        """The first transfer strictly between ``lo`` and ``hi`` touching (rank, chunk), not in ``own``."""
        found = []
        for table in ((self.writes,) if writes_only else (self.writes, self.reads)):
            ids = table.get((rank, chunk), [])
            for i in ids[bisect.bisect_right(ids, lo):bisect.bisect_left(ids, hi)]:
                if i not in own:
                    found.append(i)
                    break
        return min(found) if found else None

    def written_before(self, rank: int, chunk: int, index: int) -> bool:
        ids = self.writes.get((rank, chunk), [])
        return bisect.bisect_left(ids, index) > 0


def _units(algorithm: Any) -> tuple[list[NvlsUnit], dict[int, list[int]]]:
    ops, groups = _operations(algorithm)
    units: dict[tuple, NvlsUnit] = {}
    for op in ops:
        s, c, writers, readers = op
        kind, issuer = _classify(algorithm, op, groups[s])
        key = (s, tuple(writers), tuple(readers))
        if key not in units:
            units[key] = NvlsUnit(kind, s, [], issuer, groups[s], list(writers), list(readers))
        units[key].chunks.append(c)
    ordered = sorted(units.values(), key=lambda u: u.trigger)
    for u in ordered:
        u.chunks.sort()
    return ordered, groups


def _one_place(places: dict[int, tuple[str, int]]) -> tuple[str, int] | None:
    """The one (buffer, offset) every GPU has, or None."""
    values = set(places.values())
    return next(iter(values)) if len(values) == 1 else None


def _sources(algorithm: Any, unit: NvlsUnit, location: dict, inputs: dict, touches: _Touches) -> None:
    """Where a load-reduce reads each chunk on every GPU: the common working slot, or the common
    input slot when no GPU of the group has had the chunk written before contributing it."""
    transfers = algorithm.transfers
    for c in unit.chunks:
        at = {transfers[w].src: location[(transfers[w].src, c)] for w in unit.writers}
        place = _one_place(at)
        if place is None:
            untouched = {transfers[w].src: ("i", inputs[(transfers[w].src, c)]) for w in unit.writers
                         if (transfers[w].src, c) in inputs and not touches.written_before(transfers[w].src, c, w)}
            place = _one_place(untouched) if len(untouched) == len(unit.writers) else None
        if place is None:
            raise MscclError(f"{_name(transfers[unit.writers[0]])}: chunk {c} works at {sorted(set(at.values()))} on "
                             f"the GPUs of switch {unit.switch}'s group; an NVLS load-reduce reads one offset of one "
                             "buffer on every GPU")
        unit.src.append(place)


def _targets(unit: NvlsUnit, location: dict) -> list[tuple[str, int]] | None:
    """The slot each chunk works at on every GPU of the group, when it is one for all."""
    out = []
    for c in unit.chunks:
        place = _one_place({g: location[(g, c)] for g in unit.group})
        if place is None:
            return None
        out.append(place)
    return out


def _check_open(algorithm: Any, unit: NvlsUnit, touches: _Touches, fused: bool = False) -> int | None:
    """The first transfer touching a chunk of ``unit`` on a GPU of the group while the multimem
    operation is open (module docstring); None when there is none."""
    transfers = algorithm.transfers
    own = unit.own()
    found = []
    if unit.kind == "reduce":
        r = unit.readers[0]
        for w in unit.writers:  # a contribution must hold until the issuer loads it
            j = transfers[w].src
            hi = max(unit.store.readers) if fused else r
            for c in unit.chunks:
                if fused and j != unit.issuer:  # the sum lands at j at once: j may not read the chunk either
                    i = touches.between(j, c, w, hi, own)
                elif fused:
                    i = touches.between(j, c, w, unit.store.writers[0], own, writes_only=True)
                else:
                    i = touches.between(j, c, w, r, own, writes_only=True)
                if i is not None:
                    found.append(i)
    else:
        w = unit.writers[0]
        for r in unit.readers:  # the store lands at every GPU at once
            j = transfers[r].dst
            for c in unit.chunks:
                i = touches.between(j, c, w, r, own)
                if i is not None:
                    found.append(i)
    return min(found) if found else None


def _fuse(algorithm: Any, units: list[NvlsUnit], location: dict, read_place: Any, touches: _Touches) -> None:
    """Pair each load-reduce with the multicast store of its sum where they can be one ``glres``."""
    transfers = algorithm.transfers
    stores: dict[tuple, list[NvlsUnit]] = {}
    for u in units:
        if u.kind == "store":
            stores.setdefault((u.switch, u.issuer, tuple(u.chunks)), []).append(u)
    for u in units:
        if u.kind != "reduce":
            continue
        r = u.readers[0]
        later = [m for m in stores.get((u.switch, u.issuer, tuple(u.chunks)), [])
                 if m.writers[0] > r and m.fused_into is None]
        if not later:
            continue
        m = min(later, key=lambda x: x.writers[0])
        dst = _targets(u, location)
        w = transfers[m.writers[0]]
        if dst is None or any(read_place(w, c) != location[(u.issuer, c)] for c in u.chunks):
            continue
        u.store = m
        if _check_open(algorithm, u, touches, fused=True) is not None:
            u.store = None
            continue
        m.fused_into = u
        u.dst = dst


def _check_kept_values(algorithm: Any) -> None:
    """A kept value (``Transfer.read``) of a switch transfer would have to be copied at the switch."""
    topology = algorithm.topology
    for t in algorithm.transfers:
        target = read_target(t.read)
        if target is not None:
            k = algorithm.transfers[target]
            if topology.is_switch(k.src) or topology.is_switch(k.dst):
                raise MscclError(f"{_name(t)}: reads the value transfer {k.id} left at an NVLS switch transfer's end, "
                                 "which an MSCCL++ plan does not keep")


def _place_lone(algorithm: Any, u: NvlsUnit, plan: NvlsPlan, location: dict, read_place: Any,
                touches: _Touches) -> None:
    """A unit that is not fused: a store's slots (one offset on every GPU), a load-reduce's reserved
    scratch; then no transfer may touch its chunks on the group while it is open."""
    transfers = algorithm.transfers
    if u.kind == "store":
        dst = _targets(u, location)
        w = transfers[u.writers[0]]
        if dst is None or any(read_place(w, c) != location[(u.issuer, c)] for c in u.chunks):
            raise MscclError(f"{_name(w)}: chunk {','.join(map(str, u.chunks))} does not work at one offset of "
                             f"one buffer on every GPU of switch {u.switch}'s group; an NVLS multicast store "
                             "writes one offset on every GPU")
        u.src, u.dst = list(dst), dst
    elif u.store is None:
        u.reserved = plan.reserved.get(u.switch, 0)
        plan.reserved[u.switch] = u.reserved + len(u.chunks)
    clash = _check_open(algorithm, u, touches)
    if clash is not None:
        what = "load-reduce" if u.kind == "reduce" else "multicast store"
        raise MscclError(f"{_name(transfers[clash])}: touches chunk {','.join(map(str, u.chunks))} on a GPU of "
                         f"switch {u.switch}'s group while its NVLS {what} (transfers {min(u.own())}.."
                         f"{max(u.own())}) is open; a multimem operation reads and writes every GPU of the group "
                         "at once")


def _roles_and_channels(plan: NvlsPlan) -> None:
    """Each switch transfer's role and each GPU's switch channels (sorted: every member of a group
    lists the channels it shares with another in one order)."""
    for u in plan.units:
        for j in u.writers:
            plan.role[j] = (u, "contribute" if u.kind == "reduce" else "run")
        for j in u.readers:
            plan.role[j] = (u, "run" if u.kind == "reduce" else "skip")
        for j in (u.store.writers + u.store.readers) if u.store is not None else []:
            plan.role[j] = (u, "skip")
        for g in u.group:
            mine = plan.channels.setdefault(g, [])
            mine.extend(key for key in sorted(u.channels()) if key not in mine)
    for g in plan.channels:
        plan.channels[g].sort()


def plan_nvls(algorithm: Any, location: dict, inputs: dict, read_place: Any) -> NvlsPlan:
    """The NVLS units of ``algorithm`` (module docstring) with their places, fusions, channels and
    reserved scratch; a one-line ``MscclError`` naming the transfer for anything at a switch that is
    not one. ``location``/``inputs``: the lowering's working slots and input offsets;
    ``read_place(t, c)``: where the send of ``t`` reads ``c``."""
    plan = NvlsPlan()
    topology = algorithm.topology
    if not any(topology.is_switch(t.src) or topology.is_switch(t.dst) for t in algorithm.transfers):
        return plan
    _check_kept_values(algorithm)
    units, plan.groups = _units(algorithm)
    touches = _Touches(algorithm)
    for u in units:
        if u.kind == "reduce":
            _sources(algorithm, u, location, inputs, touches)
    _fuse(algorithm, units, location, read_place, touches)
    for u in units:
        if u.fused_into is None:
            _place_lone(algorithm, u, plan, location, read_place, touches)
            plan.units.append(u)
    _roles_and_channels(plan)
    return plan
