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
from neardup.kernels.sorting import sorted_distinct
from neardup.pipeline.steps.near import NearResult
from neardup.pipeline.steps.near_pairs import MappedRows

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


# Rows of `assignments.parquet` built and written at a time.
ASSIGN_SLICE = 1 << 20


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


def run_clusters(staging: Path, near: NearResult, settings: Settings) -> int:
    """Write `assignments.parquet`; return the number of clusters with at least two pages."""
    reps = near.reps
    n = reps.size
    node_of = np.searchsorted(reps, near.class_rep)  # node of every eligible page
    class_size = np.bincount(node_of, minlength=n)
    ea = np.searchsorted(reps, near.edge_a)
    eb = np.searchsorted(reps, near.edge_b)
    cluster_node, component, identical_node = cluster_graph(
        n, ea, eb, near.similarity, near.agree, class_size, near.keys[reps], settings
    )
    del ea, eb

    rep_pos = reps[cluster_node[node_of]]
    similarity = np.ones(near.docs.size, dtype=np.float32)
    others = np.flatnonzero(rep_pos != np.arange(near.docs.size))
    if others.size:
        signatures = MappedRows(staging / "signatures.npy")  # mapped per read, not kept
        for start in range(0, others.size, 200_000):
            part = others[start : start + 200_000]
            similarity[part] = estimate_resemblance(
                np.asarray(signatures[near.rows[part]]),
                np.asarray(signatures[near.rows[rep_pos[part]]]),
            )
    del rep_pos, others
    with pq.ParquetWriter(
        staging / "assignments.parquet", ASSIGN_SCHEMA, compression="zstd"
    ) as writer:
        for start in range(0, near.docs.size, ASSIGN_SLICE):
            part = slice(start, start + ASSIGN_SLICE)
            nodes = node_of[part]

            def doc_of_node(labels: np.ndarray, nodes: np.ndarray = nodes) -> np.ndarray:
                return near.docs[reps[labels[nodes]]]

            table = pa.table(
                {
                    "doc_id": near.docs[part],
                    "cluster_id": doc_of_node(cluster_node),
                    "component_id": doc_of_node(component),
                    "identical_id": doc_of_node(identical_node),
                    "class_id": near.docs[near.class_rep[part]],
                    "similarity_to_representative": similarity[part],
                },
                schema=ASSIGN_SCHEMA,
            )
            writer.write_table(table)
    sizes = np.bincount(cluster_node[node_of], minlength=n)
    return int((sizes >= 2).sum())
