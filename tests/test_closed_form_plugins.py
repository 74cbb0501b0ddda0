"""Rule-built plug-ins on ``ClosedForm``: the options declaration, and subclasses written for 0.1
(a ``parameters`` tuple, ``build(problem, seed, **params)``) that keep running unchanged."""

import pytest

from formulations.baselines import ring_schedule
from workbench.model.collective import make_collective
from workbench.plugin.closed_form import ClosedForm
from workbench.plugin.parameters import Parameter, ParameterError, check_parameters, declared_parameters
from workbench.plugin.registry import Problem
from workbench.topology import build


class OldStyleRing(ClosedForm):
    """A 0.1 plug-in: a Parameter tuple and its own build taking the params as keywords."""

    name = "old-ring"
    parameters = (Parameter("bidirectional", ("bool",), True, "alternate directions"),)

    def build(self, problem, seed, **params):
        self.seen = dict(params)
        return ring_schedule(problem, **params)


def _problem() -> Problem:
    return Problem(build("ring:4"), make_collective("allgather", 4, 2), 4e6)


def test_an_old_style_closed_form_keeps_its_parameters_and_its_build():
    ring = OldStyleRing()
    assert [p.name for p in declared_parameters(ring)] == ["bidirectional"]
    check_parameters(ring, {"bidirectional": False}, "params")
    with pytest.raises(ParameterError, match="restartz"):
        check_parameters(ring, {"restartz": 1}, "params")
    result = ring.synthesize(_problem(), time_limit=10, seed=0, bidirectional=False)
    assert result.status == "feasible" and ring.seen == {"bidirectional": False}
    with pytest.raises(ValueError, match="unknown parameters"):
        ring.synthesize(_problem(), time_limit=10, seed=0, restartz=1)


def test_a_closed_form_without_declarations_takes_no_parameters():
    class Bare(ClosedForm):
        name = "bare"
        builder = staticmethod(ring_schedule)

    assert declared_parameters(Bare()) == ()
    assert Bare().synthesize(_problem(), time_limit=10, seed=0).status == "feasible"
