"""Clusters: verified pairs -> one cluster per page, with three views.

* `cluster_id` (the default view): core clusters, centre clusters or connected components,
  per `cluster_rule`; the id is the representative's doc_id. Ties are broken by the page
  keys (`near_pairs.page_keys`), so the same pages in another input order get the same
  clusters and the same representative pages;
* `component_id`: the transitive view (smallest doc_id of the connected component);
* `identical_id`: Fetterly's "virtually identical" level (all super-shingles agree), plus
  pages with identical shingle sets.
Equivalent pages (same shingle set) follow their class representative into its cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.kernels import estimate_resemblance
from neardup.kernels.graph import (
    Graph,
    center_clusters,
    component_representatives,
    connected_components,
    core_clusters,
)
from neardup.kernels.sorting import found_in_sorted, sorted_distinct
from neardup.pipeline.steps.near import NearResult
from neardup.pipeline.steps.near_pairs import MappedRows
from neardup.pipeline.steps.pair_rows import Rows, edge_rows, identical_rows

ASSIGN_SCHEMA = pa.schema(
    [
        ("doc_id", pa.int64()),
        ("cluster_id", pa.int64()),
        ("component_id", pa.int64()),
        ("identical_id", pa.int64()),
        ("class_id", pa.int64()),
        ("similarity_to_representative", pa.float32()),
    ]
)


# Rows of `assignments.parquet` built and written at a time: the cluster stage's memory
# besides the graph (about 40 MiB with the signatures compared, measured at 1 and 4 M pages).
ASSIGN_SLICE = 1 << 18
# Pages compared with their representative at a time (two signatures each in memory).
RESEMBLANCE_ROWS = 200_000


def _lift(touched: np.ndarray, labels: np.ndarray, n: int) -> np.ndarray:
    """Per node of the whole graph: its label from the subgraph of `touched` nodes (mapped
    back to whole-graph nodes), itself for a node outside it."""
    out = np.arange(n, dtype=np.int64)
    out[touched] = touched[labels]
    return out


def _touched_graph(n: int, ea: np.ndarray, eb: np.ndarray, similarity: np.ndarray | None):
    """The subgraph of the nodes that have an edge, renumbered in the same order.

    Most pages of a crawl have no near-duplicate: their node is alone, its cluster,
    component and identical group are itself, and every rule would only carry it through
    its sorts. The rules never look across a component and order nodes by keys and ranks
    that keep their relative order under an increasing renumbering, so running them on
    the touched nodes alone gives the same clusters, with arrays the size of the pages
    that have a near-duplicate rather than of all pages."""
    touched = sorted_distinct(np.concatenate([ea, eb]))
    graph = Graph.from_edges(
        touched.size, np.searchsorted(touched, ea), np.searchsorted(touched, eb), similarity
    )
    return touched, graph


def rule_representatives(
    graph: Graph,
    weight: np.ndarray,
    tie: np.ndarray,
    settings: Settings,
    components: np.ndarray | None = None,
) -> np.ndarray:
    """Per node, the node of its cluster's representative by `settings.cluster_rule` (core
    clusters, centre clusters or connected components), `weight` each node's class size and
    `tie` its page key. The one place the rule is chosen: the scan (`cluster_graph`), the
    Spark engine's executors (`spark.kernels.cluster_component`) and the index
    (`ScanGraph.cluster`) call it, so a new rule or a changed default reaches all three.
    `components`: the graph's connected components, when the caller has them."""
    if settings.cluster_rule == "core":
        return core_clusters(graph, settings.strong_similarity, weight, tie)
    if settings.cluster_rule == "center":
        return center_clusters(graph, weight, tiebreak=tie)
    if components is None:
        components = connected_components(graph)
    return component_representatives(graph, components, weight, tie)


def cluster_graph(
    n: int,
    ea: np.ndarray,
    eb: np.ndarray,
    similarity: np.ndarray,
    agree: np.ndarray | None,
    weight: np.ndarray,
    tie: np.ndarray,
    settings: Settings,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The scan's clustering of a graph of `n` nodes (class representatives numbered in
    doc-id order) and its verified edges: per node, the node of its cluster's
    representative (by `settings.cluster_rule`), of its component (the smallest node) and of
    its identical group (all super-shingles agree). `weight` is each node's class size and
    `tie` its page key. Both engines call it: the embedded scan on every class
    representative, the Spark engine on the driver over the nodes that have an edge."""
    touched, graph = _touched_graph(n, ea, eb, similarity)
    component_t = connected_components(graph)
    component = _lift(touched, component_t, n)
    tie_t = tie[touched]
    weight_t = weight[touched]
    cluster_t = rule_representatives(graph, weight_t, tie_t, settings, component_t)
    cluster = _lift(touched, cluster_t, n)
    del graph, component_t, cluster_t
    full = agree == settings.supershingle_count if settings.has_supershingles else None
    if full is not None and full.any():
        identical_touched, identical_graph = _touched_graph(n, ea[full], eb[full], None)
        identical = _lift(identical_touched, connected_components(identical_graph), n)
    else:
        identical = np.arange(n)
    return cluster, component, identical


@dataclass
class PageArrays:
    """The per-page arrays of the eligible pages the cluster stage reads: in memory (the
    stage in the scanning process) or `MappedRows` over the near stage's files (by parts),
    read a slice or a gather at a time, so that no more than that is resident."""

    docs: Rows  # doc ids, increasing
    rows: Rows  # rows in signatures.npy
    class_rep: Rows  # position of each page's class representative
    keys: Rows  # page keys, the rules' tie-break

    def __len__(self) -> int:
        return len(self.docs)


def run_clusters(staging: Path, near: NearResult, settings: Settings) -> int:
    """Write `assignments.parquet` from the near stage in this process; return the number
    of clusters with at least two pages (`cluster_parts`, the edges one part)."""
    pages = PageArrays(near.docs, near.rows, near.class_rep, near.keys)
    edges = [edge_rows(near.edge_a, near.edge_b, near.similarity, near.agree)]
    classes = [identical_rows(np.arange(near.docs.size), near.class_rep)]
    return cluster_parts(staging, pages, edges, classes, settings)


def _touched_nodes(edges: Sequence[Rows]) -> np.ndarray:
    """The positions of the pages that have a verified edge, increasing, one part read at
    a time."""
    found = [np.empty(0, dtype=np.int64)]
    for part in edges:
        rows = part[0 : len(part)]
        found.append(sorted_distinct(np.concatenate([rows["a"], rows["b"]])))
    return sorted_distinct(np.concatenate(found))


def _graph_edges(
    edges: Sequence[Rows], touched: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The edges renumbered over `touched` (a, b, similarity, agreement), one part read at
    a time. Their order does not matter: `Graph.from_edges` sorts each node's neighbours."""
    a, b, similarity, agree = [], [], [], []
    for part in edges:
        rows = part[0 : len(part)]
        a.append(np.searchsorted(touched, rows["a"]))
        b.append(np.searchsorted(touched, rows["b"]))
        similarity.append(rows["similarity"])
        agree.append(rows["agree"])
    if not a:
        return (
            np.empty(0, np.int64),
            np.empty(0, np.int64),
            np.empty(0, np.float32),
            np.empty(0, np.int8),
        )
    return np.concatenate(a), np.concatenate(b), np.concatenate(similarity), np.concatenate(agree)


def _class_sizes(classes: Sequence[Rows], touched: np.ndarray) -> tuple[np.ndarray, int]:
    """The class size of each touched page, and the number of classes of two pages or more
    whose representative has no edge, from the `identical` rows (representative, member),
    one part read at a time: a class is whole in one part."""
    weight = np.ones(touched.size, dtype=np.int64)
    alone = 0
    for part in classes:
        reps = part[0 : len(part)]["a"]
        if not reps.size:
            continue
        first = np.flatnonzero(np.r_[True, reps[1:] != reps[:-1]])
        rep, members = reps[first], np.diff(np.r_[first, reps.size])
        at, hit = found_in_sorted(touched, rep)
        np.add.at(weight, at[hit], members[hit])
        alone += int((~hit).sum())
    return weight, alone


def cluster_parts(
    staging: Path,
    pages: PageArrays,
    edges: Sequence[Rows],
    classes: Sequence[Rows],
    settings: Settings,
) -> int:
    """Write `assignments.parquet`; return the number of clusters with at least two pages.

    `edges` are parts of the verified edges between class representatives and `classes`
    parts of the `identical` rows (`pair_rows.PAIR_DTYPE`, by position). The graph is the
    pages that have an edge (`cluster_graph` over them, numbered in position order, which
    the rules allow); every other page is labelled by its class representative, a slice
    of pages at a time. Memory: the graph (a few arrays an edge) and one slice's arrays,
    not arrays of the crawl's pages."""
    touched = _touched_nodes(edges)
    ea, eb, edge_similarity, agree = _graph_edges(edges, touched)
    weight, alone = _class_sizes(classes, touched)
    labels = _Labels(
        touched,
        *cluster_graph(
            touched.size, ea, eb, edge_similarity, agree, weight, pages.keys[touched], settings
        ),
    )
    del ea, eb, edge_similarity, agree
    sizes = np.bincount(labels.cluster, weights=weight, minlength=touched.size)
    clusters = alone + int((sizes >= 2).sum())
    del weight, sizes
    signatures = MappedRows(staging / "signatures.npy")  # mapped per read, not kept
    with pq.ParquetWriter(
        staging / "assignments.parquet", ASSIGN_SCHEMA, compression="zstd"
    ) as writer:
        for start in range(0, len(pages), ASSIGN_SLICE):
            stop = min(start + ASSIGN_SLICE, len(pages))
            here = np.arange(start, stop, dtype=np.int64)
            rep = pages.class_rep[start:stop]
            cluster, component, identical = labels.of(rep)
            similarity = np.ones(here.size, dtype=np.float32)
            others = np.flatnonzero(cluster != here)
            similarity[others] = resemblance_to(
                pages.rows[here[others]], pages.rows[cluster[others]], signatures
            )
            table = pa.table(
                {
                    "doc_id": pages.docs[start:stop],
                    "cluster_id": pages.docs[cluster],
                    "component_id": pages.docs[component],
                    "identical_id": pages.docs[identical],
                    "class_id": pages.docs[rep],
                    "similarity_to_representative": similarity,
                },
                schema=ASSIGN_SCHEMA,
            )
            writer.write_table(table)
    return clusters


@dataclass
class _Labels:
    """The graph's labels (`cluster_graph`'s, over the `touched` pages) by position."""

    touched: np.ndarray
    cluster: np.ndarray
    component: np.ndarray
    identical: np.ndarray

    def of(self, reps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The positions of the cluster, component and identical group representatives of
        pages whose class representatives are `reps`: a representative without an edge is
        its own."""
        at, hit = found_in_sorted(self.touched, reps)
        found = []
        for labels in (self.cluster, self.component, self.identical):
            out = np.array(reps, dtype=np.int64)
            out[hit] = self.touched[labels[at[hit]]]
            found.append(out)
        return found[0], found[1], found[2]


def resemblance_to(
    rows_a: np.ndarray, rows_b: np.ndarray, signatures: Rows | np.ndarray
) -> np.ndarray:
    """The estimated resemblance of the signatures `signatures[rows_a[i]]` and
    `signatures[rows_b[i]]`, `RESEMBLANCE_ROWS` pairs at a time (two signatures each in
    memory): a page's similarity to its cluster's representative, on both engines."""
    out = np.empty(rows_a.size, dtype=np.float32)
    for start in range(0, rows_a.size, RESEMBLANCE_ROWS):
        part = slice(start, start + RESEMBLANCE_ROWS)
        out[part] = estimate_resemblance(
            np.asarray(signatures[rows_a[part]]), np.asarray(signatures[rows_b[part]])
        )
    return out
