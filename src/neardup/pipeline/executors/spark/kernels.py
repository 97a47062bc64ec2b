"""The per-batch work of the Spark stages: the embedded engine's kernels on Arrow batches.

Each function is the body of a `mapInArrow` or `applyInArrow` call, so sketching, band keys
and the clustering rule run the very code the embedded engine runs, which is what makes
the two engines' tables equal.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neardup.config import Settings
from neardup.kernels import SIGNATURE_DTYPE, estimate_resemblance
from neardup.kernels.buckets import CandidateStats, key_parts, partition_pairs, unpack_pairs
from neardup.kernels.graph import Graph
from neardup.pipeline.steps.clusters import ASSIGN_SCHEMA, rule_representatives
from neardup.pipeline.steps.near_pairs import (
    by_megashingles,
    candidate_keys,
    pair_scores,
    passes,
)

KEYS_SCHEMA = pa.schema(
    [("tbl", pa.int32()), ("key", pa.int64()), ("doc_id", pa.int64()), ("order_key", pa.int64())]
)
# A task's bucket keys dealt into parts by (table, key): one row per part (or per 64 MiB of
# it), the rows of KEYS_SCHEMA as one Arrow IPC stream (`key_blob_batches`).
KEY_BLOBS_SCHEMA = pa.schema([("part", pa.int32()), ("keys", pa.binary())])
BLOB_ROWS = (64 << 20) // 28  # KEYS_SCHEMA rows are 28 bytes
# A partition's candidate pairs, then one row of its statistics (doc_a and doc_b null).
BUCKET_PAIRS_SCHEMA = pa.schema(
    [
        ("doc_a", pa.int64()),
        ("doc_b", pa.int64()),
        ("emitted", pa.int64()),
        ("large_buckets", pa.int64()),
        ("largest_bucket", pa.int64()),
    ]
)
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
    """A column of fixed-width lists, or of binary values holding `width` values of `dtype`
    each (`binary_rows`), back as an N x width matrix."""
    if not width or not len(column):
        return np.empty((len(column), width), dtype)
    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        index = np.int64 if pa.types.is_large_binary(array.type) else np.int32
        _, offsets_buffer, data = array.buffers()
        offsets = np.frombuffer(offsets_buffer, index)[array.offset : array.offset + len(array) + 1]
        flat = np.frombuffer(data, np.uint8)[offsets[0] : offsets[-1]]
        return flat.view(dtype).reshape(-1, width)
    values = pc.list_flatten(column)
    flat = np.asarray(values.to_numpy(zero_copy_only=False))
    return flat.view(dtype).reshape(-1, width)


def binary_rows(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column of fixed-width lists as one binary value a row, the bytes of its values.

    Why: Spark turns an Arrow list into its rows element by element and a binary value in
    one copy, and the signatures that meet in a join (verification, the resemblance to a
    representative) only pass through Spark; `matrix_of` reads them back."""
    flat = np.ascontiguousarray(pc.list_flatten(column).to_numpy(zero_copy_only=False))
    n = len(column)
    width = flat.nbytes // n if n else 0
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(width)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(flat)])


def key_batches(batches: Iterator[pa.RecordBatch], settings: Settings) -> Iterator[pa.RecordBatch]:
    """Class representatives -> one (table, key, doc) row per bucket table, by the embedded
    engine's `candidate_keys` (LSH bands, or megashingles for the super-shingle method)."""
    n_ss = settings.supershingle_count if settings.has_supershingles else 0
    for batch in batches:
        n = batch.num_rows
        if not n:
            continue
        signature = matrix_of(batch.column("minhash"), settings.num_perm, np.int32)
        supers = matrix_of(batch.column("supers"), n_ss, np.int64)
        keys, _, _ = candidate_keys(
            signature.view(SIGNATURE_DTYPE), supers, np.arange(n, dtype=np.int64), settings
        )
        tables = keys.shape[1]
        docs = np.asarray(batch.column("doc_id"))
        order = np.asarray(batch.column("order_key"), dtype=np.int64)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(np.tile(np.arange(tables, dtype=np.int32), n)),
                pa.array(keys.reshape(-1)),
                pa.array(np.repeat(docs, tables)),
                pa.array(np.repeat(order, tables)),
            ],
            schema=KEYS_SCHEMA,
        )


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


def key_blob_batches(
    batches: Iterator[pa.RecordBatch], settings: Settings, parts: int
) -> Iterator[pa.RecordBatch]:
    """Class representatives -> their bucket keys (`key_batches`), dealt into `parts` parts
    by (table, key), each part's keys of the whole task as one Arrow IPC stream in one row.

    Why blobs: the keys are 18 rows a page at the default settings, and Spark moved them a
    row at a time (Arrow to JVM rows, a shuffle of rows, rows back to Arrow), which cost
    several times the numba work on them; a shuffle of a few large binary rows per task
    costs a copy of the bytes. The partitioning is the same: a bucket is whole in one part,
    and a part in one partition."""
    found = [batch for batch in key_batches(batches, settings) if batch.num_rows]
    if not found:
        return
    keys = pa.Table.from_batches(found)
    del found
    part = key_parts(keys.column("tbl").to_numpy(), keys.column("key").to_numpy(), parts)
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(parts + 1))
    for p in range(parts):
        lo, hi = int(bounds[p]), int(bounds[p + 1])
        for start in range(lo, hi, BLOB_ROWS):
            rows = keys.take(pa.array(order[start : min(hi, start + BLOB_ROWS)]))
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, KEYS_SCHEMA) as writer:
                writer.write_table(rows)
            yield pa.RecordBatch.from_arrays(
                [pa.array([p], pa.int32()), pa.array([sink.getvalue().to_pybytes()], pa.binary())],
                schema=KEY_BLOBS_SCHEMA,
            )


def bucket_blob_batches(
    batches: Iterator[pa.RecordBatch], max_bucket: int
) -> Iterator[pa.RecordBatch]:
    """One partition of key blobs (`key_blob_batches`) -> its candidate pairs and its
    statistics row, by `bucket_pair_batches` over the keys the blobs hold."""

    def keys() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            blobs = batch.column("keys")
            for i in range(len(blobs)):  # each blob read where it lies, not copied
                yield from pa.ipc.open_stream(blobs[i].as_buffer()).read_all().to_batches()

    yield from bucket_pair_batches(keys(), max_bucket)


def bucket_pair_batches(
    batches: Iterator[pa.RecordBatch], max_bucket: int
) -> Iterator[pa.RecordBatch]:
    """One partition of bucket keys, each bucket whole in it (the keys are partitioned by
    table and key) -> its candidate pairs by the embedded rule (`kernels.buckets.
    table_pairs`: every pair of a small bucket, the chain of a large one in page-key order),
    each pair once per partition, then one row of the partition's statistics."""
    parts = [batch for batch in batches if batch.num_rows]
    if not parts:
        return
    keys = pa.Table.from_batches(parts)
    tbl = keys.column("tbl").to_numpy()
    key = keys.column("key").to_numpy()
    doc = keys.column("doc_id").to_numpy()
    order = keys.column("order_key").to_numpy()
    del keys, parts
    stats = CandidateStats()
    packed = partition_pairs(tbl, key, doc, order, max_bucket, stats)
    a, b = unpack_pairs(packed)
    none = pa.nulls(a.size, pa.int64())
    yield pa.RecordBatch.from_arrays(
        [pa.array(a), pa.array(b), none, none, none], schema=BUCKET_PAIRS_SCHEMA
    )
    figures = [stats.emitted, stats.large_buckets, stats.largest_bucket]
    yield pa.RecordBatch.from_arrays(
        [pa.nulls(1, pa.int64()), pa.nulls(1, pa.int64())]
        + [pa.array([value], pa.int64()) for value in figures],
        schema=BUCKET_PAIRS_SCHEMA,
    )


def _estimates(batch: pa.RecordBatch, k: int) -> np.ndarray:
    """Estimated resemblance of the signatures in columns `minhash_a` and `minhash_b`."""
    return np.asarray(
        estimate_resemblance(
            matrix_of(batch.column("minhash_a"), k, np.int32),
            matrix_of(batch.column("minhash_b"), k, np.int32),
        ),
        dtype=np.float64,
    ).reshape(-1)


def verify_batches(
    batches: Iterator[pa.RecordBatch], settings: Settings
) -> Iterator[pa.RecordBatch]:
    """Candidate pairs with both sketches -> the verified edges, by the embedded engine's
    `pair_scores` and `passes`: the estimated resemblance against the threshold, or two
    agreeing super-shingles."""
    k = settings.num_perm
    n_ss = settings.supershingle_count if settings.has_supershingles else 0
    megashingle = by_megashingles(settings)
    for batch in batches:
        if not batch.num_rows:
            continue
        sim, agree = pair_scores(
            matrix_of(batch.column("minhash_a"), k, np.int32),
            matrix_of(batch.column("minhash_b"), k, np.int32),
            matrix_of(batch.column("supers_a"), n_ss, np.int64) if n_ss else None,
            matrix_of(batch.column("supers_b"), n_ss, np.int64) if n_ss else None,
        )
        keep = passes(sim, agree, settings.threshold, megashingle)
        yield pa.RecordBatch.from_arrays(
            [
                batch.column("doc_a").filter(pa.array(keep)),
                batch.column("doc_b").filter(pa.array(keep)),
                pa.array(sim.astype(np.float32)[keep]),
                pa.array(np.asarray(agree, dtype=np.int32)[keep]),
            ],
            schema=EDGE_SCHEMA,
        )


def representative_batches(
    batches: Iterator[pa.RecordBatch], settings: Settings
) -> Iterator[pa.RecordBatch]:
    """Assignments with the page's and its representative's signatures -> the assignment
    rows, with the estimated resemblance to the representative (1 for itself), as
    `steps.clusters` computes it."""
    k = settings.num_perm
    for batch in batches:
        if not batch.num_rows:
            continue
        sim = _estimates(batch, k)
        doc = np.asarray(batch.column("doc_id"))
        similarity = np.where(doc == np.asarray(batch.column("cluster_id")), 1.0, sim)
        columns = [batch.column(name) for name in ASSIGN_SCHEMA.names[:-1]]
        yield pa.RecordBatch.from_arrays(
            [*columns, pa.array(similarity.astype(np.float32))], schema=ASSIGN_SCHEMA
        )


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
