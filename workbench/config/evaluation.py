"""How a cell's algorithms are evaluated: the simulation model, the bound LP, what is saved, the
limits of the evaluation. Parsed from a config's ``evaluation:`` section (``config.experiment``)
or set by ``workbench synth``; read by the cell (``run.evaluate``) and its monitor."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.checking.simulate import DEFAULT_MODEL

__all__ = ["Evaluation"]


@dataclass(frozen=True)
class Evaluation:
    link_model: str = DEFAULT_MODEL["link_model"]
    order: str = DEFAULT_MODEL["order"]
    switch_model: str = DEFAULT_MODEL["switch_model"]
    save_algorithms: bool = False  # write each algorithm file beside the run's rows
    lp_bound: bool = True  # the multi-commodity flow LP among the bounds
    memory_limit: float | None = None  # bytes of address space for the cell process
    evaluation_time_limit: float = 600.0  # seconds for verifying, simulating and bounding

    @property
    def simulation(self) -> dict[str, str]:
        """The keyword arguments of ``workbench.checking.simulate.simulate``."""
        return {key: getattr(self, key) for key in DEFAULT_MODEL}
