"""Direct sends: every rank receives each chunk it lacks straight from the chunk's origin.

A rule, not a paper's method, so there are no paper symbols to map. Copy collectives only
(All-Gather, Broadcast, Scatter, Gather, All-to-All); reductions would come from
workbench.kit.duality.by_duality.
"""

from dataclasses import dataclass

from workbench.kit.deadline import Deadline
from workbench.kit.schedule import claim_in_model
from workbench.model.algorithm import Algorithm, Transfer
from workbench.plugin.parameters import Options, option
from workbench.plugin.registry import Problem, SynthesisResult, Unsupported


@dataclass(frozen=True)
class StarOptions(Options):
    order: str = option("near-first", "which destinations each origin serves first",
                        choices=("near-first", "by-id"))


class Star:
    name = "star"
    kind = "schedule"
    options = StarOptions

    def synthesize(self, problem: Problem, *, time_limit: float, seed: int, options: StarOptions,
                   on_incumbent=None) -> SynthesisResult:
        """One transfer per (chunk, rank that lacks it), from the chunk's origin."""
        deadline = Deadline(time_limit)
        collective = problem.collective
        if collective.combining:
            raise Unsupported(f"star: copy collectives only, not {collective.kind}")
        hops = problem.topology.hop_distances()
        sends = [(collective.origin(c), r, c) for r in range(collective.num_ranks)
                 for c in sorted(collective.post[r] - collective.pre[r])]
        if options.order == "near-first":
            sends.sort(key=lambda send: (hops[send[0]][send[1]], send))
        transfers = [Transfer(i, (chunk,), src, dst) for i, (src, dst, chunk) in enumerate(sends)]
        algorithm = Algorithm(problem.topology, collective, problem.chunk_bytes, transfers)
        claim_in_model(algorithm)  # no timing model of its own: it claims the default model's time
        if on_incumbent is not None:
            on_incumbent(algorithm)  # a run killed later still keeps this one
        return SynthesisResult([algorithm], "feasible", deadline.elapsed())
