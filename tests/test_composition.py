"""Composition by dimensions: a formulation's model on one group per class, translated and pipelined."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.plugin import call
from formulations.baselines import Direct, Ring
from formulations.taccl import Taccl
from formulations.teccl import Teccl
from workbench.checking.simulate import simulate
from workbench.checking.verify import verify
from workbench.plugin.composition import compose
from workbench.model.collective import make_collective
from workbench.plugin.registry import Problem
from workbench.topology import build


def _rule(formulation):
    def solve(sub: Problem, dimension: str):
        return call.synthesize(formulation, sub, time_limit=30, seed=0).algorithms[0]
    return solve


@given(spec=st.sampled_from(["rails:2x4", "rails:3x2", "rails:4x2", "rails:2x3"]),
       kind=st.sampled_from(["allgather", "reducescatter", "allreduce"]), rounds=st.integers(1, 4),
       rule=st.sampled_from([Ring, Direct]))
@settings(max_examples=20, deadline=None)
def test_a_composed_collective_verifies_for_any_rounds(spec, kind, rounds, rule):
    topology = build(spec)
    problem = Problem(topology, make_collective(kind, topology.num_npus, 1), 1 << 20)
    composition = compose(problem, rounds, _rule(rule()))
    assert composition.algorithm is not None, composition.message
    verify(composition.algorithm)
    assert composition.algorithm.collective.kind == kind
    assert composition.algorithm.collective.chunks_per_rank == rounds
    boxes, per_box = (int(x) for x in spec.split(":")[1].split("x"))
    # one rail group and one box group solved per view; every other group reuses the answer
    views = 1 if kind == "allgather" else 2  # a reduction also solves the reversed groups
    assert composition.record["reused"] == views * ((per_box - 1) + (boxes - 1))


def test_rounds_pipeline_the_two_stages():
    topology = build("rails:4x8")
    problem = Problem(topology, make_collective("allgather", 32, 1), 1 << 30)
    one, sixteen = (simulate(compose(problem, r, _rule(Direct())).algorithm).collective_time for r in (1, 16))
    assert sixteen < 0.7 * one  # the box stage of round q runs beside the rail stage of round q + 1


def test_no_composition_without_boxes_and_rails():
    problem = Problem(build("ring:8"), make_collective("allgather", 8, 1), 1 << 20)
    composition = compose(problem, 4, _rule(Ring()))
    assert composition.algorithm is None and "box and rail" in composition.message


@pytest.mark.parametrize("formulation", [Teccl(), Taccl()], ids=["teccl", "taccl"])
def test_solver_formulations_take_symmetry_as_a_parameter(formulation):
    topology = build("rails:2x4")
    problem = Problem(topology, make_collective("allgather", 8, 1), 1 << 20)
    result = call.synthesize(formulation, problem, time_limit=60, seed=0, symmetry="dimensions", rounds=2)
    assert result.status in ("feasible", "timeout")
    algorithm = result.algorithms[0]
    verify(algorithm)
    record = algorithm.meta["symmetry"]
    assert [s["dimension"] for s in record["solved"]] == ["rail", "box"]
    assert [s["gpus"] for s in record["solved"]] == [2, 4]
    assert simulate(algorithm).collective_time == pytest.approx(algorithm.meta["claimed_time"])
