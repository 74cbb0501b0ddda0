"""Two-level All-Reduce for box-and-rail fabrics: scale-up Reduce-Scatter, scale-out All-Reduce
along the rails, scale-up All-Gather, pipelined over pieces.

The idea is the hierarchical (2D) All-Reduce: Horovod's hierarchical allreduce and NCCL's rings and
trees over nodes reduce inside a node first and cross the network with one rank per node; BlueConnect
(M. Cho, U. Finkler, D. Kung, H. Hunter, "BlueConnect: Decomposing All-Reduce for Deep Learning on
Heterogeneous Network Hierarchy", SysML 2019) runs a Reduce-Scatter and an All-Gather per tier, and
the 2D-torus All-Reduce (H. Mikami et al., "Massively Distributed SGD: ImageNet/ResNet-50 Training
in a Flash", 2018) does the same along two torus dimensions. Here, on B boxes of G NPUs whose
position i sits on rail i:

1. Reduce-Scatter inside each box (the fast scale-up links): rank (b, i) ends with box b's partial
   sum of the M/G bytes owned on rail i;
2. All-Reduce of those M/G bytes along rail i, over the B boxes: a Reduce-Scatter, then an
   All-Gather. Above one leaf group (Q boxes per leaf, g groups, B = gQ) it is two-level itself:
   inside the leaf group, then across the groups through the spines, each message stored at the
   leaves and at a spine it names, so that the groups' traffic spreads over every up-link at its
   full rate (the simulator's own route would take the lowest-id spine for every pair, cut
   through at the NICs' rate);
3. All-Gather inside each box.

Each NIC carries 2(B-1)/B x M/G bytes, what the group gossip bound (docs/bounds.md) asks of the
links entering the boxes, so the scale-out phase alone meets the bound's bandwidth term. The
scale-up phases (2(G-1)/G x M at scale-up bandwidth) would add to it if run in sequence; the buffer
is cut into P pieces and the stages pipelined (a ``workbench.algorithm/3`` period, each step
lagging the one before), so they overlap the rail phase of other pieces and cost only the fill and
drain. The exchanges inside a box and along a rail are ``direct`` (one step, q - 1 messages) or
``halving-doubling`` (log2 q steps and messages), and P is a power of two; all three are chosen
from the cost model (``cost``): with no per-message overhead direct and many pieces (the fill
shrinks, 1 GiB and 16 MB alike, the transfer budget bounding P), with overheads fewer pieces and
halving-doubling where its fewer messages pay. The choices and the estimate are in ``meta``.
Reduce-Scatter is step 1 and the first half of 2; All-Gather the second half of 2 and step 3.

Symbols and code names: B ``num_boxes``, G ``per_box``, g ``num_groups``, Q ``per_group``
(``layout.Layout``); P ``pieces``; the stages (``schedule.STAGES``): ``box-rs`` (1), ``rail-rs``
and ``cross-rs`` (2, Reduce-Scatter half), ``cross-ag`` and ``rail-ag`` (2, All-Gather half),
``box-ag`` (3); T(P) ``cost.pipeline_time``, its period tau ``cost.period``. Boxes come from
recorded dimensions when the topology has them, otherwise from its links (``layout.find_layout``;
a leaf-spine fabric's boxes are its leaves, its rails the NPUs at one place under every leaf); a
fabric without boxes is refused.

Method note: ``docs/methods/two-level.md``. Layout: ``layout`` (boxes, groups, spine paths), ``exchange`` (direct and halving-doubling),
``schedule`` (one piece and the pipeline), ``cost`` (the choices), ``options``, ``synthesis``, this
file (the declaration). Claimed time: the schedule's time in the simulator's default model
(``meta.claim_model``), simulated after it is built and not counted in the synthesis seconds.
"""

from __future__ import annotations

from typing import Any, Callable

from formulations.two_level.options import TwoLevelOptions

__all__ = ["TwoLevel", "TwoLevelOptions"]


class TwoLevel:
    """Two-level pipelined All-Reduce, Reduce-Scatter and All-Gather (see the module docstring)."""

    name = "two-level"
    kind = "schedule"
    options = TwoLevelOptions

    def synthesize(self, problem: Any, *, time_limit: float, seed: int, options: TwoLevelOptions,
                   on_incumbent: Callable | None = None) -> Any:
        """The pipelined two-level schedule with the cost model's piece count (module docstring)."""
        from formulations.two_level.synthesis import synthesize

        return synthesize(problem, time_limit=time_limit, seed=seed, options=options, on_incumbent=on_incumbent)
