"""Fetterly et al.'s super-shingles and megashingles.

A super-shingle is a 64-bit hash of `size` adjacent min-hash values (Fetterly: 6 of 14 out of
84). Fetterly hash the *pre-images* (the shingle fingerprints that attain each minimum); we
hash the minimum values themselves. For one-to-one functions the two carry the same
information, so equal super-shingles mean equal pre-images; with 32-bit images (see
`minhash`) an accidental equality needs all 14 positions to collide at once, which does not
happen in practice. Two pages of resemblance r then agree on each super-shingle with
probability r^size, independently, because the functions are independent.

"Very similar" pages agree on at least 2 of the 6 super-shingles; "virtually identical" pages
on all 6. To find pages with two agreeing super-shingles with hash tables, each page emits
its C(6, 2) = 15 megashingles, one per pair (i < j) of super-shingles; the pair index is
mixed into the hash so the 15 tables never collide with each other.
"""

from __future__ import annotations

import numpy as np

from neardup.kernels.hashing import (
    TAG_MEGASHINGLE,
    TAG_SUPERSHINGLE,
    U64,
    as_int64,
    combine,
    derive_seeds,
    finish,
    hash_row_segments,
)
from neardup.kernels.jit import njit


def supershingles(minhash: np.ndarray, count: int, size: int, seed: int) -> np.ndarray:
    """N x count int64: super-shingle j of a row hashes minhash[:, j*size:(j+1)*size]."""
    minhash = np.ascontiguousarray(minhash)
    if minhash.ndim != 2 or minhash.shape[1] < count * size:
        raise ValueError(f"need N x >= {count * size} min-hash values, got {minhash.shape}")
    seeds = derive_seeds(seed, TAG_SUPERSHINGLE, count)
    return as_int64(hash_row_segments(minhash, size, count, seeds))


@njit(cache=True)
def _megashingles(ss: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    n, c = ss.shape
    out = np.empty((n, c * (c - 1) // 2), dtype=np.uint64)
    for r in range(n):
        p = 0
        for i in range(c):
            for j in range(i + 1, c):
                h = combine(combine(seeds[p], U64(ss[r, i])), U64(ss[r, j]))
                out[r, p] = finish(h, 2)
                p += 1
    return out


def megashingle_pairs(count: int) -> list[tuple[int, int]]:
    """The (i, j) super-shingle pair of each megashingle column, in column order."""
    return [(i, j) for i in range(count) for j in range(i + 1, count)]


def megashingles(supershingles: np.ndarray) -> np.ndarray:
    """N x C(count, 2) int64: one hash per pair (i < j) of a row's super-shingles, lesser
    first, mixed with the pair's column index (Fetterly's 15 tables for 6 super-shingles).
    Two pages share the megashingle of column p exactly when they agree on both
    super-shingles of pair p."""
    ss = np.ascontiguousarray(supershingles, dtype=np.int64)
    if ss.ndim != 2 or ss.shape[1] < 2:
        raise ValueError(f"need N x >= 2 super-shingles, got {ss.shape}")
    c = ss.shape[1]
    seeds = derive_seeds(0, TAG_MEGASHINGLE, c * (c - 1) // 2)
    return as_int64(_megashingles(ss, seeds))


def supershingle_agreement(a_ss: np.ndarray, b_ss: np.ndarray) -> np.ndarray:
    """Number of equal super-shingles, per row of two aligned (M x count) arrays (or one int
    array of shape () for two single rows)."""
    a = np.asarray(a_ss)
    b = np.asarray(b_ss)
    if a.shape != b.shape:
        raise ValueError(f"super-shingle shapes differ: {a.shape} and {b.shape}")
    return np.count_nonzero(a == b, axis=-1)


def supershingle_probability(
    similarity: np.ndarray | float, count: int, size: int, min_agree: int = 2
) -> np.ndarray | float:
    """P(at least `min_agree` of `count` super-shingles agree) for resemblance s: the binomial
    tail with p = s^size. Fetterly's numbers: s=0.95 -> 0.88, s=0.8 -> 0.026 (6 of 14, >= 2).
    """
    from scipy import stats  # imported here: scipy.stats takes ~0.5 s to import

    s = np.asarray(similarity, dtype=np.float64)
    p = stats.binom.sf(min_agree - 1, count, s**size)
    return float(p) if np.ndim(p) == 0 else p
