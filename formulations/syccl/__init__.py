"""SyCCL: symmetry decomposition of collectives on regular clusters (formulation ``syccl``).

J. Cao, S. Shi, J. Gao, W. Liu, Y. Yang, Y. Xu, Z. Zheng, Y. Guan, K. Qian, Y. Liu, M. Xu, T. Wang,
N. Wang, J. Dong, B. Fu, D. Cai, E. Zhai, "SyCCL: Exploiting Symmetry for Efficient Collective
Communication Scheduling", ACM SIGCOMM 2025. Method note: ``docs/methods/syccl.md`` (what is the
paper's, what is ours where its text is not public).

Pipeline (one module each):

1. decomposition (the workbench's ``workbench.kit.decomposition``): the box and rail dimensions of a
   boxes-by-rails cluster, its groups and their isomorphism classes under the verified
   translations;
2. sketch exploration (``sketches``): stage sequences of sub-demands, pruned by three rules, with
   counts of what each rule removed;
3. bandwidth balancing (``balance``): an LP giving each kept sketch a share of the data;
4. sub-schedules (``submodel``): one alpha-aware epoch MILP per isomorphism class and piece size,
   written for local GPU 0 and translated to every GPU and every group of the class (reuse);
   All-to-All (``alltoall``): one LP per combination of its two-hop sketches;
5. stitching (``stitching``, ``workbench.kit.decomposition.stitch``) and selection: candidates
   (pipeline depth x combination x merged messages) are built, simulated in the default model, and
   the fastest kept (section 5.2's simulator-based selection).

Paper symbols and their names here:

=========================  =====================================================================
``D_k`` (dimension)        ``Dimension`` (``box``, ``rail``)
``G_{d,k}`` (groups)       ``Dimension.groups``; classes ``Dimension.classes``
``V^s``, ``V^r``           a stage's holders and its destination set (``Stage.fanout``: ``all``, ``one``)
sketch                     ``Sketch`` (``stages``, per-dimension ``sends``)
combination                ``balance`` shares, made whole chunks by ``chunk_split``
sub-schedule MILP          ``submodel.broadcast_pattern`` (``send[a, b, t]``, ``finish``)
=========================  =====================================================================

Collectives: All-Gather natively; Reduce-Scatter by duality (the All-Gather of the reversed
fabric, reversed: ``workbench.kit.duality``); All-Reduce as Reduce-Scatter then All-Gather with
one chunking; All-to-All by its own sketches (``alltoall``). Other kinds, and fabrics without a
verified boxes-by-rails symmetry, give an ``error`` result naming why.

Parameters (``SycclOptions``): ``max_stages`` (3), ``prune_ratio`` (3.0), ``max_sketches`` (4),
``milp_seconds`` (20 s a sub-model, at most a fifth of what is left), ``max_model_columns``
(20,000: a larger group model is replaced by direct sends), ``depths`` ("auto": 1, 2, 4, ...
chunks per rank until doubling stops helping; or a list such as "1,2,4", or one integer, each from 1
to 1,000,000: anything else is refused where the parameters are read), ``max_transfers`` (2,000,000).

Status ``feasible`` (the workbench labels it ``optimal`` only when the simulated time meets the
problem's bound, ``workbench.bounds.yardstick``); ``timeout`` when the time limit ended the
candidate search (the best candidate so far is returned); ``error`` naming why when the search
ended before the time limit without a candidate (every depth above ``max_transfers``). Claimed time: the chosen schedule's
time in the simulator's default model (``meta.claim_model``), so ``workbench simulate``
reproduces it. ``meta.syccl`` records the decomposition, the sketch counts per pruning rule,
the balance, the sub-models solved and reused, and every candidate simulated.
"""

from __future__ import annotations

from typing import Any, Callable

from formulations.syccl.options import SycclOptions

__all__ = ["Syccl", "SycclOptions"]


class Syccl:
    """SyCCL's symmetry-decomposed synthesis (see the module docstring)."""

    name = "syccl"
    kind = "schedule"
    options = SycclOptions

    def synthesize(self, problem: Any, *, time_limit: float, seed: int, options: SycclOptions,
                   on_incumbent: Callable | None = None) -> Any:
        """The fastest stitched candidate (module docstring)."""
        from formulations.syccl.synthesis import synthesize

        return synthesize(self, problem, time_limit=time_limit, seed=seed, on_incumbent=on_incumbent,
                          options=options)
