"""Turn per-document bucket keys into candidate pairs, one hash table at a time.

Both candidate generators of the scan reduce to the same shape: every document has one key
per table (an LSH band of its min-hash signature, or one of Fetterly's 15 megashingles), and
two documents are candidates when they share a key in the same table. Sorting one table's
keys brings each bucket together; a bucket of n documents yields all n(n-1)/2 pairs while it
is small, and a chain of n-1 consecutive pairs when it is larger than `max_bucket_pairs`, so
one boilerplate-heavy bucket cannot make the pair count explode. A chain still connects the
whole bucket, so clustering sees the same components; verification then decides which links
hold. Which pairs a chain holds depends on the order of the bucket, so the chain follows a
per-document `order` key (the scan's and the service's page key) and the id only where two
keys are equal: the same pages read in another order, or added to the service one batch at a
time, give the same chain.

Each table is sorted by its key alone, stably (`kernels/sorting.py`: numpy's quicksort with
the ties put back in order, three to five times faster than its stable sort), over the
documents put once in (order, id) order (`_rank`): the same permutation as a three-key
`lexsort` of (key, order, id). Tables are sorted two at a time in threads (numpy's sort and
these kernels release the GIL).
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from neardup.kernels.jit import njit
from neardup.kernels.sorting import lexsort_pair, sorted_distinct, sorted_stably, stable_argsort

_LOW32 = np.int64(0xFFFFFFFF)
# Tables sorted at once: each holds its keys and three arrays of 8 bytes a document while it
# is (`_ranked_pairs`).
_THREADS = min(2, os.cpu_count() or 1)


class KeyTables(Protocol):
    """An (n_docs, n_tables) matrix of keys read one table (column) at a time, `keys[:, t]`:
    a numpy array, or a matrix kept on disk so that only one column is ever in memory."""

    @property
    def ndim(self) -> int: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    def __getitem__(self, index: tuple[slice, int]) -> np.ndarray: ...


@dataclass
class CandidateStats:
    """What candidate generation did, for the scan summary and the benchmarks."""

    tables: int = 0
    emitted: int = 0  # pairs emitted over all tables, before de-duplication
    unique: int = 0
    large_buckets: int = 0  # buckets that emitted a chain instead of all pairs
    largest_bucket: int = 0

    def count(self, emitted: int, large: int, largest: int) -> None:
        """One more table: its emitted pairs, large buckets and largest bucket."""
        self.tables += 1
        self.emitted += emitted
        self.large_buckets += large
        self.largest_bucket = max(self.largest_bucket, largest)


@njit(cache=True, nogil=True)
def _count_pairs(keys: np.ndarray, max_bucket: int) -> tuple[int, int, int]:
    n = keys.shape[0]
    total = 0
    large = 0
    largest = 0
    i = 0
    while i < n:
        j = i + 1
        while j < n and keys[j] == keys[i]:
            j += 1
        size = j - i
        if size > largest:
            largest = size
        if size > max_bucket:
            total += size - 1
            large += 1
        elif size > 1:
            total += size * (size - 1) // 2
        i = j
    return total, large, largest


@njit(cache=True, nogil=True)
def _emit_pairs(
    keys: np.ndarray,
    ranked_docs: np.ndarray,
    positions: np.ndarray,
    max_bucket: int,
    out: np.ndarray,
) -> None:
    """The pairs of every bucket of the sorted `keys`; the document at sorted place p is
    `ranked_docs[positions[p]]`, looked up only inside buckets of two or more (a gather of
    every document cost as much as the sort, at four million)."""
    n = keys.shape[0]
    k = 0
    i = 0
    while i < n:
        j = i + 1
        while j < n and keys[j] == keys[i]:
            j += 1
        size = j - i
        if size > max_bucket:
            for p in range(i, j - 1):
                a, b = ranked_docs[positions[p]], ranked_docs[positions[p + 1]]
                out[k] = (min(a, b) << 32) | max(a, b)
                k += 1
        elif size > 1:
            for p in range(i, j):
                a = ranked_docs[positions[p]]
                for q in range(p + 1, j):
                    b = ranked_docs[positions[q]]
                    out[k] = (min(a, b) << 32) | max(a, b)
                    k += 1
        i = j


def table_pairs(
    keys: np.ndarray,
    docs: np.ndarray,
    max_bucket_pairs: int,
    stats: CandidateStats,
    order: np.ndarray | None = None,
) -> np.ndarray:
    """Packed pairs (a << 32 | b, a < b) of documents sharing a key in one table; a large
    bucket's chain follows (`order`, doc), or doc alone without `order`."""
    docs = np.asarray(docs, dtype=np.int64)
    rank = _rank(docs, order)
    pairs, counts = _ranked_pairs(keys, docs[rank], rank, max_bucket_pairs)
    stats.count(*counts)
    return pairs


def _rank(docs: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    """The positions of the documents sorted by (order, doc), or by doc alone."""
    return stable_argsort(docs) if order is None else lexsort_pair(docs, order)


def _ranked_pairs(
    keys: np.ndarray, ranked_docs: np.ndarray, rank: np.ndarray, max_bucket_pairs: int
) -> tuple[np.ndarray, tuple[int, int, int]]:
    """One table's packed pairs and (emitted, large buckets, largest bucket): the keys
    sorted stably over the documents in `rank` order (`ranked_docs`, the documents in that
    order), so that a bucket's documents follow (order, doc). At most three arrays of a
    document each are held besides the table's keys."""
    by_key, sorted_keys = sorted_stably(keys[rank])
    total, large, largest = _count_pairs(sorted_keys, max_bucket_pairs)
    out = np.empty(total, dtype=np.int64)
    _emit_pairs(sorted_keys, ranked_docs, by_key, max_bucket_pairs, out)
    return out, (int(total), int(large), int(largest))


def bucket_candidates(
    keys: np.ndarray | KeyTables,
    docs: np.ndarray,
    max_bucket_pairs: int,
    order: np.ndarray | None = None,
) -> tuple[np.ndarray, CandidateStats]:
    """Unique packed candidate pairs over all tables (columns) of `keys`.

    `keys` is (n_docs, n_tables) int64, read one table at a time (`KeyTables`, in this
    thread: a spilled matrix reads its file); `docs` the (n_docs,) integer ids, each below
    2**31 so that a pair packs into one int64 with the smaller id first; `order` (n_docs,)
    int64 orders the chains of large buckets (see the module docstring).
    """
    if keys.ndim != 2 or keys.shape[0] != docs.shape[0]:
        raise ValueError("keys must be (n_docs, n_tables) aligned with docs")
    docs = np.asarray(docs, dtype=np.int64)
    if order is not None:
        order = np.asarray(order, dtype=np.int64)
        if order.shape != docs.shape:
            raise ValueError("order must hold one key per document")
    if docs.size and (docs.min() < 0 or docs.max() >= 2**31):
        raise ValueError("document ids must be in [0, 2**31)")
    stats = CandidateStats()
    found = np.empty(0, dtype=np.int64)
    rank = _rank(docs, order)
    ranked_docs = docs[rank]
    running: deque[Future[tuple[np.ndarray, tuple[int, int, int]]]] = deque()
    held: list[np.ndarray] = []  # tables' pairs not merged into `found` yet

    def merge() -> None:
        nonlocal found
        found = sorted_distinct(np.concatenate([found, *held]))
        held.clear()

    def collect() -> None:
        """One table's pairs, merged once the tables held outgrow what is merged (each
        table merged alone sorted the growing set 18 times: 0.9 s at a million pages)."""
        pairs, counts = running.popleft().result()
        stats.count(*counts)
        held.append(pairs)
        if sum(h.size for h in held) > max(found.size, 1 << 20):
            merge()

    with ThreadPoolExecutor(_THREADS, thread_name_prefix="neardup-buckets") as pool:
        for t in range(keys.shape[1]):
            column = np.ascontiguousarray(keys[:, t])
            running.append(pool.submit(_ranked_pairs, column, ranked_docs, rank, max_bucket_pairs))
            if len(running) >= _THREADS:
                collect()
        while running:
            collect()
    if held:
        merge()
    stats.unique = int(found.size)
    return found, stats


def key_parts(tbl: np.ndarray, key: np.ndarray, parts: int) -> np.ndarray:
    """The part of each bucket key, a hash of (table, key) (splitmix64's finaliser): every
    row of one bucket gets one part, so the parts' pairs (`partition_pairs`) together are
    the pairs of the whole. The one partitioning of both engines' buckets (the Spark
    engine's shuffle, the embedded scan's workers); also deals packed pairs into parts
    (`tbl` 0), so that each pair is verified in one part only."""
    x = key.astype(np.uint64) ^ (tbl.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return (x % np.uint64(parts)).astype(np.int32)


def partition_pairs(
    tbl: np.ndarray,
    key: np.ndarray,
    docs: np.ndarray,
    order: np.ndarray,
    max_bucket_pairs: int,
    stats: CandidateStats,
) -> np.ndarray:
    """Unique packed pairs of one part of the bucket keys (rows of table, key, document and
    its `order` key), every bucket whole in it (`key_parts`): each table's pairs by
    `table_pairs`, the rule of `bucket_candidates`, over the documents that have a key of
    that table in the part. Only the order of a bucket's documents decides its chain, so
    the other documents of a table, in other parts, change nothing. `stats` counts each
    table's emitted pairs and buckets (its `tables` once per table of the part). Tables are
    numbered below 2**16: the rows are put in table order by a radix sort, one pass, rather
    than a mask of every row per table. (Ranking the part's documents once, as
    `bucket_candidates` does, and sorting the rows by (table, rank) cost more: a quarter of
    a million pages' parts took 1.0 CPU-s against 0.75, the large sorts out of cache.)"""
    by_table = np.argsort(np.asarray(tbl).astype(np.uint16), kind="stable")  # a radix sort
    tbl, key = np.asarray(tbl)[by_table], np.asarray(key)[by_table]
    docs, order = np.asarray(docs)[by_table], np.asarray(order)[by_table]
    bounds = np.flatnonzero(np.diff(tbl)) + 1
    found = [
        table_pairs(key[lo:hi], docs[lo:hi], max_bucket_pairs, stats, order[lo:hi])
        for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), tbl.size], strict=True)
        if hi > lo
    ]
    return sorted_distinct(np.concatenate(found)) if found else np.empty(0, dtype=np.int64)


def unpack_pairs(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split packed pairs into (doc_a, doc_b) arrays with doc_a < doc_b."""
    return packed >> 32, packed & _LOW32
