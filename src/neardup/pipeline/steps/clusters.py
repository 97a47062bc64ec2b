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


def run_clusters(staging: Path, near: NearResult, settings: Settings) -> int:
    """Write `assignments.parquet`; return the number of clusters with at least two pages."""
    reps = near.reps
    node_of = np.searchsorted(reps, near.class_rep)  # node of every eligible page
    class_size = np.bincount(node_of, minlength=reps.size)
    ea = np.searchsorted(reps, near.edge_a)
    eb = np.searchsorted(reps, near.edge_b)
    graph = Graph.from_edges(reps.size, ea, eb, near.similarity)

    component = connected_components(graph)
    tie = near.keys[reps]
    if settings.cluster_rule == "core":
        cluster_node = core_clusters(graph, settings.strong_similarity, class_size, tie)
    elif settings.cluster_rule == "center":
        cluster_node = center_clusters(graph, class_size, tiebreak=tie)
    else:
        cluster_node = component_representatives(graph, component, class_size, tie)

    full = near.agree == settings.supershingle_count if settings.has_supershingles else None
    if full is not None:
        identical_graph = Graph.from_edges(reps.size, ea[full], eb[full])
        identical_node = connected_components(identical_graph)
    else:
        identical_node = np.arange(reps.size)

    def doc_of_node(nodes: np.ndarray) -> np.ndarray:
        return near.docs[reps[nodes[node_of]]]

    cluster_doc = doc_of_node(cluster_node)
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
    table = pa.table(
        {
            "doc_id": near.docs,
            "cluster_id": cluster_doc,
            "component_id": doc_of_node(component),
            "identical_id": doc_of_node(identical_node),
            "class_id": near.docs[near.class_rep],
            "similarity_to_representative": similarity,
        },
        schema=ASSIGN_SCHEMA,
    )
    pq.write_table(table, staging / "assignments.parquet", compression="zstd")
    sizes = np.bincount(cluster_node[node_of], minlength=reps.size)
    return int((sizes >= 2).sum())
