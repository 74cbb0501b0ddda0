"""workbench.kit.duality: combining collectives from a gather-like synthesizer."""

from __future__ import annotations

from workbench.model.algorithm import Algorithm, Transfer
from workbench.model.collective import Collective
from workbench.kit.duality import by_duality
from workbench.topology import Topology, build
from workbench.checking.verify import verify


def _ring_gather(topology: Topology, collective: Collective, chunk_bytes: float) -> Algorithm:
    """A plain ring all-gather / broadcast on a unidirectional ring (i -> i+1): every chunk walks the ring."""
    n = collective.num_ranks
    steps = []
    last: dict[tuple[int, int], int] = {}
    for chunk, holders in enumerate(collective.pre):
        origin = min(holders)
        for hop in range(n - 1):
            src, dst = (origin + hop) % n, (origin + hop + 1) % n
            dep = last.get((src, chunk))
            steps.append((hop, chunk, src, dst, dep))
    steps.sort(key=lambda s: (s[0], s[1]))
    transfers = []
    for tid, (_, chunk, src, dst, _) in enumerate(steps):
        dep = last.get((src, chunk))
        transfers.append(Transfer(tid, (chunk,), src, dst, "copy", () if dep is None else (dep,)))
        last[(dst, chunk)] = tid
    return Algorithm(topology, collective, chunk_bytes, transfers, {"gather": collective.kind})


def test_reducescatter_reduce_allreduce_from_a_gather_synthesizer():
    topology = build("ring:4")  # bidirectional, so the reversed graph has the same ring i -> i+1
    from workbench.model.collective import make_collective

    seen = []

    def gather(view: Topology, collective: Collective, chunk_bytes: float) -> Algorithm:
        seen.append((view.name, collective.kind))
        return _ring_gather(view, collective, chunk_bytes)

    for kind, root in (("allgather", None), ("reducescatter", None), ("allreduce", None), ("broadcast", 0),
                       ("reduce", 2)):
        collective = make_collective(kind, 4, 2, root)
        algorithm = by_duality(topology, collective, 1000.0, gather)
        assert algorithm.collective.kind == kind
        assert algorithm.topology == topology
        verify(algorithm)
    assert ("reversed(ring:4)", "allgather") in seen  # reduce-scatter is built on the reversed graph
    assert ("reversed(ring:4)", "broadcast") in seen


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_phases_name_their_role_and_split_the_deadline():
    from workbench.model.collective import make_collective
    from workbench.kit.deadline import Deadline
    from workbench.kit.duality import Phase, by_duality_phases

    topology = build("ring:4")
    clock = _Clock()
    seen: list[tuple[str, int, bool, float]] = []

    def gather(view: Topology, collective: Collective, chunk_bytes: float, phase: Phase) -> Algorithm:
        seen.append((phase.role, phase.index, phase.reversed, phase.deadline.remaining()))
        clock.now += 1.0  # each run takes a second of the test's clock
        algorithm = _ring_gather(view, collective, chunk_bytes)
        algorithm.meta["claimed_time"] = 2.0 + phase.index
        return algorithm

    deadline = Deadline(10.0, clock=clock)
    algorithm = by_duality_phases(topology, make_collective("allreduce", 4, 1), 1000.0, gather, deadline=deadline,
                                  first_share=0.25)
    verify(algorithm)
    # the reduce-scatter half: a quarter of the 10 s; the all-gather half: what is left after it (9 s)
    assert seen == [("reducescatter", 0, True, 2.5), ("allgather", 1, False, 9.0)]
    assert algorithm.meta["claimed_time"] == 2.0 + 3.0  # the two halves' claims add up

    seen.clear()
    reduce = by_duality_phases(topology, make_collective("reduce", 4, 1, 1), 1000.0, gather, deadline=deadline)
    verify(reduce)
    assert seen == [("reduce", 0, True, 8.0)]  # a single run keeps the whole deadline
    assert reduce.meta["claimed_time"] == 2.0  # a reversed schedule claims what its gather claimed


def test_without_claims_nothing_is_claimed():
    from workbench.model.collective import make_collective

    algorithm = by_duality(build("ring:4"), make_collective("allreduce", 4, 1), 1000.0, _ring_gather)
    assert "claimed_time" not in algorithm.meta
