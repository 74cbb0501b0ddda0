import importlib.metadata
from importlib.metadata import EntryPoint
import time

import pytest

from workbench.plugin import call
from workbench.plugin import registry
from workbench.model.collective import make_collective
from workbench.kit.examples import ring_allgather
from workbench.plugin.registry import (DesignResult, FormulationError, Problem, SynthesisResult, get_formulation,
                                register, unregister)
from workbench.kit.solvers import smt_status
from workbench.topology import build


class RingOnly:
    """A tiny schedule formulation used by the registry tests."""

    name = "test-ring"
    kind = "schedule"

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        started = time.perf_counter()
        algo = ring_allgather(problem.collective.num_ranks, problem.chunk_bytes, problem.topology)
        if on_incumbent:
            on_incumbent(algo)
        return SynthesisResult([algo], "feasible", time.perf_counter() - started)


def test_register_and_lookup():
    register(RingOnly)
    try:
        formulation = get_formulation("test-ring")
        problem = Problem(build("uniring:4"), make_collective("allgather", 4), 4e6)
        seen = []
        result = call.synthesize(formulation, problem, time_limit=1.0, seed=0, on_incumbent=seen.append)
        assert result.status == "feasible" and len(seen) == 1 and problem.chunk_bytes == 1e6
    finally:
        unregister("test-ring")
    with pytest.raises(FormulationError, match="unknown formulation 'test-ring'"):
        get_formulation("test-ring")


def test_entry_point_discovery(monkeypatch):
    entry = EntryPoint("plugged", f"{__name__}:RingOnly", registry.ENTRY_POINT_GROUP)
    broken = EntryPoint("broken", "no_such_module:Thing", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [entry, broken])
    registry.refresh()
    try:
        assert "plugged" in registry.available_formulations()
        assert get_formulation("plugged").name == "test-ring"
        with pytest.raises(FormulationError, match="failed to load"):
            get_formulation("broken")
    finally:
        unregister("plugged")
        registry.refresh()


def test_installed_formulations_are_found_by_their_entry_points():
    names = {e.name for e in registry.entry_points(registry.ENTRY_POINT_GROUP)}
    assert {"sccl", "tacos", "teccl", "taccl", "forestcoll", "libra", "ring"} <= names
    sccl = next(e for e in registry.entry_points(registry.ENTRY_POINT_GROUP) if e.name == "sccl")
    assert sccl.load().__name__ == "Sccl"


def test_status_vocabulary():
    with pytest.raises(ValueError):
        SynthesisResult([], "Optimal", 0.0)
    assert DesignResult([1.0], 1.0, 1.0, "optimal", 0.1).status == "optimal"
    assert smt_status("sat") == "feasible" and smt_status("sat", proven_optimal=True) == "optimal"
    assert smt_status("unsat") == "infeasible" and smt_status("unknown") == "timeout"


def test_not_a_formulation():
    with pytest.raises(FormulationError, match="not a formulation"):
        register(object())
