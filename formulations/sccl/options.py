"""SCCL's options: the one declaration of its parameters (``workbench.plugin.parameters``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from typing import Any

from workbench.plugin.parameters import Options, option

__all__ = ["ScclOptions", "check_groups", "cpsat_available", "INSTALL_CPSAT"]

_DEFAULT_MAX_CHUNKS = 64
INSTALL_CPSAT = "pip install collective-workbench[cpsat]"  # the optional extra that brings OR-Tools' CP-SAT


@cache
def cpsat_available() -> bool:
    """OR-Tools' CP-SAT is installed: its module is located, nothing imported (not even the
    ``ortools`` package, whose import a tiny instance answered by z3 alone would pay for nothing)."""
    from importlib.machinery import PathFinder
    from importlib.util import find_spec

    try:
        spec = find_spec("ortools")  # a top-level name: located, not imported
    except (ImportError, ValueError):  # ValueError: a module without a spec stands in sys.modules
        return False
    if spec is None or not spec.submodule_search_locations:
        return False
    places = [os.path.join(root, "sat", "python") for root in spec.submodule_search_locations]
    return PathFinder.find_spec("cp_model", places) is not None  # source or compiled, found by path


def check_groups(groups: Any) -> None:
    """``ValueError`` naming the first entry of ``groups`` that is not ``[[[src, dst], ...], b]``
    (integer nodes, a whole number of chunks per round b >= 0); None passes. Checked with the
    parameters, so a malformed ``--set groups=...`` is one line before anything runs."""
    if groups is None:
        return
    if not isinstance(groups, (list, tuple)):
        raise ValueError(f"expected a list of [[[src, dst], ...], bandwidth], got {type(groups).__name__}")

    def integer(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    for i, entry in enumerate(groups):
        if not (isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[0], (list, tuple))):
            raise ValueError(f"[{i}]: expected [[[src, dst], ...], bandwidth], got {str(entry)[:60]}")
        pairs, b = entry
        for j, pair in enumerate(pairs):
            if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and all(map(integer, pair))):
                raise ValueError(f"[{i}][0][{j}]: expected [src, dst] (two node ids), got {str(pair)[:60]}")
        if not (integer(b) and b >= 0):
            raise ValueError(f"[{i}][1]: expected a whole number of chunks per round >= 0, got {str(b)[:60]}")


@dataclass(frozen=True)
class ScclOptions(Options):
    """SCCL's search: the mode, its (S, R) or search bounds, the solver and extra bandwidth groups."""

    mode: str = option("instance", "one (C,S,R) instance, the fewest steps, or the Pareto frontier",
                       choices=("instance", "least-steps", "pareto"))
    steps: int | None = option(None, "S: synchronous steps (instance mode)", minimum=1)
    rounds: int | None = option(None, "R: rounds, bandwidth units over all steps", minimum=1)
    k: int = option(0, "extra rounds beyond the step count searched (least-steps, pareto)", minimum=0)
    backend: str = option("race", "race (CP-SAT and z3-auto in two processes, the first answer wins), z3 "
                          "(QF_LIA, the paper's), z3-auto or cpsat", choices=("race", "z3", "z3-auto", "cpsat"))
    max_steps: int | None = option(None, "largest step count searched", minimum=1)
    max_chunks: int = option(_DEFAULT_MAX_CHUNKS, "largest chunk count searched (pareto)", minimum=1)
    groups: list | None = option(None, "extra bandwidth groups: [[[src, dst], ...], bandwidth]", check=check_groups)
    call_limit: float | None = option(None, "seconds per solver call", minimum=0)

    def estimate(self, problem: Any) -> list[tuple[str, float]]:
        """The largest (C, S, R) instance the mode builds: per step, a term per chunk and link (z3)
        and per chunk and link or node (CP-SAT; the race runs both), ``BYTES_PER_SOLVER_TERM``, and
        z3's case split on a step's rounds, one term per step, chunk, link and round beyond the
        step count, ``BYTES_PER_CASE_TERM`` (figures in ``workbench.util.size_guard``). Named by
        ``steps`` / ``rounds`` for an instance, ``max_steps`` or ``max_chunks`` and ``k`` for a
        search; a search left to its defaults stops at the step bound + 8."""
        from workbench.util import size_guard

        z3 = self.backend in ("race", "z3", "z3-auto")
        cpsat = self.backend in ("race", "cpsat")
        n, links = problem.npus, problem.links
        per_chunk_step = (links if z3 else 0) + (n + links if cpsat else 0)

        def instance(steps: float, extra_rounds: float, chunks: float) -> tuple[float, float]:
            main = size_guard.BYTES_PER_SOLVER_TERM * steps * chunks * per_chunk_step
            case = size_guard.BYTES_PER_CASE_TERM * steps * (max(extra_rounds, 0.0) + 1) * chunks * links if z3 else 0.0
            return main, case

        if self.mode == "instance":
            if self.steps is None or self.rounds is None:
                return []
            main, case = instance(float(self.steps), float(self.rounds) - float(self.steps), problem.num_chunks)
            return [("steps", main), ("rounds", case)]
        steps = float(self.max_steps) if self.max_steps is not None else float(n + 8)
        if self.mode == "least-steps":
            main, case = instance(steps, float(self.k), problem.num_chunks)
            return [("max_steps", main), ("k", case)]
        main, case = instance(steps, float(self.k), problem.chunks_at(self.max_chunks))
        by_steps = self.max_steps is not None and (not self.is_given("max_chunks")
                                                   or steps / (n + 8) >= float(self.max_chunks) / _DEFAULT_MAX_CHUNKS)
        return [("max_steps" if by_steps else "max_chunks", main), ("k", case)]

    def validate(self) -> None:
        """One instance is named by its steps and rounds together; backend cpsat needs OR-Tools
        (the optional ``cpsat`` extra), refused here, before anything is built."""
        if self.mode == "instance" and (self.steps is None or self.rounds is None):
            raise ValueError("sccl: mode 'instance' needs steps and rounds (e.g. --set steps=3 --set rounds=7)")
        if self.backend == "cpsat" and not cpsat_available():
            raise ValueError(f"sccl: backend 'cpsat' needs OR-Tools, which is not installed: {INSTALL_CPSAT} "
                             f"(the default backend, race, runs z3 alone without it)")
