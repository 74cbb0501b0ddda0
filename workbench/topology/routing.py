"""Routes and distances over a topology's links, each computed on first use and kept.

The route between two nodes is the one the simulator uses: the direct link when one exists,
otherwise the breadth-first shortest path with neighbours taken in increasing id, the first
parent kept (docs/cost-model.md, "The plan and the routes"). Beside it: reachability, strongly
connected components, hop counts, and the shortest alpha (and alpha plus overhead) sums between
all nodes, which the latency bounds rest on. ``Topology`` answers these through one ``Routes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy costs an import; only the distance queries need it
    import numpy as np

__all__ = ["Routes"]


class Routes:
    """The routing queries of one topology: ``links`` (sorted), ``out`` (each node's out-neighbours
    by increasing id) and ``index`` (``(src, dst)`` to link position) are the topology's own, read
    only; NPUs are the nodes below ``num_npus``."""

    def __init__(self, num_npus: int, num_nodes: int, links: tuple[Any, ...], out: list[list[int]],
                 index: dict[tuple[int, int], int]) -> None:
        self._num_npus = num_npus
        self._num_nodes = num_nodes
        self._links = links
        self._out = out
        self._index = index
        self._bfs_parents: dict[int, list[int]] = {}
        self._path_cache: dict[tuple[int, int], tuple[int, ...] | None] = {}
        self._alpha = None

    def _parents_from(self, src: int) -> list[int]:
        """BFS from ``src`` over out-links, neighbours in increasing id, first parent kept."""
        parents = self._bfs_parents.get(src)
        if parents is None:
            from workbench.util.graphs import bfs

            parents = self._bfs_parents[src] = bfs(self._out, (src,)).parent
        return parents

    def route(self, src: int, dst: int) -> tuple[int, ...] | None:
        """The node path ``src .. dst``, or None when unreachable (the module docstring)."""
        key = (src, dst)
        cached = self._path_cache.get(key, False)
        if cached is not False:
            return cached  # type: ignore[return-value]
        if (src, dst) in self._index:
            path: tuple[int, ...] | None = (src, dst)
        else:
            parents = self._parents_from(src)
            if parents[dst] == -1:
                path = None
            else:
                nodes = [dst]
                while nodes[-1] != src:
                    nodes.append(parents[nodes[-1]])
                path = tuple(reversed(nodes))
        self._path_cache[key] = path
        return path

    def reachable(self, src: int, dst: int) -> bool:
        """True when links lead from ``src`` to ``dst`` (a node reaches itself)."""
        return src == dst or self._parents_from(src)[dst] != -1

    def strong_components(self) -> list[int]:
        """A label per node; nodes with one label reach each other (strongly connected components).

        Kosaraju in plain Python up to 20,000 nodes (importing scipy's csgraph alone costs ~0.4 s,
        more than the search on any fabric of that size); scipy beyond.
        """
        links = self._links
        if self._num_nodes <= 20_000:
            from workbench.util.graphs import strong_components

            return strong_components(self._num_nodes, [(l.src, l.dst) for l in links])
        import numpy as np
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import connected_components

        src = np.fromiter((l.src for l in links), dtype=np.int64, count=len(links))
        dst = np.fromiter((l.dst for l in links), dtype=np.int64, count=len(links))
        graph = csr_matrix((np.ones(len(links), dtype=np.int8), (src, dst)),
                           shape=(self._num_nodes, self._num_nodes))
        _, labels = connected_components(graph, directed=True, connection="strong")
        return labels.tolist()

    def hop_distances(self) -> list[list[int]]:
        """Unweighted shortest-path hop counts between all nodes (-1 when unreachable)."""
        from workbench.util.graphs import all_pairs_hops

        return all_pairs_hops(self._out)

    def alpha_distances(self) -> np.ndarray:
        """Shortest-path sums of alpha between all nodes (inf when unreachable), computed once.

        Plain Python on small fabrics (no scipy import, ~0.4 s, for a few ms of work), scipy beyond
        (``workbench.util.graphs.all_pairs_shortest``).
        """
        if self._alpha is None:
            from workbench.util.graphs import all_pairs_shortest

            # the 1e-30 on every alpha is kept from when the scipy twin needed non-zero weights:
            # zero-alpha fabrics then keep their distances, and bounds built on them, unchanged
            self._alpha = all_pairs_shortest(self._num_nodes, [(l.src, l.dst, l.alpha + 1e-30) for l in self._links])
        return self._alpha

    def message_distances(self) -> np.ndarray:
        """Shortest chains of messages between all nodes: each link weighs its alpha, and a link
        leaving an NPU its overhead too (inf when unreachable).

        A segment leaves an NPU and arrives after its alphas plus its serialisation, which is at
        least the overhead of its first link (docs/cost-model.md); a chain of transfers from one
        NPU to another pays that for every segment, so no chunk arrives sooner than this. Equal to
        ``alpha_distances`` where every overhead is 0.
        """
        if not any(l.overhead for l in self._links):
            return self.alpha_distances()
        from workbench.util.graphs import all_pairs_shortest

        return all_pairs_shortest(self._num_nodes, [
            (l.src, l.dst, l.alpha + (0.0 if l.src >= self._num_npus else l.overhead) + 1e-30)
            for l in self._links])
