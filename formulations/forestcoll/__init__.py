"""ForestColl: throughput-optimal spanning-tree packing (formulation ``forestcoll``).

L. Zhao, S. Maleki, Z. Yang, H. Pourreza, A. Shah, C. Hwang, A. Krishnamurthy, "ForestColl:
Throughput-Optimal Collective Communications on Heterogeneous Network Fabrics", arXiv 2402.06787.
Method note: ``docs/methods/forestcoll.md`` ("spec forestcoll N" in this package is its section N).
Pipeline: exact optimum -> (k, U) ->
edge splitting removes switches -> capacitated Edmonds arborescence packing -> map logical edges
back to physical paths -> pipelined schedule.

Paper symbols and their names here:

=====================  ==================================================================
``G = (V, E)``         ``Topology``; ``Vc`` = NPUs ``0..N-1``, ``Vs`` = switch ids ``N..``
``b_e``                ``Link.bandwidth``; integer capacity ``c_e`` = ``TreeUnits.capacities``
``N``                  ``collective.num_ranks``
``M``                  ``problem.size_bytes`` (All-Gather output, nccl-tests convention)
``B+(S)``              bandwidth leaving S (``workbench.bounds.optimum.cut_capacity``)
``1/x*``               ``TreeUnits.optimum_ratio`` (max ``|S ∩ Vc| / B+(S)`` in capacity units)
``k``, ``U``           ``TreeUnits.k``, ``TreeUnits.U`` (``U / k = 1/x*``; budget ``U c_e``)
``s``                  the super-source node (id ``num_nodes``) in ``splitting`` / ``optimum``
``Ts[u,i]``, ``Cs``    ``TreeGroup.edges`` / ``.multiplicity``; after map-back ``PathGroup``
edge splitting         ``splitting.split_switches`` (``edge_map`` for map-back)
=====================  ==================================================================

Collectives: all-gather and broadcast natively (a broadcast packs ``lambda(root)`` arborescences
from the root: optimum ``M / lambda``); reduce-scatter and reduce by duality
(``workbench.kit.duality.by_duality``: the forest of the reversed graph, reversed). When a tree edge
sent hop by hop makes a switch forward one chunk twice, ``Algorithm.reverse`` refuses and
``reverse.reverse_serialised`` builds the reduction directly (one partial sum per switch buffer
at a time); the forest to be reversed is first staggered (``stagger``) so that two visits of one
chunk to a switch are two rounds apart and that rule never makes a link wait. All-reduce = reduce-scatter then all-gather with a common chunking (``lcm`` of the two
``k``). A periodic gather (``periodic`` below) is reversed and joined on its period
(``Algorithm.reverse`` and ``Algorithm.concat``, or ``reverse.reverse_periodic`` through switch
buffers; phases of unlike ``k`` share a period by ``workbench.model.periodic.coarsened``), so a
reduction at 1,024 GPUs is a period too: its All-Reduce lists piece ``p``'s All-Gather a period
after piece ``p``'s Reduce-Scatter. gather, scatter, all-to-all and custom collectives are not supported.

Parameters: ``pieces`` (P, pipeline depth per tree-unit; default ``64 * H`` (H: the deepest chain
of transfers from a root), at most 1024, lowered so the schedule stays within ``max_transfers``,
default 4,000,000 written out (the simulator and verifier take a minute or two and ~5 GB at that size) or
96,000,000 in a period's expansion (never written; ~1 us and ~150 bytes a transfer; 16,000,000 where
the depth is chosen by size, as several depths are timed), and the pipeline fill
``(H - 1) / P`` is what keeps a deep forest from T*; below 256 MB the depth, a power of two up to
that default, is the one whose schedule simulates fastest at the size, which matters where links
pay a per-message overhead: ``sizing``, ``meta.time_by_choice["pieces"]``; there too, where ``k`` and
``packing`` are left "auto", the trees are chosen by size: the forest of the optimal k, one tree
per root (k = 1: fewer, larger messages; ``T_1 >= T*``) where the optimal k is above one, and
BFS-layered trees ("levels") where the translation packer grew them, each written at its best
depth, the fastest in the simulator kept, ``meta.time_by_choice["trees"]``; a candidate starts only while
twice the first forest's seconds are left), ``cut_through`` (False: edges through
switches are sent hop by hop; True: one cut-through transfer where the simulator's route matches,
see ``schedule``; default "auto": the one predicted faster, see ``build_forest``), ``periodic``
(True: the schedule written as one period, its hops lagging by their rounds, and a repeat count:
``workbench.algorithm/3``, whose expansion is the listing transfer for transfer, reductions
included (a reversed period's is the reversed listing with its pieces mirrored); "auto", default:
so from 200,000 transfers, and where the depth is chosen by size from 1,000,000, past what
``claim_listing`` would relist), ``k`` ("auto" or a fixed number of trees per root; a fixed k gives
``T_k >= T*``), ``splitting`` ("auto", "greedy", "spread", "bulk": a whole switch at a time by a
proportional plan, the requirement checked after each batch of like switches, pair by pair where a
check fails; or "symmetric": one plan per switch orbit of a cluster's translations, moved to the
orbit's other switches, so root 0's trees can be translated: ``symmetric_splitting``; "auto" takes
"symmetric" where ``workbench.kit.cluster_translations`` verifies a group, else bulk past 3,000 switch
arc pairs, falling back in that order; see ``build_forest``), ``packing``
("auto", default: "symmetric" where it applies, else "levels"; "symmetric": on a fabric whose
translations preserve every capacity (tori, rings: ``workbench.kit.symmetry``; clusters of equal boxes
and leaf groups after a symmetric split), root 0's trees are
grown and shifted to every root, one max-flow per tested batch of arcs (``symmetric``); "levels":
groups grow one BFS layer per pass, shallower trees; "fifo": the reference's order, each group
grown completely in turn). Status
"optimal" when the forest provably meets the exact optimum (auto k or a fixed k that reaches it,
exact capacities, every check passed) for all-gather, reduce-scatter, broadcast and reduce;
"feasible" for a fixed k above the optimum and for all-reduce (RS + AG is not a proven all-reduce
optimum); "timeout" when ``time_limit`` ran out in the tree construction (no algorithm). The
proof holds in the throughput model (``meta.model_optimal = "forestcoll-throughput"``); the row's
status is the workbench's, by the simulated time (``workbench.bounds.yardstick``). The simulated time
approaches the bandwidth term ``M U / (N k)`` as P grows; the pipeline fill
``(H - 1) T*/P`` and the packing of cut-through transfers into rounds (``slots.round_slots``)
are the remaining gap.

Claimed time (``meta.claimed_time``): the time of the pieces as written in the simulator's default
model (``meta.claim_model`` = ``pipelined/in-order/cut-through``), so ``workbench simulate``
reproduces it at every message size. Transfers are listed by their start in the schedule's own
timeline (``schedule.plan_times``: rounds of the slot order, each hop as many rounds behind its
feeder as alpha and serialisation take), which the default model serves link by link in that
order; the claim is computed after the synthesis (``stats.claim_seconds``, not in its seconds).
Where the depth is chosen by size (below 256 MB, ``pieces`` not pinned) the listing is then that
plan's or its list-scheduled one, whichever simulates faster
(``workbench.kit.schedule.claim_listing``, ``meta.listing``); a period keeps its plan's.
"""

from __future__ import annotations

from typing import Any, Callable

from formulations.forestcoll.options import PACKINGS, SPLITTINGS, ForestCollOptions
from workbench.util.lazy import forward_attributes

__all__ = ["ForestColl", "ForestCollOptions", "PACKINGS", "SPLITTINGS"]

class ForestColl:
    """Throughput-optimal spanning-tree packing (see the module docstring)."""

    name = "forestcoll"
    kind = "schedule"
    options = ForestCollOptions

    def synthesize(self, problem: Any, *, time_limit: float, seed: int, options: ForestCollOptions,
                   on_incumbent: Callable | None = None) -> Any:
        """The packed forest's pipelined schedule (module docstring)."""
        from formulations.forestcoll.synthesis import synthesize

        return synthesize(self, problem, time_limit=time_limit, seed=seed, on_incumbent=on_incumbent,
                          options=options)


__getattr__ = forward_attributes("formulations.forestcoll.synthesis")  # the implementation's names, on first use
