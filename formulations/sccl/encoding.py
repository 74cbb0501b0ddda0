"""SCCL's SMT encoding on two backends: z3 (QF_LIA as the paper, or z3's own tactics) and CP-SAT
(see the package docstring for the symbol map)."""

from __future__ import annotations

from typing import Any

Group = tuple[tuple[tuple[int, int], ...], int]


# ----------------------------------------------------------------------------------- the encodings
class _Z3Model:
    """C1-C6 in z3 (QF_LIA; C5 pseudo-Boolean with a case split on r_s)."""

    def __init__(self, n: int, pre, post, groups: list[Group], steps: int, rounds: int, logic: str = "QF_LIA") -> None:
        import z3

        from .z3_terms import Z3Terms

        self.z3 = z3
        # "QF_LIA" fixes the logic as the paper did; "auto" lets z3 pick its tactic, which is several
        # times faster on the hard bandwidth-optimal instances here (its pseudo-Boolean handling)
        self.solver = z3.SolverFor("QF_LIA") if logic == "QF_LIA" else z3.Solver()
        g = len(pre)
        edges = sorted({pair for pairs, b in groups if b > 0 for pair in pairs})
        self.edges = edges
        self.time = [[z3.Int(f"t_{c}_{v}") for v in range(n)] for c in range(g)]
        self.snd = {(u, c, v): z3.Bool(f"s_{u}_{c}_{v}") for c in range(g) for u, v in edges}
        self.r = [z3.Int(f"r_{s}") for s in range(1, steps + 1)]
        # the terms z3's operators build (``t <= S`` is ``le(t, S)``), made without their argument checks
        terms = Z3Terms(z3)
        lt, le, ge, eq, implies, and_ = terms.lt, terms.le, terms.ge, terms.eq, terms.implies, terms.and_

        def add(*constraints) -> None:
            terms.assert_(self.solver, *constraints)

        into = {v: [u for u, w in edges if w == v] for v in range(n)}
        for c in range(g):
            for v in range(n):
                t = self.time[c][v]
                add(ge(t, 0), le(t, steps + 1))  # any value above S means "never"; S + 1 stands for all of them
                if v in pre[c]:
                    add(eq(t, 0))  # C1
                else:
                    add(implies(le(t, steps), terms.pb_eq([(self.snd[(u, c, v)], 1) for u in into[v]], 1)
                                if into[v] else terms.false()))  # C3
                if v in post[c]:
                    add(le(t, steps))  # C2
            for u, v in edges:
                add(implies(self.snd[(u, c, v)], lt(self.time[c][u], self.time[c][v])))  # C4
        k = rounds - steps
        for s_index, r_s in enumerate(self.r):
            step = s_index + 1
            add(ge(r_s, 1))
            for pairs, b in groups:
                sent_at_step = [(and_(self.snd[(u, c, v)], eq(self.time[c][v], step)), 1)
                                for c in range(g) for u, v in pairs if (u, c, v) in self.snd]
                if not sent_at_step:
                    continue
                for extra in range(1, k + 2):  # C5, case split (every r_s <= k + 1)
                    add(implies(eq(r_s, extra), terms.pb_le(sent_at_step, b * extra)))
        # C6 (no steps, as when every chunk starts where it is needed: the empty sum is 0)
        add(eq(terms.sum_(self.r), rounds) if self.r else (terms.true() if rounds == 0 else terms.false()))

    def solve(self, seconds: float) -> tuple[str, Any]:
        self.solver.set("timeout", max(1, int(seconds * 1000)))
        answer = self.solver.check()
        if str(answer) != "sat":
            return str(answer), None
        model = self.solver.model()
        times = [[model.eval(t, model_completion=True).as_long() for t in row] for row in self.time]
        sends = [key for key, var in self.snd.items() if self.z3.is_true(model.eval(var, model_completion=True))]
        rounds = [model.eval(r, model_completion=True).as_long() for r in self.r]
        return "sat", (times, sends, rounds)


class _CpSatModel:
    """The same instance on OR-Tools CP-SAT: one-hot arrival step y[c,n,s], s in 0..S or never."""

    def __init__(self, n: int, pre, post, groups: list[Group], steps: int, rounds: int, seed: int) -> None:
        try:
            from ortools.sat.python import cp_model
        except ImportError as exc:  # the optional cpsat extra (ScclOptions.validate refuses it earlier)
            from .options import INSTALL_CPSAT

            raise ModuleNotFoundError(f"sccl: backend 'cpsat' needs OR-Tools, which is not installed: "
                                      f"{INSTALL_CPSAT}") from exc

        self.cp_model = cp_model
        model = cp_model.CpModel()
        self.model = model
        self.seed = seed
        g = len(pre)
        never = steps + 1
        edges = sorted({pair for pairs, b in groups if b > 0 for pair in pairs})
        self.edges = edges
        self.time = [[model.NewIntVar(0, never, f"t_{c}_{v}") for v in range(n)] for c in range(g)]
        self._add_arrival_steps(n, pre, post, never)
        self.snd = {(u, c, v): model.NewBoolVar(f"s_{u}_{c}_{v}") for c in range(g) for u, v in edges}
        self._add_sends(n, pre, never)
        self.r = [model.NewIntVar(1, rounds - steps + 1, f"r_{s}") for s in range(1, steps + 1)]
        for step in range(1, steps + 1):
            self._add_step_bandwidth(groups, g, step)
        model.Add(sum(self.r) == rounds)  # C6

    def _add_arrival_steps(self, n: int, pre, post, never: int) -> None:
        """One-hot y[c,v,s] per chunk and node, tied to t[c][v], with C1 and C2 on its first and last step."""
        model = self.model
        self.y = {}
        for c in range(len(pre)):
            for v in range(n):
                ys = [model.NewBoolVar(f"y_{c}_{v}_{s}") for s in range(never + 1)]
                model.AddExactlyOne(ys)
                model.Add(self.time[c][v] == sum(s * y for s, y in enumerate(ys)))
                self.y[(c, v)] = ys
                if v in pre[c]:
                    model.Add(ys[0] == 1)  # C1
                else:
                    model.Add(ys[0] == 0)
                if v in post[c]:
                    model.Add(ys[never] == 0)  # C2

    def _add_sends(self, n: int, pre, never: int) -> None:
        """C3 and C4, per chunk: one sender into each node the chunk reaches, sent after it arrived there."""
        model = self.model
        edges = self.edges
        into = {v: [u for u, w in edges if w == v] for v in range(n)}
        for c in range(len(pre)):
            for v in range(n):
                if v in pre[c]:
                    continue
                incoming = [self.snd[(u, c, v)] for u in into[v]]
                # C3 (phantom sends forbidden, which keeps feasibility): exactly one sender iff it arrives
                model.Add(sum(incoming) == 1 - self.y[(c, v)][never])
            for u, v in edges:
                model.Add(self.time[c][u] < self.time[c][v]).OnlyEnforceIf(self.snd[(u, c, v)])  # C4

    def _add_step_bandwidth(self, groups: list[Group], g: int, step: int) -> None:
        """C5 at one step: each link group carries at most b * r_s chunks arriving at that step."""
        model = self.model
        for pairs, b in groups:
            terms = []
            for c in range(g):
                for u, v in pairs:
                    if (u, c, v) not in self.snd:
                        continue
                    z = model.NewBoolVar("")
                    model.AddBoolAnd([self.snd[(u, c, v)], self.y[(c, v)][step]]).OnlyEnforceIf(z)
                    model.AddBoolOr([self.snd[(u, c, v)].Not(), self.y[(c, v)][step].Not()]).OnlyEnforceIf(
                        z.Not())
                    terms.append(z)
            if terms:
                model.Add(sum(terms) <= b * self.r[step - 1])  # C5

    def solve(self, seconds: float) -> tuple[str, Any]:
        solver = self.cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = max(0.05, seconds)
        solver.parameters.num_workers = 2
        solver.parameters.random_seed = self.seed
        name = solver.StatusName(solver.Solve(self.model))
        if name not in ("OPTIMAL", "FEASIBLE"):  # a feasibility model: any solution is the answer
            return ("unsat" if name == "INFEASIBLE" else "unknown"), None
        times = [[solver.Value(t) for t in row] for row in self.time]
        sends = [key for key, var in self.snd.items() if solver.Value(var)]
        rounds = [solver.Value(r) for r in self.r]
        return "sat", (times, sends, rounds)
