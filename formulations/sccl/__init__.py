"""SCCL: k-synchronous collective algorithms by QF_LIA SMT synthesis, and their Pareto frontier.

Paper: Z. Cai et al., "Synthesizing Optimal Collective Algorithms" (PPoPP 2021); method note
``docs/methods/sccl.md`` ("spec N" and "erratum N" in this package are its section N and the N-th
item of its section 8).

Paper symbol -> code name:

* P nodes, bandwidth relation B = {(L, b)}  -> ``bandwidth_groups(topology)``: one group per directed
  link with b = its bandwidth / the slowest link's (DGX-1: 1 or 2 NVLinks), plus optional extra
  groups (``groups`` parameter: per-node aggregate limits, shared buses); E = pairs in a group with
  b > 0 (spec 1.1, erratum 2)
* G global chunks, pre/post relations (All, Root, Scattered, Transpose; spec 2.1)  -> the workbench
  collective's explicit pre/post (our chunk ids j*n + r are SCCL's i*P + n); SCCL's per-node C is
  chunks per rank k (n*k for All-to-All, which needs C a multiple of P)
* S steps, R rounds, r_s rounds of step s, k-synchronous R <= S + k  -> ``steps``, ``rounds``,
  ``r[s]``, ``k``
* time[c,n] (Int), snd[n,c,n'] (Bool)  -> ``time[c][n]``, ``snd[(n, c, n2)]`` (spec 3.2)
* constraints C1-C6 (spec 3.3, typos fixed: C4 over every c and (n,n') in E; decode with the
  destination's time)  -> ``_Z3Model`` (C5 as pseudo-Boolean with a case split on r_s, encoding (a); its terms
  made through z3's C API by ``z3_terms.Z3Terms``, the same terms as z3's operators, several times faster)
  and ``_CpSatModel`` (the same model on OR-Tools CP-SAT with one-hot arrival steps); ``backend`` is
  ``race`` (default: ``cpsat`` and ``z3-auto`` in two processes, the first sat/unsat wins, ``race.py``;
  without OR-Tools, the optional ``cpsat`` extra, ``z3-auto`` alone, and ``meta["backend"]`` says so),
  ``z3`` (``SolverFor("QF_LIA")``, the paper's setting), ``z3-auto`` (z3's default tactic selection)
  or ``cpsat`` (refused with the install line when OR-Tools is missing)
* decoding (spec 3.4): Q = (r_1..r_S), T = {(c, n, n', t) : snd and time[c,n'] = t+1}  -> ``_decode``;
  phantom sends (destination never reached) are dropped; each send waits for the send that delivered its
  chunk to its source (``workbench.kit.schedule.DeliveryChain``)
* cost T(L) = S*alpha + (R/C)*L*beta  -> ``meta["claimed_time"]`` with beta of the slowest link, in SCCL's
  own step model (``meta["claim_model"]`` = ``"sccl-steps"``: synchronous steps, every round one chunk on
  the slowest link; no simulator model reproduces it)
* lower bounds a_l (collective-aware step bound) and b_l (exact max-flow optimum, flow-LP and cut bounds of
  ``workbench.bounds`` in rounds per chunk; spec 4)  -> ``step_bound``, ``bandwidth_bound``
* combining collectives (spec 2.2): Reduce / Reduce-Scatter are Broadcast / All-Gather on the
  reversed topology run backwards (``Algorithm.reverse``); All-Reduce = RS then AG,
  (P*C, 2S, 2R). Built by ``workbench.kit.duality.by_duality`` with every phase served by the one base
  solve (on a symmetric fabric the AG half is the same all-gather), so the solver runs once
* Pareto synthesis (Algorithm 1, spec 3.8): for S = a_l, a_l+1, ...: the (R, C) with
  S <= R <= S+k, R/C >= b_l in ascending R/C (smaller C first); the first SAT is the frontier point
  at S; stop when R/C = b_l, at ``max_steps`` or when the time budget is spent

Modes: ``instance`` (one (C, S, R): C is the problem's chunks per rank), ``pareto`` (C varies;
one algorithm per frontier point) and ``least-steps`` (the smallest S for the problem's C with
R = S + k). Status by the SMT rule of docs/architecture.md ("Statuses"): sat -> feasible (optimal when the bounds prove both
S = a_l and R/C = b_l, or a Pareto search completes at b_l), unsat -> infeasible (also when a
bound rejects the instance without calling the solver), unknown -> timeout. "optimal" is proven
in SCCL's step model (``meta.model_optimal = "sccl-steps"``); the row's status is the workbench's, by
the simulated time (``workbench.bounds.yardstick``).
"""

from __future__ import annotations

from typing import Any, Callable

from formulations.sccl.options import ScclOptions, check_groups
from workbench.util.lazy import forward_attributes

__all__ = ["Sccl", "ScclOptions", "check_groups"]


class Sccl:
    """SCCL synthesis (see the module docstring)."""

    name = "sccl"
    kind = "schedule"
    tune_candidate = False  # minutes per size: not a candidate of `workbench tune` by default
    row_facts = {"sccl_chunks": "chunks"}  # C, kept in the rows; a plot's bandwidth cost is rounds / C
    options = ScclOptions

    def synthesize(self, problem: Any, *, time_limit: float, seed: int, options: ScclOptions,
                   on_incumbent: Callable | None = None) -> Any:
        """The instance, least-steps or Pareto search (module docstring)."""
        from formulations.sccl.synthesis import synthesize

        return synthesize(self, problem, time_limit=time_limit, seed=seed, on_incumbent=on_incumbent,
                          options=options)


__getattr__ = forward_attributes("formulations.sccl.synthesis")  # the implementation's names, on first use
