"""Min-hash signatures, resemblance estimates and exact set measures.

Broder's MIN-wise sketch as Fetterly et al. use it: K fixed, seeded functions h_1..h_K map
each shingle fingerprint to an image, and the sketch keeps min over the page's shingles of
every h_i. Two pages agree at position i with probability equal to their resemblance
|A ∩ B| / |A ∪ B|, so the fraction of equal positions estimates it, with standard error
sqrt(r (1 - r) / K).

Why SIGNATURE_DTYPE is uint32
-----------------------------
The inner loop (every distinct shingle times every function) is the largest single cost of
sketching. With 64-bit images it needs a 64x64-bit vector multiply, which x86 lacks before
AVX-512 and which is slow where it exists (3 micro-ops for 4 lanes of an AVX2 register);
with 32-bit images it needs one 32-bit multiply, which every SIMD unit has, for 8 lanes.
Measured on the pages of bench/sketch_speed.py (K=128, one core, the same loop structure),
the min-hash step alone is about 2.5x faster with 32-bit images than with the cheapest
64-bit family (affine a*x+b mod 2^64) and about 6x faster than with a full 64-bit mixer per
function; end to end (tokens, shingles, de-duplication, min-hash, fingerprints) the 32-bit
kernel is about 1.5x faster than the affine 64-bit one. Signatures are also half the size
(512 bytes per page at K=128).

The functions: each 64-bit shingle fingerprint x (already the output of a strong mixer) is
folded once to a 32-bit pre-image y = lo32(x) XOR hi32(x), and
h_i(y) = ((y XOR b_i) * a_i) mod 2^32 with random odd a_i and random b_i. Each h_i is a
bijection of y, so every image is equally likely and the minimum identifies its pre-image,
as Fetterly's one-to-one functions do; the top bits of a product with a random odd constant,
which decide the minimum, are a good universal hash (Dietzfelbinger's multiply-shift),
different for each i. The fold sits outside the loop over i, which keeps that loop at three
vector operations per lane. The tests check that positions agree with probability r and
independently (14 positions agree with probability r^14).

What 32 bits cost: two different shingles can share a pre-image. For pages with n and m
distinct shingles an accidental equality at one position has probability about
n*m / ((n + m) * 2^32): 1.2e-7 for two pages of 1000 shingles, 1.2e-5 for two of 100,000,
a bias far below the standard error (0.035 at K=128, r=0.8). An LSH band needs r such
accidents at once, a super-shingle 14.
"""

from __future__ import annotations

import numpy as np

from neardup.kernels.hashing import TAG_MINHASH, U64, derive_seeds
from neardup.kernels.jit import njit

SIGNATURE_DTYPE = np.uint32
# The two K-value sketches a page can have (`Settings.sketch`): "oph", one-permutation hashing
# with optimal densification (`kernels.oph`, O(n + K) per page), and "classic", the K
# independent functions of this module (O(n * K)). Both estimate resemblance by the share of
# equal positions, but their values differ, so sketches of one kind never meet the other's.
SKETCHES = ("oph", "classic")
EMPTY_VALUE = np.iinfo(SIGNATURE_DTYPE).max  # every position of a page without shingles
_LO = U64(0xFFFFFFFF)
_S32 = U64(32)


def minhash_params(seed: int, num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    """The K function constants (a odd, b), uint32. Function i depends only on (seed, i)."""
    raw = derive_seeds(seed, TAG_MINHASH, num_perm)
    a = (raw & _LO).astype(np.uint32) | np.uint32(1)
    b = (raw >> _S32).astype(np.uint32)
    return a, b


@njit(inline="always")
def fold(x: np.uint64) -> np.uint32:
    """The 32-bit pre-image of a 64-bit shingle fingerprint (already a strong mix)."""
    return np.uint32((x ^ (x >> _S32)) & _LO)


@njit(inline="always")
def _h(y: np.uint32, a: np.uint32, b: np.uint32) -> np.uint32:
    return np.uint32(np.uint32(y ^ b) * a)


@njit(cache=True)
def minhash_into(values: np.ndarray, n: int, a: np.ndarray, b: np.ndarray, out: np.ndarray):
    """out[i] = min over values[:n] of h_i; `out` is filled with EMPTY_VALUE first.

    Four shingles per pass over the K functions: the inner loop over i is contiguous and
    vectorises (an xor, a 32-bit multiply and a min per lane), and loading and storing the
    running minima is shared by four shingles.
    """
    k = a.shape[0]
    for i in range(k):
        out[i] = np.uint32(0xFFFFFFFF)
    s = 0
    while s + 3 < n:
        y0 = fold(values[s])
        y1 = fold(values[s + 1])
        y2 = fold(values[s + 2])
        y3 = fold(values[s + 3])
        for i in range(k):
            ai = a[i]
            bi = b[i]
            m01 = min(_h(y0, ai, bi), _h(y1, ai, bi))
            m23 = min(_h(y2, ai, bi), _h(y3, ai, bi))
            out[i] = min(out[i], min(m01, m23))
        s += 4
    while s < n:
        y = fold(values[s])
        for i in range(k):
            out[i] = min(out[i], _h(y, a[i], b[i]))
        s += 1


@njit(cache=True)
def _minhash_rows(
    values: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray
) -> None:
    for d in range(offsets.shape[0] - 1):
        start = offsets[d]
        minhash_into(values[start:], offsets[d + 1] - start, a, b, out[d])


def minhash_packed(values: np.ndarray, offsets: np.ndarray, seed: int, num_perm: int) -> np.ndarray:
    """N x K signatures of N sets of uint64 fingerprints given as one flat array plus
    offsets (n + 1), in one kernel call: for shingle sets that are already hashed (stored
    sets, other features)."""
    flat = np.ascontiguousarray(values, dtype=np.uint64)
    bounds = np.ascontiguousarray(offsets, dtype=np.int64)
    a, b = minhash_params(seed, num_perm)
    out = np.empty((bounds.size - 1, num_perm), dtype=SIGNATURE_DTYPE)
    _minhash_rows(flat, bounds, a, b, out)
    return out


def minhash_signature(shingles: np.ndarray, seed: int, num_perm: int) -> np.ndarray:
    """The K-value min-hash signature of any set (or multiset) of uint64 fingerprints."""
    values = np.ascontiguousarray(shingles, dtype=np.uint64)
    return minhash_packed(values, np.array([0, values.size]), seed, num_perm)[0]


def estimate_resemblance(a: np.ndarray, b: np.ndarray) -> float | np.ndarray:
    """Fraction of equal min-hash positions: one float for two signatures, or one per row
    for two (M x K) arrays (rows are candidate pairs). Two pages without shingles (all
    EMPTY_VALUE) compare as 1.0, so callers keep such pages out of candidate pairs."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape:
        raise ValueError(f"signature shapes differ: {a.shape} and {b.shape}")
    equal = np.count_nonzero(a == b, axis=-1)
    frac = equal / a.shape[-1]
    return float(frac) if a.ndim == 1 else frac


@njit(cache=True)
def _intersection_size(a: np.ndarray, b: np.ndarray) -> int:
    i = 0
    j = 0
    n = 0
    while i < a.shape[0] and j < b.shape[0]:
        x = a[i]
        y = b[j]
        if x == y:
            n += 1
            i += 1
            j += 1
        elif x < y:
            i += 1
        else:
            j += 1
    return n


def _as_set(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.uint64)


def intersection_size(a: np.ndarray, b: np.ndarray) -> int:
    """|A ∩ B| of two sorted unique uint64 arrays, by one linear merge."""
    return int(_intersection_size(_as_set(a), _as_set(b)))


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact resemblance |A ∩ B| / |A ∪ B| of two sorted unique uint64 arrays.
    Two empty sets are identical: 1.0."""
    inter = intersection_size(a, b)
    union = len(a) + len(b) - inter
    return inter / union if union else 1.0


def containment(a: np.ndarray, b: np.ndarray) -> float:
    """Exact containment |A ∩ B| / |A| of A in B (sorted unique uint64 arrays).
    The empty set is contained in everything: 1.0."""
    return intersection_size(a, b) / len(a) if len(a) else 1.0
