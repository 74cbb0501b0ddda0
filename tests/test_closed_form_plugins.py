"""Rule-built plug-ins on ``ClosedForm``: one without an options declaration takes no parameters."""

import pytest

from workbench.plugin import call
from formulations.baselines import ring_schedule
from workbench.model.collective import make_collective
from workbench.plugin.closed_form import ClosedForm
from workbench.plugin.parameters import ParameterError, check_parameters, declared_parameters
from workbench.plugin.registry import Problem
from workbench.topology import build


def _problem() -> Problem:
    return Problem(build("ring:4"), make_collective("allgather", 4, 2), 4e6)


def test_a_closed_form_without_declarations_takes_no_parameters():
    class Bare(ClosedForm):
        name = "bare"
        builder = staticmethod(ring_schedule)

    assert declared_parameters(Bare()) == ()
    assert call.synthesize(Bare(), _problem(), time_limit=10, seed=0).status == "feasible"
    with pytest.raises(ParameterError, match="bare has no parameter 'restartz' \\(accepted: none\\)"):
        check_parameters(Bare(), {"restartz": 1}, "params")
    with pytest.raises(ParameterError, match="restartz"):
        call.synthesize(Bare(), _problem(), time_limit=10, seed=0, restartz=1)
