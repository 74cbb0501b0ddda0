"""Building schedules whose dependencies are derived from buffer accesses or from deliveries.

``DeliveryChain``: formulations that route chunks hop by hop (trees, SMT or MILP solutions) list
transfers in planned order, each waiting for the transfer that brought its chunks to its sender.

``ScheduleBuilder``: formulations that think in steps (ring, recursive halving-doubling, trees) add transfers in
planned order; ``ScheduleBuilder`` fills ``deps`` so that every execution agrees with the file
order (the verifier's timeline rule):

* a transfer reading (src, c) waits for every earlier write to (src, c) (read after write);
* a ``copy`` into (dst, c) waits for earlier writes and reads of (dst, c) (write after write/read);
* a ``reduce`` into (dst, c) waits for earlier reads of (dst, c); reduces into the same buffer may
  overlap each other, since their contributions are disjoint. It does not wait for an earlier copy
  into (dst, c): a caller that reduces onto a value it copied there passes that copy in
  ``extra_deps`` (``formulations.nvls`` does).

``order_by_start``: the simulator's default model serves each link's segments in file order, so a
file should list transfers in the order the formulation plans to start them; this sorts a schedule
by planned start and keeps every dependency before its dependent. ``claim_in_model``: a formulation
whose only timeline is the schedule it writes claims that schedule's time in a simulator model.
``settle_order``: a schedule re-listed by list scheduling in the default model, for formulations
whose planned order leaves links idle behind a transfer that waits; ``claim_listing`` keeps the
planned or the settled listing, whichever simulates faster, and claims its time.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from itertools import chain
from typing import Any, Iterable, Sequence

from workbench.model.algorithm import Algorithm, Transfer
from workbench.model.transfer import READ_INPUT, read_target, with_read_target
from workbench.model.collective import Collective
from workbench.util.lazy import lazy_module
from workbench.topology import Topology

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["ScheduleBuilder", "DeliveryChain", "order_by_start", "settle_order", "claim_listing", "claim_in_model", "SIZED_BELOW", "adapts_to_size"]

# bytes: a formulation that adapts its chunking to the message size does so only below this, so
# large-message results (every committed reproduction is at 1 GB or more) do not move
SIZED_BELOW = 256e6


def adapts_to_size(topology: Topology, size_bytes: float) -> bool:
    """Whether a formulation chooses its chunking by the message size: below ``SIZED_BELOW``, and at
    any size on a fabric whose links pay a per-message overhead (there every piece costs link time,
    and no committed reproduction has one)."""
    return size_bytes < SIZED_BELOW or any(link.overhead for link in topology.links)


class ScheduleBuilder:
    def __init__(self, topology: Topology, collective: Collective, chunk_bytes: float) -> None:
        self.topology = topology
        self.collective = collective
        self.chunk_bytes = chunk_bytes
        self.transfers: list[Transfer] = []
        self._writes: dict[tuple[int, int], list[int]] = defaultdict(list)  # since the last copy
        self._reads: dict[tuple[int, int], list[int]] = defaultdict(list)  # since the last copy

    def add(self, chunks: int | Iterable[int], src: int, dst: int, op: str = "copy",
            extra_deps: Iterable[int] = ()) -> int:
        """Append a transfer (planned after every transfer added before it); returns its id."""
        chunks = (chunks,) if isinstance(chunks, int) else tuple(chunks)
        deps: set[int] = set(extra_deps)
        for c in chunks:
            deps.update(self._writes[(src, c)])
            key = (dst, c)
            deps.update(self._reads[key])
            if op == "copy":
                deps.update(self._writes[key])
        tid = len(self.transfers)
        self.transfers.append(Transfer(tid, chunks, src, dst, op, tuple(sorted(deps))))
        for c in chunks:
            self._reads[(src, c)].append(tid)
            key = (dst, c)
            if op == "copy":  # later accesses wait for this copy, which waited for everything before
                self._writes[key] = [tid]
                self._reads[key] = []
            else:  # reduces may overlap each other, so each keeps waiting for the reads before it
                self._writes[key].append(tid)
        return tid

    def build(self, meta: dict[str, Any] | None = None) -> Algorithm:
        """The transfers added so far, as an Algorithm of the builder's problem with ``meta``."""
        return Algorithm(self.topology, self.collective, self.chunk_bytes, self.transfers, dict(meta or {}))


class DeliveryChain:
    """Transfers in planned order, each waiting for the deliveries of its chunks to its sender.

    ``send`` records the new transfer as the delivery of its chunks to ``dst``; a later send from
    that node waits for it. Nothing is waited for at a node that started with the chunk (or that
    nothing delivered it to). By default a delivery replaces the one recorded before it at that
    node (a chunk arrives once); with ``every`` a send waits for all deliveries of the chunk there
    (reductions: every contribution must have arrived).
    """

    def __init__(self, every: bool = False) -> None:
        self.every = every
        self.transfers: list[Transfer] = []
        self._delivered: dict[tuple[int, int], list[int]] = {}  # (node, chunk) -> transfer ids

    def delivered(self, node: int, chunk: int) -> tuple[int, ...]:
        """The ids of the transfers recorded as bringing ``chunk`` to ``node``."""
        return tuple(self._delivered.get((node, chunk), ()))

    def send(self, chunks: int | Iterable[int], src: int, dst: int, op: str = "copy",
             t_start: float | None = None, t_end: float | None = None) -> Transfer:
        """Append a transfer (its id is its position) with deps on what delivered its chunks to ``src``."""
        chunks = (chunks,) if isinstance(chunks, int) else tuple(chunks)
        deps: set[int] = set()
        for c in chunks:
            deps.update(self._delivered.get((src, c), ()))
        transfer = Transfer(len(self.transfers), chunks, src, dst, op, tuple(sorted(deps)), t_start, t_end)
        self.transfers.append(transfer)
        for c in chunks:
            if self.every:
                self._delivered.setdefault((dst, c), []).append(transfer.id)
            else:
                self._delivered[(dst, c)] = [transfer.id]
        return transfer

    def build(self, topology: Topology, collective: Collective, chunk_bytes: float,
              meta: dict[str, Any] | None = None) -> Algorithm:
        """The transfers sent so far, as an Algorithm of ``collective`` on ``topology`` with ``meta``."""
        return Algorithm(topology, collective, chunk_bytes, self.transfers, dict(meta or {}))


def order_by_start(algorithm: Algorithm, starts: Sequence[float] | None = None) -> Algorithm:
    """The same transfers listed by planned start, each after the transfers it depends on.

    ``starts``: one planned start per transfer (default: each transfer's ``t_start``). The sort is
    stable, so transfers planned at the same instant keep their order; where a dependency would
    come after its dependent (a plan that starts a transfer before what it waits for has arrived)
    the earliest-planned transfer whose dependencies are listed goes next. The transfers are
    renumbered in place (deps follow their ids; times and meta are kept) and belong to the returned
    algorithm: the one passed in no longer lists them in order. Only the order of transfers that
    no chain of deps orders can change, so this suits schedules whose deps order every pair that
    touches a buffer (``ScheduleBuilder``, ``DeliveryChain``); the verifier checks the result.
    """
    transfers = algorithm.transfers
    count = len(transfers)
    if starts is None:
        starts = [t.t_start for t in transfers]
        if any(s is None for s in starts):
            raise ValueError("order_by_start: give starts, or a t_start on every transfer")
    if len(starts) != count:
        raise ValueError(f"order_by_start: {len(starts)} starts for {count} transfers")
    keys = np.asarray(starts, dtype=np.float64)
    order = np.argsort(keys, kind="stable")
    position = np.empty(count, dtype=np.int64)
    position[order] = np.arange(count)
    lengths = np.fromiter(map(len, (t.deps for t in transfers)), dtype=np.int64, count=count)
    deps = np.fromiter(chain.from_iterable(t.deps for t in transfers), dtype=np.int64, count=int(lengths.sum()))
    owners = np.repeat(np.arange(count), lengths)
    if not (position[deps] < position[owners]).all():
        order = np.asarray(_ready_first(transfers, keys.tolist()), dtype=np.int64)
        position[order] = np.arange(count)
    if (order == np.arange(count)).all():
        return algorithm
    # renumbered in place: a schedule of millions of transfers is not copied
    renumber = position.tolist().__getitem__
    for t in transfers:
        deps = t.deps
        if len(deps) == 1:
            t.deps = (renumber(deps[0]),)
        elif deps:
            t.deps = tuple(sorted(map(renumber, deps)))
        if t.read is not None and t.read != READ_INPUT:  # a read of transfer k follows k's new id
            t.read = with_read_target(t.read, renumber(read_target(t.read)))
    listed = [transfers[i] for i in order.tolist()]
    for new_id, t in enumerate(listed):
        t.id = new_id
    return Algorithm(algorithm.topology, algorithm.collective, algorithm.chunk_bytes, listed, dict(algorithm.meta))


def _dependants(transfers: list) -> tuple[list[int], list[list[int]]]:
    """Per transfer: how many distinct deps it waits for, and the transfers that depend on it."""
    waiting = [len(set(t.deps)) for t in transfers]
    dependants: list[list[int]] = [[] for _ in transfers]
    for t in transfers:
        for d in set(t.deps):
            dependants[d].append(t.id)
    return waiting, dependants


def settle_order(algorithm: Algorithm) -> Algorithm:
    """The same transfers re-listed by list scheduling in the simulator's default model.

    That model serves every link in file order, so a transfer listed early that waits for its
    chunk holds back every later one on its links. Here transfers are placed one at a time, each
    time the one (among those whose deps are placed) that can start earliest on its first segment's
    links given what is placed so far (ties: the earlier ready, then file order), and listed in
    that order. Each placement follows the default model's own rule (start at the latest of ready
    and the links' free times, segment by segment), so the listed schedule simulates to exactly
    the placed times, which become the transfers' ``t_start``/``t_end``. Same transfers, same deps
    (renumbered by ``order_by_start``). Only the order of transfers that no chain of deps orders
    changes, so a schedule stays valid where its deps order every pair of accesses to a buffer
    (``ScheduleBuilder``, ``DeliveryChain``, ``Algorithm.reverse`` and ``concat`` write them so). Ready transfers wait in one queue per first-segment link
    set, earliest ready first; a lazy heap ranks the queues' heads (a start only grows as links
    fill, so a popped head whose start grew is pushed back).
    """
    from workbench.checking.simulate import segment_table

    topology = algorithm.topology
    transfers = algorithm.transfers
    segments = segment_table(algorithm, "cut-through")  # the default model's segments
    waiting, dependants = _dependants(transfers)
    free = [0.0] * len(topology.links)
    ready = [0.0] * len(transfers)
    placed_start = [0.0] * len(transfers)
    chunk_bytes = algorithm.chunk_bytes
    # ready transfers queue by the links of their first segment: within a queue the links' free
    # time is common, so the earliest ready goes first; one heap entry per queue ranks the queues
    queues: dict[tuple[int, ...], list[tuple[float, int]]] = {}
    heap: list[tuple[float, int, tuple[int, ...]]] = []

    def offer(i: int) -> None:
        links = segments[i][0][0]
        queue = queues.setdefault(links, [])
        if not queue or (ready[i], i) < queue[0]:
            heapq.heappush(heap, (max([ready[i]] + [free[l] for l in links]), i, links))
        heapq.heappush(queue, (ready[i], i))

    for t in transfers:
        if waiting[t.id] == 0:
            offer(t.id)
    placed = 0
    while heap:
        key, head, links = heapq.heappop(heap)
        queue = queues[links]
        if not queue or queue[0][1] != head:
            continue  # a stale entry: this queue's head has changed since
        begin = max([queue[0][0]] + [free[l] for l in links])
        if begin > key:
            heapq.heappush(heap, (begin, head, links))
            continue
        _, i = heapq.heappop(queue)
        placed_start[i] = placed
        placed += 1
        at, nbytes = ready[i], chunk_bytes * len(transfers[i].chunks)
        for number, (seg_links, alpha_sum, bandwidth, overhead) in enumerate(segments[i]):
            begin = max([at] + [free[l] for l in seg_links])
            if number == 0:
                transfers[i].t_start = begin
            serialise = nbytes / bandwidth + overhead
            for l in seg_links:
                free[l] = begin + serialise
            at = begin + serialise + alpha_sum
        transfers[i].t_end = at
        if queue:
            ahead = queue[0]
            heapq.heappush(heap, (max([ahead[0]] + [free[l] for l in links]), ahead[1], links))
        for j in dependants[i]:
            ready[j] = max(ready[j], at)
            waiting[j] -= 1
            if waiting[j] == 0:
                offer(j)
    if placed != len(transfers):
        raise ValueError("settle_order: the dependencies form a cycle")
    return order_by_start(algorithm, placed_start)


SETTLE_MOST = 1_000_000  # transfers: larger schedules keep their planned listing (list scheduling is Python)
SETTLE_RATE = 20_000  # transfers a second, with room: settle_order alone did 355k in 6.6 s, then the copy and a simulation


def claim_listing(algorithm: Algorithm, size_bytes: float | None = None,
                  seconds_left: float | None = None, claimed: bool = False) -> Algorithm:
    """The planned listing or its ``settle_order``, whichever the default model times faster (the
    planned one on a tie), with that time claimed (``claim_in_model``) and ``meta.listing`` saying
    which. Where ``adapts_to_size`` is false at ``size_bytes`` (256 MB and up, no per-message
    overhead), past ``SETTLE_MOST`` transfers, or where ``seconds_left`` would not cover it at
    ``SETTLE_RATE``, the planned listing is kept and claimed as it is: results at large sizes stay
    what they were. A periodic algorithm keeps its listing too (a relisting of its template would
    not be one of its expansion). The planned listing's transfers are left as they were (a copy is
    settled).
    ``claimed``: the caller has just claimed the planned listing in the default model
    (``claim_in_model``), so its ``meta.claimed_time`` is taken as it is, not simulated again."""
    planned = algorithm.meta["claimed_time"] if claimed else claim_in_model(algorithm)
    count = len(algorithm.transfers)
    if algorithm.period is not None or count > SETTLE_MOST \
            or (size_bytes is not None and not adapts_to_size(algorithm.topology, size_bytes)) \
            or (seconds_left is not None and count / SETTLE_RATE > seconds_left):
        return algorithm
    settled = settle_order(Algorithm(algorithm.topology, algorithm.collective, algorithm.chunk_bytes,
                                     [Transfer(t.id, t.chunks, t.src, t.dst, t.op, t.deps, t.t_start, t.t_end, read=t.read, via=t.via)
                                      for t in algorithm.transfers], dict(algorithm.meta)))
    if claim_in_model(settled) < planned:
        settled.meta["listing"] = "settled"
        settled.meta["planned_listing_time"] = planned
        return settled
    algorithm.meta["listing"] = "planned"
    return algorithm


def _ready_first(transfers: list[Transfer], keys: list[float]) -> list[int]:
    """A topological order that always takes the earliest-planned transfer whose deps are listed
    (ties by position)."""
    waiting = [len(set(t.deps)) for t in transfers]
    dependants: list[list[int]] = [[] for _ in transfers]
    for t in transfers:
        for d in set(t.deps):
            dependants[d].append(t.id)
    ready = [(keys[i], i) for i, left in enumerate(waiting) if left == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for j in dependants[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, (keys[j], j))
    if len(order) != len(transfers):
        raise ValueError("order_by_start: the dependencies form a cycle")
    return order


def claim_in_model(algorithm: Algorithm, model: str | None = None) -> float:
    """Record the algorithm's time in a simulator model as its claim and return it.

    For a formulation whose only timeline is the schedule it writes (no estimate of its own):
    ``meta.claimed_time`` becomes the collective time ``simulate`` gives in ``model`` (a
    ``workbench.checking.simulate.model_name`` string, default the default model) and ``meta.claim_model``
    names the model, so ``workbench simulate`` in that model reproduces the claim exactly.
    """
    from workbench.checking.simulate import DEFAULT_MODEL_NAME, parse_model, simulate

    model = model or DEFAULT_MODEL_NAME
    options = parse_model(model)
    if options is None:
        raise ValueError(f"claim_in_model: {model!r} is not a simulator model")
    claimed = simulate(algorithm, **options).collective_time
    algorithm.meta["claimed_time"] = claimed
    algorithm.meta["claim_model"] = model
    return claimed
