"""The two-level formulation's options: the one declaration of its parameters (``workbench.plugin.parameters``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from formulations.two_level.exchange import EXCHANGES
from workbench.plugin.parameters import Options, option

__all__ = ["TwoLevelOptions", "PERIODIC_FROM"]

PERIODIC_FROM = 200_000  # transfers of the expansion from which "auto" writes one period (workbench.algorithm/3)


@dataclass(frozen=True)
class TwoLevelOptions(Options):
    """The exchanges, the pipeline's pieces, the transfer budget that bounds them, how the file is written."""

    box: str = option("auto", "the exchange inside each box ('auto': the cost model's)", choices=("auto", *EXCHANGES))
    rail: str = option("auto", "the exchange along each rail of a leaf group ('auto': the cost model's)",
                       choices=("auto", *EXCHANGES))
    pieces: int | str = option("auto", "P: pieces the buffer is cut into and pipelined through the stages ('auto': "
                               "the cost model's, within max_transfers)",
                               choices=("auto",), minimum=1)
    max_transfers: int = option(6_000_000, "transfers of the whole schedule (every piece) 'auto' pieces stay within",
                                minimum=1)
    tolerance: float = option(0.005, "'auto' choices: the relative loss in the cost model's time that a choice "
                              "with fewer transfers may cost", minimum=0.0)
    periodic: str = option("auto", "write one period and its repeat count (workbench.algorithm/3; 'auto': from "
                           "200,000 transfers)", choices=("auto", "true", "false"))

    @property
    def depth(self) -> int | None:
        """The pinned piece count, None where the cost model chooses it."""
        return None if self.pieces == "auto" else int(self.pieces)

    def fixed(self) -> dict[str, str | int]:
        """The choices given, by name (``box``, ``rail``, ``pieces``), for ``cost.choose``."""
        return {k: v for k, v in (("box", self.box), ("rail", self.rail), ("pieces", self.pieces)) if v != "auto"}

    def estimate(self, problem: Any) -> list[tuple[str, float]]:
        """What pinned ``pieces`` ask for: the expansion as the verifier and simulator hold it
        (``periodic_bytes``), at about one transfer per rank and stage message (G + B a rank and
        stage is an upper bound on the messages of a direct exchange over boxes and rails)."""
        from workbench.util import size_guard

        if self.depth is None:
            return []
        per_piece = 4.0 * problem.npus * (problem.npus ** 0.5 + 8)  # 6 stages, about sqrt(N) + G messages each
        return [("pieces", size_guard.periodic_bytes(self.depth, problem.chunks_at(1), per_piece))]
