"""The semantic verifier (docs/verifier.md).

Every (node, chunk) buffer holds a contribution set, kept as a bitset (a Python int over ranks).
``copy`` overwrites the destination with what the source held; ``reduce`` adds it and fails on
overlap (double counting). An algorithm is valid when

1. replaying its transfers in file order breaks no rule and meets every postcondition, and
2. replaying the default simulation's timeline (arrivals at an instant in file order, before any
   start at that instant) every transfer reads exactly what it read in the file-order replay.

A transfer may read an earlier value of its source (``Transfer.read``): its input, or a snapshot
of what it held right after a named earlier transfer into it arrived. Both replays keep those
values beside the buffers; on the timeline a snapshot exists only once its transfer has arrived.
Such algorithms are replayed in Python (the compiled replays do not model snapshots).

A switch that reduces or does not multicast holds one value per operation and forgets it when its
last reader starts; fan-out and open reduction trees are limited as it declares
(``workbench.checking.switch_values``). Those algorithms are replayed in Python too.

A periodic schedule (``workbench.model.periodic``) is checked on one piece plus the repetition rule
(see the section at the end).

Every failure is an ``InvalidAlgorithm`` naming the transfer, chunk, ranks and the reason.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from workbench.util.lazy import lazy_module
from workbench.model.algorithm import Algorithm
from workbench.model.transfer import READ_INPUT, read_target, reads_carried
from workbench.compiled.engines import choose_engine
from workbench.model.periodic import PeriodError, check_repetition, one_piece, piece_collective
from workbench.checking.switch_values import SwitchValues, too_many_trees
from workbench.checking.simulate import DEFAULT_MODEL, SimulationError, SimulationResult, simulate, simulate_with_arrays

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["InvalidAlgorithm", "VerifyReport", "verify", "check_structure"]


class InvalidAlgorithm(ValueError):
    """Why an algorithm does not implement its collective."""

    def __init__(self, message: str, transfer: int | None = None, chunk: int | None = None,
                 ranks: tuple[int, ...] = (), kind: str = "invalid") -> None:
        super().__init__(message)
        self.transfer = transfer
        self.chunk = chunk
        self.ranks = ranks
        self.kind = kind


@dataclass
class VerifyReport:
    transfers: int
    delivered_pairs: int
    simulation: SimulationResult | None

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON (``valid`` is always true: an invalid algorithm raises instead)."""
        return {"valid": True, "transfers": self.transfers, "delivered_pairs": self.delivered_pairs}


def _ranks_of(mask: int) -> list[int]:
    ranks = []
    index = 0
    while mask:
        if mask & 1:
            ranks.append(index)
        mask >>= 1
        index += 1
    return ranks


def _show(ranks: list[int], limit: int = 12) -> str:
    if len(ranks) <= limit:
        return "{" + ", ".join(map(str, ranks)) + "}"
    return "{" + ", ".join(map(str, ranks[:limit])) + f", ... ({len(ranks)} ranks)" + "}"


def check_structure(algorithm: Algorithm) -> None:
    """The structural rules: ids are positions, deps point back, src != dst, endpoints exist and
    are connected, chunks exist, ``reduce`` only on a combining collective and never into a switch."""
    topology = algorithm.topology
    collective = algorithm.collective
    if collective.num_ranks > topology.num_npus:
        raise InvalidAlgorithm(
            f"the collective has {collective.num_ranks} ranks but the topology has {topology.num_npus} NPUs",
            kind="structure")
    num_nodes = topology.num_nodes
    num_chunks = collective.num_chunks
    combining = collective.combining
    first_switch = topology.num_npus
    connected: dict[tuple[int, int], bool] = {}
    for position, t in enumerate(algorithm.transfers):
        if t.id != position:
            raise InvalidAlgorithm(f"transfer at position {position} has id {t.id}; ids must equal positions",
                                   transfer=position, kind="structure")
        if not (0 <= t.src < num_nodes and 0 <= t.dst < num_nodes):
            _missing_node(t, num_nodes)
        if t.src == t.dst:
            raise InvalidAlgorithm(f"transfer {t.id}: src and dst are both {t.src}", transfer=t.id, kind="structure")
        for d in t.deps:
            if not (0 <= d < t.id):
                raise InvalidAlgorithm(f"transfer {t.id}: dependency {d} does not name an earlier transfer",
                                       transfer=t.id, kind="structure")
        _check_chunks(t, num_chunks)
        if t.op == "reduce":
            if not combining or (t.dst >= first_switch and not topology.reduces(t.dst)):
                _bad_reduce(t, collective, first_switch)
        elif t.op != "copy":
            raise InvalidAlgorithm(f"transfer {t.id}: unknown op {t.op!r}", transfer=t.id, kind="structure")
        if (t.src, t.dst) not in connected:  # each pair's route looked up once
            _check_connected(topology, t, connected)
        if t.via is not None:
            _check_named_route(topology, t)
        if t.read is not None:
            _check_read(algorithm, t)


def _check_chunks(t, num_chunks: int) -> None:
    """Each chunk of ``t`` exists and appears once."""
    if len(set(t.chunks)) != len(t.chunks):
        raise InvalidAlgorithm(f"transfer {t.id}: a chunk appears twice in one message", transfer=t.id,
                               kind="structure")
    for c in t.chunks:
        if not (0 <= c < num_chunks):
            raise InvalidAlgorithm(f"transfer {t.id}: chunk {c} does not exist (chunks 0..{num_chunks - 1})",
                                   transfer=t.id, chunk=c, kind="structure")


def _check_read(algorithm: Algorithm, t) -> None:
    """An earlier-value read: from an NPU; of transfer k (after it, or what it brought) only where
    k is an earlier transfer into that NPU that carried every chunk read."""
    if algorithm.period is not None:
        raise InvalidAlgorithm(f"transfer {t.id}: a periodic schedule cannot read earlier values",
                               transfer=t.id, kind="structure")
    if algorithm.topology.is_switch(t.src):
        raise InvalidAlgorithm(f"transfer {t.id}: switch {t.src} keeps no earlier values to read",
                               transfer=t.id, kind="structure")
    if t.read == READ_INPUT:
        return
    k = read_target(t.read)
    what = "what transfer" if reads_carried(t.read) else "the value after transfer"
    if not (0 <= k < t.id):
        raise InvalidAlgorithm(f"transfer {t.id}: reads {what} {k}, which is not an earlier transfer",
                               transfer=t.id, kind="structure")
    after = algorithm.transfers[k]
    if after.dst != t.src or not set(t.chunks) <= set(after.chunks):
        raise InvalidAlgorithm(f"transfer {t.id}: reads node {t.src}'s chunks {list(t.chunks)} of transfer {k}, "
                               f"which delivered chunks {list(after.chunks)} to node {after.dst}",
                               transfer=t.id, kind="structure")


def _check_connected(topology, t, connected: dict[tuple[int, int], bool]) -> None:
    """InvalidAlgorithm when no path leads from ``t``'s src to its dst; else the pair is noted."""
    if topology.route(t.src, t.dst) is None:
        raise InvalidAlgorithm(f"transfer {t.id}: no path from node {t.src} to node {t.dst}",
                               transfer=t.id, kind="structure")
    connected[(t.src, t.dst)] = True


def _check_named_route(topology, t) -> None:
    """InvalidAlgorithm when ``t.via`` is not a walk of links through switches from src to dst."""
    from workbench.checking.simulate import SimulationError, named_route

    try:
        named_route(topology, t.src, t.dst, t.via)
    except SimulationError as exc:
        raise InvalidAlgorithm(f"transfer {t.id}: {exc}", transfer=t.id, kind="structure") from None


def _missing_node(t, num_nodes: int) -> None:
    """InvalidAlgorithm naming the first endpoint of ``t`` that is not a node."""
    for node in (t.src, t.dst):
        if not (0 <= node < num_nodes):
            raise InvalidAlgorithm(f"transfer {t.id}: node {node} does not exist (nodes 0..{num_nodes - 1})",
                                   transfer=t.id, kind="structure")


def _bad_reduce(t, collective, first_switch: int) -> None:
    """InvalidAlgorithm for a reduce in a non-combining collective, or into a switch."""
    if not collective.combining:
        raise InvalidAlgorithm(
            f"transfer {t.id}: reduce of chunk {t.chunks[0]} in a non-combining {collective.kind}",
            transfer=t.id, chunk=t.chunks[0], kind="structure")
    if t.dst >= first_switch:
        raise InvalidAlgorithm(f"transfer {t.id}: reduce into switch {t.dst}, which does not reduce "
                               f"(a switch sums only where its node says reduce: true)",
                               transfer=t.id, chunk=t.chunks[0], kind="structure")


def _initial_state(algorithm: Algorithm) -> dict[int, int]:
    collective = algorithm.collective
    num_chunks = collective.num_chunks
    full, _ = collective.masks()
    state: dict[int, int] = {}
    for chunk, holders in enumerate(collective.pre):
        if collective.combining:
            for rank in holders:
                state[rank * num_chunks + chunk] = 1 << rank
        else:
            for rank in holders:
                state[rank * num_chunks + chunk] = full[chunk]
    return state


def _file_order_replay(algorithm: Algorithm, switches: SwitchValues | None) -> tuple[list, list, dict[int, int]]:
    """Apply transfers in file order. Returns per transfer the sets read and the writer of each
    buffer read (-1 = initial), plus the final state."""
    num_chunks = algorithm.collective.num_chunks
    state = _initial_state(algorithm)
    earlier = _EarlierValues(algorithm, state)
    if switches is not None:
        switches.reset()
    writer: dict[int, int] = {}
    reads: list = [None] * len(algorithm.transfers)
    read_from: list = [None] * len(algorithm.transfers)
    for t in algorithm.transfers:
        src_base = t.src * num_chunks
        values = []
        sources = []
        for c in t.chunks:
            key = src_base + c
            value = state.get(key) if t.read is None else earlier.value(t, key)
            if not value:
                _fail_nothing(algorithm, t, c)
            values.append(value)
            sources.append(writer.get(key, -1) if t.read is None else read_target(t.read))
        if switches is not None:
            _clear_read(switches, t.id, state, num_chunks)
        dst_base = t.dst * num_chunks
        for c, value in zip(t.chunks, values):
            target = dst_base + c
            if t.op == "copy":
                state[target] = value
            else:
                old = state.get(target, 0)
                if old & value:
                    _fail_double(algorithm, t, c, old & value)
                state[target] = old | value
            writer[target] = t.id
        earlier.arrived(t, state, values)
        if len(values) == 1:  # the common single-chunk transfer keeps plain values (less memory)
            reads[t.id] = values[0]
            read_from[t.id] = sources[0]
        else:
            reads[t.id] = tuple(values)
            read_from[t.id] = tuple(sources)
    return reads, read_from, state


def _switch_values(algorithm: Algorithm) -> SwitchValues | None:
    """The operations of the switches that reduce or do not multicast (``switch_values``), their
    fan-out checked; None without such switches."""
    if not algorithm.topology.abilities:
        return None
    switches = SwitchValues(algorithm)
    broken = switches.fan_out(algorithm.topology)
    if broken is not None:
        op, tid, why = broken
        raise InvalidAlgorithm(f"transfer {tid}: {why}, but its value of chunk {op.chunk} is already sent by "
                               f"transfer {op.readers[0]}", transfer=tid, chunk=op.chunk, kind="fan-out")
    return switches


def _clear_read(switches: SwitchValues, tid: int, state: dict[int, int], num_chunks: int) -> None:
    """Transfer ``tid`` has read: a switch buffer whose last reader it is holds nothing from now."""
    for op in switches.started(tid):
        state.pop(op.switch * num_chunks + op.chunk, None)


class _EarlierValues:
    """The earlier values a replay's transfers read (``Transfer.read``): the initial state, and per
    transfer k that a later one reads, its destination's chunks right after it arrived and what it
    brought, both kept when k arrives."""

    def __init__(self, algorithm: Algorithm, state: dict[int, int]) -> None:
        self.num_chunks = algorithm.collective.num_chunks
        self.initial = dict(state) if any(t.read is not None for t in algorithm.transfers) else {}
        self.wanted = {read_target(t.read) for t in algorithm.transfers} - {None}
        self.snapshots: dict[int, dict[int, int]] = {}
        self.brought: dict[int, dict[int, int]] = {}

    def arrived(self, t, state: dict[int, int], values) -> None:
        """Transfer ``t`` has been applied, bringing ``values`` (one per chunk): keep them and what
        its destination now holds, if a later transfer reads them."""
        if t.id in self.wanted:
            base = t.dst * self.num_chunks
            self.snapshots[t.id] = {base + c: state.get(base + c, 0) for c in t.chunks}
            self.brought[t.id] = {base + c: value for c, value in zip(t.chunks, values)}

    def value(self, t, key: int) -> int | None:
        """What ``t`` reads at buffer ``key``: the input, the snapshot after transfer k, or what k
        brought (None: k has not arrived yet)."""
        if t.read == READ_INPUT:
            return self.initial.get(key)
        kept = (self.brought if reads_carried(t.read) else self.snapshots).get(read_target(t.read))
        return None if kept is None else kept.get(key)


def _fail_nothing(algorithm: Algorithm, t, chunk: int) -> None:
    where = "switch" if algorithm.topology.is_switch(t.src) else "rank"
    raise InvalidAlgorithm(
        f"transfer {t.id}: {where} {t.src} sends chunk {chunk} to {t.dst} but holds nothing for it "
        f"(in file order no earlier transfer delivered it)",
        transfer=t.id, chunk=chunk, ranks=(t.src, t.dst), kind="missing")


def _fail_double(algorithm: Algorithm, t, chunk: int, overlap: int) -> None:
    ranks = _ranks_of(overlap)
    raise InvalidAlgorithm(
        f"transfer {t.id}: reduce of chunk {chunk} from {t.src} into {t.dst} double counts the "
        f"contributions of ranks {_show(ranks)}",
        transfer=t.id, chunk=chunk, ranks=tuple(ranks), kind="double-count")


def _check_post(algorithm: Algorithm, state: dict[int, int]) -> int:
    collective = algorithm.collective
    num_chunks = collective.num_chunks
    full, _ = collective.masks()
    delivered = 0
    for chunk, ranks in enumerate(collective.post):
        want = full[chunk]
        for rank in ranks:
            have = state.get(rank * num_chunks + chunk, 0)
            if have != want:
                if not have:
                    detail = "holds nothing for it"
                elif collective.combining:
                    missing = _ranks_of(want & ~have)
                    extra = _ranks_of(have & ~want)
                    detail = f"is missing the contributions of ranks {_show(missing)}"
                    if extra:
                        detail += f" and has extra ones from {_show(extra)}"
                else:
                    detail = f"holds rank {_ranks_of(have)} data instead of rank {_ranks_of(want)}'s"
                raise InvalidAlgorithm(
                    f"postcondition: rank {rank} must end with chunk {chunk} but {detail}",
                    chunk=chunk, ranks=(rank,), kind="postcondition")
            delivered += 1
    return delivered


def _timeline_replay(algorithm: Algorithm, simulation: SimulationResult, reads: list, read_from: list,
                     switches: SwitchValues | None = None) -> None:
    """Replay the default timeline; every transfer must read what it read in file order."""
    count = len(algorithm.transfers)
    if count == 0:
        return
    num_chunks = algorithm.collective.num_chunks
    times = np.concatenate((simulation.end, simulation.start))
    kinds = np.concatenate((np.zeros(count, dtype=np.int8), np.ones(count, dtype=np.int8)))
    ids = np.concatenate((np.arange(count), np.arange(count)))
    order = np.lexsort((ids, kinds, times))
    event_kind = kinds[order].tolist()
    event_id = ids[order].tolist()
    state = _initial_state(algorithm)
    earlier = _EarlierValues(algorithm, state)
    if switches is not None:
        switches.reset()
    writer: dict[int, int] = {}
    carried: list = [None] * count
    transfers = algorithm.transfers
    for kind, tid in zip(event_kind, event_id):
        t = transfers[tid]
        if kind == 1 and t.read is not None:  # start: read an earlier value
            carried[tid] = _earlier_on_timeline(algorithm, simulation, earlier, t, reads[tid])
            continue
        if kind == 1:  # start: read the source buffers
            base = t.src * num_chunks
            if len(t.chunks) == 1:
                key = base + t.chunks[0]
                value = state.get(key)
                if value != reads[tid]:
                    _fail_race(algorithm, simulation, t, t.chunks[0], read_from[tid], writer.get(key, -1))
            else:
                value = tuple(state.get(base + c) for c in t.chunks)
                if value != reads[tid]:
                    for i, c in enumerate(t.chunks):
                        if value[i] != reads[tid][i]:
                            _fail_race(algorithm, simulation, t, c, read_from[tid][i], writer.get(base + c, -1))
            carried[tid] = value
            if switches is not None:  # a switch buffer whose last reader this is forgets its value
                _clear_read(switches, tid, state, num_chunks)
            continue
        base = t.dst * num_chunks
        values = (carried[tid],) if len(t.chunks) == 1 else carried[tid]
        for c, value in zip(t.chunks, values):
            target = base + c
            if t.op == "copy":
                state[target] = value
            else:
                state[target] = state.get(target, 0) | value
            writer[target] = tid
        earlier.arrived(t, state, values)
    _timeline_end(algorithm, state)


def _timeline_end(algorithm: Algorithm, state: dict[int, int]) -> None:
    """The timeline's final buffers meet the postconditions too: every read can match file order
    while two writes into one buffer arrive in the other order (a late copy of a stale value)."""
    try:
        _check_post(algorithm, state)
    except InvalidAlgorithm as exc:
        raise InvalidAlgorithm(f"race: in the default execution, {exc}: writes into it arrived in another order "
                               f"than listed; add the missing dependency", chunk=exc.chunk, ranks=exc.ranks,
                               kind="race") from None


def _earlier_on_timeline(algorithm: Algorithm, simulation: SimulationResult, earlier: _EarlierValues, t,
                         planned) -> Any:
    """The earlier value ``t`` reads at its start on the timeline, which must be what it read in
    file order: after transfer k only once k has arrived (a snapshot is taken on arrival)."""
    base = t.src * algorithm.collective.num_chunks
    values = tuple(earlier.value(t, base + c) for c in t.chunks)
    value = values[0] if len(t.chunks) == 1 else values
    if value != planned:
        when = simulation.start[t.id] * 1e6
        why = ("before that transfer has arrived" if None in values else
               "but writes into it arrived in another order than listed, so it holds other data than in file order")
        raise InvalidAlgorithm(
            f"race: transfer {t.id} reads node {t.src}'s value of transfer {read_target(t.read)} at t={when:.6g} us in the "
            f"default execution, {why}; add the missing dependency",
            transfer=t.id, chunk=t.chunks[0], ranks=(t.src, t.dst), kind="race")
    return value


def _fail_race(algorithm: Algorithm, simulation: SimulationResult, t, chunk: int, planned: int, actual: int) -> None:
    when = simulation.start[t.id] * 1e6
    def name(writer: int) -> str:
        return "the initial data" if writer < 0 else f"transfer {writer}'s write"
    if actual == planned:
        why = ("the buffer holds other data than in file order: a write listed before it has not arrived, "
               "or one listed after it arrived early")
    elif actual < planned:
        why = (f"{name(planned)} (listed before it) has not arrived yet; it would read {name(actual)}")
    else:
        why = (f"{name(actual)} arrived first although it is listed after it (file order reads {name(planned)})")
    raise InvalidAlgorithm(
        f"race: transfer {t.id} reads chunk {chunk} at node {t.src} at t={when:.6g} us in the default "
        f"execution, but {why}; add the missing dependency",
        transfer=t.id, chunk=chunk, ranks=(t.src, t.dst), kind="race")


COMPILED_FROM = 200_000  # transfers: from here the compiled replays pay for loading numba (workbench.compiled.engines)


def verify(algorithm: Algorithm, timeline: bool = True, simulation: SimulationResult | None = None, *,
           engine: str = "auto") -> VerifyReport:
    """Raise ``InvalidAlgorithm`` unless the algorithm implements its collective (both rules).

    ``simulation`` may pass an already computed default simulation (pipelined, in-order,
    cut-through) to save recomputing it; the report carries the one used, so a caller that needs the
    default simulation anyway gets it from ``verify(algorithm).simulation``. ``engine``: ``python``,
    ``compiled`` (numba; ``workbench.compiled.verify``) or ``auto`` (compiled from ``COMPILED_FROM``
    transfers). Both give the same verdicts; a rule the compiled replays find broken is named by
    the Python verifier, so the messages are the same too.
    """
    if algorithm.period is not None:
        reading = next((t for t in algorithm.transfers if t.read is not None), None)
        if reading is not None:
            raise InvalidAlgorithm(f"transfer {reading.id}: a periodic schedule cannot read earlier values",
                                   transfer=reading.id, kind="structure")
        return _verify_periodic(algorithm, timeline, simulation, engine)
    if choose_engine(engine, len(algorithm.transfers), COMPILED_FROM, "verify", eager=False) == "compiled":
        report = _verify_compiled(algorithm, timeline, simulation)
        if report is not None:
            return report
    check_structure(algorithm)
    switches = _switch_values(algorithm)
    reads, read_from, state = _file_order_replay(algorithm, switches)
    delivered = _check_post(algorithm, state)
    if timeline:
        simulation = _default_simulation(algorithm, simulation)
        _timeline_replay(algorithm, simulation, reads, read_from, switches)
        _check_trees(algorithm, switches, [lambda tid: simulation.start[tid]])
    return VerifyReport(len(algorithm.transfers), delivered, simulation)


def _check_trees(algorithm: Algorithm, switches: SwitchValues | None, start_of: list) -> None:
    """InvalidAlgorithm where a switch keeps more reduction trees open than it runs at once;
    ``start_of``: per copy of the schedule, a transfer's start on the timeline."""
    topology = algorithm.topology
    if switches is None or not any(a.reduce_trees is not None for a in topology.abilities.values()):
        return
    broken = too_many_trees(topology, algorithm.transfers, switches, start_of)
    if broken is not None:
        switch, when, trees = broken
        limit = topology.ability(switch).reduce_trees
        raise InvalidAlgorithm(f"switch {switch} runs at most {limit} reduction trees at once (reduce_trees), but "
                               f"at t={when * 1e6:.6g} us in the default execution {trees} are open", kind="trees")


def _default_simulation(algorithm: Algorithm, simulation: SimulationResult | None, arrays=None) -> SimulationResult:
    if simulation is not None and simulation.options == DEFAULT_MODEL:
        return simulation
    try:
        return simulate(algorithm) if arrays is None else simulate_with_arrays(algorithm, arrays)
    except SimulationError as exc:
        raise InvalidAlgorithm(str(exc), kind="structure") from None


def _verify_compiled(algorithm: Algorithm, timeline: bool, simulation: SimulationResult | None) -> VerifyReport | None:
    """The report when every rule holds; None when one breaks, or the rows would not fit in memory
    (the Python verifier then runs)."""
    from workbench.compiled import verify as fast
    from workbench.compiled.arrays import transfer_arrays

    if algorithm.topology.abilities or any(t.read is not None for t in algorithm.transfers):
        return None  # switch operations and earlier-value reads are replayed in Python (docs/verifier.md)
    arrays = transfer_arrays(algorithm.transfers)
    if arrays is None or not fast.fits(algorithm, arrays) or not fast.structure_ok(algorithm, arrays):
        return None
    replayed = fast.replay(algorithm, arrays)
    if replayed is None:
        return None
    reads, delivered = replayed
    if timeline:
        simulation = _default_simulation(algorithm, simulation, arrays)
        if not fast.timeline_ok(algorithm, arrays, simulation, reads):
            return None
    return VerifyReport(len(arrays), delivered, simulation)


# ------------------------------------------------------------------ periodic schedules (workbench.model.periodic)
# The repetition rule (``periodic.check_repetition``) makes every piece the template with its chunks
# relabelled: the pieces tile the collective, and each relabelled chunk has the template chunk's
# holders before and after. So (1) the file-order replay of piece 0 alone (``periodic.one_piece``,
# on the collective of one piece) with its postconditions stands for every piece, and (2) the
# timeline rule is checked piece by
# piece: piece k replayed at its own simulated times (the periodic simulation's arrays,
# piece-major) must read what piece 0 read in file order. Pieces never share a buffer, so no race
# can cross two of them. Inside a piece, failures name transfers as ``one_piece`` numbers them (by
# lag, then id: the template's own ids when no transfer lags).


@dataclass
class _PieceTimes:
    """One piece's start and end times, indexed as ``one_piece`` numbers its transfers."""

    start: "np.ndarray"
    end: "np.ndarray"


def _verify_periodic(algorithm: Algorithm, timeline: bool = True, simulation: SimulationResult | None = None,
                     engine: str = "auto") -> VerifyReport:
    """Raise ``InvalidAlgorithm`` unless the periodic algorithm implements its collective."""
    try:
        check_repetition(algorithm)
    except PeriodError as exc:
        raise InvalidAlgorithm(f"periodic schedule: {exc}", kind="period") from None
    piece, order = one_piece(algorithm)
    piece.collective = piece_collective(algorithm.collective, algorithm.period)  # its chunks are piece 0's
    lagging = any(t.lag for t in algorithm.transfers)
    with _named("piece 0", lagging):
        check_structure(piece)
        switches = _switch_values(piece)
        reads, read_from, state = _file_order_replay(piece, switches)
        delivered = _check_post(piece, state) * algorithm.period.repeat
    if timeline:
        if simulation is None or simulation.options != DEFAULT_MODEL:
            try:
                simulation = simulate(algorithm)
            except SimulationError as exc:
                raise InvalidAlgorithm(str(exc), kind="structure") from None
        _pieces_on_timeline(algorithm, piece, order, simulation, reads, read_from, lagging, engine, switches)
        m = len(piece.transfers)
        where = np.asarray(order, dtype=np.int64)
        _check_trees(piece, switches, [lambda tid, k=k: simulation.start[k * m + where[tid]]
                                              for k in range(algorithm.period.repeat)])
    return VerifyReport(algorithm.total_transfers, delivered, simulation)


def _pieces_on_timeline(algorithm, piece, order, simulation, reads, read_from, lagging, engine, switches) -> None:
    m = len(piece.transfers)
    if m == 0:
        return
    where = np.asarray(order, dtype=np.int64)
    compiled = None
    if choose_engine(engine, algorithm.total_transfers, COMPILED_FROM, "verify", eager=False) == "compiled":
        compiled = _CompiledPiece.build(piece)
    for k in range(algorithm.period.repeat):
        times = _PieceTimes(simulation.start[k * m + where], simulation.end[k * m + where])
        if compiled is not None and compiled.reads_as_planned(times):
            continue
        with _named(f"piece {k}", lagging):
            _timeline_replay(piece, times, reads, read_from, switches)


class _CompiledPiece:
    """The compiled timeline replay for one piece (``workbench.compiled.verify``): says only whether a
    piece reads as planned; the Python replay then names a failure."""

    def __init__(self, piece, arrays, fast, initial, reads) -> None:
        self.piece, self.arrays, self.fast, self.initial, self.reads = piece, arrays, fast, initial, reads

    @classmethod
    def build(cls, piece) -> "_CompiledPiece | None":
        from workbench.compiled import verify as fast
        from workbench.compiled.arrays import transfer_arrays

        arrays = transfer_arrays(piece.transfers)
        if piece.topology.abilities or arrays is None or not fast.fits(piece, arrays):
            return None
        initial = fast.initial_state(piece)
        state = initial.copy()
        reads = np.empty((len(arrays.chunks), state.shape[1]), dtype=np.uint64)
        status, _ = fast.file_order_replay(arrays.src, arrays.dst, arrays.reduce, arrays.chunk_start, arrays.chunks,
                                           piece.collective.num_chunks, state, reads)
        return cls(piece, arrays, fast, initial, reads) if status == fast.OK else None

    def reads_as_planned(self, times: _PieceTimes) -> bool:
        return self.fast.timeline_ok_with(self.piece, self.arrays, times, self.reads, self.initial.copy())


@contextmanager
def _named(piece: str, lagging: bool):
    """Prefix an ``InvalidAlgorithm`` raised inside a piece with which piece it is."""
    try:
        yield
    except InvalidAlgorithm as exc:
        prefix = f"periodic schedule, {piece}" + (" (transfers numbered by lag, then id)" if lagging else "")
        raise InvalidAlgorithm(f"{prefix}: {exc}", exc.transfer, exc.chunk, exc.ranks, exc.kind) from None
