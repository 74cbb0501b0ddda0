"""TE-CCL: collective scheduling as time-expanded multi-commodity flow (MILP, LP, A* rounds) on HiGHS.

Paper: X. Liu et al., "Rethinking Machine Learning Collective Communication as a Multi-Commodity
Flow Problem" (SIGCOMM 2024); method note ``docs/methods/teccl.md`` (section numbers below). The
authors solve with Gurobi; here every model is built as sparse arrays (``workbench.kit.milp``) and
solved by HiGHS.

Paper symbol -> code name:

* N, S, E, T_ij (chunks/s), alpha_ij, tau, K epochs, delta_ij = alpha_ij / tau
  -> ``epochs.epoch_graph``: ``EpochGraph.tau``, ``Edge.a`` (ceil(alpha/tau), 0 under the 0.1
  threshold), ``Edge.kappa`` (epochs a chunk occupies a slow link, Appendix F), ``Edge.per_window``
  (floor(kappa T tau)), ``Edge.delay`` (L = a + kappa - 1); horizon n_e = ``horizon``
* commodities (s, c) and demands D_{s,c,d} -> the workbench collective's chunks: a commodity is
  one of our chunk ids, its holders are ``pre``, its demands are ``post - pre`` (TE-CCL counts
  chunks per destination for All-to-All; ours are per (source, destination) piece)
* F_{s,i,j,k,c}, B_{s,n,k,c}, R_{s,d,k,c} -> ``milp``: ``f[c,e,k]``, ``b[c,n,k]``
  (R_k = B_{k+1}, note 8.2), eqs. of note 2.2 / 2.10; switch models of note 1.6
  (``switch_model`` copy / no-copy / hyperedge, ``single_beta``; per switch, note 2.11, below); Appendix B buffers
  (``buffer_limit``); objective weights 1/(k+1) (``objective="paper"``) or 1 (``"code"``)
* the LP (note 3.3, 3.6) -> ``lp.solve_lp_schedule`` (commodity = source rank), the rate
  decomposition of note 3.5 -> ``lp._decompose``; fractional pieces become ``lp_subchunks``
  whole sub-chunks per chunk (largest remainder), so the collective is emitted with that finer chunking
* A* rounds (note 4): look-ahead Q, distance reward P with Floyd-Warshall distances, demand
  retirement -> ``astar.solve_astar``
* silly-flow removal (note 2.7) -> ``epochs.prune_flows``; schedule -> ``workbench.algorithm/1``
  transfers (one per flow hop, switch nodes as endpoints except in the hyperedge model), deps from
  the flows, claimed time = epochs x tau, in TE-CCL's epoch model (``meta["claim_model"]`` =
  ``"teccl-epochs"``: whole epochs per hop; no simulator model reproduces it)
* Reduce-Scatter: the All-Gather on the reversed topology, reversed (``Algorithm.reverse``);
  All-Reduce = Reduce-Scatter then All-Gather (``Algorithm.concat``)

Switches that reduce or do not multicast (note 2.11; ``workbench.topology.abilities``). This is
our extension, not the paper's: the paper's switches either all copy or none, and it has no
in-network reduction. Here the switch model is read per switch (``EpochGraph.copies_at``):

* under ``copy`` a switch copies only where it multicasts; a ``multicast: false`` switch carries
  what enters it one for one and holds no value, so its crossings are emitted as single transfers
  through it (``EpochGraph.passes_through``, ``synthesis._emit``);
* the switch-reduction commodity: the reversed All-Gather of a Reduce-Scatter / Reduce (and of
  All-Reduce's first half) runs on a *dual* epoch graph (``epoch_graph(..., dual=True)``) whose
  switches copy exactly where they reduce (``Topology.reduces``), so ``Algorithm.reverse`` turns
  each copy into a sum in that switch; every other switch carries a chunk once, as the paper's
  no-copy model. In paper symbols: a copy ``F_{s,w,j,k,c} = 1`` on several out-edges j of a
  switch w in the dual graph is, reversed, the reduction into w of the partial sums of chunk c
  from those j, the sum leaving w once (towards the edge the copy came in by);
* rows of the dual graph (``milp._switch_rows``, ``astar``): ``(2.11 one at a time)`` a chunk's
  visits to a summing switch do not overlap (each reversed sum is one operation of the switch,
  read once: ``sum_fanout: false`` is kept); at a switch with ``reduce_trees``, ``(2.11 tree
  fan-out)`` / ``(2.11 tree port)`` (``milp.tree_rows``, a binary ``y[c, w, k]``): a copy leaves
  on one out-edge, or on every port the chunk did not come in by, so every sum there has one tree
  (all ports) and no schedule keeps more than one open;
* the greedy start follows the same rules (``greedy``), in a dual graph with summing switches
  ranking moves by arrival plus the epochs they hold slow links beyond one;
* under ``single_beta`` (one transmission through a switch) a switch visit with one hop in and
  one out is emitted as one transfer through the switch.

Status by the rule of docs/architecture.md ("Statuses"): HiGHS's status of the main solve (MILP, LP or the last A* round);
``timeout`` when a limit ended it, with the incumbent (the greedy warm start at worst) attached.
"optimal" is proven in the epoch model (``meta.model_optimal = "teccl-epochs"``); the row's status
is the workbench's, by the simulated time (``workbench.bounds.yardstick``).

With ``symmetry: dimensions`` (and ``rounds``, 16) this model solves only one rail group's and one
box group's All-Gather of a rail cluster whose translations verify; the answers are translated to
every group and composed, rails first, in pipelined rounds (``workbench.plugin.composition``, the
decomposition SyCCL uses: ``docs/methods/syccl.md``). The composed schedule claims its simulated
time; ``meta.symmetry`` records the groups solved and reused; ``error`` naming why on other fabrics.
"""

from __future__ import annotations

from typing import Any, Callable

from formulations.teccl.options import TecclOptions

__all__ = ["Teccl", "TecclOptions"]


class Teccl:
    """TE-CCL's time-expanded flow synthesis (see the module docstring)."""

    name = "teccl"
    kind = "schedule"
    tune_candidate = False  # minutes per size: not a candidate of `workbench tune` by default
    options = TecclOptions

    def synthesize(self, problem: Any, *, time_limit: float, seed: int, options: TecclOptions,
                   on_incumbent: Callable | None = None) -> Any:
        """The schedule by the chosen method (module docstring)."""
        from formulations.teccl.synthesis import synthesize

        return synthesize(self, problem, time_limit=time_limit, seed=seed, options=options, on_incumbent=on_incumbent)
