"""One problem's bounds, solved once per run.

Every cell of one problem (topology, collective, size) measures its schedules against the same
yardstick (``workbench.bounds.problem_bounds``), whose LPs take seconds: All-to-All's alpha-beta LP
takes 11 s on a DGX-1 and 20 s on a 4x4 torus. A run keeps each problem's bounds in its folder,
``bounds/<key>.json``, so the other cells of that problem read them instead of solving again (and
``workbench rebound``, which recomputes with the current code, writes them afresh).

The key is a digest of everything the bounds depend on: the topology document, the collective
without a schedule's chunking, the size, the bound options, ``FORMAT``, the workbench's source files
and the solver libraries' versions (a run resumed after either changed solves again). An entry that cannot be
read (missing, cut short, not ours, too large, not a regular file) is solved again; bounds an LP
time limit cut short are not kept (a later cell, with less load beside it, may prove more); nor is
an entry whose folder cannot be written (read-only, or a Dask worker on another machine, where the
run folder does not exist: nothing is created there). Entries are written atomically, so two cells
of one problem finishing together leave one whole entry.

An entry is checked against what the cell knows: a lower bound is never above a verified
schedule's simulated time (``workbench.bounds.yardstick``), so an entry whose best bound is above
the cell's fastest simulated time (``schedule_time``; an edited or foreign entry) is discarded
with one line on stderr naming it, solved again and rewritten, and the bounds carry
``notes.cache`` saying so. Bounds that are not finite are not kept (an entry holds standard JSON).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from workbench.bounds import Bounds, problem_bounds, unchunked
from workbench.bounds.yardstick import bound_above

__all__ = ["FORMAT", "cache_key", "cached_problem_bounds", "bounds_from_dict"]

FORMAT = "workbench.bounds-cache/3"  # /3: with ``egress``
_NUMBERS = ("injection", "latency", "cut", "flow_lp", "ideal", "optimum", "splitting_cut", "gossip",
            "group_gossip", "two_hop", "egress", "rs_ag_throughput", "alpha_beta")
_MAX_BYTES = 1 << 20  # an entry is a few hundred bytes; anything larger is not ours
_LIBRARIES = ("highspy", "numpy", "scipy", "networkx")
_code_digest: str | None = None


def _code() -> str:
    """A digest of the workbench's source files and the solver libraries' versions (once per process)."""
    global _code_digest
    if _code_digest is None:
        from importlib import metadata

        floor = Path(__file__).resolve().parent.parent
        digest = hashlib.sha256()
        for path in sorted(floor.rglob("*.py")):
            digest.update(str(path.relative_to(floor)).encode() + b"\0")
            try:
                digest.update(path.read_bytes())
            except OSError:
                digest.update(b"unreadable")
        for name in _LIBRARIES:
            try:
                digest.update(f"{name}={metadata.version(name)}".encode())
            except metadata.PackageNotFoundError:
                digest.update(f"{name}=none".encode())
        _code_digest = digest.hexdigest()
    return _code_digest


def cache_key(topology, collective, size_bytes: float, options: dict[str, Any]) -> str:
    """The digest that names one problem's entry (hex, 32 characters)."""
    problem = unchunked(collective).to_dict()
    document = {"format": FORMAT, "code": _code(), "topology": topology.to_dict(), "collective": problem,
                "size_bytes": float(size_bytes), "options": {k: options[k] for k in sorted(options)}}
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def bounds_to_dict(bounds: Bounds) -> dict[str, Any]:
    """The problem's part of ``bounds`` (not ``schedule_time``, which is a cell's)."""
    return {"format": FORMAT, **{k: getattr(bounds, k) for k in _NUMBERS},
            "optimum_exact": bounds.optimum_exact, "notes": dict(bounds.notes)}


def bounds_from_dict(data: Any) -> Bounds | None:
    """``Bounds`` from an entry, or None when the entry is not one this version wrote."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    values: dict[str, Any] = {}
    for key in _NUMBERS:
        value = data.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return None
            value = float(value)
            if not math.isfinite(value) or value < 0:
                return None
        values[key] = value
    if values["injection"] is None or values["latency"] is None:
        return None
    notes = data.get("notes", {})
    if not isinstance(data.get("optimum_exact"), bool) or not isinstance(notes, dict) \
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in notes.items()):
        return None
    return Bounds(**values, optimum_exact=data["optimum_exact"], notes=dict(notes))


def _read(path: Path) -> Bounds | None:
    """The entry at ``path``, or None: opened without following a link and without waiting on a
    FIFO, checked to be a regular file, read to at most ``_MAX_BYTES``."""
    from workbench.util.files import open_regular

    try:
        fd = open_regular(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            text = handle.read(_MAX_BYTES + 1)
        if len(text) > _MAX_BYTES:
            return None
        return bounds_from_dict(json.loads(text))
    except Exception:  # noqa: BLE001 - whatever is wrong with an entry, the bounds are solved again
        return None
    finally:
        os.close(fd)


def cached_problem_bounds(topology, collective, size_bytes: float, folder: str | Path | None, *,
                          refresh: bool = False, schedule_time: float | None = None, **options: Any) -> Bounds:
    """``problem_bounds(topology, collective, size_bytes, **options)``, read from ``folder/bounds/``
    when a cell of the run solved this problem already (``refresh``: solve and write it anew).
    ``folder`` None: solved, not kept. ``schedule_time``: the fastest simulated time of a verified
    schedule of the problem; an entry whose best bound is above it is discarded (module docstring)."""
    if folder is None:
        return problem_bounds(topology, collective, size_bytes, **options)
    path = Path(folder) / "bounds" / f"{cache_key(topology, collective, size_bytes, options)}.json"
    discarded = None
    if not refresh:
        found = _read(path)
        if found is not None and bound_above(found.best, schedule_time):
            discarded = (f"{path}: the cached best bound {found.best:.6g} s is above a verified schedule's "
                         f"simulated time {schedule_time:.6g} s (a lower bound never is): entry discarded, "
                         f"bounds solved again")
            print(discarded, file=sys.stderr)
        elif found is not None:
            return found
    bounds = problem_bounds(topology, collective, size_bytes, **options)
    if not bounds.cut_short and Path(folder).is_dir():
        _write(path, bounds)
    if discarded is not None:  # after the write: the note is this cell's, not the problem's
        bounds.notes["cache"] = discarded
    return bounds


def _write(path: Path, bounds: Bounds) -> None:
    """Keep ``bounds`` at ``path`` (atomically); not kept when the folder cannot take it or a bound
    is not finite (an entry holds standard JSON, and one with an infinity would be refused on reading)."""
    try:
        text = json.dumps(bounds_to_dict(bounds), sort_keys=True, allow_nan=False)
    except ValueError:
        return
    try:
        from workbench.util.files import write_atomic

        path.parent.mkdir(exist_ok=True)  # in the run folder only: never a path of folders elsewhere
        write_atomic(path, text)
    except OSError:
        pass  # not kept: the next cell solves it again
