"""The two-level synthesis: find the boxes, price the pipeline, emit it and claim its time."""

from __future__ import annotations

import time
from typing import Callable

from formulations.two_level.cost import choose, pipeline_time, step_lags
from formulations.two_level.exchange import allowed
from formulations.two_level.layout import Layout, find_layout
from formulations.two_level.options import PERIODIC_FROM, TwoLevelOptions
from formulations.two_level.schedule import piece_schedule, pipelined
from workbench.kit.schedule import claim_in_model
from workbench.model.algorithm import Algorithm
from workbench.plugin.closed_form import require_kind
from workbench.plugin.formulation import Unsupported
from workbench.plugin.registry import Problem, SynthesisResult

__all__ = ["synthesize", "KINDS"]

KINDS = ("allreduce", "reducescatter", "allgather")


def synthesize(problem: Problem, *, time_limit: float, seed: int, options: TwoLevelOptions,
               on_incumbent: Callable[[Algorithm], None] | None = None) -> SynthesisResult:
    """The pipelined two-level schedule (package docstring) as a ``feasible`` result: a rule proves
    nothing. ``seed`` is unused (nothing is drawn); ``time_limit`` is not needed by a rule."""
    started = time.perf_counter()
    topology, collective = problem.topology, problem.collective
    require_kind(collective, "two-level", KINDS)
    layout = find_layout(topology, collective.num_ranks)
    if layout is None:
        raise Unsupported("two-level needs boxes: equal groups of NPUs joined by a slower tier (rails:, leafspine:, "
                          "a file with two bandwidth tiers or leaf switches); this fabric has none")
    _check_fixed(options, layout)
    whole_chunk = problem.size_bytes / collective.num_ranks  # one chunk per rank: one piece's shard
    choice = choose(topology, layout, collective.kind, whole_chunk, options.fixed(), options.max_transfers,
                    options.tolerance)
    piece, step_of, steps = piece_schedule(topology, layout, collective.kind, choice.exchanges, whole_chunk)
    pieces = choice.pieces
    while options.depth is None and pieces > 1 and pieces * len(piece.transfers) > options.max_transfers:
        pieces //= 2  # the estimate of the transfers was short: keep within the budget
    piece.chunk_bytes = whole_chunk / pieces
    step_lag = step_lags(steps, choice.stages, piece.chunk_bytes)
    piece.meta.update(_meta(layout, choice, pieces, pipeline_time(choice.stages, whole_chunk, pieces), step_lag,
                            options))
    periodic = options.periodic == "true" or (options.periodic == "auto" and
                                              pieces * len(piece.transfers) >= PERIODIC_FROM)
    algorithm = pipelined(piece, [step_lag[step] for step in step_of], pieces, periodic)
    seconds = time.perf_counter() - started
    claim_in_model(algorithm)  # judges the schedule, does not make it: timed apart
    if on_incumbent is not None:
        on_incumbent(algorithm)
    return SynthesisResult([algorithm], "feasible", seconds,
                           {"transfers": algorithm.total_transfers, "claim_seconds":
                            time.perf_counter() - started - seconds})


def _check_fixed(options: TwoLevelOptions, layout: Layout) -> None:
    """Refuse a given exchange the layout's level cannot run (halving-doubling needs a power of two)."""
    for level, count in (("box", layout.per_box), ("rail", layout.per_group)):
        how = getattr(options, level)
        if how != "auto" and how not in allowed(count):
            raise Unsupported(f"two-level: {level}={how} needs a power of two of at least 4 members, "
                              f"this fabric's {level} level has {count}")


def _meta(layout: Layout, choice, pieces: int, estimate: float, step_lag: list[int],
          options: TwoLevelOptions) -> dict:
    """What the schedule records of its making: the layout, the exchanges and pieces and who chose
    them, the cost model's estimate, the steps' lags and how the rail All-Reduce runs."""
    given = options.fixed()
    return {"layout": layout.describe(), "stages": [s.name for s in choice.stages], "exchanges": choice.exchanges,
            "pieces": pieces, "chosen_by": {k: "given" if k in given else "cost model" for k in
                                            ("box", "rail", "pieces")},
            "estimated_time": estimate, "step_lags": step_lag, "rail": _rail_words(layout, choice.exchanges)}


def _rail_words(layout: Layout, exchanges: dict[str, str]) -> str:
    """How the rail All-Reduce runs, for ``meta.rail``."""
    if layout.num_groups == 1:
        return f"{exchanges['rail']} over {layout.num_boxes} boxes"
    return (f"{exchanges['rail']} inside {layout.num_groups} leaf groups of {layout.per_group} boxes, "
            f"then direct across the groups through the spines")
