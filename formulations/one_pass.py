"""One-pass All-Reduce: every rank sums whole vectors it receives, with no Reduce-Scatter then All-Gather.

Two-pass schedules (ring, RHD, the synthesizers' RS + AG) cost two latency chains; at small sizes
the latency is the time, and runtimes send whole vectors instead (MSCCL++'s and TensorRT-LLM's
one-shot All-Reduce; NCCL's symmetric-memory one-shot kernels). Both rules read an *earlier value*
of the sender (``Transfer.read``, ``workbench.algorithm/4``): a runtime keeps it in scratch, and
without it a rank that has already received would pass its partners' contributions back to them.
Method note: ``docs/methods/baselines.md`` section 12.

* ``oneshot``: every rank sends its input (``read`` = input) to every other rank, reduced there.
  In rotation r = 1..N-1 rank u sends to u + r, so every in-link takes one message per rotation;
  a pair with no direct link goes along the simulator's route. N - 1 messages of M bytes leave and
  enter every rank: the two-hop bound's raw term (``workbench.bounds.two_hop``).
* ``rd``: recursive doubling of whole vectors (R. Thakur, R. Rabenseifner, W. Gropp, "Optimization
  of Collective Communication Operations in MPICH", IJHPCA 19(1), 2005, section 4.4). With p the
  largest power of two <= N, rank r in 0..p-1 exchanges with r XOR d for d = 1, 2, ..., p/2,
  sending what it held after its last receipt (``read`` = that transfer; its input at first) and
  adding what it gets: log2 p steps of M bytes. The N - p extra ranks first add their inputs into
  ranks 0..N-p-1 and at the end receive the sum back from them (the paper's non-power-of-two fix).

A rule writes the whole vector as one message of all its chunks. Claimed time: the schedule's own
time in the simulator's default model (``workbench.plugin.closed_form``).
"""

from __future__ import annotations

from workbench.model.algorithm import Algorithm, Transfer
from workbench.model.transfer import READ_INPUT
from workbench.plugin.closed_form import ClosedForm, require_kind
from workbench.plugin.formulation import Unsupported
from workbench.plugin.registry import Problem

__all__ = ["OneShot", "RecursiveDoubling", "oneshot_schedule", "rd_schedule"]


def _whole_vector(problem: Problem, name: str) -> tuple[int, tuple[int, ...]]:
    """The rank count and every chunk (one message carries the whole vector); All-Reduce only."""
    collective = problem.collective
    require_kind(collective, name, ("allreduce",))
    if collective.num_ranks < 2:
        raise Unsupported(f"{name} needs at least 2 ranks")
    return collective.num_ranks, tuple(range(collective.num_chunks))


def oneshot_schedule(problem: Problem) -> Algorithm:
    """Every input to every other rank, in rotations (module docstring)."""
    n, chunks = _whole_vector(problem, "oneshot")
    sends = [(u, (u + r) % n) for r in range(1, n) for u in range(n)]
    transfers = [Transfer(i, chunks, u, v, "reduce", (), read=READ_INPUT) for i, (u, v) in enumerate(sends)]
    return Algorithm(problem.topology, problem.collective, problem.chunk_bytes, transfers, {"passes": 1})


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
    return Algorithm(problem.topology, problem.collective, problem.chunk_bytes, transfers,
                     {"passes": 1, "steps": (n > p) * 2 + (p.bit_length() - 1)})


class OneShot(ClosedForm):
    """Every input to every rank, reduced on arrival (see the module docstring)."""

    name = "oneshot"
    builder = staticmethod(oneshot_schedule)


class RecursiveDoubling(ClosedForm):
    """Recursive doubling of whole vectors (see the module docstring)."""

    name = "rd"
    builder = staticmethod(rd_schedule)
