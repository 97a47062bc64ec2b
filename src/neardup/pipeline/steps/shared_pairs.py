"""All pairs of documents sharing at least T features (chunks, sketch elements): the
"iceberg query" of Shivakumar & Garcia-Molina (1998), two ways.

The input is a list of (feature, doc) postings. A feature held by n documents stands for
n(n-1)/2 (doc, doc) rows; the overlap of a pair is how many such rows it gets.

- **sort-based** (`join="sort"`): materialise those rows and count them per pair, a DuckDB
  self-join with `GROUP BY doc_a, doc_b HAVING count(*) >= T` (store/sql/shared_pairs.sql).
  Simple, exact, and the intermediate row count is the sum of n(n-1)/2 over features.
- **probabilistic / coarse counting** (`join="iceberg"`): one scan hashes every (doc, doc)
  row into one of m counters; a bitmap marks the heavy buckets (count >= T); a second scan
  (the candidate-selection scan) emits only the rows whose pair falls in a heavy bucket;
  counting those rows per pair is the exact count of every candidate pair (a pair's rows all
  go to its one bucket, so a pair with >= T rows always lands in a heavy bucket: no pair is
  missed), and the candidates below T are the false positives removed. Only rows of heavy
  buckets are ever materialised, which is the point when most pairs share few features.

Very common features would make the row count quadratic: a feature held by more than
`max_df` documents is dropped first (Broder's "shared by more than 1000 documents").
Both joins return the same pairs, sorted by (doc_a, doc_b), doc_a < doc_b.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa

from neardup.kernels.hashing import U64, mix64
from neardup.kernels.jit import njit

_ICEBERG_SEED = U64(0x5851F42D4C957F2D)


@dataclass
class JoinStats:
    """What one all-pairs overlap computation did (for the summary and the benchmark)."""

    join: str = "sort"
    threshold: int = 1
    postings: int = 0  # distinct (feature, doc) rows given
    common_features: int = 0  # features dropped for being held by more than max_df docs
    join_rows: int = 0  # (doc, doc) rows a sort-based join materialises
    materialised_rows: int = 0  # rows this join actually materialised
    buckets: int = 0  # iceberg: counters
    heavy_buckets: int = 0
    candidates: int = 0  # distinct pairs counted exactly
    pairs: int = 0  # pairs with >= threshold shared features
    false_positives: int = 0  # candidates below the threshold

    def as_dict(self) -> dict:
        return asdict(self)


def postings(
    features: np.ndarray, docs: np.ndarray, max_df: int, stats: JoinStats
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (feature, doc) rows sorted by feature then doc, keeping only the features
    held by 2..max_df documents (max_df 0: no cap); also the start of every feature group
    (plus the end)."""
    features = np.asarray(features, dtype=np.int64)
    docs = np.asarray(docs, dtype=np.int64)
    order = np.lexsort((docs, features))
    f, d = features[order], docs[order]
    if f.size:
        keep = np.ones(f.size, dtype=bool)
        keep[1:] = (f[1:] != f[:-1]) | (d[1:] != d[:-1])
        f, d = f[keep], d[keep]
    stats.postings = int(f.size)
    if not f.size:
        return f, d, np.zeros(1, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, f[1:] != f[:-1]])
    df = np.diff(np.r_[starts, f.size])
    ok = df >= 2
    if max_df:
        stats.common_features = int((df > max_df).sum())
        ok &= df <= max_df
    row_ok = np.repeat(ok, df)
    f, d = f[row_ok], d[row_ok]
    df = df[ok]
    bounds = np.zeros(df.size + 1, dtype=np.int64)
    np.cumsum(df, out=bounds[1:])
    stats.join_rows = int((df * (df - 1) // 2).sum())
    return f, d, bounds


def shared_pairs_sort(
    features: np.ndarray, docs: np.ndarray, threshold: int, stats: JoinStats, threads: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort-based join in DuckDB over postings (already capped by `postings`)."""
    import duckdb  # here: the index's modules import this one, and never join by sorting

    from neardup.store.run import read_sql

    stats.join, stats.threshold = "sort", threshold
    stats.materialised_rows = stats.join_rows
    con = duckdb.connect()
    try:
        con.execute(f"SET threads = {max(1, threads)}")
        table = pa.table({"fp": features, "doc": docs})
        con.register("postings", table)
        out = con.sql(
            read_sql("shared_pairs.sql").format(threshold=int(threshold))
        ).to_arrow_table()
    finally:
        con.close()
    a = out.column("doc_a").to_numpy().astype(np.int64)
    b = out.column("doc_b").to_numpy().astype(np.int64)
    shared = out.column("shared").to_numpy().astype(np.int64)
    stats.candidates = int(a.size)  # no candidate step: every pair is counted exactly
    stats.pairs = int(a.size)
    stats.false_positives = 0
    return a, b, shared


@njit(inline="always")
def _bucket(a: np.int64, b: np.int64, shift: np.uint64) -> np.int64:
    key = (U64(a) << U64(32)) | U64(b)
    return np.int64(mix64(key ^ _ICEBERG_SEED) >> shift)


@njit(cache=True)
def _coarse_count(docs: np.ndarray, bounds: np.ndarray, counts: np.ndarray, shift: np.uint64):
    for g in range(bounds.shape[0] - 1):
        for p in range(bounds[g], bounds[g + 1]):
            for q in range(p + 1, bounds[g + 1]):
                k = _bucket(docs[p], docs[q], shift)
                if counts[k] < np.uint32(0xFFFFFFFF):
                    counts[k] += np.uint32(1)


@njit(cache=True)
def _candidate_scan(
    docs: np.ndarray, bounds: np.ndarray, heavy: np.ndarray, shift: np.uint64
) -> np.ndarray:
    n = 0
    for g in range(bounds.shape[0] - 1):
        for p in range(bounds[g], bounds[g + 1]):
            for q in range(p + 1, bounds[g + 1]):
                n += heavy[_bucket(docs[p], docs[q], shift)]
    out = np.empty(n, dtype=np.int64)
    k = 0
    for g in range(bounds.shape[0] - 1):
        for p in range(bounds[g], bounds[g + 1]):
            for q in range(p + 1, bounds[g + 1]):
                if heavy[_bucket(docs[p], docs[q], shift)]:
                    out[k] = (docs[p] << 32) | docs[q]
                    k += 1
    return out


def shared_pairs_iceberg(
    docs: np.ndarray, bounds: np.ndarray, threshold: int, buckets: int, stats: JoinStats
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coarse counting over postings (see module doc); `buckets` a power of two."""
    stats.join, stats.threshold, stats.buckets = "iceberg", threshold, buckets
    docs = np.ascontiguousarray(docs, dtype=np.int64)
    if docs.size and docs.max() >= 2**31:
        raise ValueError("document ids must be below 2**31")
    shift = np.uint64(64 - (int(buckets).bit_length() - 1))
    counts = np.zeros(buckets, dtype=np.uint32)
    _coarse_count(docs, bounds, counts, shift)
    heavy = (counts >= threshold).astype(np.uint8)  # the bitmap; the counters go
    del counts
    stats.heavy_buckets = int(heavy.sum())
    rows = _candidate_scan(docs, bounds, heavy, shift)
    stats.materialised_rows = int(rows.size)
    packed, shared = np.unique(rows, return_counts=True)
    del rows
    stats.candidates = int(packed.size)
    keep = shared >= threshold
    packed, shared = packed[keep], shared[keep].astype(np.int64)
    stats.pairs = int(packed.size)
    stats.false_positives = stats.candidates - stats.pairs
    return packed >> 32, packed & np.int64(0xFFFFFFFF), shared


def shared_pairs(
    features: np.ndarray,
    docs: np.ndarray,
    threshold: int,
    max_df: int = 0,
    join: str = "sort",
    buckets: int = 1 << 22,
    threads: int = 1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, JoinStats]:
    """(doc_a, doc_b, shared) of every pair sharing >= `threshold` features, and the stats."""
    stats = JoinStats(join=join, threshold=threshold)
    f, d, bounds = postings(features, docs, max_df, stats)
    if join == "iceberg":
        a, b, shared = shared_pairs_iceberg(d, bounds, threshold, buckets, stats)
    elif join == "sort":
        a, b, shared = shared_pairs_sort(f, d, threshold, stats, threads)
    else:
        raise ValueError(f"unknown join {join!r}")
    return a, b, shared, stats
