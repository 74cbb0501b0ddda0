"""Random valid schedules for property tests, built without any formulation."""

from __future__ import annotations

import random

from workbench.model.algorithm import Algorithm, Transfer
from workbench.model.collective import make_collective
from workbench.topology import Link, Topology


def random_connected_topology(rng: random.Random, n: int, extra: int, switch: bool = False) -> Topology:
    """A strongly connected digraph: a random Hamiltonian cycle plus ``extra`` random links.

    With ``switch=True`` some NPUs also hang off one switch node (id n).
    """
    order = list(range(n))
    rng.shuffle(order)
    links: dict[tuple[int, int], Link] = {}

    def add(u: int, v: int) -> None:
        if u != v and (u, v) not in links:
            links[(u, v)] = Link(u, v, rng.choice([0.0, 0.3e-6, 1e-6]), rng.choice([10e9, 25e9, 50e9]))

    for i in range(n):
        add(order[i], order[(i + 1) % n])
    for _ in range(extra):
        add(rng.randrange(n), rng.randrange(n))
    switches = 0
    if switch:
        members = rng.sample(range(n), k=min(n, rng.randint(2, max(2, n))))
        for m in members:
            bw = rng.choice([25e9, 50e9])
            links[(m, n)] = Link(m, n, 0.25e-6, bw)
            links[(n, m)] = Link(n, m, 0.25e-6, bw)
        switches = 1
    return Topology.create(n, links.values(), switches, "random")


def spread_schedule(rng: random.Random, topology: Topology, kind: str, n: int, k: int = 1,
                    root: int = 0, chunk_bytes: float = 1e5, multi: bool = False) -> Algorithm:
    """A random valid all-gather / broadcast: chunks spread greedily over random links.

    Every (node, chunk) is written at most once and each send depends on the transfer that
    delivered its chunk, so the schedule is valid in every execution order. With ``multi``,
    sends of several chunks over the same link from the same ready state are merged.
    """
    collective = make_collective(kind, n, k, root if kind in ("broadcast",) else None)
    holder_of: dict[tuple[int, int], int] = {}
    for chunk, holders in enumerate(collective.pre):
        for h in holders:
            holder_of[(h, chunk)] = -1
    missing = {(c, r) for c, ranks in enumerate(collective.post) for r in ranks if (r, c) not in holder_of}
    transfers: list[Transfer] = []
    guard = 0
    while missing:
        guard += 1
        assert guard < 100000, "spread did not converge"
        frontier = [(u, c, v) for (u, c) in holder_of for v in topology.out_neighbors(u) if (v, c) not in holder_of]
        u, c, v = rng.choice(frontier)
        chunks = [c]
        if multi:
            for (u2, c2) in list(holder_of):
                if u2 == u and c2 != c and (v, c2) not in holder_of and holder_of[(u, c2)] == holder_of[(u, c)]:
                    chunks.append(c2)
        dep = holder_of[(u, c)]
        tid = len(transfers)
        transfers.append(Transfer(tid, tuple(chunks), u, v, "copy", () if dep < 0 else (dep,)))
        for chunk in chunks:
            holder_of[(v, chunk)] = tid
            missing.discard((chunk, v))
    return Algorithm(topology, collective, chunk_bytes, transfers, {"formulation": "random-spread"})


def random_algorithm(seed: int | random.Random, kind: str, max_ranks: int = 6, switch_chance: float = 0.3) -> Algorithm:
    """A valid random schedule: ``ag`` (All-Gather), ``bc`` (broadcast from 0), ``rs`` (Reduce-Scatter,
    the reversed All-Gather) or ``ar`` (All-Reduce, RS then AG), on 2..``max_ranks`` ranks; the
    gathering kinds may have a switch. ``seed``: a seed, or a ``random.Random`` to draw from
    (hypothesis' ``st.randoms()``, whose draws shrink)."""
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    n = rng.randint(2, max_ranks)
    topo = random_connected_topology(rng, n, extra=rng.randint(0, 2 * n),
                                     switch=rng.random() < switch_chance and kind in ("ag", "bc"))
    k = rng.randint(1, 2)
    if kind == "ag":
        return spread_schedule(rng, topo, "allgather", n, k, multi=rng.random() < 0.5)
    if kind == "bc":
        return spread_schedule(rng, topo, "broadcast", n, k, root=0)
    rs = spread_schedule(rng, topo.reversed(), "allgather", n, k).reverse(topo)
    return rs if kind == "rs" else rs.concat(spread_schedule(rng, topo, "allgather", n, k))
