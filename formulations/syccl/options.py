"""SyCCL's options: the one declaration of its parameters (``workbench.plugin.parameters``)."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.plugin.parameters import Options, option

__all__ = ["SycclOptions"]


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
    depths: str = option("auto", "pipeline depths (chunks per rank) to try, comma separated ('auto': powers "
                         "of two while a chunk serialises in at least a sixteenth of the smallest alpha, stopping after "
                         "three doublings without a gain)")
    max_transfers: int = option(2_000_000, "skip candidates listing more transfers", minimum=1)
