"""Calling a formulation: the one way the runner, ``workbench synth`` and a Python session do it.

``synthesize(formulation, problem, time_limit=..., seed=..., **params)`` builds the formulation's
options from ``params`` through its ``Options`` declaration (names, types, ranges and choices
checked, defaults filled in; ``ParameterError`` naming the key otherwise), then calls
``formulation.synthesize(problem, time_limit=, seed=, options=, on_incumbent=)``. A formulation
never sees a keyword param and never builds its own options.

A formulation refuses a problem it does not define a schedule for (a collective, a rank count, a
fabric) by raising ``Unsupported`` with the reason; here that becomes an ``error`` result whose
message is the reason, led by the formulation's name, which is what the row says. Any other
exception is a fault and goes on up (the runner's cell reports it with its type).

Provenance (formulation, effective parameters, seed, status, synthesis seconds) is stamped into
saved algorithm files by the runner (``workbench.run.evaluate.provenance``), never here or by a
formulation.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from workbench.plugin.formulation import IncumbentCallback, Unsupported
from workbench.plugin.parameters import RUNNER_KEYS, Options, declared_options
from workbench.plugin.problem import DesignResult, SynthesisResult

__all__ = ["synthesize", "build_options", "refusal_message"]


def build_options(formulation: Any, params: Mapping[str, Any], where: str = "params") -> Options:
    """The formulation's options object from ``params`` (the runner's ``time_limit`` ignored).
    The declarations' file checks (``check=``) ran where a config or ``--set`` was read; a direct
    call meets what the formulation's own reading of the value raises."""
    given = {k: v for k, v in params.items() if k not in RUNNER_KEYS}
    return declared_options(formulation).from_params(given, where, owner=_name(formulation), read_files=False)


def refusal_message(formulation: Any, refusal: Unsupported) -> str:
    """The row's message for a refused problem: the reason, led by the formulation's name."""
    reason = (str(refusal).splitlines() or ["unsupported problem"])[0]
    name = _name(formulation)
    return reason if reason.startswith(name) else f"{name}: {reason}"


def synthesize(formulation: Any, problem: Any, *, time_limit: float, seed: int,
               on_incumbent: IncumbentCallback | None = None, options: Options | None = None,
               **params: Any) -> SynthesisResult | DesignResult:
    """Run ``formulation`` on ``problem`` within ``time_limit`` seconds (module docstring):
    ``options`` as built (``build_options``) or keyword ``params``, never both. Returns what the
    formulation returns, or an ``error`` result naming why it refused the problem."""
    if options is None:
        options = build_options(formulation, params)
    elif params:
        raise TypeError(f"{_name(formulation)}: pass options= or keyword params, not both (got {sorted(params)})")
    started = time.perf_counter()
    try:
        return formulation.synthesize(problem, time_limit=time_limit, seed=seed, options=options,
                                      on_incumbent=on_incumbent)
    except Unsupported as refusal:
        seconds = time.perf_counter() - started
        message = refusal_message(formulation, refusal)
        if getattr(formulation, "kind", "schedule") == "design":
            return DesignResult([], None, None, "error", seconds, message=message)
        return SynthesisResult([], "error", seconds, message=message)


def _name(formulation: Any) -> str:
    name = getattr(formulation, "name", None)
    return name if isinstance(name, str) and name else "formulation"
