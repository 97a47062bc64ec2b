"""The Spark engine's steps without Spark: the candidate pairs of partitioned bucket keys
agree with the embedded engine's numba bucket join, and the near stage's part tasks over
the ingest tasks' files give the embedded classes and edges; unsupported settings are
refused."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from neardup.config import Settings, SettingsError
from neardup.ingest.eligibility import enough_words
from neardup.kernels.buckets import (
    CandidateStats,
    bucket_candidates,
    key_parts,
    partition_pairs,
)
from neardup.pipeline.executors.spark.jobs import check_settings
from neardup.pipeline.executors.spark.kernels import matrix_of
from neardup.pipeline.executors.spark.near_files import (
    CLASSES,
    EDGES,
    NearRows,
    RangeRows,
    bucket_part,
    class_part,
    verify_part,
)
from neardup.pipeline.steps.near_pairs import (
    by_megashingles,
    candidate_keys,
    equivalence_classes,
    verified_candidates,
)


@pytest.mark.parametrize("max_bucket", [2, 5, 64])
@pytest.mark.parametrize("partitions", [1, 3, 8])
def test_partitioned_bucket_pairs_match_the_embedded_join(max_bucket, partitions):
    """The keys dealt into parts by (table, key) (`key_parts`), as both engines' near stages
    deal them, and each part's buckets paired by `partition_pairs`: the union of the parts'
    pairs and the sum of their statistics are the embedded engine's over all keys at once."""
    rng = np.random.default_rng(max_bucket * 10 + partitions)
    n, tables = 400, 6
    docs = np.sort(rng.choice(10_000, n, replace=False)).astype(np.int64)
    # Few distinct keys per table: buckets of every size, some far above max_bucket.
    keys = rng.zipf(1.6, size=(n, tables)).astype(np.int64) % 40
    # Page keys unrelated to doc order, with collisions: chains follow (key, doc).
    order = rng.integers(-50, 50, n).astype(np.int64)
    packed, stats = bucket_candidates(keys, docs, max_bucket, order)
    tbl = np.tile(np.arange(tables, dtype=np.int32), n)
    key, doc, page = keys.reshape(-1), np.repeat(docs, tables), np.repeat(order, tables)
    shuffled = rng.permutation(key.size)
    tbl, key, doc, page = tbl[shuffled], key[shuffled], doc[shuffled], page[shuffled]
    part = key_parts(tbl, key, partitions)
    found = []
    emitted = large = 0
    for p in range(partitions):
        mine = part == p
        counted = CandidateStats()
        found.append(
            partition_pairs(tbl[mine], key[mine], doc[mine], page[mine], max_bucket, counted)
        )
        emitted += counted.emitted
        large += counted.large_buckets
    assert np.array_equal(np.unique(np.concatenate(found)), packed)
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


def _text_rows(n: int, settings: Settings, seed: int) -> pa.Table:
    """Sketched text rows as an ingest task holds them (`ingest.sketch_rows`'s columns but
    the text): near copies of 40 originals, some pages with one shingle set (classes),
    some too short to be eligible, page keys with ties."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**32, size=(40, settings.num_perm), dtype=np.uint64)
    origin = rng.integers(0, 40, n)
    signatures = base[origin].astype(np.uint32)
    noise = rng.random(signatures.shape) < 0.15
    signatures[noise] = rng.integers(0, 2**32, int(noise.sum()), dtype=np.uint64).astype(np.uint32)
    supers = rng.integers(0, 3, size=(n, settings.supershingle_count)).astype(np.int64)
    fps = np.where(rng.random(n) < 0.2, origin, rng.integers(100, 2**40, n)).astype(np.int64)
    return pa.table(
        {
            "doc_id": np.arange(n, dtype=np.int64),
            "n_tokens": np.where(rng.random(n) < 0.1, 3, 400).astype(np.int32),
            "n_shingles": np.full(n, 390, np.int32),
            "shingle_fp": fps,
            "minhash": pa.array(list(signatures.view(np.int32)), pa.list_(pa.int32())),
            "supers": pa.array(list(supers), pa.list_(pa.int64())),
            "order_key": rng.integers(-20, 20, n).astype(np.int64),
        }
    )


def _embedded_near(rows: pa.Table, settings: Settings) -> tuple[dict, set, int, int]:
    """The embedded rules over all rows at once: class of each eligible page, verified
    edges (doc_a, doc_b, similarity, agree), unique and emitted candidates."""
    eligible = np.flatnonzero(
        enough_words(rows["n_tokens"].to_numpy(), rows["n_shingles"].to_numpy(), 5)
    )
    docs = rows["doc_id"].to_numpy()[eligible]
    order = rows["order_key"].to_numpy()[eligible]
    rep = equivalence_classes(rows["shingle_fp"].to_numpy()[eligible], order)
    reps = np.flatnonzero(rep == np.arange(eligible.size))
    width = settings.supershingle_count
    signatures = matrix_of(rows["minhash"], settings.num_perm, np.int32).view(np.uint32)
    supers = matrix_of(rows["supers"], width, np.int64)
    keys, _, _ = candidate_keys(signatures, supers, eligible[reps], settings)
    found = verified_candidates(
        keys,
        eligible[reps],
        signatures,
        settings,
        supers=supers,
        megashingle=by_megashingles(settings),
        order=order[reps],
    )
    edges = set(
        zip(
            found.a.tolist(),
            found.b.tolist(),
            found.similarity.astype(np.float32).tolist(),
            found.agree.tolist(),
            strict=True,
        )
    )
    classes = dict(zip(docs.tolist(), docs[rep].tolist(), strict=True))
    return classes, edges, found.stats.unique, found.stats.emitted


@pytest.mark.parametrize("method", ["minhash", "supershingles"])
@pytest.mark.parametrize("ranges,parts", [(1, 1), (3, 2), (5, 7)])
def test_near_files_give_the_embedded_classes_and_edges(tmp_path, method, ranges, parts):
    """Rows split into `ranges` ingest ranges (`NearRows`, ids local to each range), then
    the classes, bucket pairs and verification of `parts` part tasks over their files
    (`spark/near_files.py`): the embedded engine's classes, verified edges and candidate
    counts over all rows at once, whatever the split, small buckets' cap and chains
    included."""
    settings = Settings(method=method, min_tokens=5, max_bucket_pairs=3)
    rows = _text_rows(400, settings, ranges * 10 + parts)
    classes, edges, unique, emitted = _embedded_near(rows, settings)
    assert edges and len(set(classes.values())) < len(classes)

    bounds = np.linspace(0, rows.num_rows, ranges + 1).astype(int)
    starts = bounds[:-1].astype(np.int64)
    for r in range(ranges):
        near = NearRows(settings)
        part = rows.slice(bounds[r], bounds[r + 1] - bounds[r])
        local = pc.subtract(part["doc_id"], pa.scalar(int(bounds[r]), pa.int64()))
        part = part.set_column(0, "doc_id", local)
        for batch in part.to_batches(max_chunksize=37):
            near.add(pa.Table.from_batches([batch]))
        near.write(tmp_path, r, part.num_rows)

    for p in range(parts):
        class_part(tmp_path, p, parts, starts)
    found = pq.read_table(tmp_path / CLASSES)
    got_classes = zip(found["doc_id"].to_pylist(), found["class_id"].to_pylist(), strict=True)
    assert dict(got_classes) == classes
    got_emitted = sum(
        bucket_part(tmp_path, p, parts, starts, settings.max_bucket_pairs)[0] for p in range(parts)
    )
    got_unique = sum(verify_part(tmp_path, p, starts, settings) for p in range(parts))
    out = pq.read_table(tmp_path / EDGES)
    got = set(zip(*(out[c].to_pylist() for c in out.column_names), strict=True))
    assert got == edges
    assert (got_unique, got_emitted) == (unique, emitted)


def test_signatures_are_read_by_document_id(tmp_path):
    """`RangeRows` reads a page's signature by its run id, whichever range wrote it."""
    settings = Settings()
    rows = _text_rows(120, settings, 1)
    for r, (lo, hi) in enumerate([(0, 50), (50, 51), (51, 120)]):
        near = NearRows(settings)
        part = rows.slice(lo, hi - lo)
        part = part.set_column(0, "doc_id", pc.subtract(part["doc_id"], pa.scalar(lo)))
        near.add(part)
        near.write(tmp_path, r, hi - lo)
    signatures = matrix_of(rows["minhash"], settings.num_perm, np.int32).view(np.uint32)
    read = RangeRows(tmp_path, np.array([0, 50, 51]), "minhash")
    wanted = np.array([119, 0, 50, 51, 49, 50], dtype=np.int64)
    assert np.array_equal(read[wanted], signatures[wanted])


@pytest.mark.parametrize("width", [0, 3, 128])
def test_signature_lists_come_back_as_the_same_matrix(width):
    """A list column of signatures back as the matrix, after a filter and a slice
    (offsets into shared buffers) and in chunks."""
    rng = np.random.default_rng(width)
    matrix = rng.integers(-(2**31), 2**31 - 1, size=(50, width), dtype=np.int64).astype(np.int32)
    column = pa.array([list(row) for row in matrix], pa.list_(pa.int32()))
    keep = rng.random(50) < 0.6
    picked = column.filter(pa.array(keep)).slice(2)
    expected = matrix[keep][2:]
    assert np.array_equal(matrix_of(picked, width, np.int32), expected)
    chunked = pa.chunked_array([picked.slice(0, 5), picked.slice(5)])
    assert np.array_equal(matrix_of(chunked, width, np.int32), expected)
