"""ForestColl's options: the one declaration of its parameters (``workbench.plugin.parameters``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.plugin.parameters import Options, option

__all__ = ["ForestCollOptions", "PACKINGS", "SPLITTINGS"]

# the synthesis's budgets, defined here once: ``estimate`` prices with them and the synthesis imports
# them (this module never imports the synthesis)
LISTING_BUDGET = 4_000_000
PERIODIC_BUDGET = 96_000_000
# a period's expansion where the depth is chosen by size: several depths are written and timed, each
# at ~1 us a transfer (96 million would take minutes apiece at 1,024 GPUs)
SIZED_PERIODIC_BUDGET = 16_000_000
MAX_DEFAULT_PIECES = 1024
PERIODIC_FROM = 200_000
PACKINGS = ("auto", "symmetric", "levels", "fifo")
SPLITTINGS = ("auto", "greedy", "spread", "bulk", "symmetric")


def _flag(value: Any) -> bool | str:
    """A yes/no option that may be left "auto": "auto", True or False."""
    if isinstance(value, str):
        return "auto" if value.lower() == "auto" else value.lower() in ("true", "1", "yes")
    return bool(value)


@dataclass(frozen=True)
class ForestCollOptions(Options):
    """ForestColl's pipeline depth, tree count, transfer budget, splitting, packing and listing."""

    pieces: int | None | str = option(None, "P: pipeline pieces per tree-unit ('auto': 64 x height)",
                                      choices=("auto",), minimum=1)
    k: int | str = option("auto", "trees per root ('auto': the optimal k)", choices=("auto",), minimum=1)
    max_transfers: int = option(4_000_000, "refuse schedules with more transfers (default: 4 million written out, "
                                "96 million in a period's expansion)", minimum=1)
    splitting: str = option("auto", "edge splitting: pair by pair (greedy, spread), a switch at a time (bulk) or a "
                            "switch orbit at a time (symmetric)", choices=SPLITTINGS)
    packing: str = option("auto", "arborescence growth: symmetric (tori, rings, clusters), levels, fifo",
                          choices=PACKINGS)
    cut_through: bool | str = option("auto", "tree edges through switches as one routed transfer",
                                     choices=("auto", "true", "false"))
    periodic: bool | str = option("auto", "write one period and its repeat count (workbench.algorithm/3; 'auto': "
                                  "from 200,000 transfers, 1,000,000 where the depth is chosen by size)",
                                  choices=("auto", "true", "false"))

    def estimate(self, problem: Any) -> list[tuple[str, float]]:
        """The schedule ``pieces`` x ``k`` chunks per rank asks for (a depth left to the formulation:
        as many pieces as ``max_transfers`` allows, at most 1,024), listed
        (``BYTES_PER_LISTED_TRANSFER``) or, where it is written as a period (any kind: a reduction is
        its gather's period reversed), held as a period's expansion (``periodic_bytes``); named by the
        parameter that sets it."""
        from workbench.kit.schedule import SETTLE_MOST, SIZED_BELOW
        from workbench.util import size_guard

        k = 1 if self.trees == "auto" else self.trees
        per_piece = max(problem.transfers(k), 1.0)  # one piece per tree-unit: k chunks per rank
        pinned = self.depth is not None
        repeats = self.periodic_flag is not False
        # "auto" writes a period from PERIODIC_FROM transfers, or past SETTLE_MOST where the depth is
        # chosen by size (the synthesis's rule)
        sized = not pinned and problem.size_bytes < SIZED_BELOW
        large = SETTLE_MOST if sized else PERIODIC_FROM
        pieces = self.depth
        if pieces is None:
            budget = int(self.max_transfers)
            if not self.is_given("max_transfers"):
                budget = (SIZED_PERIODIC_BUDGET if sized else PERIODIC_BUDGET) if repeats else LISTING_BUDGET
            pieces = max(1, min(MAX_DEFAULT_PIECES, int(budget // per_piece)))
        transfers = per_piece * pieces
        if repeats and (self.periodic_flag is True or transfers >= large):
            needed = size_guard.periodic_bytes(pieces, problem.chunks_at(k), per_piece)
        else:
            needed = size_guard.BYTES_PER_LISTED_TRANSFER * transfers
        key = "pieces" if pinned else "k" if self.trees != "auto" else "max_transfers"
        return [(key, needed)]

    @property
    def depth(self) -> int | None:
        """The pinned pipeline depth, None where it is chosen ("auto" or not given)."""
        return None if self.pieces in (None, "auto") else int(self.pieces)

    @property
    def trees(self) -> int | str:
        """``k`` as a number of trees per root, or "auto"."""
        return self.k if self.k == "auto" else int(self.k)

    @property
    def cut_through_flag(self) -> bool | str:
        """``cut_through`` as True, False or "auto"."""
        return _flag(self.cut_through)

    @property
    def periodic_flag(self) -> bool | str:
        """``periodic`` as True, False or "auto"."""
        return _flag(self.periodic)
