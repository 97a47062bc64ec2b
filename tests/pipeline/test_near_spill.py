"""The near stage's bounded-memory helpers (issue 16) give what the in-memory arrays gave:
band keys spilled to disk, signature rows read through short-lived maps, signature files
written without a map, and page keys read a batch of URLs at a time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.ingest.urls import normalize_url
from neardup.kernels.buckets import bucket_candidates
from neardup.pipeline.steps import near
from neardup.pipeline.steps.near_pairs import (
    MappedRows,
    SpilledKeys,
    lsh_keys,
    lsh_shape,
    page_keys,
    url_key,
    verified_candidates,
)


def _signatures(n: int, k: int, seed: int = 0) -> np.ndarray:
    """Signatures with many near-copies, so that bands collide and pairs verify."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**32, size=(n // 4 + 1, k), dtype=np.uint64).astype(np.uint32)
    sig = base[rng.integers(0, base.shape[0], size=n)].copy()
    flip = rng.random(sig.shape) < 0.1
    sig[flip] = rng.integers(0, 2**32, size=int(flip.sum()), dtype=np.uint64).astype(np.uint32)
    return sig


def test_spilled_keys_give_the_same_candidates(tmp_path: Path) -> None:
    sig = _signatures(3000, 128)
    bands, rows = lsh_shape(Settings())
    in_memory = lsh_keys(sig, None, bands, rows)
    spilled = lsh_keys(sig, None, bands, rows, spill=tmp_path / "keys.tmp")
    assert isinstance(spilled, SpilledKeys) and spilled.shape == in_memory.shape
    for t in range(bands):
        assert np.array_equal(spilled[:, t], in_memory[:, t])
    ids = np.arange(sig.shape[0])
    order = np.random.default_rng(1).integers(-(2**62), 2**62, size=ids.size)
    want, want_stats = bucket_candidates(in_memory, ids, 8, order)
    got, got_stats = bucket_candidates(spilled, ids, 8, order)
    assert want.size > 1000  # the test data makes real candidates
    assert np.array_equal(got, want) and got_stats == want_stats
    spilled.close()
    assert not (tmp_path / "keys.tmp").exists()


def test_mapped_rows_read_like_a_memory_map(tmp_path: Path) -> None:
    sig = _signatures(500, 128)
    np.save(tmp_path / "s.npy", sig)
    rows = MappedRows(tmp_path / "s.npy")
    assert rows.shape == sig.shape and len(rows) == 500
    pick = np.array([499, 0, 7, 7, 250])
    assert np.array_equal(rows[pick], sig[pick])
    many = np.random.default_rng(2).integers(0, 500, size=20_000)  # gathered in blocks
    assert np.array_equal(rows[many], sig[many])
    assert np.array_equal(rows[10:20], sig[10:20])
    s = Settings()
    ids = np.arange(500)
    keys = lsh_keys(sig, None, *lsh_shape(s))
    a = verified_candidates(keys, ids, sig, s)
    b = verified_candidates(keys, ids, rows, s)
    assert a.a.size > 50  # the test data makes real pairs
    assert np.array_equal(a.a, b.a) and np.array_equal(a.similarity, b.similarity)
    np.save(tmp_path / "empty.npy", np.empty((0, 6), dtype=np.int64))
    empty = MappedRows(tmp_path / "empty.npy")
    assert empty[np.array([], dtype=np.int64)].shape == (0, 6)


def test_eligible_keys_by_batches_match_all_urls_at_once(tmp_path: Path, monkeypatch) -> None:
    """Page keys read a few URLs at a time, from a table in any row order, with URL-less
    pages and pages that are not eligible: the keys of the plain reference."""
    rng = np.random.default_rng(4)
    n = 1000
    doc_ids = rng.permutation(n).astype(np.int64)
    urls = [
        None
        if i % 97 == 0
        else "  "  # blank: a key of its own, not the fingerprint
        if i % 89 == 0
        else f"HTTP://Up.example:80/a/../p/{i}#top"  # normalized before it is hashed
        if i % 83 == 0
        else f"https://h{i % 13}.example/p/{i}"
        for i in doc_ids
    ]
    identities = [normalize_url(u) if u else None for u in urls]  # as the ingest writes them
    pq.write_table(
        pa.table(
            {
                "doc_id": doc_ids,
                "url": pa.array(urls, pa.string()),
                "url_key": pa.array(identities, pa.string()),
            }
        ),
        tmp_path / "pages_raw.parquet",
        row_group_size=128,
    )
    monkeypatch.setattr(near, "URL_BATCH", 100)
    eligible = np.sort(rng.choice(n, size=600, replace=False)).astype(np.int64)
    fps = rng.integers(-(2**62), 2**62, size=eligible.size)
    got = near.eligible_keys(tmp_path, eligible, fps)
    url_of = dict(zip(doc_ids.tolist(), urls, strict=True))
    want = np.array(
        [url_key(url_of[d]) if url_of[d] else f for d, f in zip(eligible, fps, strict=True)]
    )
    assert np.array_equal(got, want)
    assert np.array_equal(got, page_keys([url_of[d] for d in eligible.tolist()], fps))
