"""The greedy link-chunk matching of TACOS (spec 2.4), shared by its two engines.

``greedy_all_gather`` runs one randomised matching on a switchless view and returns a
``MatchResult``. Two engines implement it and give identical results for the same seed:

* ``python_engine``: the reference loop, Python-int bitsets (always available);
* ``compiled_engine``: the same loop compiled with numba over word arrays, with its own
  Mersenne Twister started from ``random.Random(seed)``'s state, so both draw the same numbers.

``engine="auto"`` takes the compiled one where it pays: when numba is already loaded in this
process, or when the run is large enough (``COMPILED_FROM`` deliveries) that loading numba and its
cached machine code (about half a second, once per process) costs less than it saves.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import time
from dataclasses import dataclass
from typing import Any

from workbench.lazy import lazy_module
from workbench.collective import Collective
from workbench.topology import Topology, TopologyError

np = lazy_module("numpy")  # imported on first use (workbench.lazy)

TIE = 1e-15  # seconds; the reference's 1e-9 us tie tolerance
REPLACEMENT_MODES = ("causal", "reference", "off")
ENGINES = ("auto", "compiled", "python")
COMPILED_FROM = 40_000  # deliveries (N (N-1) k for an All-Gather): about 200 NPUs at one chunk each


class OutOfTime(Exception):
    """The run's deadline passed before the matching finished."""


def end_time(t: float, cost: float) -> float:
    """When a transfer started at ``t`` over a link of cost ``cost`` ends, on a femtosecond grid.

    Arrivals closer than the grid are one event, as with the reference's tie tolerance. The
    rounding is plain IEEE arithmetic (round-half-even of ``x * 1e15``, then a division), so the
    compiled engine computes the very same float.
    """
    return round((t + cost) * 1e15) / 1e15


@dataclass
class MatchResult:
    """One greedy run: the claimed time and the useful matches, one array entry per delivery.

    ``src[i] -> dst[i]`` carried ``chunk[i]`` from ``started[i]`` to ``ended[i]``, listed in
    arrival order. Runs that do not record the schedule (``record=False``) have empty arrays.
    """

    claimed_time: float
    src: np.ndarray
    dst: np.ndarray
    chunk: np.ndarray
    started: np.ndarray
    ended: np.ndarray
    deliveries: int
    wasted: int
    events: int
    engine: str

    def __len__(self) -> int:
        return self.deliveries


@dataclass
class Fabric:
    """The view's links and the collective's conditions in array form, for either engine."""

    num_npus: int
    num_chunks: int
    src: list[int]
    dst: list[int]
    cost: list[float]
    in_links: list[list[int]]   # per destination, ascending link index (= ascending source)
    out_nodes: list[list[int]]
    pre: list[frozenset[int]]
    post: list[frozenset[int]]
    deliveries: int             # (chunk, rank) pairs in post and not in pre

    @classmethod
    def of(cls, view: Topology, collective: Collective, chunk_bytes: float) -> "Fabric":
        if view.num_switches:
            raise TopologyError("the TACOS engine needs a switchless view (unwind the switches first)")
        n = view.num_npus
        links = view.links
        in_links: list[list[int]] = [[] for _ in range(n)]
        for e, link in enumerate(links):
            in_links[link.dst].append(e)  # links are sorted by (src, dst): ascending source
        pre, post = list(collective.pre), list(collective.post)
        deliveries = sum(len(needers - holders) for holders, needers in zip(pre, post))
        return cls(n, len(pre), [l.src for l in links], [l.dst for l in links],
                   [l.alpha + chunk_bytes / l.bandwidth for l in links], in_links,
                   [list(view.out_neighbors(u)) for u in range(n)], pre, post, deliveries)


def unreachable(rank: int, chunk: int) -> TopologyError:
    return TopologyError(f"rank {rank} can never receive chunk {chunk}: TACOS sends a chunk only to ranks that "
                         f"need it, so a chunk that must be relayed through other ranks (All-to-All, Scatter on a "
                         f"sparse topology) cannot arrive")


def compiled_available() -> bool:
    return importlib.util.find_spec("numba") is not None


def choose_engine(engine: str, deliveries: int) -> str:
    """The engine that runs: ``engine`` unless it is ``auto`` (see the module docstring)."""
    if engine not in ENGINES:
        raise ValueError(f"tacos: engine must be one of {ENGINES}, got {engine!r}")
    if engine == "compiled":
        if not compiled_available():
            raise ValueError("tacos: engine 'compiled' needs numba (pip install numba), or use engine 'python'")
        return engine
    if engine == "python":
        return engine
    if "numba" in sys.modules or deliveries >= COMPILED_FROM:
        return "compiled" if compiled_available() else "python"
    return "python"


def greedy_all_gather(view: Topology, collective: Collective, chunk_bytes: float, seed: int,
                      replacement: str = "causal", deadline: float = float("inf"), *, engine: str = "auto",
                      record: bool = True) -> MatchResult:
    """One TACOS run for a non-combining collective on a switchless view.

    ``record=False`` keeps only the claimed time and counters, for runs whose schedule would
    not fit in memory (N (N-1) deliveries for an All-Gather).
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


def check_deadline(deadline: float) -> None:
    if time.perf_counter() > deadline:
        raise OutOfTime()


def empty_matches() -> dict[str, Any]:
    return {"src": np.zeros(0, np.int64), "dst": np.zeros(0, np.int64), "chunk": np.zeros(0, np.int64),
            "started": np.zeros(0), "ended": np.zeros(0)}
