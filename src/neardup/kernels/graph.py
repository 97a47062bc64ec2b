"""Clustering on the graph of verified near-duplicate pairs.

Nodes are indices 0..n-1; edges are verified pairs (every edge already passed the similarity
threshold). Every tie is broken by a per-node `tiebreak` key (the scan and the service pass a
64-bit hash of the page's normalized URL), then by the node index only where two keys are
equal: node indices follow input order, which a re-crawl or an incremental index does not
share, so a rule that fell back on them would give a different representative, and after
the centre rule a different partition, for the same pages read in another order. Without
`tiebreak` the index is the key. Three views are computed:

* connected components (union-find's answer, Broder et al. 1997): the transitive closure. On
  sites whose pages share heavy navigation, chains of 0.8-similar neighbours can join hundreds
  of different pages, so this view is kept as `component_id` but is not the default cluster;
* centre clusters: nodes are visited by decreasing degree (ties: larger equivalence class,
  then lower tiebreak rank); a node that no centre has reached yet becomes a centre. Then
  every other node joins the adjacent centre it is most similar to (ties: the earlier centre). Every
  member therefore has a verified edge to its representative, in the spirit of the Ask.com
  design, where a loser must verify against its group's winner;
* core clusters (the scan's default): first the connected components over *strong* edges
  only (similarity >= a core threshold well above the verification threshold), because
  pages that close belong together whatever a centre decides; then centre clusters over
  those cores, two cores being adjacent when any of their pages are. Short strong links
  cannot drift far, while the weaker links that make transitive blobs only join a core to a
  centre core.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neardup.kernels.jit import njit


@dataclass
class Graph:
    """An undirected graph in compressed adjacency form."""

    n: int
    indptr: np.ndarray
    indices: np.ndarray
    weights: np.ndarray  # similarity of each adjacency entry

    @classmethod
    def from_edges(
        cls, n: int, a: np.ndarray, b: np.ndarray, similarity: np.ndarray | None = None
    ) -> Graph:
        """Undirected graph of unique edges (a[i], b[i]) with their similarities."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        if a.size and (min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= n):
            raise ValueError("edge endpoint outside 0..n-1")
        sim = np.ones(a.size, dtype=np.float64) if similarity is None else similarity
        rows = np.concatenate([a, b])
        cols = np.concatenate([b, a])
        data = np.concatenate([sim, sim]).astype(np.float64)
        indptr, indices, weights = _csr(n, rows, cols, data)
        return cls(n=n, indptr=indptr, indices=indices, weights=weights)

    def degree(self) -> np.ndarray:
        return np.diff(self.indptr)


@njit(cache=True)
def _csr(
    n: int, rows: np.ndarray, cols: np.ndarray, data: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Compressed rows of the entries (rows[i], cols[i], data[i]): a counting sort by row,
    each row's columns sorted (stably), the data of repeated entries summed, as a sparse
    matrix library's coordinate-to-row conversion does. Here rather than scipy's: the
    graph is all neardup takes from scipy, whose import (0.1 s) every command paid."""
    m = rows.shape[0]
    indptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(m):
        indptr[rows[i] + 1] += 1
    for r in range(n):
        indptr[r + 1] += indptr[r]
    fill = indptr[:-1].copy()
    indices = np.empty(m, dtype=np.int64)
    weights = np.empty(m, dtype=np.float64)
    for i in range(m):
        at = fill[rows[i]]
        indices[at] = cols[i]
        weights[at] = data[i]
        fill[rows[i]] += 1
    k = 0
    start = 0
    for r in range(n):
        end = indptr[r + 1]
        if end - start > 32:
            order = np.argsort(indices[start:end], kind="mergesort")
            indices[start:end] = indices[start:end][order]
            weights[start:end] = weights[start:end][order]
        else:  # a short row (nearly all of them): an insertion sort in place, stable too
            for x in range(start + 1, end):
                col, w = indices[x], weights[x]
                y = x - 1
                while y >= start and indices[y] > col:
                    indices[y + 1] = indices[y]
                    weights[y + 1] = weights[y]
                    y -= 1
                indices[y + 1] = col
                weights[y + 1] = w
        j = start
        while j < end:
            col = indices[j]
            total = weights[j]
            j += 1
            while j < end and indices[j] == col:
                total += weights[j]
                j += 1
            indices[k] = col
            weights[k] = total
            k += 1
        start = end
        indptr[r + 1] = k
    return indptr, indices[:k].copy(), weights[:k].copy()


@njit(cache=True)
def _smallest_member(n: int, indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Union-find over the edges, the smaller root kept on each union, so that every
    root is the smallest node of its set (path halving on the finds)."""
    parent = np.arange(n)
    for u in range(n):
        for p in range(indptr[u], indptr[u + 1]):
            ru = u
            while parent[ru] != ru:
                parent[ru] = parent[parent[ru]]
                ru = parent[ru]
            rv = indices[p]
            while parent[rv] != rv:
                parent[rv] = parent[parent[rv]]
                rv = parent[rv]
            if ru < rv:
                parent[rv] = ru
            elif rv < ru:
                parent[ru] = rv
    for v in range(n):
        r = v
        while parent[r] != r:
            r = parent[r]
        parent[v] = r
    return parent


def connected_components(graph: Graph) -> np.ndarray:
    """Component label of each node: the smallest node index in its component."""
    if graph.n == 0:
        return np.empty(0, dtype=np.int64)
    return _smallest_member(graph.n, graph.indptr, graph.indices)


def tiebreak_rank(n: int, tiebreak: np.ndarray | None) -> np.ndarray:
    """Rank 0..n-1 of each node by (tiebreak key, index); the index itself without keys."""
    idx = np.arange(n, dtype=np.int64)
    if tiebreak is None:
        return idx
    key = np.asarray(tiebreak, dtype=np.int64)
    if key.shape != (n,):
        raise ValueError("tiebreak must hold one key per node")
    rank = np.empty(n, dtype=np.int64)
    rank[np.lexsort((idx, key))] = idx
    return rank


def _visit_order(
    graph: Graph, weight: np.ndarray, weight_first: bool = False, rank: np.ndarray | None = None
) -> np.ndarray:
    """Nodes by decreasing degree, then decreasing weight (or weight, then degree), then
    increasing tiebreak rank (the index when no rank is given)."""
    r = np.arange(graph.n, dtype=np.int64) if rank is None else rank
    w = -np.asarray(weight, dtype=np.int64)
    d = -graph.degree()
    return np.lexsort((r, d, w) if weight_first else (r, w, d))


@njit(cache=True)
def _centres(indptr: np.ndarray, indices: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Greedy dominating set: a node becomes a centre unless a centre already reached it."""
    n = order.shape[0]
    rank = np.full(n, -1, dtype=np.int64)  # visit rank of each centre, -1 for non-centres
    reached = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        v = order[i]
        if reached[v]:
            continue
        rank[v] = i
        reached[v] = True
        for p in range(indptr[v], indptr[v + 1]):
            reached[indices[p]] = True
    return rank


@njit(cache=True)
def _join_best_centre(
    indptr: np.ndarray, indices: np.ndarray, weights: np.ndarray, rank: np.ndarray
) -> np.ndarray:
    n = rank.shape[0]
    rep = np.empty(n, dtype=np.int64)
    for v in range(n):
        if rank[v] >= 0:
            rep[v] = v
            continue
        best = -1
        best_sim = -1.0
        for p in range(indptr[v], indptr[v + 1]):
            u = indices[p]
            if rank[u] < 0:
                continue
            if weights[p] > best_sim or (weights[p] == best_sim and rank[u] < rank[best]):
                best = u
                best_sim = weights[p]
        rep[v] = best
    return rep


def center_clusters(
    graph: Graph,
    weight: np.ndarray | None = None,
    weight_first: bool = False,
    tiebreak: np.ndarray | None = None,
) -> np.ndarray:
    """Representative node of each node under the centre rule (itself when it is one)."""
    if graph.n == 0:
        return np.empty(0, dtype=np.int64)
    w = np.ones(graph.n, dtype=np.int64) if weight is None else weight
    order = _visit_order(graph, w, weight_first, tiebreak_rank(graph.n, tiebreak))
    rank = _centres(graph.indptr, graph.indices, order)
    return _join_best_centre(graph.indptr, graph.indices, graph.weights, rank)


def component_representatives(
    graph: Graph,
    labels: np.ndarray,
    weight: np.ndarray | None = None,
    tiebreak: np.ndarray | None = None,
) -> np.ndarray:
    """For the transitive view: each node's component representative, chosen by the same
    order as the centre rule (highest degree, then weight, then lowest tiebreak rank)."""
    if graph.n == 0:
        return np.empty(0, dtype=np.int64)
    w = np.ones(graph.n, dtype=np.int64) if weight is None else weight
    order = _visit_order(graph, w, rank=tiebreak_rank(graph.n, tiebreak))
    # The first node of each component in visit order is its representative.
    first_seen = np.full(graph.n, -1, dtype=np.int64)
    lab_in_order = labels[order]
    _, first_pos = np.unique(lab_in_order, return_index=True)
    first_seen[lab_in_order[first_pos]] = order[first_pos]
    return first_seen[labels]


def _quotient(
    graph: Graph, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Collapse nodes with equal labels: (groups, group of each node, edge a, edge b, max sim)."""
    groups, group_of = np.unique(labels, return_inverse=True)
    src = np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(graph.indptr))
    ga, gb = group_of[src], group_of[graph.indices]
    keep = ga < gb
    key = ga[keep] * groups.size + gb[keep]
    sim = graph.weights[keep]
    order = np.lexsort((-sim, key))
    key, sim = key[order], sim[order]
    uniq, first = np.unique(key, return_index=True)
    return groups, group_of, uniq // groups.size, uniq % groups.size, sim[first]


def core_clusters(
    graph: Graph,
    core_threshold: float,
    weight: np.ndarray | None = None,
    tiebreak: np.ndarray | None = None,
) -> np.ndarray:
    """Representative node of each node under the core rule (see the module docstring)."""
    if graph.n == 0:
        return np.empty(0, dtype=np.int64)
    rank = tiebreak_rank(graph.n, tiebreak)
    w = np.ones(graph.n, dtype=np.int64) if weight is None else np.asarray(weight, dtype=np.int64)
    src = np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(graph.indptr))
    strong = (graph.weights >= core_threshold) & (src < graph.indices)
    cores = connected_components(
        Graph.from_edges(graph.n, src[strong], graph.indices[strong], graph.weights[strong])
    )
    _, core_of, qa, qb, qsim = _quotient(graph, cores)
    n_cores = int(core_of.max()) + 1
    core_weight = np.bincount(core_of, weights=w, minlength=n_cores).astype(np.int64)
    # A core's own tie-break is its best-ranked page's, so core order follows the page keys.
    core_rank = np.full(n_cores, graph.n, dtype=np.int64)
    np.minimum.at(core_rank, core_of, rank)
    # Cores are visited by size first: a large core of near-identical pages is the natural
    # centre of the weaker pages around it.
    quotient = Graph.from_edges(n_cores, qa, qb, qsim)
    centre_core = center_clusters(quotient, core_weight, weight_first=True, tiebreak=core_rank)
    # The representative page of a centre core: its first node in the usual visit order.
    order = _visit_order(graph, w, rank=rank)
    first_of_core = np.full(n_cores, -1, dtype=np.int64)
    core_in_order = core_of[order]
    _, pos = np.unique(core_in_order, return_index=True)
    first_of_core[core_in_order[pos]] = order[pos]
    return first_of_core[centre_core[core_of]]
