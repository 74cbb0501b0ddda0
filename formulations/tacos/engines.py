"""TACOS's greedy matching, run by one of two engines that give identical results for a seed.

``greedy_all_gather`` runs one randomised matching (note 2.4) on a switchless view and returns a
``MatchResult``:

* ``python_engine``: the reference loop, Python-int bitsets (always available);
* ``compiled_engine``: the same loop compiled with numba over word arrays, with its own
  Mersenne Twister started from ``random.Random(seed)``'s state, so both draw the same numbers.

``engine="auto"`` takes the compiled one where it pays (``workbench.compiled.engines``): when numba is
already loaded in this process, or from ``COMPILED_FROM`` deliveries.
"""

from __future__ import annotations

import random

from formulations.tacos.matching import REPLACEMENT_MODES, Fabric, MatchResult
from workbench.model.collective import Collective
from workbench.compiled.engines import ENGINES, choose_engine as _choose
from workbench.topology import Topology

__all__ = ["ENGINES", "COMPILED_FROM", "choose_engine", "greedy_all_gather"]

COMPILED_FROM = 40_000  # deliveries (N (N-1) k for an All-Gather): about 200 NPUs at one chunk each


def choose_engine(engine: str, deliveries: int) -> str:
    """The engine that runs: ``engine`` unless it is ``auto`` (``workbench.compiled.engines``)."""
    return _choose(engine, deliveries, COMPILED_FROM, "tacos")


def greedy_all_gather(view: Topology, collective: Collective, chunk_bytes: float, seed: int,
                      replacement: str = "causal", deadline: float = float("inf"), *, engine: str = "auto",
                      record: bool = True) -> MatchResult:
    """One TACOS run for a non-combining collective on a switchless view.

    ``record=False`` keeps only the claimed time and counters, for runs whose schedule would
    not fit in memory (N (N-1) deliveries for an All-Gather). ``deadline`` is a
    ``time.perf_counter`` time (``Deadline.at``): the compiled loop compares it itself.
    """
    if replacement not in REPLACEMENT_MODES:
        raise ValueError(f"tacos: replacement must be one of {REPLACEMENT_MODES}, got {replacement!r}")
    fabric = Fabric.of(view, collective, chunk_bytes)
    rng = random.Random(seed)
    if choose_engine(engine, fabric.deliveries) == "compiled":
        from formulations.tacos.compiled_engine import run_compiled
        return run_compiled(fabric, rng, replacement, deadline, record)
    from formulations.tacos.python_engine import run_python
    return run_python(fabric, rng, replacement, deadline, record)

