"""Hypothesis strategies that draw the inputs themselves (so a failure shrinks to a small fabric
and collective), shared by the property tests."""

from __future__ import annotations

from hypothesis import strategies as st

from workbench.model.collective import make_collective
from workbench.plugin.registry import Problem
from workbench.topology import Link, Topology

ALPHAS = (0.0, 0.3e-6, 1e-6)
BANDWIDTHS = (10e9, 25e9, 50e9)
ROOTED = ("broadcast", "reduce", "gather", "scatter")


@st.composite
def fabrics(draw, min_npus: int = 2, max_npus: int = 7, npus: st.SearchStrategy[int] | None = None,
            switch: bool | None = None) -> Topology:
    """A strongly connected fabric: a drawn cycle through every NPU, up to 2N more drawn links, and
    (``switch`` None: maybe, True: always) one switch that some NPUs hang off both ways."""
    n = draw(npus if npus is not None else st.integers(min_npus, max_npus))
    cost = st.tuples(st.sampled_from(ALPHAS), st.sampled_from(BANDWIDTHS))
    order = draw(st.permutations(list(range(n))))
    links: dict[tuple[int, int], Link] = {}
    for i in range(n):
        u, v = order[i], order[(i + 1) % n]
        if u != v:
            links[(u, v)] = Link(u, v, *draw(cost))
    for u, v, (alpha, bandwidth) in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), cost),
                                                  max_size=2 * n)):
        if u != v:
            links.setdefault((u, v), Link(u, v, alpha, bandwidth))
    switches = 0
    if draw(st.booleans()) if switch is None else switch:
        members = draw(st.lists(st.integers(0, n - 1), min_size=min(2, n), max_size=n, unique=True))
        for m in members:
            bandwidth = draw(st.sampled_from((25e9, 50e9)))
            links[(m, n)] = Link(m, n, 0.25e-6, bandwidth)
            links[(n, m)] = Link(n, m, 0.25e-6, bandwidth)
        switches = 1
    return Topology.create(n, links.values(), switches, "drawn")


@st.composite
def problems(draw, kinds: tuple[str, ...], max_chunks: int = 2, bytes_per_chunk: float = 1e6,
             **fabric: object) -> Problem:
    """A drawn fabric (``fabrics(**fabric)``) and collective: kind, chunks per rank, root."""
    topology = draw(fabrics(**fabric))
    n = topology.num_npus
    kind = draw(st.sampled_from(kinds))
    k = draw(st.integers(1, max_chunks))
    root = draw(st.integers(0, n - 1)) if kind in ROOTED else None
    return Problem(topology, make_collective(kind, n, k, root), bytes_per_chunk * n * k)
