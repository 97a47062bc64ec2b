"""Min-hash signatures, resemblance estimates and exact set measures.

Broder's MIN-wise sketch as Fetterly et al. use it: K fixed, seeded functions h_1..h_K map
each shingle fingerprint to an image, and the sketch keeps min over the page's shingles of
every h_i. Two pages agree at position i with probability equal to their resemblance
|A ∩ B| / |A ∪ B|, so the fraction of equal positions estimates it, with standard error
sqrt(r (1 - r) / K).

Why SIGNATURE_DTYPE is uint32
-----------------------------
The inner loop (every distinct shingle times every function) is the whole cost of
sketching. With 64-bit images it needs a 64x64-bit vector multiply, which x86 lacks before
AVX-512 and which is slow where it exists; with 32-bit images it needs one 32-bit multiply,
which every SIMD unit has, and twice as many lanes fit a register. Measured on the Debian
documentation pages of bench/sketch_speed.py, K=128, one core, the same loop structure: the
min-hash step takes about 11 us per page with 32-bit images against 23 us with the cheapest
64-bit family (affine a*x+b, which is weaker than ours) and 62 us with a full 64-bit mixer;
end to end (canonicalise, shingle, de-duplicate, min-hash) 32-bit sketching is about 1.6x
faster. Signatures are also half the size (512 bytes per page at K=128).

What 32 bits cost: the functions are no longer one-to-one on 64-bit fingerprints, so two
different shingles can share a minimum by accident. For pages with n and m distinct shingles
that happens at one position with probability about n*m / ((n + m) * 2^32): 1.2e-7 for two
pages of 1000 shingles, 1.2e-5 for two of 100,000, a bias far below the standard error
(0.035 at K=128, r=0.8). An LSH band needs r such accidents at once, a super-shingle 14.

The functions: each 64-bit fingerprint x (already the output of a strong mixer) is split into
32-bit halves (lo, hi) and h_i(x) = ((lo XOR b_i) * a_i mod 2^32) XOR hi with random odd a_i
and random b_i. For a fixed hi this is a bijection of lo, so every image is equally likely,
and the top bits of a multiply by a random odd constant, which decide the minimum, are a
good universal hash of lo (Dietzfelbinger's multiply-shift), different for each i.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from neardup.sketch.hashing import TAG_MINHASH, U64, derive_seeds

SIGNATURE_DTYPE = np.uint32
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
def _h(lo: np.uint32, hi: np.uint32, a: np.uint32, b: np.uint32) -> np.uint32:
    return np.uint32(np.uint32(np.uint32(lo ^ b) * a) ^ hi)


@njit(cache=True)
def minhash_into(values: np.ndarray, n: int, a: np.ndarray, b: np.ndarray, out: np.ndarray):
    """out[i] = min over values[:n] of h_i; `out` is filled with EMPTY_VALUE first.

    Four shingles per pass over the K functions: the inner loop over i is contiguous and
    vectorises (one 32-bit multiply per lane), and loading and storing the running minima
    is shared by four shingles.
    """
    k = a.shape[0]
    for i in range(k):
        out[i] = np.uint32(0xFFFFFFFF)
    s = 0
    while s + 3 < n:
        y0 = values[s]
        y1 = values[s + 1]
        y2 = values[s + 2]
        y3 = values[s + 3]
        l0 = np.uint32(y0 & _LO)
        h0 = np.uint32(y0 >> _S32)
        l1 = np.uint32(y1 & _LO)
        h1 = np.uint32(y1 >> _S32)
        l2 = np.uint32(y2 & _LO)
        h2 = np.uint32(y2 >> _S32)
        l3 = np.uint32(y3 & _LO)
        h3 = np.uint32(y3 >> _S32)
        for i in range(k):
            ai = a[i]
            bi = b[i]
            m01 = min(_h(l0, h0, ai, bi), _h(l1, h1, ai, bi))
            m23 = min(_h(l2, h2, ai, bi), _h(l3, h3, ai, bi))
            out[i] = min(out[i], min(m01, m23))
        s += 4
    while s < n:
        y = values[s]
        lo = np.uint32(y & _LO)
        hi = np.uint32(y >> _S32)
        for i in range(k):
            out[i] = min(out[i], _h(lo, hi, a[i], b[i]))
        s += 1


def minhash_signature(shingles: np.ndarray, seed: int, num_perm: int) -> np.ndarray:
    """The K-value min-hash signature of any set (or multiset) of uint64 fingerprints."""
    values = np.ascontiguousarray(shingles, dtype=np.uint64)
    a, b = minhash_params(seed, num_perm)
    out = np.empty(num_perm, dtype=SIGNATURE_DTYPE)
    minhash_into(values, values.size, a, b, out)
    return out


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
