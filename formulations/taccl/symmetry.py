"""Rotational symmetry of a sketch (note 2.4, A4) as permutations of ranks, chunks and logical links.

Each ``(o, g)`` is the rank map ``sigma(r) = ((r mod g) + o) mod g + g * (r // g)``. The chunk map
sends ``c`` to the unique chunk with ``sigma(pre(c))``, ``sigma(post(c))`` and the same position
among the chunks sharing that pre/post (the code's map, not the paper's ``(c+o)%g``). A logical
link maps to the link ``sigma(s) -> sigma(d)`` when that exists with the same cost and kind;
links without such an image are left untied (``-1``), which keeps the substitution sound on
topologies where sigma is not a full automorphism.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.util.lazy import lazy_module

from formulations.taccl.logical import LogicalTopology
from formulations.taccl.sketch import Sketch, SketchError
from workbench.model.collective import Collective

np = lazy_module("numpy")  # imported on first use (workbench.util.lazy)

__all__ = ["Generator", "symmetry_generators", "propagate_labels"]


@dataclass
class Generator:
    offset: int
    group: int
    ranks: np.ndarray  # sigma over ranks
    chunks: np.ndarray  # chunk map
    links: np.ndarray  # logical link map, -1 where untied


def symmetry_generators(sketch: Sketch, logical: LogicalTopology, collective: Collective) -> list[Generator]:
    """One ``Generator`` per ``symmetry`` entry of the sketch: its rank, chunk and logical-link maps;
    ``SketchError`` when a group size does not divide the ranks or a chunk has no image."""
    n = logical.num_ranks
    chunk_key = _chunk_keys(collective)
    lookup = {key: c for c, key in enumerate(chunk_key)}
    generators = []
    for i, (offset, group) in enumerate(sketch.symmetry):
        g = n if group == "n" else int(group)
        if n % g:
            raise SketchError(f"sketch {sketch.source}: field symmetry[{i}]: group size {g} does not divide {n} ranks")
        ranks = np.array([((r % g) + offset) % g + g * (r // g) for r in range(n)], dtype=np.int64)
        chunks = np.empty(collective.num_chunks, dtype=np.int64)
        for c, (pre, post, sub) in enumerate(chunk_key):
            image = (frozenset(int(ranks[r]) for r in pre), frozenset(int(ranks[r]) for r in post), sub)
            if image not in lookup:
                raise SketchError(f"sketch {sketch.source}: field symmetry[{i}]: [{offset}, {group}] does not map the "
                                  f"{collective.kind} onto itself (no image for chunk {c})")
            chunks[c] = lookup[image]
        links = np.full(len(logical.links), -1, dtype=np.int64)
        for l in logical.links:
            j = logical.by_pair.get((int(ranks[l.src]), int(ranks[l.dst])))
            if j is None:
                continue
            other = logical.links[j]
            if (abs(other.alpha - l.alpha) <= 1e-12 * max(1.0, l.alpha) and abs(other.beta - l.beta) <= 1e-9 * l.beta
                    and other.internode == l.internode and other.via_switch == l.via_switch):
                links[l.index] = j
        generators.append(Generator(offset, g, ranks, chunks, links))
    return generators


def _chunk_keys(collective: Collective) -> list[tuple[frozenset, frozenset, int]]:
    seen: dict[tuple[frozenset, frozenset], int] = {}
    keys = []
    for c in range(collective.num_chunks):
        base = (collective.pre[c], collective.post[c])
        sub = seen.get(base, 0)
        seen[base] = sub + 1
        keys.append((base[0], base[1], sub))
    return keys


def propagate_labels(size: int, pairs: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Connected components of the union of index pairs, labelled by their smallest member."""
    labels = np.arange(size, dtype=np.int64)
    pairs = [(a, b) for a, b in pairs if len(a)]
    if not pairs:
        return labels
    while True:
        before = labels.copy()
        for a, b in pairs:
            low = np.minimum(labels[a], labels[b])
            np.minimum.at(labels, a, low)
            np.minimum.at(labels, b, low)
        labels = labels[labels]  # pointer jumping
        if np.array_equal(labels, before):
            return labels
