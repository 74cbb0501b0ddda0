"""Collectives as explicit pre/postconditions over global chunk ids.

``pre[c]`` is the set of ranks that hold chunk ``c`` at the start; ``post[c]`` the ranks that
must hold it at the end. For a combining collective the data a post rank must end with is the
sum of the inputs of every rank in ``pre[c]``; for a non-combining one it is the chunk of its
single origin (the lowest rank in ``pre[c]``).

Chunk numbering (fixed, so outside tools agree; n ranks, k chunks per rank):

* allgather, reducescatter, allreduce, gather, scatter: chunk j of rank r is ``j*n + r``
* alltoall: piece j from source s to destination d is ``(j*n + s)*n + d``
* broadcast, reduce: chunk j is ``j``

Sizes follow nccl-tests (see ``chunk_bytes``) so algorithm and bus bandwidth compare with
real measurements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

__all__ = [
    "Collective",
    "CollectiveError",
    "KINDS",
    "make_collective",
    "collective_from_dict",
    "bus_factor",
]

KINDS = ("allgather", "reducescatter", "allreduce", "broadcast", "reduce", "gather", "scatter", "alltoall", "custom")
_ROOTED = ("broadcast", "reduce", "gather", "scatter")
_COMBINING = ("reducescatter", "allreduce", "reduce")


class CollectiveError(ValueError):
    """An invalid collective description; the message names the field."""


@dataclass
class Collective:
    kind: str
    num_ranks: int
    chunks_per_rank: int
    pre: tuple[frozenset[int], ...]
    post: tuple[frozenset[int], ...]
    combining: bool
    root: int | None = None
    _masks: tuple[list[int], list[int]] | None = field(default=None, repr=False, compare=False)
    _groups: list | None = field(default=None, repr=False, compare=False)

    @property
    def num_chunks(self) -> int:
        """All chunks of the collective (global chunk ids are 0 to ``num_chunks - 1``)."""
        return len(self.pre)

    def chunk_bytes(self, size_bytes: float) -> float:
        """Bytes per chunk for an nccl-tests ``size`` (see module docstring)."""
        return size_bytes / self.size_divisor()

    def size_bytes(self, chunk_bytes: float) -> float:
        """The nccl-tests size for a chunk size (inverse of ``chunk_bytes``)."""
        return chunk_bytes * self.size_divisor()

    def size_divisor(self) -> int:
        """Chunks an nccl-tests size is split into: k for broadcast and reduce, every chunk for custom, else n*k."""
        if self.kind in ("broadcast", "reduce"):
            return self.chunks_per_rank
        if self.kind == "custom":
            return self.num_chunks
        return self.num_ranks * self.chunks_per_rank

    def origin(self, chunk: int) -> int:
        """The rank whose data a non-combining chunk carries (lowest rank in ``pre``)."""
        return min(self.pre[chunk])

    def masks(self) -> tuple[list[int], list[int]]:
        """Per chunk: the contribution bitset a post rank must end with, and the post bitset."""
        if self._masks is None:
            full = []
            for chunk, holders in enumerate(self.pre):
                if self.combining:
                    full.append(sum(1 << r for r in holders))
                else:
                    full.append(1 << min(holders))
            posts = [sum(1 << r for r in ranks) for ranks in self.post]
            self._masks = (full, posts)
        return self._masks

    def groups(self) -> list[tuple[frozenset[int], frozenset[int], int]]:
        """Distinct (pre, post) pairs with how many chunks share them (computed once)."""
        if self._groups is None:
            counts: dict[tuple[frozenset[int], frozenset[int]], int] = {}
            for pair in zip(self.pre, self.post):
                counts[pair] = counts.get(pair, 0) + 1
            self._groups = [(pre, post, count) for (pre, post), count in counts.items()]
        return self._groups

    def check_reachable(self, topology) -> None:
        """Raise ``TopologyError`` naming a post rank that cannot get a chunk it needs."""
        from workbench.topology import TopologyError

        if topology.num_npus < self.num_ranks:
            raise TopologyError(
                f"topology {topology.name!r} has {topology.num_npus} NPUs but the collective needs {self.num_ranks} ranks"
            )
        labels = topology.strong_components()
        if len({labels[r] for r in range(self.num_ranks)}) == 1:
            return  # every rank reaches every other: nothing to name (one pass, not a BFS per rank)
        checked: set[tuple[frozenset[int], frozenset[int]]] = set()
        for chunk, (holders, needers) in enumerate(zip(self.pre, self.post)):
            if (holders, needers) in checked:
                continue
            checked.add((holders, needers))
            for rank in sorted(needers):
                if self.combining:
                    missing = [src for src in sorted(holders) if src != rank and not topology.reachable(src, rank)]
                elif rank in holders or any(topology.reachable(src, rank) for src in holders):
                    missing = []
                else:
                    missing = sorted(holders)[:1]
                if missing:
                    raise TopologyError(
                        f"topology {topology.name!r}: rank {rank} is unreachable from rank {missing[0]} "
                        f"(needed for chunk {chunk} of the {self.kind})"
                    )

    def to_dict(self, size_bytes: float | None = None) -> dict[str, Any]:
        """The algorithm-file form (read by ``collective_from_dict``); pre/post as [chunk, sorted ranks]."""
        return {
            "kind": self.kind,
            "ranks": self.num_ranks,
            "chunks_per_rank": self.chunks_per_rank,
            "root": self.root,
            "combining": self.combining,
            "size_bytes": size_bytes,
            "pre": [[c, sorted(r)] for c, r in enumerate(self.pre)],
            "post": [[c, sorted(r)] for c, r in enumerate(self.post)],
        }

    def describe(self) -> str:
        """One line for messages: kind, ranks, chunks per rank, root and the total of chunks."""
        root = f", root {self.root}" if self.root is not None else ""
        return f"{self.kind} over {self.num_ranks} ranks, {self.chunks_per_rank} chunk(s) per rank{root}, {self.num_chunks} chunks"


def bus_factor(kind: str, num_ranks: int) -> float:
    """nccl-tests bus-bandwidth factor: busbw = algbw * factor."""
    n = num_ranks
    if kind == "allreduce":
        return 2 * (n - 1) / n
    if kind in ("allgather", "reducescatter", "alltoall", "gather", "scatter"):
        return (n - 1) / n
    return 1.0


def make_collective(kind: str, num_ranks: int, chunks_per_rank: int = 1, root: int | None = None) -> Collective:
    """The standard collectives (see module docstring for chunk numbering)."""
    kind = kind.lower().replace("-", "").replace("_", "")
    if kind not in KINDS or kind == "custom":
        raise CollectiveError(f"unknown collective {kind!r} (known: {', '.join(KINDS[:-1])}; custom needs pre/post)")
    if not isinstance(num_ranks, int) or num_ranks < 1:
        raise CollectiveError(f"collective needs at least one rank, got {num_ranks!r}")
    if not isinstance(chunks_per_rank, int) or chunks_per_rank < 1:
        raise CollectiveError(f"chunks per rank must be a positive integer, got {chunks_per_rank!r}")
    n, k = num_ranks, chunks_per_rank
    if kind in _ROOTED:
        root = 0 if root is None else root
        if not (0 <= root < n):
            raise CollectiveError(f"root {root} is not a rank (0..{n - 1})")
    else:
        root = None
    pre, post = _standard_sets(kind, n, k, root)
    return Collective(kind, n, k, tuple(pre), tuple(post), kind in _COMBINING, root)


def _standard_sets(kind: str, n: int, k: int, root: int | None) -> tuple[list, list]:
    """The pre and post rank sets of every chunk of a standard collective, in chunk order."""
    everyone = frozenset(range(n))
    singles = [frozenset((r,)) for r in range(n)]
    pre: list[frozenset[int]]
    post: list[frozenset[int]]
    if kind == "allgather":
        pre = [singles[c % n] for c in range(n * k)]
        post = [everyone] * (n * k)
    elif kind == "reducescatter":
        pre = [everyone] * (n * k)
        post = [singles[c % n] for c in range(n * k)]
    elif kind == "allreduce":
        pre = [everyone] * (n * k)
        post = [everyone] * (n * k)
    elif kind == "gather":
        pre = [singles[c % n] for c in range(n * k)]
        post = [singles[root]] * (n * k)
    elif kind == "scatter":
        pre = [singles[root]] * (n * k)
        post = [singles[c % n] for c in range(n * k)]
    elif kind == "broadcast":
        pre = [singles[root]] * k
        post = [everyone] * k
    elif kind == "reduce":
        pre = [everyone] * k
        post = [singles[root]] * k
    else:  # alltoall
        pre, post = [], []
        for j in range(k):
            for s in range(n):
                for d in range(n):
                    pre.append(singles[s])
                    post.append(singles[d])
    return pre, post


def custom_collective(
    num_ranks: int,
    pre: Sequence[Iterable[int]],
    post: Sequence[Iterable[int]],
    combining: bool = False,
    source: str = "collective",
) -> Collective:
    """A custom collective from explicit per-chunk pre/post rank lists (e.g. a TE-CCL demand matrix)."""
    if len(pre) != len(post):
        raise CollectiveError(f"{source}: pre has {len(pre)} chunks but post has {len(post)}")
    pre_sets, post_sets = [], []
    for chunk, (holders, needers) in enumerate(zip(pre, post)):
        holders, needers = frozenset(holders), frozenset(needers)
        for rank in holders | needers:
            if not isinstance(rank, int) or not (0 <= rank < num_ranks):
                raise CollectiveError(f"{source}: chunk {chunk} names rank {rank!r}, not in 0..{num_ranks - 1}")
        if not holders:
            raise CollectiveError(f"{source}: chunk {chunk} has an empty precondition")
        pre_sets.append(holders)
        post_sets.append(needers)
    return Collective("custom", num_ranks, 1, tuple(pre_sets), tuple(post_sets), bool(combining), None)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def pairs_to_lists(pairs: Any, field_name: str, source: str) -> list[list[int]]:
    """``[[chunk, [ranks]], ...]`` as the rank lists of chunks 0..n-1; ``CollectiveError`` naming the
    entry otherwise (booleans are not integers)."""
    if not isinstance(pairs, list):
        raise CollectiveError(f"{source}: {field_name} must be a list of [chunk, [ranks]]")
    result: dict[int, list[int]] = {}
    for i, entry in enumerate(pairs):
        if not (isinstance(entry, list) and len(entry) == 2 and _is_int(entry[0]) and isinstance(entry[1], list)
                and all(map(_is_int, entry[1]))):
            raise CollectiveError(f"{source}: {field_name}[{i}] must be [chunk, [ranks]] (integers)")
        if entry[0] in result:
            raise CollectiveError(f"{source}: {field_name}[{i}]: chunk {entry[0]} listed twice")
        result[entry[0]] = entry[1]
    if sorted(result) != list(range(len(result))):
        raise CollectiveError(f"{source}: {field_name} must list chunks 0..{len(result) - 1}")
    return [result[c] for c in range(len(result))]


def collective_from_dict(data: Any, source: str = "collective") -> Collective:
    """Parse an algorithm file's ``collective``; explicit pre/post win, named fields must agree."""
    if not isinstance(data, dict):
        raise CollectiveError(f"{source}: expected a mapping")
    for key in ("kind", "ranks", "pre", "post", "combining"):
        if key not in data:
            raise CollectiveError(f"{source}: missing field {key!r}")
    kind = data["kind"]
    ranks = data["ranks"]
    if not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 1:
        raise CollectiveError(f"{source}.ranks: expected a positive integer, got {ranks!r}")
    if not isinstance(data["combining"], bool):  # by type: the string "no" is not true
        raise CollectiveError(f"{source}.combining: expected true or false, got {data['combining']!r}")
    pre = pairs_to_lists(data["pre"], "pre", source)
    post = pairs_to_lists(data["post"], "post", source)
    explicit = custom_collective(ranks, pre, post, data["combining"], source)
    if kind == "custom":
        return explicit
    chunks_per_rank = data.get("chunks_per_rank", 1)
    try:
        named = make_collective(kind, ranks, chunks_per_rank, data.get("root"))
    except CollectiveError as exc:
        raise CollectiveError(f"{source}: {exc}") from None
    if named.pre != explicit.pre or named.post != explicit.post or named.combining != explicit.combining:
        raise CollectiveError(
            f"{source}: explicit pre/post/combining disagree with kind={kind!r}, ranks={ranks}, "
            f"chunks_per_rank={chunks_per_rank} (use kind 'custom' for a non-standard collective)"
        )
    return named
