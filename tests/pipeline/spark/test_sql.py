"""The Spark engine's steps without Spark: the candidate pairs of partitioned bucket keys
agree with the embedded engine's numba bucket join; unsupported settings are refused."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from neardup.config import Settings, SettingsError
from neardup.kernels.buckets import bucket_candidates, unpack_pairs
from neardup.pipeline.executors.spark.jobs import check_settings
from neardup.pipeline.executors.spark.kernels import BUCKET_PAIRS_SCHEMA, bucket_pair_batches


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
