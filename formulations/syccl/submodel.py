"""A group's sub-schedule (SyCCL section 5.1): one small epoch MILP per isomorphism class, on HiGHS.

The sub-demand of an ``all`` stage is a group broadcast: every group GPU sends what it holds to
every other. By collective symmetry the model is written for local GPU 0's piece only; the other
GPUs run its image under the group's translations (``workbench.kit.decomposition.GroupFabric``),
and the capacity rows count every translated copy on every link. Time is cut into epochs of
``tau`` seconds (at least one piece's serialisation on the group's slowest GPU link plus its
per-message overhead, and at least a quarter of the shortest path's alpha, so latency stays a
few epochs), a link carries ``cap_e`` pieces per epoch, and a send on path ``a -> b`` arrives
``1 + L_ab`` epochs after it starts (``L_ab``: the path's alpha in epochs, rounded up): the
model is alpha-aware, as the paper's (which counts latency in epochs too).

Symbols (the paper's model, as far as it is public, and our names):

=============================  ===============================================================
``x_{a,b,t}`` (send)           ``send[a, b, t]``: binary, local GPU ``a`` sends the piece to ``b``
                               in epoch ``t``
``holds(a, t)``                ``a == 0`` or a send to ``a`` arrived by epoch ``t``
``C_e`` (link capacity)        ``cap_e`` pieces per epoch
``T`` (makespan)               ``finish``: the last arrival, in epochs (minimised)
=============================  ===============================================================

Rows: every GPU other than 0 receives the piece once; a GPU sends only what it holds (an arrival
``1 + L`` epochs after its send); for every link ``e`` and epoch ``t``, the sends of all
translated copies crossing ``e`` are at most ``cap_e`` (``m_e(a, b)``: how many translations put
``e`` on the path of ``a -> b``); ``finish`` is at least every arrival. Direct sends (GPU 0 to
everyone, ``cap`` per epoch) are feasible and are the MIP start. A group whose model would
exceed ``max_columns`` gets those direct sends without a model (``status`` ``direct``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from workbench.kit.decomposition import GroupFabric
from workbench.kit.milp import MilpModel

__all__ = ["Pattern", "broadcast_pattern"]


@dataclass(frozen=True)
class Pattern:
    """A group broadcast from local GPU 0: ``sends`` (a, b, epoch), ``arrival[b]`` in epochs, the
    epoch length ``tau`` (s), and how it was found."""

    sends: tuple[tuple[int, int, int], ...]
    arrival: dict[int, int]
    tau: float
    status: str
    stats: dict[str, Any] = field(default_factory=dict)


def broadcast_pattern(fabric: GroupFabric, piece_bytes: float, time_limit: float, max_columns: int,
                      seed: int = 0) -> Pattern:
    """The fastest group broadcast of one piece from local GPU 0 with every GPU doing the same
    (module docstring)."""
    sub, g = fabric.topology, fabric.size
    paths = {(a, b): _path_links(sub, a, b) for a in range(g) for b in range(g) if a != b}
    serial = max(piece_bytes / sub.links[l].bandwidth + sub.links[l].overhead for p in paths.values() for l in p)
    alpha = {pair: sum(sub.links[l].alpha for l in p) for pair, p in paths.items()}
    tau = max(serial, min(alpha.values()) / 4)
    latency = {pair: math.ceil(a / tau - 1e-9) for pair, a in alpha.items()}
    capacity = [max(1, math.floor(tau / (piece_bytes / l.bandwidth + l.overhead) + 1e-9)) for l in sub.links]
    per_epoch = min(capacity[l] for p in paths.values() for l in p)
    horizon = math.ceil((g - 1) / per_epoch) + max(latency.values()) + 1
    columns = g * (g - 1) * horizon
    direct = _direct(g, per_epoch)
    if columns > max_columns:
        return _pattern(direct, latency, tau, "direct", {"columns": columns, "max_columns": max_columns})
    multiplicity = _multiplicity(fabric, paths)
    model = MilpModel("syccl-group-broadcast")
    send = {(a, b, t): model.add_binary() for a in range(g) for b in range(1, g) if a != b for t in range(horizon)}
    finish = model.add_var(0.0, cost=1.0)
    for b in range(1, g):  # b receives the piece once
        cols = [send[a, b, t] for a in range(g) if a != b for t in range(horizon)]
        model.add_row(cols, [1.0] * len(cols), 1.0, 1.0)
        arrivals = [(send[a, b, t], t + 1 + latency[a, b]) for a in range(g) if a != b for t in range(horizon)]
        model.add_row([c for c, _ in arrivals] + [finish], [float(v) for _, v in arrivals] + [-1.0], upper=0.0)
    for (a, b, t), col in send.items():  # a sends only what has arrived
        if a == 0:
            continue
        fed = [send[c, a, s] for c in range(g) if c != a for s in range(horizon) if s + 1 + latency[c, a] <= t]
        model.add_row([col] + fed, [1.0] + [-1.0] * len(fed), upper=0.0)
    for link, uses in multiplicity.items():  # every translated copy on the link, per epoch
        for t in range(horizon):
            model.add_row([send[a, b, t] for (a, b) in uses if b != 0],
                          [float(m) for (a, b), m in uses.items() if b != 0], upper=float(capacity[link]), dedupe=True)
    start = [0.0] * model.num_cols
    for a, b, t in direct:
        start[send[a, b, t]] = 1.0
    start[finish] = float(max(t + 1 + latency[a, b] for a, b, t in direct))
    outcome = model.solve(time_limit=max(time_limit, 0.5), seed=seed, start=start)
    stats = {"columns": model.num_cols, "rows": model.num_rows, "seconds": round(outcome.seconds, 3),
             "objective_epochs": outcome.objective, "bound_epochs": outcome.bound}
    if not outcome.has_solution:
        return _pattern(direct, latency, tau, outcome.status, stats)
    chosen = [key for key, col in send.items() if outcome.value(col) > 0.5]
    return _pattern(chosen, latency, tau, outcome.status, stats)


def _direct(g: int, per_epoch: int) -> list[tuple[int, int, int]]:
    """GPU 0 sends to 1, 2, ... in order, ``per_epoch`` a epoch."""
    return [(0, b, (b - 1) // per_epoch) for b in range(1, g)]


def _pattern(sends, latency, tau: float, status: str, stats: dict) -> Pattern:
    ordered = tuple(sorted(sends, key=lambda s: (s[2], s[0], s[1])))
    arrival = {b: t + 1 + latency[a, b] for a, b, t in ordered}
    return Pattern(ordered, arrival, tau, status, stats)


def _path_links(sub, a: int, b: int) -> tuple[int, ...]:
    """The link indices of the route ``a -> b`` the simulator takes in the group's fabric."""
    path = sub.route(a, b)
    return tuple(sub.link_index(u, v) for u, v in zip(path, path[1:]))


def _multiplicity(fabric: GroupFabric, paths: dict) -> dict[int, dict[tuple[int, int], int]]:
    """Per link, per pair ``(a, b)``: how many of the group's translations put the link on the
    image of the path ``a -> b`` (the load the translated copies add there)."""
    sub, table = fabric.topology, fabric.translations
    index = {(l.src, l.dst): i for i, l in enumerate(sub.links)}
    out: dict[int, dict[tuple[int, int], int]] = {}
    for pair, links in paths.items():
        for row in table:
            for l in links:
                link = sub.links[l]
                image = index[(int(row[link.src]), int(row[link.dst]))]
                uses = out.setdefault(image, {})
                uses[pair] = uses.get(pair, 0) + 1
    return out
