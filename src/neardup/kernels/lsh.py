"""LSH banding of min-hash signatures: band keys, the S-curve, and choosing (bands, rows).

Cut the K values into b bands of r rows; two pages become candidates when all r rows of any
band agree. With resemblance s a band agrees with probability s^r, so the pages become
candidates with probability 1 - (1 - s^r)^b, an S-shaped curve whose steep part sits near
(1/b)^(1/r). `optimal_bands` places it at the threshold by minimising the weighted areas of
false positives (below the threshold) and false negatives (above it).
"""

from __future__ import annotations

import numpy as np

from neardup.kernels.hashing import TAG_BAND, as_int64, derive_seeds, hash_row_segments

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
    """The S-curve 1 - (1 - s^rows)^bands."""
    s = np.asarray(similarity, dtype=np.float64)
    p = 1.0 - (1.0 - s**rows) ** bands
    return float(p) if p.ndim == 0 else p


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
