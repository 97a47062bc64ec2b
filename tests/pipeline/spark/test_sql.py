"""The Spark engine's relational steps without Spark: the candidate SQL runs on DuckDB and
agrees with the embedded engine's numba bucket join; unsupported settings are refused."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from neardup.config import Settings, SettingsError
from neardup.kernels.buckets import bucket_candidates, unpack_pairs
from neardup.pipeline.executors.spark.jobs import check_settings, read_sql


@pytest.mark.parametrize("max_bucket", [2, 5, 64])
def test_candidate_sql_on_duckdb_matches_the_embedded_join(max_bucket):
    rng = np.random.default_rng(max_bucket)
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
    con = duckdb.connect()
    con.register("bucket_keys", bucket_keys)
    params = {"keys": "bucket_keys", "max_bucket": max_bucket}
    rows = con.sql(read_sql("candidates.sql").format(**params)).fetchall()
    assert {(r[0], r[1]) for r in rows} == expected
    emitted, large, largest = con.sql(read_sql("candidate_stats.sql").format(**params)).fetchall()[
        0
    ]
    assert (emitted, large, largest) == (stats.emitted, stats.large_buckets, stats.largest_bucket)
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
