"""SyCCL's options: the one declaration of its parameters (``workbench.plugin.parameters``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.plugin.parameters import Options, option

__all__ = ["SycclOptions", "MAX_DEPTH", "parse_depths"]

MAX_DEPTH = 1_000_000  # chunks per rank: far beyond any transfer budget (max_transfers)


def parse_depths(value: str | int) -> list[int] | None:
    """The pipeline depths ``depths`` names: None for ``"auto"``, else the positive integers of a
    comma-separated list (``"1,2,4"``) or one integer. ``ValueError`` names what is wrong (checked
    where the parameters are read, so a bad value is one line before anything runs)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"expected 'auto' or depths (chunks per rank) like '1,2,4', got {value!r}")
    if isinstance(value, str) and value.strip() == "auto":
        return None
    parts = [part.strip() for part in str(value).split(",")]
    found = []
    for part in parts:
        if not (part.isascii() and part.isdigit()) or len(part) > 7 or not 1 <= int(part) <= MAX_DEPTH:
            raise ValueError(f"expected 'auto' or depths (chunks per rank, 1 to {MAX_DEPTH}) like '1,2,4', "
                             f"got {value!r}")
        found.append(int(part))
    return found


def _check_depths(value: str | int) -> None:
    parse_depths(value)


@dataclass(frozen=True)
class SycclOptions(Options):
    """Sketch depth and pruning, sub-model size and time, pipeline depths and the transfer budget."""

    max_stages: int = option(3, "most stages (sub-demands in a row) a sketch may have", minimum=1, maximum=4)
    prune_ratio: float = option(3.0, "drop sketches whose bandwidth time is above this multiple of the best",
                                minimum=1.0)
    max_sketches: int = option(4, "most sketches a bandwidth-balanced combination mixes", minimum=1)
    milp_seconds: float = option(20.0, "most seconds for one sub-model (each also gets at most a fifth of "
                                 "what is left)", minimum=0.1)
    max_model_columns: int = option(20_000, "a group's sub-model above this many variables is replaced by "
                                    "direct sends", minimum=100)
    depths: str = option("auto", "pipeline depths (chunks per rank) to try, comma separated, e.g. '1,2,4' or 8 "
                         "('auto': powers of two while a chunk serialises in at least a sixteenth of the smallest "
                         "alpha, stopping after three doublings without a gain)",
                         types=("str", "int"), minimum=1, maximum=MAX_DEPTH, check=_check_depths)
    max_transfers: int = option(2_000_000, "skip candidates listing more transfers", minimum=1)

    def estimate(self, problem: Any) -> list[tuple[str, float]]:
        """The deepest candidate listed: the depths are tried in turn until one would list more than
        ``max_transfers`` (``auto``: up to 1,024 chunks per rank), each a schedule of that many chunks
        per rank (``BYTES_PER_LISTED_TRANSFER``, ``workbench.util.size_guard``); named by ``depths``,
        else ``max_transfers``. ``max_model_columns`` only bounds a group model the fabric sets."""
        from workbench.util import size_guard

        try:
            listed = parse_depths(self.depths)
        except ValueError:  # refused where the parameters are read
            return []
        deepest = 0.0
        for depth in listed if listed is not None else [2 ** i for i in range(11)]:
            transfers = problem.transfers(depth)
            if transfers > self.max_transfers:
                break  # this depth and the ones after it are skipped, unlisted
            deepest = max(deepest, transfers)
        return [("depths" if listed is not None else "max_transfers", size_guard.BYTES_PER_LISTED_TRANSFER * deepest)]
