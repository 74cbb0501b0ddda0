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
cell from ``evaluation.memory_limit``), else 80% of the machine's memory or of what the process's
own limits leave it (``ulimit -v`` less what is mapped, a cgroup's ``memory.max`` less its use),
whichever is smaller.

Files declare sizes too, and a 4 KB XML with ``ngpus="2000000000"`` once grew to 23.5 GB. Every
reader of such a file (``interpret``, ``import``, ``export``'s check, ``synth --demand``, ``run``)
asks ``check_declared`` with one estimate per declared field before it builds anything, and the
refusal names the field whose part is the largest (``big.xml: <algo> ngpus=2000000000 ...``). The
per-unit figures (CPython 3.11, measured with tracemalloc on exported files, rounded up):

* ``BYTES_PER_SLOT`` 320: a (rank, chunk) pair of a collective's pre- or postcondition as the
  interpreters lay it out (buffer layout, initial values, masks, the outputs checked), or a declared
  buffer slot (``i_chunks``, ``o_chunks``, ``s_chunks``; a plan's ``*_chunks``) a run may fill; the
  pairs of a collective are ``collective_pairs`` (All-Gather over n ranks with k chunks per rank:
  n k (1 + n));
* ``BYTES_PER_STEP`` 1,500: an XML ``<step>`` or a plan operation, parsed, in the happens-before
  analysis and in a run (measured 1.1-1.3 KB); ``BYTES_PER_ACCESS`` 200: one slot a step touches
  (``cnt``, a plan buffer's ``size``), as the race analysis records it (measured 145 B);
* ``BYTES_PER_TEXT`` 20: a byte of an XML or plan, parsed and interpreted (measured 10 B per byte for
  the parse, 17 for the whole check), asked before the text is parsed;
* a ``--demand`` chunk: its pre and post sets (2 slots) and at least one transfer; ``--instances``:
  every transfer again per instance, with its two XML steps, and the finer collective's pairs;
* a periodic algorithm file (``workbench.algorithm/3``) declares ``period.repeat`` pieces of its
  collective and template: ``BYTES_PER_PIECE_CHUNK`` 64 per chunk of the whole collective and
  ``BYTES_PER_PIECE_TRANSFER`` 120 per transfer of the expansion (its simulated start and end and
  the occupancy of its links, held as arrays; measured 100 B on a 32-GPU forest), asked before the
  whole collective is built (``periodic_bytes``);
* every file is sized by its length before a byte of it is read (``workbench.util.safe_load.read_bytes``):
  ``BYTES_PER_PARSED_BYTE`` 30 per byte of JSON, XML or rows (the parse measured 9 B per byte, the
  built objects the rest), ``BYTES_PER_YAML_BYTE`` 130 per byte of YAML (PyYAML's safe loader,
  measured 127 B per byte of a topology file), so a 5 GB sparse file is refused in well under a
  second whatever it claims inside;
* ``BYTES_PER_CELL`` 4,000: an experiment cell as a run holds it (the cell and its id measured
  ~470 B; its request, progress entry and result row on top);
* a topology file's node and link lists count as a built topology's nodes, links and node pairs
  (``Estimate``), and ``bounds --chunks`` / ``--ranks`` as ``synth --chunks`` (``schedule_bytes``).

Counts are capped as well, where time runs away before memory does: a grid of more than
``MAX_CELLS`` (10^6) cells is refused naming ``repeats`` / ``seeds`` or the grid key that makes it
(``check_cells``), and ``interpret --schedules`` is refused when schedules x steps exceeds
``MAX_STEP_RUNS`` (10^8 interpreted steps, about two hours at the ~15,000 steps a second a random
schedule runs; ``check_runs``). The runs themselves take no more memory than one run: each is made
and dropped in turn.

Formulation parameters that scale the work are priced too, before a cell starts: ``workbench synth
--set`` and an experiment's ``params:`` are asked, on the problem's numbers (``ProblemSize``), what
the formulation's declaration estimates (``Options.estimate``, called by
``workbench.plugin.parameters.price_parameters``), and a refusal names the parameter
(``--set chunks=1000000000: needs an estimated ...``). Only the parameters given are priced; a
formulation's defaults are its own business. The figures (CPython 3.11; tracemalloc where the memory
is Python's, the resident size where a solver's own):

* ``BYTES_PER_LISTED_TRANSFER`` 900: a transfer the collective needs at least (one per chunk and
  destination, ``collective_transfers``) as a formulation lists, re-lists and simulates it, hops
  and share of the collective included (multipath measured 900 B per piece and rank pair on ring:4
  All-to-All at 256-1,024 pieces, 680 B per written transfer; forestcoll 860 B per chunk and
  destination at 4,096 pieces written out, 640 B per written transfer); what a parameter that sets
  the chunks per rank costs (multipath ``chunks``, forestcoll ``pieces`` x ``k``, syccl ``depths``,
  teccl ``lp_subchunks``, the composed ``rounds`` of teccl and taccl); a forest written as a period
  is priced as a periodic file (``periodic_bytes``). Longer paths write more transfers: these
  prices are floors, so a refusal is certain, a pass no promise;
* ``BYTES_PER_EPOCH_COLUMN`` 700: a (commodity, link or NPU, epoch) column of a time-expanded model
  with its rows (TE-CCL's MILP measured 510-630 B on ring:4 and switch:4 at 100-1,600 epochs): teccl
  ``epochs`` (and ``round_epochs`` for A*) times the collective's chunks (the MILP) or its ranks (the
  LP's commodities) times the links and nodes;
* ``BYTES_PER_SOLVER_TERM`` 800: a (step, chunk, link or node) term of SCCL's encodings (z3 measured
  750 B per step, chunk and link, CP-SAT 500 B per step, chunk and link or node; resident size, the
  race runs both) and ``BYTES_PER_CASE_TERM`` 130 per step, chunk, link and round of z3's case split
  on a step's rounds (measured 125 B): sccl ``steps`` / ``max_steps`` and ``rounds`` / ``k``,
  ``max_chunks`` for the largest instance a search may build;
* ``BYTES_PER_THREAD`` 16,000: a solver thread (HiGHS measured 16 KB resident a thread at 1,024;
  ``threads`` of teccl and taccl).

A periodic file's ``period.repeat`` is priced again where it is written out in full: an MSCCL++ plan
lists every operation (``workbench export --format mscclpp``; MSCCL XML loops one period and is not
expanded), so ``BYTES_PER_EXPORTED_TRANSFER`` 8,000 per transfer of the expansion (the expanded
transfer, its plan operations, the plan's JSON text and the interpreter's parse and run of it;
measured 6.1-7 KB on ring All-Gathers of 2 and 4 GPUs) and the whole collective's layout are asked
before the period is expanded or verified (``workbench.mscclpp.export.check_expansion``).

Caps (``max_transfers``, ``max_model_columns``, ``buffer_limit``, ``max_contig``) only bound work the
problem sets, and counts that cost time, not memory (``restarts``, ``max_sketches``, ``prune_ratio``),
are bounded by the cell's time limit; a cap that lets a parameter grow (forestcoll's ``max_transfers``
with ``pieces`` left to it) is priced at the schedule it allows.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

__all__ = ["SizeError", "Estimate", "collective_transfers", "schedule_bytes", "check", "budget", "set_budget", "machine_memory",
           "readable", "BUDGET_ENV", "BYTES_PER_ELEMENT", "BYTES_PER_PAIR", "BYTES_PER_TRANSFER", "BYTES_PER_SLOT",
           "BYTES_PER_STEP", "BYTES_PER_ACCESS", "BYTES_PER_TEXT", "BYTES_PER_PARSED_BYTE", "BYTES_PER_YAML_BYTE",
           "BYTES_PER_CELL", "MAX_CELLS", "MAX_STEP_RUNS",
           "process_memory_limit", "as_float", "shown", "collective_pairs", "check_declared", "check_cells", "check_runs", "demand_bytes",
           "instances_bytes", "periodic_bytes", "BYTES_PER_PIECE_CHUNK", "BYTES_PER_PIECE_TRANSFER"]

BUDGET_ENV = "WORKBENCH_MAX_MEMORY"
BYTES_PER_ELEMENT = 400  # a built node or link
BYTES_PER_PAIR = 48  # all-pairs routing / distance tables
BYTES_PER_TRANSFER = 300  # a transfer and its simulation state
BYTES_PER_SLOT = 320  # a (rank, chunk) pair of a collective's layout, or a declared buffer slot a run fills
BYTES_PER_STEP = 1_500  # an XML step or a plan operation: parsed, analysed for races, run
BYTES_PER_ACCESS = 200  # one slot a step touches, in the race analysis
BYTES_PER_TEXT = 20  # a byte of an XML or plan, parsed and interpreted
BYTES_PER_PARSED_BYTE = 30  # a byte of a JSON file (or XML, rows), parsed and built into what it describes
BYTES_PER_YAML_BYTE = 130  # a byte of a YAML file, parsed by PyYAML's safe loader (measured 127 B)
BYTES_PER_CELL = 4_000  # an experiment cell before it runs (the cell, its id, request and row)
BYTES_PER_PIECE_CHUNK = 64  # a chunk of a periodic schedule's whole collective (its pre and post entries)
BYTES_PER_PIECE_TRANSFER = 120  # a transfer of a periodic schedule's expansion: its simulated times and link use
MAX_CELLS = 1_000_000  # cells in one grid: more is a typo (repeats: 10000000), not a study
MAX_STEP_RUNS = 10**8  # schedules x steps one interpret may run (~15,000 steps a second: about two hours)
_OVERRIDE: float | None = None


class SizeError(ValueError):
    """A request whose estimated memory exceeds the budget (exit 2 at the CLI)."""


@dataclass(frozen=True)
class Estimate:
    """Upper bounds on a topology's NPUs, nodes and links, before it is built."""

    npus: int
    nodes: int
    links: int

    def bytes(self, transfers: float = 0.0, pairs: bool = True) -> float:
        """Memory for the nodes and links, ``transfers`` transfers and (``pairs``) the all-pairs tables."""
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
    """The memory budget in bytes: ``--max-memory``, else ``WORKBENCH_MAX_MEMORY``, else 80% of the
    machine's memory or of the process's own limit (``process_memory_limit``), the smaller."""
    if _OVERRIDE is not None:
        return _OVERRIDE
    from_env = os.environ.get(BUDGET_ENV)
    if from_env:
        try:
            return float(from_env)
        except ValueError:
            pass
    limit = process_memory_limit()
    return 0.8 * (machine_memory() if limit is None else min(machine_memory(), limit))


def process_memory_limit() -> float | None:
    """What this process may still take by its own limits, in bytes, or None when it has none: the
    address-space limit (``ulimit -v``, ``RLIMIT_AS``) less what is mapped already, and a cgroup's
    ``memory.max`` less its use. A guard that knew only the machine's memory would let a 16 GB
    request through under a 6 GB cap, to die there."""
    limits = []
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            limits.append(float(soft) - _status_kb("VmSize") * 1024.0)
    except (ImportError, ValueError, OSError):
        pass
    cgroup = _cgroup_room()
    if cgroup is not None:
        limits.append(cgroup)
    return max(min(limits), 0.0) if limits else None


def _status_kb(field: str) -> float:
    """A ``kB`` field of /proc/self/status (0 where there is none)."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _cgroup_room() -> float | None:
    """The cgroup (v2) memory limit less its current use, or None without one."""
    try:
        with open("/sys/fs/cgroup/memory.max") as handle:
            text = handle.read().strip()
        if text == "max":
            return None
        with open("/sys/fs/cgroup/memory.current") as handle:
            used = float(handle.read().strip())
        return float(text) - used
    except (OSError, ValueError):
        return None


def readable(value: float) -> str:
    """Bytes in words: 1.7 GB, 480 KB, 12,000 TB."""
    if value == math.inf:  # a declared number past the float range
        return "over 1e308 B"
    for unit, factor in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if value >= factor:
            return f"{value / factor:,.3g} {unit}" if value < 1000 * factor or unit == "TB" else f"{value / factor:,.0f} {unit}"
    return f"{value:.0f} B"


def check(what: str, needed: float, counts: str = "nodes, links, node pairs and transfers",
          limit: float | None = None) -> None:
    """Raise ``SizeError`` naming ``what`` when ``needed`` bytes exceed ``limit`` (default: the budget)."""
    limit = budget() if limit is None else limit
    if needed > limit:
        raise SizeError(f"{what}: needs an estimated {readable(needed)} of memory, over the {readable(limit)} budget "
                        f"(--max-memory raises it; the estimate counts {counts})")


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


def as_float(value: float) -> float:
    """A declared number as a float, at least 0: a 400-digit integer is infinite here, not an
    OverflowError, so the refusal still names it."""
    try:
        return max(float(value), 0.0)
    except OverflowError:
        return math.inf if value > 0 else 0.0


def shown(value: int) -> str:
    """A declared integer for a message: in full up to 18 digits, else its first digits and length
    (an XML attribute may hold 4,000 digits)."""
    text = str(value)
    return text if len(text.lstrip("-")) <= 18 else f"{text[:8]}...({len(text.lstrip('-'))} digits)"


def collective_pairs(kind: str, ranks: float, chunks_per_rank: float) -> float:
    """(rank, chunk) pairs of a standard collective's pre- and postconditions: what the interpreters
    lay out per rank and check at the end (an unknown kind is counted as All-Reduce, the largest)."""
    n = as_float(ranks)
    kind = kind.lower().replace("-", "").replace("_", "")
    chunks = collective_chunks(kind, ranks, chunks_per_rank)
    one_to_all = 1.0 + n  # one holder and every rank, or every holder and one rank
    per_chunk = {"allgather": one_to_all, "reducescatter": one_to_all, "broadcast": one_to_all,
                 "reduce": one_to_all, "gather": 2.0, "scatter": 2.0, "alltoall": 2.0}.get(kind, 2.0 * n)
    return chunks * per_chunk


def check_declared(source: str, parts: list[tuple[str, float]]) -> None:
    """Refuse what a file or an argument declares, before anything is built: ``parts`` are
    (field as the file writes it, estimated bytes); over the budget, ``SizeError`` names the field
    with the largest part and the estimate of them all."""
    needed = sum(max(part, 0.0) for _, part in parts)
    if parts and needed > budget():
        field = max(parts, key=lambda item: item[1])[0]
        check(f"{source}: {field}" if field else source, needed, "the sizes the input declares")


def periodic_bytes(repeat: float, piece_chunks: float, template_transfers: float) -> float:
    """A periodic schedule (``workbench.model.periodic``) as the simulator and verifier hold it: the whole
    collective's chunks and, per transfer of the expansion, its times and link occupancy (never a
    ``Transfer`` object)."""
    return as_float(repeat) * (BYTES_PER_PIECE_CHUNK * as_float(piece_chunks)
                               + BYTES_PER_PIECE_TRANSFER * as_float(template_transfers))


def demand_bytes(chunks: float) -> float:
    """A custom collective of ``chunks`` chunks: pre and post sets, and at least one transfer each."""
    return as_float(chunks) * (2 * BYTES_PER_SLOT + BYTES_PER_TRANSFER)


def instances_bytes(kind: str, ranks: int, chunks_per_rank: int, transfers: int, instances: int) -> float:
    """Lowering with every chunk split in ``instances``: the transfers again per instance with their
    send and receive steps, and the finer collective's pairs."""
    per_copy = as_float(transfers) * (BYTES_PER_TRANSFER + 2 * BYTES_PER_STEP)
    parts = as_float(instances)
    return parts * per_copy + BYTES_PER_SLOT * collective_pairs(kind, ranks, as_float(chunks_per_rank) * parts)


def check_cells(cells: float, limit: float | None = None) -> str | None:
    """Why a grid of ``cells`` cells is refused (over ``MAX_CELLS``, or its cell list over ``limit``
    or the budget), or None; the caller names the key that makes the grid so large."""
    if cells > MAX_CELLS:
        return f"the grid has {cells:,.0f} cells, over the cap of {MAX_CELLS:,}"
    limit = budget() if limit is None else limit
    needed = BYTES_PER_CELL * as_float(cells)
    if needed > limit:
        return (f"the grid's {cells:,.0f} cells need an estimated {readable(needed)} before the first runs, over the "
                f"{readable(limit)} budget (--max-memory)")
    return None


def check_runs(source: str, schedules: int, steps: int) -> None:
    """``--schedules``: refuse when schedules x steps exceeds ``MAX_STEP_RUNS`` (time, not memory)."""
    total = as_float(schedules) * max(steps, 1)
    if total > MAX_STEP_RUNS:
        raise SizeError(f"{source}: --schedules {schedules:,} x {steps:,} steps is {total:,.0f} interpreted steps, "
                        f"over the size guard's cap of {MAX_STEP_RUNS:,} (lower --schedules)")


# ------------------------------------------------------------------ formulation parameters
BYTES_PER_LISTED_TRANSFER = 900  # a transfer a formulation lists, re-lists and simulates (measured 650-680 B)
BYTES_PER_EPOCH_COLUMN = 700  # a column of a time-expanded model with its rows (measured 510-630 B)
BYTES_PER_SOLVER_TERM = 800  # a (step, chunk, link or node) term of an SMT or CP-SAT model (measured 500-750 B)
BYTES_PER_CASE_TERM = 130  # a (step, round, chunk, link) term of z3's case split on a step's rounds (measured 125 B)
BYTES_PER_THREAD = 16_000  # a solver's worker thread (HiGHS: 16 KB resident each)
BYTES_PER_EXPORTED_TRANSFER = 8_000  # a transfer written out into an MSCCL++ plan and run (measured 6.1-7 KB)

__all__ += ["ProblemSize", "price", "collective_chunks", "BYTES_PER_LISTED_TRANSFER", "BYTES_PER_EPOCH_COLUMN",
            "BYTES_PER_SOLVER_TERM", "BYTES_PER_CASE_TERM", "BYTES_PER_THREAD", "BYTES_PER_EXPORTED_TRANSFER"]


def collective_chunks(kind: str, npus: float, chunks_per_rank: float) -> float:
    """Chunks of a standard collective (``workbench.model.collective.make_collective``'s count)."""
    n, k = as_float(npus), as_float(chunks_per_rank)
    kind = kind.lower().replace("-", "").replace("_", "")
    return {"alltoall": n * n * k, "broadcast": k, "reduce": k}.get(kind, n * k)


@dataclass(frozen=True)
class ProblemSize:
    """A problem by its numbers, for pricing a formulation's parameters before anything is built:
    NPUs, nodes and links (upper bounds will do), the collective's kind, its chunks per rank and its
    chunks (a custom collective's own count), and the buffer size."""

    npus: int
    nodes: int
    links: int
    kind: str
    chunks_per_rank: int = 1
    chunks: float = 0.0  # 0: the standard count for ``kind``
    size_bytes: float = 0.0

    @property
    def num_chunks(self) -> float:
        """The collective's chunks."""
        return self.chunks or collective_chunks(self.kind, self.npus, self.chunks_per_rank)

    def chunks_at(self, chunks_per_rank: float) -> float:
        """The collective's chunks at ``chunks_per_rank`` (a custom collective keeps its own)."""
        if self.kind == "custom":
            return self.num_chunks
        return collective_chunks(self.kind, self.npus, chunks_per_rank)

    def transfers(self, chunks_per_rank: float) -> float:
        """The transfers a schedule needs at least at ``chunks_per_rank`` (``collective_transfers``; a
        custom collective: one per chunk)."""
        if self.kind == "custom":
            return self.num_chunks
        return collective_transfers(self.kind, self.npus, 1) * as_float(chunks_per_rank)

    def listed_bytes(self, chunks_per_rank: float) -> float:
        """A schedule listed at ``chunks_per_rank`` (``BYTES_PER_LISTED_TRANSFER`` a transfer)."""
        return BYTES_PER_LISTED_TRANSFER * self.transfers(chunks_per_rank)


def price(what: str, needed: float, limit: float | None = None) -> None:
    """Raise ``SizeError`` naming ``what`` (a parameter as given) when ``needed`` bytes exceed
    ``limit`` (default: the budget)."""
    check(what, needed, "the model or schedule the parameter asks for on this problem", limit)
