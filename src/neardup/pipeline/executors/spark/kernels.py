"""The per-batch work of the Spark stages: the embedded engine's kernels on Arrow batches.

Each function is the body of a `mapInArrow` or `applyInArrow` call, so the clustering rule
runs the very code the embedded engine runs, which is what makes the two engines' tables
equal (the near stage's keys, pairs and verification run in plain tasks over files:
`spark/near_files.py`).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neardup.config import Settings
from neardup.kernels.graph import Graph
from neardup.pipeline.steps.clusters import rule_representatives

CLUSTER_SCHEMA = pa.schema([("doc_id", pa.int64()), ("cluster_doc", pa.int64())])
EDGE_SCHEMA = pa.schema(
    [
        ("doc_a", pa.int64()),
        ("doc_b", pa.int64()),
        ("similarity", pa.float32()),
        ("agree", pa.int32()),  # super-shingles in agreement, -1 when not computed
    ]
)


def matrix_of(column: pa.Array | pa.ChunkedArray, width: int, dtype: type) -> np.ndarray:
    """A column of fixed-width lists (the ingest files' signatures) back as an N x width
    matrix of `dtype`, the values' buffer viewed, not converted."""
    if not width or not len(column):
        return np.empty((len(column), width), dtype)
    flat = np.asarray(pc.list_flatten(column).to_numpy(zero_copy_only=False))
    return flat.view(dtype).reshape(-1, width)


def with_input_idx(
    batches: Iterator[pa.RecordBatch], firsts: np.ndarray, inputs: np.ndarray
) -> Iterator[pa.RecordBatch]:
    """Each row (a `doc_id` column) with the input it comes from: `firsts` are the inputs'
    first document ids in input order (ascending), `inputs` their indexes; an input
    without records owns no id, since the next one starts at the same id."""
    for batch in batches:
        doc = np.asarray(batch.column("doc_id"), dtype=np.int64)
        where = np.searchsorted(firsts, doc, side="right") - 1
        yield batch.append_column("input_idx", pa.array(inputs[where], pa.int32()))


def cluster_component(nodes: pa.Table, edges: pa.Table, settings: Settings) -> pa.Table:
    """One connected component's pages -> their cluster representatives, by the embedded
    rule. The rules only compare nodes of one component, ties go by page key and then by
    node number, which follows doc ids, so clustering each component on its own gives the
    global answer."""
    order = np.argsort(np.asarray(nodes.column("doc_id")))
    docs = np.asarray(nodes.column("doc_id"))[order]
    weight = np.asarray(nodes.column("weight"), dtype=np.int64)[order]
    tie = np.asarray(nodes.column("order_key"), dtype=np.int64)[order]
    a = np.searchsorted(docs, np.asarray(edges.column("doc_a")))
    b = np.searchsorted(docs, np.asarray(edges.column("doc_b")))
    similarity = np.asarray(edges.column("similarity"), dtype=np.float32)
    graph = Graph.from_edges(docs.size, a, b, similarity)
    rep = rule_representatives(graph, weight, tie, settings)
    return pa.table({"doc_id": docs, "cluster_doc": docs[rep]}, schema=CLUSTER_SCHEMA)
