"""One-permutation hashing with optimal densification: a K-value min-hash in O(n + K).

The classic sketch (`minhash`) applies K hash functions to every distinct shingle: n * K
operations per page, so its cost grows with K (measured one core, AVX-512: 257 M shingles/s
at K = 128, 125 M at K = 256; this sketch 384 and 405 M, docs/benchmarks.md).
One-permutation hashing (Li, Owen & Zhang, NIPS 2012) applies *one* hash function h to each
shingle: its top bits choose one of K bins and its low 32 bits are the shingle's value in
that bin; the sketch keeps the minimum value per bin. That is n operations, and two pages
agree in a bin that is non-empty for both with probability exactly their resemblance
J = |A ∩ B| / |A ∪ B| (the minimum of the union's elements in that bin is a uniformly
random one of them).

Pages with fewer shingles than about K leave bins empty, and an empty bin has no value to
compare. Optimal densification (Shrivastava, ICML 2017, "Optimal Densification for Fast and
Accurate Minwise Hashing") fills every empty bin i of a page by probing bins
j_1(i), j_2(i), ... chosen by a hash of (i, attempt) that is the same for every page, and
copying the value of the first probed bin that the page itself filled. Two pages then agree
at every position with probability exactly J. Take bin i, then its probes, and the first of
these bins that holds an element of A ∪ B: both pages stop there if it holds elements of
both, and then agree exactly when the union's minimum in that bin is in A ∩ B; if it holds
elements of one page only, the union's minimum there is outside A ∩ B and the pages
disagree (the other page copies some other bin). Either way they agree exactly when a
uniformly random element of the union is in the intersection: probability J. Cost: the
expected probes per empty bin are K / (non-empty bins), so O(K) per page when n ≥ K/4
or so, and at most O(K²) for a page of one shingle (16 k steps at K = 128: microseconds).

The estimator, the share of equal positions, is **unbiased** (E = J for every pair; the
tests check this against exact Jaccard from plain Python sets). Its **variance**:

- for pages with many more shingles than K (no empty bins; the common case for web pages,
  400 words give ~400 shingles against K = 128), that of sampling K elements of the union
  without replacement: J(1 - J)/K · (f - K)/(f - 1) with f = |A ∪ B|, slightly *below* the
  classic J(1 - J)/K (Li et al. 2012, Theorem 1);
- with empty bins, densified positions repeat values of filled ones, so positions are
  positively correlated and the variance rises above J(1 - J)/K; optimal densification
  keeps that excess the smallest of the known densification schemes (Shrivastava 2017,
  Theorem 3.1 gives it exactly), and it vanishes as n grows past K.

What differs from the classic sketch, for callers: positions are not independent functions,
so a K = 84 sketch is *not* the first 84 values of a K = 128 one (bins depend on K), and
super-shingles of 14 positions agree with probability close to J^14 only for pages with many
more shingles than K: for a short page, 14 densified positions copy a few filled bins and
agree far more often (the super-shingle method made wrong merges with this sketch, see
docs/benchmarks.md). Fetterly's preset and the super-shingle method therefore keep the
classic sketch by default (`Settings.sketch`).

Values are uint32 (`SIGNATURE_DTYPE`) like the classic sketch's; an empty page (no
shingles) is EMPTY_VALUE at every position, as there. Whether a bin is filled is kept apart
from its value, so a shingle whose value is EMPTY_VALUE still fills its bin. Two different
shingles collide in one bin when their hashes agree on the bin and on the 32 value bits:
probability about 2^-32 per bin for two pages, a bias far below the standard error.
"""

from __future__ import annotations

import numpy as np

from neardup.kernels.hashing import U64, derive_seeds, mix64
from neardup.kernels.jit import njit

TAG_OPH = 9  # one stream of seeded constants, apart from hashing.py's tags 1..8
_LO = U64(0xFFFFFFFF)
_S32 = U64(32)
# After this many probes of one empty bin (probability (1 - 1/K)^probes of getting there,
# i.e. never in practice), the bin takes the next filled bin in circular order instead: the
# same rule for every page, so agreement stays consistent and the loop always ends.
_MAX_PROBES = 1 << 16


def oph_params(seed: int) -> tuple[np.uint64, np.uint64]:
    """The seeds of the bin-and-value hash and of the densification probes."""
    s = derive_seeds(seed, TAG_OPH, 2)
    return U64(s[0]), U64(s[1])


@njit(inline="always")
def _bin(h: np.uint64, k: int) -> np.int64:
    """Bin of a 64-bit hash: the top 32 bits scaled to [0, k) (multiply-shift, no modulo
    bias to speak of, no division)."""
    return np.int64(((h >> _S32) * U64(k)) >> _S32)


@njit(cache=True)
def oph_into(
    values: np.ndarray,
    n: int,
    seed: np.uint64,
    probe_seed: np.uint64,
    filled: np.ndarray,
    out: np.ndarray,
) -> None:
    """out[:K] = the densified one-permutation sketch of values[:n] (uint64 fingerprints,
    duplicates allowed); `filled` is a bool scratch of at least K entries. An empty set
    gives EMPTY_VALUE everywhere."""
    k = out.shape[0]
    for i in range(k):
        out[i] = np.uint32(0xFFFFFFFF)
        filled[i] = False
    # Branch-free: which bin and which value are unpredictable, so a compare-and-branch per
    # shingle would cost a mispredicted branch half the time.
    for s in range(n):
        h = mix64(values[s] ^ seed)
        j = _bin(h, k)
        out[j] = min(out[j], np.uint32(h & _LO))
        filled[j] = True
    used = 0
    for i in range(k):
        used += filled[i]
    if used == 0 or used == k:
        return
    for i in range(k):
        if filled[i]:
            continue
        attempt = U64(1)
        found = np.int64(-1)
        while attempt <= U64(_MAX_PROBES):
            j = _bin(mix64(probe_seed ^ ((U64(i) << _S32) | attempt)), k)
            if filled[j]:
                found = j
                break
            attempt += U64(1)
        if found < 0:  # unreachable in practice, see _MAX_PROBES
            found = np.int64((i + 1) % k)
            while not filled[found]:
                found = np.int64((found + 1) % k)
        out[i] = out[found]


@njit(cache=True)
def _oph_rows(
    values: np.ndarray,
    offsets: np.ndarray,
    seed: np.uint64,
    probe_seed: np.uint64,
    out: np.ndarray,
) -> None:
    filled = np.empty(out.shape[1], dtype=np.bool_)
    for d in range(offsets.shape[0] - 1):
        start = offsets[d]
        oph_into(values[start:], offsets[d + 1] - start, seed, probe_seed, filled, out[d])


def oph_packed(values: np.ndarray, offsets: np.ndarray, seed: int, num_perm: int) -> np.ndarray:
    """N x K densified one-permutation sketches of N sets of uint64 fingerprints given as one
    flat array plus offsets (n + 1), in one kernel call."""
    from neardup.kernels.minhash import SIGNATURE_DTYPE

    flat = np.ascontiguousarray(values, dtype=np.uint64)
    bounds = np.ascontiguousarray(offsets, dtype=np.int64)
    hseed, pseed = oph_params(seed)
    out = np.empty((bounds.size - 1, num_perm), dtype=SIGNATURE_DTYPE)
    _oph_rows(flat, bounds, hseed, pseed, out)
    return out
