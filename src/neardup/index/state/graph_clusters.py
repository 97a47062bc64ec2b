"""Reading clusters off the scan graph: the components a batch touched, their clusters by the
scan's own rule, and the pages a sketch would be joined to.

Why apart from the update (`graph_update.py`): clustering only reads the graph. After a
batch, only the connected components holding a node whose edges, class or weight changed
are clustered again, with the scan's rule (`clusters.rule_representatives`: class sizes as
weights, page keys as tie-breaks). A cluster never crosses a component, and an untouched
component has the same nodes, edges, weights and keys as before, so its clusters stand.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from neardup.kernels.graph import Graph
from neardup.pipeline.steps.clusters import rule_representatives
from neardup.pipeline.steps.near_pairs import lsh_keys, pair_scores, passes

if TYPE_CHECKING:
    from neardup.index.state.scangraph import ScanGraph


def components(graph: ScanGraph, seeds: Iterable[int]) -> list[list[int]]:
    """The connected components (of verified edges) holding `seeds`, each in tie-break
    order."""
    seen: set[int] = set()
    out = []
    for seed in sorted(seeds):
        if seed in seen or not graph.is_node(seed):
            continue
        comp, stack = [], [seed]
        seen.add(seed)
        while stack:
            u = stack.pop()
            comp.append(u)
            for v in graph.neighbours(u):
                if v not in seen:
                    seen.add(v)
                    stack.append(v)
        out.append(graph.ordered(comp))
    return out


def cluster(graph: ScanGraph, comps: list[list[int]]) -> list[list[int]]:
    """The clusters of whole components by the scan's rule: lists of pages (class members
    included), each with the scan's representative first.

    A component of one node is its own cluster. The others are clustered in one call over
    their union: the rule never looks across a component (every step follows edges, and
    ties are broken by page keys, whose order inside a component does not depend on the
    other nodes), which is why the scan can cluster the whole graph at once and the service
    only the components a batch touched, with the same answer.
    """
    out: list[list[int]] = []
    nodes: list[int] = []
    for comp in comps:
        if len(comp) == 1:
            out.append(with_class(graph, [comp[0]]))
        else:
            nodes.extend(comp)
    if not nodes:
        return out
    pos = {u: i for i, u in enumerate(nodes)}
    a, b, s = [], [], []
    for u in nodes:
        for v, sim in graph.neighbours(u).items():
            if u < v:
                a.append(pos[u])
                b.append(pos[v])
                s.append(sim)
    edges = Graph.from_edges(
        len(nodes), np.array(a, np.int64), np.array(b, np.int64), np.array(s, np.float64)
    )
    weight = np.array([len(graph.class_members(int(graph.mfp[u]))) for u in nodes], dtype=np.int64)
    tie = graph.pages.key[np.array(nodes, np.int64)]
    rep = rule_representatives(edges, weight, tie, graph.settings)
    groups: dict[int, list[int]] = {}  # the representative node first
    for i, r in enumerate(rep.tolist()):
        members = groups.setdefault(r, [nodes[r]])
        if i != r:
            members.append(nodes[i])
    out.extend(with_class(graph, members) for members in groups.values())
    return out


def with_class(graph: ScanGraph, nodes: list[int]) -> list[int]:
    """Nodes followed each by the other pages of its class (same shingle set)."""
    pages = []
    for u in nodes:
        pages.append(u)
        cls = graph.class_members(int(graph.mfp[u]))
        if len(cls) > 1:
            pages.extend(graph.ordered(set(cls) - {u}))
    return pages


def similar(graph: ScanGraph, sig: np.ndarray) -> list[tuple[int, float]]:
    """Pages a sketch would be joined to by the scan: those sharing a band key with it whose
    estimated resemblance passes the scan's verification, with that resemblance (class
    members of a matching node included). The cost is the size of its buckets, whatever
    the size of the index."""
    keys = lsh_keys(sig[None, :], None, graph.bands, graph.rows)[0]
    found = graph.buckets.members([np.array([k], dtype=np.int64) for k in keys.tolist()], 1)
    nodes = sorted({u for members in found.values() for u in members})
    if not nodes:
        return []
    sims, agree = pair_scores(np.broadcast_to(sig, (len(nodes), sig.size)), graph.pages.sigs[nodes])
    ok = passes(sims, agree, graph.settings.threshold, False)
    out = []
    for u, s, keep in zip(nodes, sims.tolist(), ok.tolist(), strict=True):
        if keep:
            out.extend((m, float(s)) for m in with_class(graph, [u]))
    return out
