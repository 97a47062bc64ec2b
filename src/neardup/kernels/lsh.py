"""LSH banding of min-hash signatures: band keys, the S-curve, choosing (bands, rows), and a
sorted band index.

Cut the K values into b bands of r rows; two pages become candidates when all r rows of any
band agree. With resemblance s a band agrees with probability s^r, so the pages become
candidates with probability 1 - (1 - s^r)^b, an S-shaped curve whose steep part sits near
(1/b)^(1/r). Two ways to choose (b, r):

- `optimal_bands` (datasketch's tuning) places the curve at the threshold by minimising the
  weighted areas of false positives (below the threshold) and false negatives (above it). For
  K = 128 at t = 0.8 that gives 9 x 13, which makes a pair at exactly the threshold a
  candidate only 40 % of the time and a pair at 0.9 only 93 % of the time.
- `recall_first_bands`, what scans, indexes and crawl stores use: a scan verifies every
  candidate, so a false candidate costs one signature comparison while a missed one is lost
  for good. It takes the longest bands (fewest false candidates) that still catch a pair at
  the threshold with probability `recall`: 18 x 7 for 0.8 and K = 128.

`BandTable` looks many query signatures up at once: per band the keys sorted, with the id of
each key's row, so a query is one binary search per band.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neardup.kernels.hashing import TAG_BAND, as_int64, derive_seeds, hash_row_segments
from neardup.kernels.sorting import runs_in_sorted, sorted_distinct

_GRID = 2001  # integration points on [0, 1]


def band_keys(minhash: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """N x bands int64: a 64-bit hash of each band's `rows` values, mixed with the band index
    so that equal values in different bands give different keys."""
    minhash = np.ascontiguousarray(minhash)
    if minhash.ndim != 2:
        raise ValueError(f"need an N x K signature array, got shape {minhash.shape}")
    if bands < 1 or rows < 1 or bands * rows > minhash.shape[1]:
        raise ValueError(f"{bands} bands of {rows} rows do not fit K={minhash.shape[1]}")
    seeds = derive_seeds(0, TAG_BAND, bands)
    return as_int64(hash_row_segments(minhash, rows, bands, seeds))


def candidate_probability(
    similarity: np.ndarray | float, bands: int, rows: int
) -> np.ndarray | float:
    """The S-curve 1 - (1 - s^rows)^bands: the probability that two pages of resemblance s
    share at least one band.

    A Python number is computed in Python floats (C `pow`), an array with numpy; numpy's
    vectorised `pow` may differ in the last bit, and the recall-first choice of bands and the
    reports must not depend on that."""
    if isinstance(similarity, int | float):
        return 1.0 - (1.0 - similarity**rows) ** bands
    s = np.asarray(similarity, dtype=np.float64)
    p = 1.0 - (1.0 - s**rows) ** bands
    return float(p) if p.ndim == 0 else p


def recall_first_bands(threshold: float, num_perm: int, recall: float = 0.95) -> tuple[int, int]:
    """(bands, rows) with bands = num_perm // rows and the largest rows whose curve still
    catches a pair at exactly `threshold` with probability >= `recall` (see the module doc).

    Rows are tried from 1 up and the search stops at the first that misses the recall; when
    even 1 row misses it, (num_perm, 1) is returned, the most sensitive layout there is."""
    best = (num_perm, 1)
    for rows in range(1, num_perm + 1):
        bands = num_perm // rows
        if candidate_probability(threshold, bands, rows) >= recall:
            best = (bands, rows)
        else:
            break
    return best


def optimal_bands(
    threshold: float, num_perm: int, fp_weight: float = 0.5, fn_weight: float = 0.5
) -> tuple[int, int]:
    """(bands, rows) with bands*rows <= num_perm minimising
    fp_weight * integral_0^t P(s) ds + fn_weight * integral_t^1 (1 - P(s)) ds.

    For each row count r, every band count b is evaluated at once on grids over [0, t] and
    [t, 1] (trapezoid rule); ties go to more bands, then fewer rows.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError("threshold must be in (0, 1]")
    if num_perm < 1:
        raise ValueError("num_perm must be at least 1")
    s_lo = np.linspace(0.0, threshold, _GRID)
    s_hi = np.linspace(threshold, 1.0, _GRID)
    costs, bs, rs = [], [], []
    for r in range(1, num_perm + 1):
        b = np.arange(1, num_perm // r + 1)[:, None]
        fp = np.trapezoid(1.0 - (1.0 - s_lo**r) ** b, s_lo, axis=1)
        fn = np.trapezoid((1.0 - s_hi**r) ** b, s_hi, axis=1)
        costs.append(fp_weight * fp + fn_weight * fn)
        bs.append(b[:, 0])
        rs.append(np.full(b.shape[0], r))
    cost, b_all, r_all = np.concatenate(costs), np.concatenate(bs), np.concatenate(rs)
    # Rounded so that a last-bit difference of libm's pow between machines cannot flip a
    # near-tie and change the band layout.
    cost = np.round(cost, 12)
    best = np.lexsort((r_all, -b_all, cost))[0]
    return int(b_all[best]), int(r_all[best])


def key_hits(
    sorted_keys: np.ndarray, ids: np.ndarray, queries: np.ndarray, max_per_key: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(query position, id) of every entry of one sorted table whose key equals a query's.

    One `searchsorted` per side for all queries, then the matching ranges are expanded with
    `np.repeat`: no Python loop over queries or entries. With `max_per_key`, only the first
    entries of a key (in table order) are read, so one huge bucket cannot blow a lookup up.
    Shared by `BandTable.lookup` and the service's band index."""
    lo, hi = runs_in_sorted(sorted_keys, queries)
    if max_per_key is not None:
        hi = np.minimum(hi, lo + max_per_key)
    counts = hi - lo
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, np.int64), np.empty(0, ids.dtype)
    offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(np.arange(queries.size), counts), ids[np.repeat(lo, counts) + offsets]


@dataclass(frozen=True)
class BandTable:
    """A band index: per band, the band keys sorted, and the id of the row of each key.

    keys: bands x N int64, each band (row of the array) sorted, equal keys in id order as
    given to `build`; ids: bands x N, the matching row ids. Any arrays of that layout work,
    memory-mapped ones included, so a caller can save the two arrays and reopen them: the
    class does no I/O.
    """

    keys: np.ndarray
    ids: np.ndarray

    @classmethod
    def build(cls, keys_by_band: np.ndarray, ids: np.ndarray) -> BandTable:
        """Sort `keys_by_band` (bands x N, i.e. `band_keys(...).T`) within each band (stably,
        so equal keys keep the order of `ids`), carrying the N `ids` of its columns along."""
        order = np.argsort(keys_by_band, axis=1, kind="stable")
        return cls(
            keys=np.ascontiguousarray(np.take_along_axis(keys_by_band, order, axis=1)),
            ids=np.ascontiguousarray(np.asarray(ids)[order]),
        )

    @property
    def bands(self) -> int:
        return int(self.keys.shape[0])

    def lookup(
        self, query_keys: np.ndarray, max_bucket: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(query index, id), both int64, of every distinct pair of a query (a row of the Q x
        bands `query_keys`) and an indexed row sharing at least one band key with it, sorted
        by query then id.

        Per band one `searchsorted` of all query keys, then the matching ranges are expanded
        with `np.repeat`; no Python loop over queries or rows. With `max_bucket`, only the
        first `max_bucket` rows of a bucket (in index order) are read per band and query, so
        a boilerplate bucket cannot blow a lookup up."""
        query_keys = np.asarray(query_keys)
        if query_keys.ndim != 2 or query_keys.shape[1] != self.bands:
            raise ValueError(f"need Q x {self.bands} query keys, got shape {query_keys.shape}")
        hits = [
            key_hits(self.keys[j], self.ids[j], query_keys[:, j], max_bucket)
            for j in range(self.bands)
        ]
        q = np.concatenate([q for q, _ in hits])
        r = np.concatenate([np.asarray(r, dtype=np.int64) for _, r in hits])
        if not r.size:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        if r.min() < 0:
            raise ValueError("band table ids must be non-negative")
        span = int(r.max()) + 1
        q, r = np.divmod(sorted_distinct(q * span + r), span)
        return q, r
