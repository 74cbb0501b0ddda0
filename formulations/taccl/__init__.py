"""TACCL: routing MILP -> heuristic ordering -> contiguity MILP, guided by communication sketches.

Paper: A. Shah et al., "TACCL: Guiding Collective Algorithm Synthesis using Communication
Sketches" (NSDI 2023); method note ``docs/methods/taccl.md`` (section numbers below). The original
solves both MILPs with Gurobi; here they are built as sparse arrays (``workbench.kit.milp``) and
solved by HiGHS (default) or CBC through PuLP (``backend="cbc"``, for cross-checks).

Paper symbol -> code name:

* ranks R, logical links L (physical topology filtered by the sketch), lat(s,d) = alpha + beta
  -> ``logical.build_logical`` / ``LogicalLink.lat``; a logical link is a direct link or a
  switch-only path, so switch hyperedges S^send_r / S^recv_r and shared NICs are the physical
  links several logical links cross (``LogicalTopology.groups``)
* the sketch (note 2.6: logical topology, uc-min / uc-max, relays, beta split, symmetry,
  chunkup) -> ``sketch.Sketch`` / ``load_sketch`` (paper and code spellings accepted)
* chunks C, Pre, Post -> the workbench collective (our chunk ids; chunkup = chunks per rank)
* stage 1 (note 3.1, eqs. 1-14, C1-C6): is_sent[c,s,d], send, start, is_util, time
  -> ``routing.solve_routing`` (x, snd, st, util, time); symmetry (eq. 12) by substitution
  (``symmetry``), shortest-path filter SP(c) (C1) in ``routing.allowed_links``
* stage 2 (note 3.2): chunk_order(r1,r2), switch_send_order(r), switch_recv_order(r)
  -> ``ordering.order_edges``: one order per physical link (heuristics h10, h14, h15, paper)
* stage 3 (note 3.3, S1-S9): is_together[c,o,d], is_before = 1 - is_together, strict bandwidth
  -> ``scheduling.solve_schedule`` (g, send, start, time)
* Reduce-Scatter (note 4.1): the All-Gather's trees inverted, re-ordered by flipping the
  All-Gather's stage-3 times (the code's reverse mode) and rescheduled with serialised
  reductions (is_reduce_before -> q); All-Reduce = Reduce-Scatter then All-Gather (``concat``)

Output: ``workbench.algorithm/1`` on the physical topology; transfers in stage-3 send order (so
every link sees TACCL's per-link order), merged IB sends as multi-chunk messages, ``deps`` from
the trees (a send waits for every transfer that brought its chunks to its source:
``workbench.kit.schedule.DeliveryChain(every=True)``). Claimed time = stage-3 makespan (All-Reduce: RS + AG), in the
contiguity MILP's own cost model (``meta["claim_model"]`` = ``"taccl-milp"``; no simulator model). Stage 1's objective and bound
are recorded as ``routing_time`` / ``routing_bound``; the bound is also a workbench lower bound
only when nothing restricted the routing and the model's costs bound any schedule (no sketch
restriction, no switch, alpha = 0, non-combining).

Status: ``timeout`` if any stage stopped at its limit (its incumbent is used; stage 3 always has
one, the unmerged schedule of the same orders); otherwise ``feasible`` (the three-stage
decomposition is a heuristic even when each MILP is solved to optimality; per-stage statuses are
in ``stats``).

With ``symmetry: dimensions`` (and ``rounds``, 16) this model solves only one rail group's and one
box group's All-Gather of a rail cluster whose translations verify; the answers are translated to
every group and composed, rails first, in pipelined rounds (``workbench.plugin.composition``, the
decomposition SyCCL uses: ``docs/methods/syccl.md``). The composed schedule claims its simulated
time; ``meta.symmetry`` records the groups solved and reused; ``error`` naming why on other fabrics.
"""

from __future__ import annotations

from typing import Any, Callable

from formulations.taccl.options import HEURISTICS, TacclOptions
from workbench.util.lazy import forward_attributes

__all__ = ["Taccl", "TacclOptions", "HEURISTICS"]


class Taccl:
    """TACCL: sketch-guided routing, ordering and contiguity MILPs (see the module docstring)."""

    name = "taccl"
    kind = "schedule"
    tune_candidate = False  # minutes per size: not a candidate of `workbench tune` by default
    options = TacclOptions

    def synthesize(self, problem: Any, *, time_limit: float, seed: int, options: TacclOptions,
                   on_incumbent: Callable | None = None) -> Any:
        """Routing, ordering and contiguity under the sketch (module docstring)."""
        if options.symmetry == "dimensions":  # this model on one rail and one box group, composed
            from workbench.plugin.composition import synthesize_by_dimensions

            return synthesize_by_dimensions(self, problem, time_limit=time_limit, seed=seed, options=options,
                                            rounds=options.rounds, on_incumbent=on_incumbent)
        from formulations.taccl.synthesis import synthesize

        return synthesize(self, problem, time_limit=time_limit, seed=seed, on_incumbent=on_incumbent,
                          options=options)


__getattr__ = forward_attributes("formulations.taccl.synthesis")  # the implementation's names, on first use
