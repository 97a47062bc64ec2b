"""The near-duplicate test, once: bucket keys -> candidate pairs -> verified pairs.

Three callers find near-duplicate pairs of min-hash sketches: the scan's near stage
(`steps.near.run_near`, over the representatives of the equivalence classes), the clustering
across crawls (`crawls.cross_crawl`, over every stored signature) and the Spark engine (over
DataFrames). They must agree on every choice, or the engines' tables and a cross-crawl
clustering would drift from the scan's, so each choice is made here and only here:

- `page_keys`: the per-page key every tie-break uses (class representatives, the chains of
  large buckets, the clustering's visit order): a 64-bit hash of the normalized URL, or the
  shingle-set fingerprint for a page without one. doc_id is input order, which two scans of
  the same pages or the incremental service do not share, so it decides only between equal
  keys;
- `tie_order`: the order of every tie (page key, then input order, or the index's URL);
- `equivalence_classes`: pages with one shingle set collapse to the page with the lowest key
  (the scan, the index and Spark's near tasks; the cross-crawl comparison none);
- `band_shape` / `lsh_shape`: how many LSH bands of how many rows (as set, else tuned recall
  first from the threshold);
- `candidate_keys`: which bucket keys a page has (LSH bands, or Fetterly's megashingles for
  the super-shingle method);
- `candidate_pairs`: pages sharing a key in one table, with `max_bucket_pairs` as the cap;
- `pair_scores` and `passes`: the verification, estimated resemblance against the threshold
  or, for the super-shingle method, two of the super-shingles in agreement;
- `verified_candidates`: the whole sequence from keys to verified edges, in chunks
  (`verify_pairs` the verification alone, for the scan's workers, each over its part).

The Spark engine runs the distributed equivalents of `candidate_pairs` (SQL) and of the
chunk loop (`mapInArrow`), but takes its band shape, keys, scores and test from here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neardup.config import Settings
from neardup.ingest.urls import normalize_url
from neardup.kernels import (
    band_keys,
    estimate_resemblance,
    megashingles,
    supershingle_agreement,
)
from neardup.kernels.buckets import CandidateStats, bucket_candidates, unpack_pairs
from neardup.kernels.lsh import recall_first_bands
from neardup.kernels.sorting import lexsort_pair
from neardup.store.rows import MappedRows

# Rows per step: bounds the memory of the gathered signatures. A step of a pair chunk holds
# two signature rows per pair (2 * 512 bytes at K = 128) and their comparison: 200,000 made
# that ~230 MiB at the near stage's peak; 50,000 keeps it near 60 MiB at no measurable cost
# in time (issue 16).
CHUNK = 50_000
VERY_SIMILAR_AGREE = 2  # Fetterly et al.: two of six super-shingles in common

# (positions a, positions b) -> their similarity, replacing the estimate (exact verification)
Rescore = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass
class VerifiedPairs:
    """The candidates that passed verification, as positions into the caller's ids."""

    a: np.ndarray  # int64, a < b
    b: np.ndarray
    similarity: np.ndarray  # float64: the score the test compared (cast on writing only)
    agree: np.ndarray  # int8 super-shingles in agreement, -1 when not computed
    candidates: int = 0  # unique candidate pairs verified
    stats: CandidateStats = field(default_factory=CandidateStats)


def url_key(url: str) -> int:
    """Signed 64-bit hash (BLAKE2b) of the normalized URL: stable across runs and machines."""
    return identity_key(normalize_url(url))


def identity_key(identity: str) -> int:
    """`url_key` of a URL already normalized (`normalize_url`: the `url_key` column the
    ingest writes), without parsing it again."""
    digest = hashlib.blake2b(identity.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def page_keys(
    urls: Sequence[str | None], fingerprints: np.ndarray, normalized: bool = False
) -> np.ndarray:
    """The tie-break key of each page: `url_key` of its URL, its content fingerprint (the
    shingle-set fingerprint) when it has no URL. `normalized`: the URLs are identities
    already (`normalize_url`'s), only hashed."""
    fps = np.asarray(fingerprints, dtype=np.int64)
    if len(urls) != fps.size:
        raise ValueError("one URL (or None) per fingerprint")
    pairs = zip(urls, fps.tolist(), strict=True)
    if normalized:  # an identity is None exactly where the URL was empty (`_pages_batch`)
        return np.array(
            [identity_key(u) if u is not None else int(f) for u, f in pairs], dtype=np.int64
        )
    return np.array([url_key(u) if u else int(f) for u, f in pairs], dtype=np.int64)


def tie_order(keys: np.ndarray, then: np.ndarray | None = None) -> np.ndarray:
    """Positions of pages in tie-break order: by page key (`page_keys`), equal keys by
    `then`, and what is still equal by position. The one order of every tie: the scan
    passes its pages in doc_id order (`then` None), the index the rank of each URL, as it
    has no input order (its reference scan reads pages in URL order, so both pick the same
    page)."""
    keys = np.asarray(keys, dtype=np.int64)
    if then is None:
        return np.argsort(keys, kind="stable")
    return lexsort_pair(np.asarray(then, dtype=np.int64), keys)


def equivalence_classes(shingle_fp: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """Position of each page's class representative: of the pages with its shingle set, the
    one with the lowest `order` key, then the first (the first alone without keys)."""
    fp = np.asarray(shingle_fp).reshape(-1)
    if order is None:
        _, first, inverse = np.unique(fp, return_index=True, return_inverse=True)
        return first[inverse.reshape(-1)]
    perm = lexsort_pair(np.asarray(order, dtype=np.int64), fp)  # ties: the first
    sorted_fp = fp[perm]
    starts = np.ones(fp.size, dtype=bool)
    starts[1:] = sorted_fp[1:] != sorted_fp[:-1]
    group = np.cumsum(starts) - 1
    rep = np.empty(fp.size, dtype=np.int64)
    rep[perm] = perm[starts][group]
    return rep


def by_megashingles(settings: Settings) -> bool:
    """Whether candidates come from megashingles and pass by super-shingle agreement (the
    super-shingle method) rather than from LSH bands and the threshold."""
    return settings.method == "supershingles"


def lsh_shape(settings: Settings) -> tuple[int, int]:
    """(bands, rows) of the min-hash LSH tables: as set, or tuned recall first."""
    if settings.bands is not None and settings.rows is not None:
        return settings.bands, settings.rows
    return recall_first_bands(settings.threshold, settings.num_perm, settings.band_recall)


def band_shape(settings: Settings) -> tuple[int, int]:
    """(bands, rows) a scan reports: `lsh_shape`, or (0, 0) for the super-shingle method,
    whose tables are megashingles."""
    return (0, 0) if by_megashingles(settings) else lsh_shape(settings)


class SpilledKeys:
    """An (n, tables) int64 matrix of bucket keys kept on disk one table after the other,
    handing `bucket_candidates` one table's column at a time (`keys[:, t]`): n * 8 bytes in
    memory instead of n * tables * 8 (144 bytes a page for 18 bands). Written by `lsh_keys`;
    the file is removed by `close`."""

    ndim = 2

    def __init__(self, path: Path, n: int, tables: int) -> None:
        self.path = path
        self.shape = (n, tables)
        self.file = open(path, "w+b")  # noqa: SIM115 - closed by close()
        self.file.truncate(n * tables * 8)

    def write(self, start: int, keys: np.ndarray) -> None:
        """Rows start, start + 1, ... of every table from `keys` (m x tables)."""
        n = self.shape[0]
        for t in range(self.shape[1]):
            self.file.seek((t * n + start) * 8)
            self.file.write(np.ascontiguousarray(keys[:, t], dtype=np.int64).tobytes())

    def __getitem__(self, index: tuple[slice, int]) -> np.ndarray:
        rows, t = index
        if rows != slice(None) or not isinstance(t, int | np.integer):
            raise IndexError("SpilledKeys gives whole columns only: keys[:, t]")
        n = self.shape[0]
        self.file.seek(int(t) * n * 8)
        return np.frombuffer(self.file.read(n * 8), dtype=np.int64)

    def close(self) -> None:
        self.file.close()
        self.path.unlink(missing_ok=True)


def lsh_keys(
    signatures: np.ndarray | MappedRows,
    rows: np.ndarray | None,
    bands: int,
    r: int,
    spill: Path | None = None,
) -> np.ndarray | SpilledKeys:
    """LSH band keys (one column per band) of the signature rows `rows` (all when None),
    gathered a chunk at a time so a memory-mapped matrix is never read whole. With `spill`,
    the keys go to that file (`SpilledKeys`) instead of memory."""
    n = signatures.shape[0] if rows is None else rows.size
    keys: np.ndarray | SpilledKeys = (
        np.empty((n, bands), dtype=np.int64) if spill is None else SpilledKeys(spill, n, bands)
    )
    for start in range(0, n, CHUNK):
        part = slice(start, min(start + CHUNK, n))
        sig = signatures[part] if rows is None else signatures[rows[part]]
        chunk = band_keys(np.asarray(sig), bands, r)
        if isinstance(keys, SpilledKeys):
            keys.write(start, chunk)
        else:
            keys[part] = chunk
    return keys


def candidate_keys(
    signatures: np.ndarray | MappedRows,
    supers: np.ndarray | MappedRows,
    rows: np.ndarray,
    settings: Settings,
    spill: Path | None = None,
) -> tuple[np.ndarray | SpilledKeys, int, int]:
    """Bucket keys per page: LSH bands (on disk with `spill`), or megashingles; also the
    (bands, rows) used."""
    if by_megashingles(settings):
        return megashingles(np.asarray(supers[rows])), 0, 0
    b, r = lsh_shape(settings)
    return lsh_keys(signatures, rows, b, r, spill), b, r


def candidate_pairs(
    keys: np.ndarray | SpilledKeys,
    ids: np.ndarray,
    max_bucket_pairs: int,
    order: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, CandidateStats]:
    """Unique pairs (a < b, from `ids`) sharing a key in one table; a bucket above
    `max_bucket_pairs` gives the chain of its pages only, in `order` (page keys of `ids`)."""
    packed, stats = bucket_candidates(keys, ids, max_bucket_pairs, order)
    a, b = unpack_pairs(packed)
    return a, b, stats


def pair_scores(
    signatures_a: np.ndarray,
    signatures_b: np.ndarray,
    supers_a: np.ndarray | None = None,
    supers_b: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(estimated resemblance as float64, super-shingles in agreement or -1 without them) of
    aligned rows: what `passes` tests and what the pairs table records."""
    sim = np.asarray(estimate_resemblance(signatures_a, signatures_b), dtype=np.float64)
    sim = sim.reshape(-1)
    if supers_a is None or supers_b is None:
        return sim, np.full(sim.size, -1)
    return sim, np.asarray(supershingle_agreement(supers_a, supers_b)).reshape(-1)


def passes(
    similarity: np.ndarray, agree: np.ndarray, threshold: float, megashingle: bool
) -> np.ndarray:
    """The verification test: two agreeing super-shingles for the super-shingle method, the
    similarity at or above the threshold otherwise. The similarity is compared in the dtype
    it comes in, so an exact float32 Jaccard is tested as the embedded engine always has."""
    if megashingle:
        return np.asarray(agree) >= VERY_SIMILAR_AGREE
    return np.asarray(similarity) >= threshold


def verified_candidates(
    keys: np.ndarray | SpilledKeys,
    ids: np.ndarray,
    signatures: np.ndarray | MappedRows,
    settings: Settings,
    rows: np.ndarray | None = None,
    supers: np.ndarray | MappedRows | None = None,
    megashingle: bool = False,
    rescore: Rescore | None = None,
    order: np.ndarray | None = None,
) -> VerifiedPairs:
    """Candidate pairs of `ids` (increasing positions) from their bucket `keys`, verified.

    A position p has the signature row `rows[p]` (p itself when `rows` is None) and, when
    `supers` is given, the super-shingles of that row. `rescore` replaces the estimated
    similarity (exact verification); `order` holds the page keys of `ids`. The candidates are
    verified a chunk at a time, in order, so the edges come out in the order of the packed
    candidate pairs."""
    a_all, b_all, stats = candidate_pairs(keys, ids, settings.max_bucket_pairs, order)
    found = verify_pairs(a_all, b_all, signatures, settings, rows, supers, megashingle, rescore)
    found.stats = stats
    return found


def verify_pairs(
    a_all: np.ndarray,
    b_all: np.ndarray,
    signatures: np.ndarray | MappedRows,
    settings: Settings,
    rows: np.ndarray | MappedRows | None = None,
    supers: np.ndarray | MappedRows | None = None,
    megashingle: bool = False,
    rescore: Rescore | None = None,
) -> VerifiedPairs:
    """The candidate pairs (a_all[i], b_all[i]) of positions that pass the test (`pair_scores`,
    `passes`), a chunk at a time and in order: `verified_candidates` over all the candidates
    at once, the embedded scan's workers over the candidates of one part each (`steps.
    near_parts`). The arguments are `verified_candidates`'s; `rows` may be a mapped file."""
    kept: list[tuple[np.ndarray, ...]] = []
    for start in range(0, a_all.size, CHUNK):
        a = a_all[start : start + CHUNK]
        b = b_all[start : start + CHUNK]
        ra, rb = (a, b) if rows is None else (np.asarray(rows[a]), np.asarray(rows[b]))
        sim, agree = pair_scores(
            np.asarray(signatures[ra]),
            np.asarray(signatures[rb]),
            None if supers is None else np.asarray(supers[ra]),
            None if supers is None else np.asarray(supers[rb]),
        )
        if rescore is not None:
            sim = rescore(a, b)
        keep = passes(sim, agree, settings.threshold, megashingle)
        kept.append((a[keep], b[keep], np.asarray(sim)[keep], agree[keep]))

    def cat(i: int, dtype: type) -> np.ndarray:
        parts = [k[i] for k in kept]
        return np.concatenate(parts).astype(dtype) if parts else np.empty(0, dtype=dtype)

    return VerifiedPairs(
        a=cat(0, np.int64),
        b=cat(1, np.int64),
        similarity=cat(2, np.float64),
        agree=cat(3, np.int8),
        candidates=int(a_all.size),
    )
