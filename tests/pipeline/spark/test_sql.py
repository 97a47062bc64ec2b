"""The Spark engine's steps without Spark: the candidate pairs of partitioned bucket keys
agree with the embedded engine's numba bucket join; unsupported settings are refused."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from neardup.config import Settings, SettingsError
from neardup.kernels.buckets import bucket_candidates, unpack_pairs
from neardup.pipeline.executors.spark.jobs import check_settings
from neardup.pipeline.executors.spark.kernels import (
    BUCKET_PAIRS_SCHEMA,
    binary_rows,
    bucket_blob_batches,
    bucket_pair_batches,
    key_blob_batches,
    matrix_of,
)
from neardup.pipeline.steps.near_pairs import candidate_keys


@pytest.mark.parametrize("max_bucket", [2, 5, 64])
@pytest.mark.parametrize("partitions", [1, 3, 8])
def test_partitioned_bucket_pairs_match_the_embedded_join(max_bucket, partitions):
    """The keys hashed into partitions by (table, key), as the Spark near stage does, and each
    partition's buckets paired by `bucket_pair_batches`: the union of the partitions' pairs
    and the sum of their statistics are the embedded engine's over all keys at once."""
    rng = np.random.default_rng(max_bucket * 10 + partitions)
    n, tables = 400, 6
    docs = np.sort(rng.choice(10_000, n, replace=False)).astype(np.int64)
    # Few distinct keys per table: buckets of every size, some far above max_bucket.
    keys = rng.zipf(1.6, size=(n, tables)).astype(np.int64) % 40
    # Page keys unrelated to doc order, with collisions: chains follow (key, doc).
    order = rng.integers(-50, 50, n).astype(np.int64)
    packed, stats = bucket_candidates(keys, docs, max_bucket, order)
    a, b = unpack_pairs(packed)
    expected = set(zip(a.tolist(), b.tolist(), strict=True))

    bucket_keys = pa.table(
        {
            "tbl": np.tile(np.arange(tables, dtype=np.int32), n),
            "key": keys.reshape(-1),
            "doc_id": np.repeat(docs, tables),
            "order_key": np.repeat(order, tables),
        }
    )
    # Rows shuffled, then dealt to partitions by a hash of (table, key), in small batches.
    bucket_keys = bucket_keys.take(rng.permutation(bucket_keys.num_rows))
    part = (bucket_keys["tbl"].to_numpy() * 7919 + bucket_keys["key"].to_numpy()) % partitions
    found: set[tuple[int, int]] = set()
    emitted = large = 0
    for p in range(partitions):
        rows = bucket_keys.filter(pa.array(part == p))
        out = pa.Table.from_batches(
            list(bucket_pair_batches(iter(rows.to_batches(max_chunksize=50)), max_bucket)),
            schema=BUCKET_PAIRS_SCHEMA,
        )
        pairs = out.filter(out["doc_a"].is_valid())
        found |= set(zip(pairs["doc_a"].to_pylist(), pairs["doc_b"].to_pylist(), strict=True))
        figures = out.filter(out["doc_a"].is_null())
        emitted += sum(figures["emitted"].to_pylist())
        large += sum(figures["large_buckets"].to_pylist())
    assert found == expected
    assert (emitted, large) == (stats.emitted, stats.large_buckets)
    assert large > 0  # chains were exercised


@pytest.mark.parametrize(
    "settings",
    [
        Settings(method="simhash"),
        Settings(verify="exact"),
        Settings(max_shingle_df=1000),
    ],
)
def test_unsupported_settings_are_refused_before_any_work(settings):
    with pytest.raises(SettingsError, match="Spark engine"):
        check_settings(settings)


@pytest.mark.parametrize("tasks,partitions", [(1, 1), (3, 2), (5, 4)])
def test_key_blobs_give_the_embedded_candidates(tasks, partitions):
    """Signatures split over `tasks`, their keys dealt into blobs (`key_blob_batches`), the
    blobs hashed onto `partitions` as Spark's repartition on `part` does, and each
    partition paired (`bucket_blob_batches`): the embedded engine's candidate pairs over all
    signatures at once, whatever the split."""
    settings = Settings()
    rng = np.random.default_rng(tasks * 10 + partitions)
    n = 300
    base = rng.integers(0, 2**32, size=(40, settings.num_perm), dtype=np.uint64)
    # Near copies of 40 originals: some bands agree, some do not.
    signatures = base[rng.integers(0, 40, n)].astype(np.uint32)
    noise = rng.random(signatures.shape) < 0.15
    signatures[noise] = rng.integers(0, 2**32, int(noise.sum()), dtype=np.uint64).astype(np.uint32)
    docs = np.arange(n, dtype=np.int64) * 3
    order = rng.integers(-1000, 1000, n).astype(np.int64)
    keys, _, _ = candidate_keys(
        signatures, np.zeros((n, 0), np.int64), np.arange(n, dtype=np.int64), settings
    )
    packed, stats = bucket_candidates(keys, docs, settings.max_bucket_pairs, order)
    a, b = unpack_pairs(packed)
    expected = set(zip(a.tolist(), b.tolist(), strict=True))
    assert expected  # the copies collide in some band

    rows = pa.table(
        {
            "doc_id": docs,
            "minhash": pa.array(list(signatures.view(np.int32)), pa.list_(pa.int32())),
            "supers": pa.array([[]] * n, pa.list_(pa.int64())),
            "order_key": order,
        }
    )
    parts = partitions * 4
    blobs = [
        blob
        for chunk in np.array_split(np.arange(n), tasks)
        for blob in key_blob_batches(iter(rows.take(chunk).to_batches(50)), settings, parts)
    ]
    found: set[tuple[int, int]] = set()
    emitted = 0
    for partition in range(partitions):
        mine = [blob for blob in blobs if blob.column("part")[0].as_py() % partitions == partition]
        out = pa.Table.from_batches(
            list(bucket_blob_batches(iter(mine), settings.max_bucket_pairs)),
            schema=BUCKET_PAIRS_SCHEMA,
        )
        pairs = out.filter(out["doc_a"].is_valid())
        found |= set(zip(pairs["doc_a"].to_pylist(), pairs["doc_b"].to_pylist(), strict=True))
        emitted += sum(out.filter(out["doc_a"].is_null())["emitted"].to_pylist())
    assert found == expected
    assert emitted == stats.emitted


@pytest.mark.parametrize("width", [0, 3, 128])
def test_signatures_as_binary_values_come_back_as_the_same_matrix(width):
    """A list column of signatures as one binary value a row and back: the same matrix,
    after a filter and a slice (offsets into shared buffers), in chunks, and through an
    Arrow IPC round trip (what Spark hands a Python task)."""
    rng = np.random.default_rng(width)
    matrix = rng.integers(-(2**31), 2**31 - 1, size=(50, width), dtype=np.int64).astype(np.int32)
    column = pa.array([list(row) for row in matrix], pa.list_(pa.int32()))
    keep = rng.random(50) < 0.6
    picked = column.filter(pa.array(keep)).slice(2)
    binary = binary_rows(picked)
    assert binary.type == pa.binary()
    expected = matrix[keep][2:]
    assert np.array_equal(matrix_of(binary, width, np.int32), expected)
    assert np.array_equal(matrix_of(binary.slice(3, 7), width, np.int32), expected[3:10])
    chunked = pa.chunked_array([binary.slice(0, 5), binary.slice(5)])
    assert np.array_equal(matrix_of(chunked, width, np.int32), expected)
    sink = pa.BufferOutputStream()
    batch = pa.record_batch([binary], names=["minhash"])
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    back = pa.ipc.open_stream(sink.getvalue()).read_all().column("minhash")
    assert np.array_equal(matrix_of(back, width, np.int32), expected)
    assert np.array_equal(matrix_of(picked, width, np.int32), expected)  # the list form too
