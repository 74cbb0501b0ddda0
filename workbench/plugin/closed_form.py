"""Formulations that build their schedule by a rule, with no search: the common ``synthesize``.

Ring, recursive halving-doubling, Bruck, PAT and their kin write one schedule from the problem's
shape. ``ClosedForm`` gives them the formulation's ``synthesize``: it calls the rule (``build``),
times it, stamps the claim (the schedule's own time in the simulator's default model,
``workbench.kit.schedule.claim_in_model``) and reports the schedule as ``feasible``: a rule proves
nothing. A rule that does not cover the problem (collective kind, rank count) raises
``Unsupported`` (``require_kind``). Below 256 MB (``workbench.kit.schedule.adapts_to_size``) the
rule's listing is kept or replaced by its list-scheduled one, whichever simulates faster
(``workbench.kit.schedule.claim_listing``, ``meta.listing``): on a fabric with switches a transfer
that waits can hold a link that others could use. Those simulations count in the synthesis seconds.
"""

from __future__ import annotations

import time
from typing import Callable

from workbench.model.algorithm import Algorithm
from workbench.model.collective import Collective
from workbench.plugin.formulation import Unsupported
from workbench.plugin.parameters import Options
from workbench.plugin.registry import Problem, SynthesisResult
from workbench.kit.schedule import claim_listing

__all__ = ["ClosedForm", "require_kind"]


def require_kind(collective: Collective, name: str, defined: tuple[str, ...]) -> None:
    """Raise ``Unsupported`` for a collective the rule does not define, naming what it does."""
    if collective.kind not in defined:
        raise Unsupported(f"{name} defines {', '.join(defined)}, not {collective.kind}")


class ClosedForm:
    """Base of rule-built formulations: subclasses set ``name``, ``builder`` and, where the rule
    takes parameters, ``options`` (an ``Options`` dataclass), or override ``build`` where the seed
    matters. The default ``options`` is the ``Options`` base itself: no parameters."""

    name = ""
    kind = "schedule"
    builder: Callable[..., Algorithm]
    options: type[Options] = Options

    def synthesize(self, problem: Problem, *, time_limit: float, seed: int, options: Options,
                   on_incumbent: Callable[[Algorithm], None] | None = None) -> SynthesisResult:
        """The rule's schedule as a ``feasible`` result (module docstring); ``Unsupported`` where
        the rule does not cover the problem."""
        started = time.perf_counter()
        algorithm = self.build(problem, seed, options)
        # below 256 MB the listing that simulates faster, planned or settled (claim_listing); the
        # simulations that choose it count as synthesis, since they shape the file
        algorithm = claim_listing(algorithm, problem.size_bytes,
                                  seconds_left=time_limit - (time.perf_counter() - started) if time_limit else None)
        seconds = time.perf_counter() - started
        if on_incumbent is not None:
            on_incumbent(algorithm)
        return SynthesisResult([algorithm], "feasible", seconds, {"transfers": len(algorithm.transfers)})

    def build(self, problem: Problem, seed: int, options: Options) -> Algorithm:
        """The schedule: the builder given the options as keywords; a rule that draws from the seed
        (tie breaks) overrides this."""
        return type(self).builder(problem, **options.as_dict())
