"""MSCCL XML in: every matched send and receive of a run becomes a transfer.

A send that reads a value its rank no longer holds at that point of the plan (a copy kept in
scratch: the rank's input, what it held after an earlier receive, or what a receive brought before
it was added) becomes a transfer that reads that earlier value (``Transfer.read``): ``name_reads``
replays the plan over contribution sets and names the value each send carried.
"""

from __future__ import annotations

from workbench.model.algorithm import Algorithm, Transfer
from workbench.model.collective import Collective
from workbench.model.transfer import READ_INPUT, read_carried
from workbench.msccl.common import MscclError
from workbench.msccl.parse import parse_xml
from workbench.msccl.run import check_races, collective_of, initial_buffers, run_xml
from workbench.topology import Topology

__all__ = ["import_xml", "name_reads"]


def import_xml(text: str, topology: Topology, size_bytes: float, source: str = "xml",
               root: int | None = None) -> Algorithm:
    """An MSCCL XML as a workbench algorithm on ``topology`` (plan order from ``wbid`` when present)."""
    algo = parse_xml(text, source)
    collective = collective_of(algo, root)
    if topology.num_npus < collective.num_ranks:
        raise MscclError(f"{source}: {collective.num_ranks} ranks but the topology has {topology.num_npus} NPUs")
    check_races(algo, source)  # a racy file has no single meaning to import
    result = run_xml(algo, initial_buffers(collective), source)
    records = result.transfers
    if all(r["wbid"] is not None for r in records):
        order = sorted(range(len(records)), key=lambda i: (records[i]["wbid"], i))
    else:
        order = list(range(len(records)))
    new_id = {old: new for new, old in enumerate(order)}
    transfers = []
    for new, old in enumerate(order):
        r = records[old]
        deps = tuple(sorted(new_id[d] for d in r["deps"] if new_id[d] < new))
        transfers.append(Transfer(new, tuple(r["chunks"]), r["src"], r["dst"], r["op"], deps))
    name_reads(collective, transfers, [records[old]["bits"] for old in order], source)
    meta = {"formulation": "msccl-import", "source": source, "xml_name": algo.attrs.get("name")}
    return Algorithm(topology, collective, collective.chunk_bytes(size_bytes), transfers, meta)


def name_reads(collective: Collective, transfers: list[Transfer], sent: list[list[int]], source: str) -> None:
    """Set ``read`` on every transfer whose send read a kept value (``sent``: its contribution sets per
    chunk): one that differs from what the source holds at that point of the plan, or that later writes
    into the source do not wait for, directly or through others (they may overwrite it under the send). Named as the source's
    input, or what it held after (or was brought by) the latest earlier transfer into it that matches;
    ``MscclError`` when none does."""
    full, _ = collective.masks()
    initial = {(r, c): (1 << r) if collective.combining else full[c]
               for c, pre in enumerate(collective.pre) for r in pre}
    writers: dict[tuple[int, int], list[Transfer]] = {}
    for t in transfers:
        for c in t.chunks:
            writers.setdefault((t.dst, c), []).append(t)
    dependants: list[list[int]] = [[] for _ in transfers]
    for t in transfers:
        for d in t.deps:
            dependants[d].append(t.id)
    current = dict(initial)
    after: dict[tuple[int, int], int] = {}
    carried: dict[tuple[int, int], int] = {}
    into: dict[int, list[Transfer]] = {}
    for t, bits in zip(transfers, sent):
        keys = [(t.src, c) for c in t.chunks]
        if [current.get(key) for key in keys] != bits or not _ordered_after(
                t.id, {w.id for key in keys for w in writers.get(key, ()) if w.id > t.id}, dependants):
            t.read = _earlier_value(t, bits, initial, after, carried, into.get(t.src, []), source)
        for c, b in zip(t.chunks, bits):
            held = current.get((t.dst, c), 0) if t.op == "reduce" else 0
            current[(t.dst, c)] = held | b
            after[(t.id, c)], carried[(t.id, c)] = current[(t.dst, c)], b
        into.setdefault(t.dst, []).append(t)


def _ordered_after(first: int, later: set[int], dependants: list[list[int]]) -> bool:
    """Whether every transfer in ``later`` depends on ``first``, directly or through others (a write
    into a sender that waits for its send cannot change what it sent)."""
    if not later:
        return True
    horizon, seen, frontier = max(later), {first}, [first]
    while frontier:
        for d in dependants[frontier.pop()]:
            if d <= horizon and d not in seen:
                seen.add(d)
                frontier.append(d)
    return later <= seen


def _earlier_value(t: Transfer, bits: list[int], initial: dict, after: dict, carried: dict,
                   arrivals: list[Transfer], source: str) -> int:
    for k in reversed(arrivals):
        if not set(t.chunks) <= set(k.chunks):
            continue
        if [after[(k.id, c)] for c in t.chunks] == bits:
            return k.id
        if [carried[(k.id, c)] for c in t.chunks] == bits:
            return read_carried(k.id)
    if [initial.get((t.src, c)) for c in t.chunks] == bits:
        return READ_INPUT
    raise MscclError(f"{source}: the send of transfer {t.id} ({t.src} -> {t.dst}) carries a value rank {t.src} "
                     "never held: neither its input nor what it held after, or was brought by, an earlier receive")
