"""SCCL: table rows SAT and valid, UNSAT boundaries, bounds, duality, backends agree, hard time limit."""

import multiprocessing
import sys
import types

import pytest

from guards import deadline
from workbench.plugin import call
from formulations.sccl import Sccl, bandwidth_bound, bandwidth_groups, solve_instance, step_bound
from formulations.sccl.race import cpsat_available, race_instance
from workbench.cli import main
from workbench.model.collective import make_collective
from workbench.plugin.registry import Problem
from workbench.topology import build
from workbench.checking.verify import verify

DGX1 = build("dgx1")
RING = build("amd-z52")
# the engine of the tests that are about the model, not the engine: CP-SAT, or z3-auto without
# OR-Tools (the optional cpsat extra); the tests of CP-SAT itself and of the race are requires_ortools
ENGINE = "cpsat" if cpsat_available() else "z3-auto"


def instance(topology, kind, c, steps, rounds, backend=ENGINE, root=0, seconds=60):
    k = c // 8 if kind == "alltoall" else c
    collective = make_collective(kind, 8, k, root if kind in ("broadcast", "gather", "scatter") else None)
    if backend == "race":
        return race_instance(topology, collective, 1e6, steps, rounds, seconds)
    return solve_instance(topology, collective, 1e6, steps, rounds, seconds, backend)


def test_bounds_match_the_spec():
    groups = bandwidth_groups(DGX1)
    assert {b for _, b in groups} == {1, 2}
    for collective, a_l, b_l in [(make_collective("allgather", 8, 1), 2, "7/6"),
                                 (make_collective("broadcast", 8, 1, 0), 2, "1/6"),
                                 (make_collective("gather", 8, 1, 0), 2, "7/6"),
                                 (make_collective("alltoall", 8, 1), 2, "1/3")]:
        assert step_bound(DGX1, collective) == a_l
        assert str(bandwidth_bound(DGX1, collective, groups)) == b_l
    ring_ag = make_collective("allgather", 8, 1)
    assert step_bound(RING, ring_ag) == 4
    assert str(bandwidth_bound(RING, ring_ag, bandwidth_groups(RING))) == "7/2"


# fast rows of Tables 4 and 5 (docs/methods/sccl.md 6.1/6.2): (topology, collective, C, S, R)
FAST_ROWS = [
    (DGX1, "allgather", 1, 2, 2), (DGX1, "allgather", 2, 3, 3), (DGX1, "allgather", 3, 4, 4),
    (DGX1, "allgather", 2, 2, 3), (DGX1, "allgather", 6, 3, 7), (DGX1, "allgather", 6, 7, 7),
    (DGX1, "broadcast", 2, 2, 2), (DGX1, "broadcast", 6, 3, 3), (DGX1, "broadcast", 12, 4, 4),
    (DGX1, "broadcast", 6, 3, 5), (DGX1, "broadcast", 10, 3, 5),
    (DGX1, "gather", 1, 2, 2), (DGX1, "gather", 2, 3, 3), (DGX1, "gather", 2, 2, 3),
    (DGX1, "alltoall", 8, 3, 3), (DGX1, "alltoall", 8, 2, 3),
    (RING, "allgather", 1, 4, 4), (RING, "allgather", 2, 7, 7), (RING, "allgather", 2, 4, 7),
    (RING, "broadcast", 2, 4, 4), (RING, "broadcast", 4, 5, 5), (RING, "broadcast", 10, 8, 8),
    (RING, "gather", 1, 4, 4), (RING, "gather", 2, 4, 7), (RING, "alltoall", 8, 4, 8),
]


@pytest.mark.parametrize("topology, kind, c, steps, rounds", FAST_ROWS,
                         ids=[f"{t.name}-{k}-{c},{s},{r}" for t, k, c, s, r in FAST_ROWS])
def test_table_rows_are_sat_and_verify(topology, kind, c, steps, rounds):
    result = instance(topology, kind, c, steps, rounds)
    assert result.answer == "sat"
    verify(result.algorithm)
    assert result.algorithm.meta["steps"] == steps and result.algorithm.meta["rounds"] == rounds


@pytest.mark.parametrize("kind, c, steps, rounds, root, expected", [
    ("broadcast", 3, 2, 2, 0, "unsat"), ("broadcast", 7, 3, 3, 0, "unsat"), ("broadcast", 8, 3, 3, 1, "unsat"),
    ("broadcast", 7, 3, 3, 1, "sat"),
    ("allgather", 2, 2, 2, None, "bound"), ("alltoall", 8, 2, 2, None, "bound"),
    ("allgather", 7, 3, 7, None, "bound"), ("allgather", 3, 3, 3, None, "bound"), ("allgather", 1, 1, 1, None, "bound"),
])
def test_unsat_boundaries(kind, c, steps, rounds, root, expected):
    result = instance(DGX1, kind, c, steps, rounds, root=root)
    assert result.answer == expected, result.note


@pytest.mark.parametrize("kind, c, steps, rounds, root", [
    ("allgather", 1, 2, 2, None), ("allgather", 2, 2, 3, None), ("broadcast", 2, 2, 2, 0),
    ("broadcast", 3, 2, 2, 0), ("broadcast", 7, 3, 3, 0), ("broadcast", 7, 3, 3, 1), ("gather", 2, 3, 3, 0),
    ("alltoall", 8, 2, 3, None),
])
@pytest.mark.requires_ortools
def test_z3_and_cpsat_agree(kind, c, steps, rounds, root):
    answers = {backend: instance(DGX1, kind, c, steps, rounds, backend, root=root).answer
               for backend in ("z3", "z3-auto", "cpsat", "race")}
    assert answers["z3"] == answers["cpsat"] == answers["z3-auto"] == answers["race"]


@pytest.mark.parametrize("kind, k", [("reducescatter", 1), ("reduce", 2), ("allreduce", 1)])
def test_combining_collectives_by_duality(kind, k):
    collective = make_collective(kind, 8, k, 0 if kind == "reduce" else None)
    problem = Problem(DGX1, collective, 8e6)
    result = call.synthesize(Sccl(), problem, time_limit=60, seed=0, mode="instance", steps=2,
                               rounds=3 if kind != "reduce" else 2, backend=ENGINE)
    assert result.status in ("feasible", "optimal")
    algorithm = result.algorithms[0]
    verify(algorithm)
    if kind == "allreduce":  # (P*C, 2S, 2R)
        assert (algorithm.meta["sccl_chunks"], algorithm.meta["steps"], algorithm.meta["rounds"]) == (8, 4, 6)
        # the floor's duality: both halves are the one base solve, and the claim is their sum
        halves = algorithm.meta["phases"]
        assert halves[0]["claimed_time"] == halves[1]["claimed_time"] > 0
        assert algorithm.meta["claimed_time"] == halves[0]["claimed_time"] + halves[1]["claimed_time"]


def test_pareto_k0_allgather_reproduces_the_table_frontier():
    problem = Problem(DGX1, make_collective("allgather", 8, 1), 8e6)
    result = call.synthesize(Sccl(), problem, time_limit=120, seed=0, mode="pareto", k=0, backend=ENGINE)
    points = [(a.meta["sccl_chunks"], a.meta["steps"], a.meta["rounds"]) for a in result.algorithms]
    assert points == [(1, 2, 2), (2, 3, 3), (3, 4, 4), (4, 5, 5), (5, 6, 6), (6, 7, 7)]
    assert result.status == "optimal" and "bandwidth bound 7/6 reached" in result.message
    for algorithm in result.algorithms:
        verify(algorithm)


def test_least_steps_mode():
    problem = Problem(DGX1, make_collective("allgather", 8, 2), 8e6)
    result = call.synthesize(Sccl(), problem, time_limit=60, seed=0, mode="least-steps", k=1, backend=ENGINE)
    assert result.status == "optimal" and result.algorithms[0].meta["steps"] == 2


def test_bound_rejection_reports_infeasible_without_solving():
    problem = Problem(DGX1, make_collective("allgather", 8, 3), 8e6)
    result = call.synthesize(Sccl(), problem, time_limit=60, seed=0, mode="instance", steps=3, rounds=3)
    assert result.status == "infeasible" and "bandwidth bound" in result.message
    assert result.stats["calls"][0]["answer"] == "bound"


def test_optimal_when_bounds_prove_it():
    problem = Problem(RING, make_collective("allgather", 8, 2), 8e6)
    result = call.synthesize(Sccl(), problem, time_limit=60, seed=0, mode="instance", steps=4, rounds=7, backend=ENGINE)
    assert result.status == "optimal"


def test_slow_unsat_times_out_under_a_hard_limit(tmp_path, capsys):
    with deadline(30.0):  # a hang guard: without the limit the solver runs for minutes
        code = main(["synth", "sccl", "--topology", "dgx1", "--collective", "broadcast", "--root", "0", "--chunks",
                     "12", "--size", "12MB", "--set", "steps=3", "--set", "rounds=5", "--time-limit", "3s",
                     "-o", str(tmp_path / "b.json")])
    assert code == 4, capsys.readouterr()


def test_parameters_are_checked():
    problem = Problem(DGX1, make_collective("allgather", 8, 1), 8e6)
    with pytest.raises(ValueError, match="needs steps and rounds"):
        call.synthesize(Sccl(), problem, time_limit=5, seed=0)
    with pytest.raises(ValueError, match="backend"):
        call.synthesize(Sccl(), problem, time_limit=5, seed=0, steps=2, rounds=2, backend="gurobi")
    with pytest.raises(ValueError, match="switchless"):
        bandwidth_groups(build("switch:4"))


def test_shared_bus_group_limits_a_node():
    """An extra group capping node 0's total egress at 1 chunk per round makes a 1-step broadcast of
    2 chunks to two neighbours impossible, where the links alone allow it."""
    from workbench.topology import Topology

    star = Topology.create(3, [(0, 1, 0.0, 1e9), (1, 0, 0.0, 1e9), (0, 2, 0.0, 1e9), (2, 0, 0.0, 1e9)])
    collective = make_collective("broadcast", 3, 1, 0)
    free = solve_instance(star, collective, 1e6, 1, 1, 30, "z3")
    assert free.answer == "sat"
    capped = solve_instance(star, collective, 1e6, 1, 1, 30, "z3",
                            groups=bandwidth_groups(star, [([(0, 1), (0, 2)], 1)]))
    assert capped.answer == "unsat"
    assert solve_instance(star, collective, 1e6, 2, 2, 30, "z3",
                          groups=bandwidth_groups(star, [([(0, 1), (0, 2)], 1)])).answer == "sat"


@pytest.mark.requires_ortools
def test_shared_bus_group_limits_a_node_in_cpsat():
    """The same cap on CP-SAT's model: one step is impossible, two are enough."""
    from workbench.topology import Topology

    star = Topology.create(3, [(0, 1, 0.0, 1e9), (1, 0, 0.0, 1e9), (0, 2, 0.0, 1e9), (2, 0, 0.0, 1e9)])
    collective = make_collective("broadcast", 3, 1, 0)
    capped = bandwidth_groups(star, [([(0, 1), (0, 2)], 1)])
    assert solve_instance(star, collective, 1e6, 1, 1, 30, "cpsat").answer == "sat"
    assert solve_instance(star, collective, 1e6, 1, 1, 30, "cpsat", groups=capped).answer == "unsat"
    assert solve_instance(star, collective, 1e6, 2, 2, 30, "cpsat", groups=capped).answer == "sat"


def test_scatter_natively():
    problem = Problem(RING, make_collective("scatter", 8, 1, 0), 8e6)
    result = call.synthesize(Sccl(), problem, time_limit=60, seed=0, mode="least-steps", k=4, backend=ENGINE)
    assert result.status in ("optimal", "feasible")
    verify(result.algorithms[0])


@pytest.mark.requires_ortools
def test_race_keeps_the_first_answer_and_leaves_no_process(monkeypatch):
    from formulations.sccl import race

    monkeypatch.setattr(race, "TINY_TERMS", 0)  # no head start: the two engines race
    result = instance(DGX1, "allgather", 1, 2, 2, "race")
    assert result.answer == "sat" and "race won by" in result.note
    verify(result.algorithm)
    assert multiprocessing.active_children() == []  # the loser was killed and reaped


@pytest.mark.requires_ortools  # without it there is no race to give z3 a head start in
def test_a_tiny_instance_is_answered_by_z3_in_this_process(monkeypatch):
    started = []
    monkeypatch.setattr(multiprocessing, "get_context", lambda *a: started.append(a))  # no process may start
    monkeypatch.delitem(sys.modules, "multiprocessing.connection", raising=False)
    result = instance(DGX1, "allgather", 1, 2, 2, "race")
    assert result.answer == "sat" and "a tiny instance" in result.note and not started
    assert "multiprocessing.connection" not in sys.modules  # the race's machinery was not even imported
    assert result.algorithm.meta["engine"] == "z3-auto"
    verify(result.algorithm)


@pytest.mark.requires_ortools
def test_a_tiny_instance_z3_cannot_answer_in_its_head_start_goes_to_the_race(monkeypatch):
    from formulations.sccl import race

    real, calls = race.solve_instance, []

    def head_start_runs_out(*args, **kwargs):  # the first call (the head start) says unknown
        if not calls:
            calls.append(kwargs["backend"])
            return race.InstanceResult("unknown", 0.01, None, "")
        return real(*args, **kwargs)

    monkeypatch.setattr(race, "solve_instance", head_start_runs_out)
    result = instance(DGX1, "allgather", 1, 2, 2, "race")
    assert calls == ["z3-auto"]
    assert result.answer == "sat" and "race won by" in result.note


@pytest.mark.requires_ortools
def test_race_times_out_as_unknown_and_kills_both_engines():
    # All-to-All (24, 8, 8) on DGX-1: no engine proves it in a fraction of a second
    with deadline(30.0):  # the grace ends it, never the engines' own pace (over a minute: both unknown at 60 s)
        result = instance(DGX1, "alltoall", 24, 8, 8, "race", seconds=0.5)
    assert result.answer == "unknown", result.note
    assert multiprocessing.active_children() == []


def test_race_answers_bound_rejections_without_starting_engines(monkeypatch):
    from formulations.sccl import race

    monkeypatch.setattr(race, "solve_instance", None)  # any engine start would fail
    assert instance(DGX1, "allgather", 3, 3, 3, "race").answer == "bound"


def test_race_without_ortools_is_z3_alone(monkeypatch):
    from formulations.sccl import race

    monkeypatch.setattr(race, "cpsat_available", lambda: False)
    result = instance(DGX1, "broadcast", 3, 2, 2, "race")
    assert result.answer == "unsat" and "z3-auto alone" in result.note


def test_cpsat_available_finds_the_module_without_importing_it(monkeypatch, tmp_path):
    import importlib.util
    import sys

    from formulations.sccl import race

    race.cpsat_available.cache_clear()
    try:
        monkeypatch.delitem(sys.modules, "ortools", raising=False)
        available = race.cpsat_available()
        assert "ortools" not in sys.modules
        # this one imports (the package first, so it is asked only where the package is there)
        assert available is (importlib.util.find_spec("ortools") is not None
                              and importlib.util.find_spec("ortools.sat.python.cp_model") is not None)
        # a package named ortools without CP-SAT in it does not count
        fake = tmp_path / "ortools"
        fake.mkdir()
        (fake / "__init__.py").write_text("")
        race.cpsat_available.cache_clear()
        monkeypatch.setattr(importlib.util, "find_spec", lambda name: _package_spec(name, [str(fake)]))
        assert race.cpsat_available() is False
        # a module object standing in for the package (no spec, as tests insert them) is "not installed"
        race.cpsat_available.cache_clear()
        monkeypatch.undo()
        monkeypatch.setitem(sys.modules, "ortools", types.ModuleType("ortools"))
        assert race.cpsat_available() is False
    finally:
        race.cpsat_available.cache_clear()  # no answer of this test outlives it


def _package_spec(name, locations):
    import importlib.machinery

    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = locations
    return spec


@pytest.mark.requires_ortools
def test_default_backend_is_the_race():
    problem = Problem(DGX1, make_collective("allgather", 8, 1), 8e6)
    result = call.synthesize(Sccl(), problem, time_limit=60, seed=0, steps=2, rounds=2)
    assert result.status in ("optimal", "feasible")
    assert result.algorithms[0].meta["backend"] == "race"
    assert "backend_note" not in result.algorithms[0].meta
    assert "race: z3-auto alone (a tiny instance)" in result.stats["calls"][0]["note"]


def test_without_ortools_the_default_backend_is_z3_and_says_so(monkeypatch):
    from formulations.sccl import race

    monkeypatch.setattr(race, "cpsat_available", lambda: False)
    problem = Problem(DGX1, make_collective("allgather", 8, 2), 8e6)
    result = call.synthesize(Sccl(), problem, time_limit=60, seed=0, mode="least-steps", k=1)
    assert result.status == "optimal"
    meta = result.algorithms[0].meta
    assert (meta["backend"], meta["engine"], meta["backend_requested"]) == ("z3-auto", "z3-auto", "race")
    assert "OR-Tools" in meta["backend_note"] and "pip install collective-workbench[cpsat]" in meta["backend_note"]
    assert all("z3-auto alone (no OR-Tools)" in call["note"] for call in result.stats["calls"]
               if call["answer"] in ("sat", "unsat"))
    verify(result.algorithms[0])


def test_backend_cpsat_without_ortools_is_one_line_before_any_work(monkeypatch, tmp_path, capsys):
    from formulations.sccl import instance as sccl_instance, options
    from workbench.plugin.parameters import ParameterError

    monkeypatch.setattr(options, "cpsat_available", lambda: False)  # what the parameters' check asks
    monkeypatch.setattr(sccl_instance, "_CpSatModel", None)  # a model built anyway would fail otherwise
    problem = Problem(DGX1, make_collective("allgather", 8, 1), 8e6)
    with pytest.raises(ParameterError, match=r"needs OR-Tools.*pip install collective-workbench\[cpsat\]"):
        call.synthesize(Sccl(), problem, time_limit=5, seed=0, steps=2, rounds=2, backend="cpsat")
    out = tmp_path / "a.json"
    code = main(["synth", "sccl", "--topology", "dgx1", "--collective", "allgather", "--size", "1MB",
                 "--set", "steps=2", "--set", "rounds=2", "--set", "backend=cpsat", "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 2 and not out.exists()
    assert captured.err.count("\n") == 1 and "pip install collective-workbench[cpsat]" in captured.err
    assert "synthesizing" not in captured.out + captured.err


def _paper_encoding_by_operators(n, pre, post, groups, steps, rounds):
    """C1-C6 (docs/methods/sccl.md 3.3) written with z3's Python operators: the oracle for the C-API
    builders."""
    import z3

    solver = z3.Solver()
    g = len(pre)
    edges = sorted({pair for pairs, b in groups if b > 0 for pair in pairs})
    time = [[z3.Int(f"t_{c}_{v}") for v in range(n)] for c in range(g)]
    snd = {(u, c, v): z3.Bool(f"s_{u}_{c}_{v}") for c in range(g) for u, v in edges}
    r = [z3.Int(f"r_{s}") for s in range(1, steps + 1)]
    into = {v: [u for u, w in edges if w == v] for v in range(n)}
    for c in range(g):
        for v in range(n):
            t = time[c][v]
            solver.add(t >= 0, t <= steps + 1)
            if v in pre[c]:
                solver.add(t == 0)
            else:
                solver.add(z3.Implies(t <= steps, z3.PbEq([(snd[(u, c, v)], 1) for u in into[v]], 1)
                                      if into[v] else z3.BoolVal(False)))
            if v in post[c]:
                solver.add(t <= steps)
        for u, v in edges:
            solver.add(z3.Implies(snd[(u, c, v)], time[c][u] < time[c][v]))
    for s_index, r_s in enumerate(r):
        solver.add(r_s >= 1)
        for pairs, b in groups:
            terms = [(z3.And(snd[(u, c, v)], time[c][v] == s_index + 1), 1)
                     for c in range(g) for u, v in pairs if (u, c, v) in snd]
            if terms:
                for extra in range(1, rounds - steps + 2):
                    solver.add(z3.Implies(r_s == extra, z3.PbLe(terms, b * extra)))
    solver.add(z3.Sum(r) == rounds)
    return solver


@pytest.mark.parametrize("topology, kind, k, steps, rounds", [
    (DGX1, "allgather", 1, 2, 2), (DGX1, "allgather", 2, 3, 4), (DGX1, "broadcast", 3, 2, 2),
    (DGX1, "gather", 1, 3, 4), (RING, "allgather", 2, 4, 6), (DGX1, "alltoall", 1, 2, 3),
    (DGX1, "allgather", 1, 0, 0), (DGX1, "allgather", 1, 0, 1),  # no steps: C6 is the empty sum
])
def test_the_z3_model_is_the_one_the_operators_write(topology, kind, k, steps, rounds):
    from formulations.sccl.encoding import _Z3Model

    n = topology.num_npus
    collective = make_collective(kind, n, k, 0 if kind in ("broadcast", "gather") else None)
    groups = bandwidth_groups(topology)
    built = _Z3Model(n, list(collective.pre), list(collective.post), groups, steps, rounds, "auto").solver.assertions()
    oracle = _paper_encoding_by_operators(n, list(collective.pre), list(collective.post), groups, steps,
                                          rounds).assertions()
    assert len(built) == len(oracle) > 0
    for i in range(len(oracle)):
        assert built[i].eq(oracle[i]), f"assertion {i}: {built[i]} != {oracle[i]}"


def test_z3_terms_refuse_a_coefficient_ctypes_would_wrap():
    import z3

    from formulations.sccl.z3_terms import Z3Terms

    terms, x = Z3Terms(z3), z3.Bool("x")
    assert terms.pb_le([(x, 1)], 2 ** 31 - 1).eq(z3.PbLe([(x, 1)], 2 ** 31 - 1))
    with pytest.raises(ValueError, match="32-bit"):
        terms.pb_le([(x, 1)], 2 ** 31)
    with pytest.raises(ValueError, match="32-bit"):
        terms.pb_eq([(x, -(2 ** 31) - 1)], 1)
