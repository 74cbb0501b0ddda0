"""Chunks per NPU by message size.

TACOS's paper cuts each NPU's data into a fixed number of chunks (``collectivesCount``); more chunks
pipeline better on large messages, fewer pay fewer alphas and per-message overheads on small ones.
Below ``SIZED_BELOW`` bytes, where the problem has one chunk per rank (a config that pins
``chunks`` above one keeps them) and a standard collective, the greedy runs with each of
``CHOICES`` chunks per NPU and the schedule that simulates fastest in the default model (its
claim) is kept. From ``SIZED_BELOW`` up (unless the links pay a per-message overhead:
``workbench.kit.schedule.adapts_to_size``) the problem's chunking stands, so large-message results do
not move, except on fabrics with switches joined to switches (leaf-spine tiers, unwound one
logical switch per rail by ``workbench.topology.logical``), which TACOS could not take before:
there ``MULTI_TIER_CHOICES`` are tried, as one chunk per rank left the 512-GPU 2:1 rail fabric at
85% of the bound where two reach 91%. Each choice gets an equal share of what is left of the time
limit.
"""

from __future__ import annotations

from typing import Callable

from workbench.kit.deadline import Deadline
from workbench.plugin.registry import Problem, SynthesisResult
from workbench.kit.schedule import SIZED_BELOW, adapts_to_size

__all__ = ["SIZED_BELOW", "CHOICES", "MULTI_TIER_CHOICES", "chunk_choices", "with_chunks", "fastest_chunking"]

# below SIZED_BELOW (256 MB); from there up, the problem's chunks per rank
CHOICES = (1, 2, 4, 8)
# from SIZED_BELOW up on a fabric with switch-to-switch links (each choice is a whole greedy run:
# 9 s and 11 s on the 512-GPU rail fabric)
MULTI_TIER_CHOICES = (1, 2)


def chunk_choices(problem: Problem, chunks: str) -> tuple[int, ...]:
    """The chunks per NPU to try: ``CHOICES`` where ``chunks`` is "auto" and the rule above
    applies, else the problem's own."""
    collective = problem.collective
    if chunks == "given" or collective.kind == "custom" or collective.chunks_per_rank != 1:
        return (collective.chunks_per_rank,)
    if adapts_to_size(problem.topology, problem.size_bytes):
        return CHOICES
    topology = problem.topology
    if any(topology.is_switch(link.src) and topology.is_switch(link.dst) for link in topology.links):
        return MULTI_TIER_CHOICES
    return (collective.chunks_per_rank,)


def with_chunks(problem: Problem, k: int) -> Problem:
    """The problem with ``k`` chunks per rank (``Problem.with_chunks``)."""
    return problem.with_chunks(k)


def fastest_chunking(problem: Problem, choices: tuple[int, ...], deadline: Deadline,
                     search: Callable[[Problem, float | None], SynthesisResult]
                     ) -> tuple[SynthesisResult, dict[int, float]]:
    """The result of the fastest choice (by its claimed, default-model time) and each choice's time.
    ``search(problem, time_limit)`` runs the greedy on one chunking (``None``: no limit)."""
    best: SynthesisResult | None = None
    timed: dict[int, float] = {}
    for index, k in enumerate(choices):
        if deadline.expired and best is not None:
            break
        share = None if deadline.unlimited else deadline.remaining() / (len(choices) - index)
        result = search(with_chunks(problem, k), share)
        if not result.algorithms:
            if best is None:
                best = result
            continue
        timed[k] = result.algorithms[0].meta["claimed_time"]
        if best is None or not best.algorithms or timed[k] < best.algorithms[0].meta["claimed_time"]:
            best = result
    assert best is not None
    return best, timed
