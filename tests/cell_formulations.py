"""Formulations that misbehave on purpose, for the runner's tests (imported by path in configs)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from workbench.kit.examples import ring_allgather
from workbench.plugin.parameters import Options, option
from workbench.plugin.registry import DesignResult, SynthesisResult


def _ring(problem):
    algorithm = ring_allgather(problem.collective.num_ranks, problem.chunk_bytes, problem.topology)
    algorithm.meta["claimed_time"] = 1.0
    return algorithm


class Sleeper:
    """Reports one incumbent, then never returns."""

    name = "sleeper"
    kind = "schedule"

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        if on_incumbent:
            on_incumbent(_ring(problem))
        time.sleep(3600)


@dataclass(frozen=True)
class SlowOptions(Options):
    delay: float = option(1.0, "seconds to sleep before answering", minimum=0)


class Slow:
    """Takes ``delay`` seconds, then returns a ring all-gather."""

    name = "slow"
    kind = "schedule"
    options = SlowOptions

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        time.sleep(options.delay)
        return SynthesisResult([_ring(problem)], "feasible", options.delay)


class ClaimsOptimal:
    """Says ``optimal`` (proven in a model of its own, ``toy-steps``) for a one-way ring all-gather,
    which on a bidirectional ring is twice the bound."""

    name = "claims-optimal"
    kind = "schedule"

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        algorithm = _ring(problem)
        algorithm.meta["model_optimal"] = "toy-steps"
        return SynthesisResult([algorithm], "optimal", 0.0)


class Raiser:
    name = "raiser"
    kind = "schedule"

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        raise ValueError("boom from the formulation")


class Aborter:
    name = "aborter"
    kind = "schedule"

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        os.abort()


class Impossible:
    name = "impossible"
    kind = "schedule"

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        return SynthesisResult([], "infeasible", 0.01, message="no schedule in 0 steps")


class EvenSplit:
    """A toy design formulation: the per-NPU bandwidth budget split evenly over the dimensions."""

    name = "even-split"
    kind = "design"

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        budget = float(problem.constraints["total_bandwidth"])
        dims = len(problem.dimensions)
        return DesignResult([budget / dims] * dims, None, None, "optimal", 0.0)
