"""TACOS's options: the one declaration of its parameters (``workbench.plugin.parameters``)."""

from __future__ import annotations

from dataclasses import dataclass

from formulations.tacos.matching import REPLACEMENT_MODES
from formulations.tacos.engines import ENGINES
from workbench.plugin.parameters import Options, option

__all__ = ["TacosOptions"]


@dataclass(frozen=True)
class TacosOptions(Options):
    """TACOS's search: restarts, the switch view, duplicate arrivals, the engine and the chunking."""

    restarts: int = option(1, "independent randomised runs; the best is kept", minimum=1)
    switch_degree: int | str = option(1, "links a switch serves at once per matching step",
                                      choices=("full", "max"), minimum=1)
    replacement: str = option("causal", "what a duplicate arrival is relabelled to (spec A5)",
                              choices=REPLACEMENT_MODES)
    engine: str = option("auto", "matching engine: compiled (numba) or python; same schedules", choices=ENGINES)
    chunks: str = option("auto", "auto: below 256 MB, the fastest of 1, 2, 4, 8 chunks per NPU where the problem "
                         "has one (from 256 MB on leaf-spine tiers: 1, 2; sizing); given: the problem's",
                         choices=("auto", "given"))

    @property
    def degree(self) -> int | None:
        """The switch degree as a number, None for every link at once ("full", "max")."""
        return None if self.switch_degree in ("full", "max") else int(self.switch_degree)
