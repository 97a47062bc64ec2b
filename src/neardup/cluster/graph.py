"""Clustering on the graph of verified near-duplicate pairs.

Nodes are indices 0..n-1 in document order; edges are verified pairs (every edge already
passed the similarity threshold). Two views are computed:

* connected components (union-find's answer, Broder et al. 1997): the transitive closure. On
  sites whose pages share heavy navigation, chains of 0.8-similar neighbours can join hundreds
  of different pages, so this view is kept as `component_id` but is not the default cluster;
* centre clusters (the default): nodes are visited by decreasing degree (ties: larger
  equivalence class, then lower id); an unassigned node becomes a representative and claims
  its unassigned neighbours. Every member therefore has a verified edge to its representative,
  in the spirit of the Ask.com design, where a loser must verify against its group's winner.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components as _scipy_components


@dataclass
class Graph:
    """An undirected graph in compressed adjacency form."""

    n: int
    indptr: np.ndarray
    indices: np.ndarray

    @classmethod
    def from_edges(cls, n: int, a: np.ndarray, b: np.ndarray) -> Graph:
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        if a.size and (min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= n):
            raise ValueError("edge endpoint outside 0..n-1")
        rows = np.concatenate([a, b])
        cols = np.concatenate([b, a])
        data = np.ones(rows.size, dtype=np.int8)
        csr = coo_matrix((data, (rows, cols)), shape=(n, n)).tocsr()
        csr.sum_duplicates()
        csr.sort_indices()
        return cls(n=n, indptr=csr.indptr.astype(np.int64), indices=csr.indices.astype(np.int64))

    def degree(self) -> np.ndarray:
        return np.diff(self.indptr)


def connected_components(graph: Graph) -> np.ndarray:
    """Component label of each node: the smallest node index in its component."""
    if graph.n == 0:
        return np.empty(0, dtype=np.int64)
    data = np.ones(graph.indices.size, dtype=np.int8)
    from scipy.sparse import csr_matrix

    csr = csr_matrix((data, graph.indices, graph.indptr), shape=(graph.n, graph.n))
    _, labels = _scipy_components(csr, directed=False)
    # scipy numbers components arbitrarily; relabel by their smallest member for determinism.
    smallest = np.full(labels.max() + 1, graph.n, dtype=np.int64)
    np.minimum.at(smallest, labels, np.arange(graph.n, dtype=np.int64))
    return smallest[labels]


def _visit_order(graph: Graph, weight: np.ndarray) -> np.ndarray:
    """Nodes by decreasing degree, then decreasing weight, then increasing index."""
    idx = np.arange(graph.n, dtype=np.int64)
    return np.lexsort((idx, -np.asarray(weight, dtype=np.int64), -graph.degree()))


@njit(cache=True)
def _claim(indptr: np.ndarray, indices: np.ndarray, order: np.ndarray) -> np.ndarray:
    n = order.shape[0]
    rep = np.full(n, -1, dtype=np.int64)
    for v in order:
        if rep[v] != -1:
            continue
        rep[v] = v
        for p in range(indptr[v], indptr[v + 1]):
            u = indices[p]
            if rep[u] == -1:
                rep[u] = v
    return rep


def center_clusters(graph: Graph, weight: np.ndarray | None = None) -> np.ndarray:
    """Representative node of each node under the centre rule (itself when it is one)."""
    if graph.n == 0:
        return np.empty(0, dtype=np.int64)
    w = np.ones(graph.n, dtype=np.int64) if weight is None else weight
    return _claim(graph.indptr, graph.indices, _visit_order(graph, w))


def component_representatives(
    graph: Graph, labels: np.ndarray, weight: np.ndarray | None = None
) -> np.ndarray:
    """For the transitive view: each node's component representative, chosen by the same
    order as the centre rule (highest degree, then weight, then lowest index)."""
    if graph.n == 0:
        return np.empty(0, dtype=np.int64)
    w = np.ones(graph.n, dtype=np.int64) if weight is None else weight
    order = _visit_order(graph, w)
    best = np.full(graph.n, -1, dtype=np.int64)
    # The first node of each component in visit order is its representative.
    first_seen = np.full(graph.n, -1, dtype=np.int64)
    lab_in_order = labels[order]
    _, first_pos = np.unique(lab_in_order, return_index=True)
    first_seen[lab_in_order[first_pos]] = order[first_pos]
    best = first_seen[labels]
    return best
