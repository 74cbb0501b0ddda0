"""Refuse oversized requests before they eat memory: an estimate first, then build.

``workbench topology ring:100000000`` once grew to 21 GB before the kernel killed it, and
``--chunks 100000000`` died in a MemoryError. Every command that builds a topology, a collective
or an algorithm first asks ``check`` with an estimate from the request's *numbers* (a builder spec
is read for its sizes, not built; a file for its length), and refuses with one line giving the
estimate and the budget.

The model (bytes, measured on CPython 3.11 and rounded up): a node or link of a built topology
~400 B; the all-pairs tables that descriptions, bounds, routing and the simulator keep ~48 B per
ordered pair of nodes (``workbench topology ring:4096`` peaks at 0.77 GB = 46 B x 4096^2); a
transfer of a schedule with its simulation state ~300 B. The estimate is an upper bound for the
builders (their link counts are bounded from above), so a refusal never blocks a request that
would have fitted by a wide margin, and 40,000-NPU synthesis-only benchmarks, which call the
engines directly, are not affected.

The budget: ``--max-memory`` when given, else ``WORKBENCH_MAX_MEMORY`` (set by the runner for a
cell from ``evaluation.memory_limit``), else 80% of the machine's memory.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

__all__ = ["SizeError", "Estimate", "spec_size", "collective_transfers", "schedule_bytes", "check", "budget", "set_budget", "machine_memory",
           "readable", "BUDGET_ENV", "BYTES_PER_ELEMENT", "BYTES_PER_PAIR", "BYTES_PER_TRANSFER"]

BUDGET_ENV = "WORKBENCH_MAX_MEMORY"
BYTES_PER_ELEMENT = 400  # a built node or link
BYTES_PER_PAIR = 48  # all-pairs routing / distance tables
BYTES_PER_TRANSFER = 300  # a transfer and its simulation state
_OVERRIDE: float | None = None


class SizeError(ValueError):
    """A request whose estimated memory exceeds the budget (exit 2 at the CLI)."""


@dataclass(frozen=True)
class Estimate:
    npus: int
    nodes: int
    links: int

    def bytes(self, transfers: float = 0.0, pairs: bool = True) -> float:
        total = BYTES_PER_ELEMENT * (self.nodes + self.links) + BYTES_PER_TRANSFER * transfers
        return total + (BYTES_PER_PAIR * float(self.nodes) ** 2 if pairs else 0.0)


def machine_memory() -> float:
    """Physical memory in bytes (a generous 16 GiB when the platform does not say)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 16 * 2.0**30


def set_budget(max_bytes: float | None) -> None:
    """``--max-memory``: the budget for this process (None: back to the default)."""
    global _OVERRIDE
    _OVERRIDE = max_bytes


def budget() -> float:
    if _OVERRIDE is not None:
        return _OVERRIDE
    from_env = os.environ.get(BUDGET_ENV)
    if from_env:
        try:
            return float(from_env)
        except ValueError:
            pass
    return 0.8 * machine_memory()


def readable(value: float) -> str:
    """Bytes in words: 1.7 GB, 480 KB, 12,000 TB."""
    for unit, factor in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if value >= factor:
            return f"{value / factor:,.3g} {unit}" if value < 1000 * factor or unit == "TB" else f"{value / factor:,.0f} {unit}"
    return f"{value:.0f} B"


def check(what: str, needed: float) -> None:
    """Raise ``SizeError`` naming ``what`` when ``needed`` bytes exceed the budget."""
    limit = budget()
    if needed > limit:
        raise SizeError(f"{what}: needs an estimated {readable(needed)} of memory, over the {readable(limit)} budget "
                        f"(--max-memory raises it; the estimate counts nodes, links, node pairs and transfers)")


_NUMBER = re.compile(r"\d+")
_DIM = re.compile(r"^([RFSrfs])(\d+)(?:@(\d+))?$")


def spec_size(spec: str) -> Estimate | None:
    """Upper bounds on NPUs, nodes and links of a builder spec, read from its numbers; None for
    specs this reader does not know (the builder's own error then applies)."""
    kind, _, arg = spec.strip().partition(":")
    kind = kind.lower()
    numbers = [int(x) for x in _NUMBER.findall(arg)]
    if kind in ("ring", "uniring", "line") and len(numbers) == 1:
        n = numbers[0]
        return Estimate(n, n, 2 * n)
    if kind == "fc" and len(numbers) == 1:
        n = numbers[0]
        return Estimate(n, n, n * max(n - 1, 0))
    if kind in ("mesh", "torus") and numbers:
        n = math.prod(numbers)
        return Estimate(n, n, 2 * len(numbers) * n)
    if kind == "switch" and numbers:
        n = numbers[0]
        degree = numbers[1] if len(numbers) > 1 else 1
        return Estimate(n, n + 1, 2 * n * degree)
    if kind in ("md", "rfs"):
        tokens = ([f"R{numbers[0]}", f"F{numbers[1]}", f"S{numbers[2]}"] if kind == "rfs" and len(numbers) == 3
                  else arg.split(","))
        sizes, per_npu = [], 0
        for token in tokens:
            match = _DIM.match(token.strip())
            if not match:
                return None
            size = int(match.group(2))
            sizes.append(size)
            per_npu += {"r": 2, "f": max(size - 1, 1), "s": 2 * int(match.group(3) or 1)}[match.group(1).lower()]
        n = math.prod(sizes)
        return Estimate(n, 2 * n, per_npu * n)
    if kind == "dragonfly" and len(numbers) == 2:
        n = numbers[0] * numbers[1]
        return Estimate(n, n, n * numbers[0] + numbers[1] ** 2)
    chassis_kinds = ("ndv2", "ndv2-taccl", "dgx2", "dgx2-taccl", "amd", "ndv2-nic", "ndv2-taccl-nic", "dgx2-nic",
                     "dgx2-taccl-nic", "nvs-ib")
    if kind in chassis_kinds and len(numbers) <= 1:
        k = numbers[0] if numbers else 2
        return Estimate(16 * k, 34 * k + 2, 600 * k + 16 * k * k)
    return None


def collective_transfers(kind: str, npus: int, chunks: int) -> float:
    """Transfers a schedule of this collective needs at least (an upper-bound-sized model)."""
    n = float(npus)
    per_pair = {"allgather": 1, "reducescatter": 1, "alltoall": 1, "allreduce": 2}.get(kind, None)
    if per_pair is not None:
        return per_pair * n * max(n - 1, 1) * chunks
    return n * chunks  # rooted collectives: every chunk reaches (or leaves) every rank once


def schedule_bytes(npus: int, nodes: int, links: int, kinds: list[str], chunks: int) -> float:
    """The estimate for a built topology and the largest schedule of these collectives on it."""
    transfers = max(collective_transfers(kind, npus, chunks) for kind in kinds)
    return Estimate(npus, nodes, links).bytes(transfers)
