"""Broder's sketches (Broder 1997, "On the resemblance and containment of documents").

Both sketches keep a sample of the page's shingle fingerprints, after one seeded random
permutation of the 64-bit values (`mix64(x ^ seed)`, a bijection):

- MIN_s(A): the s smallest values. For two pages, MIN_s(A ∪ B) is the s smallest of
  MIN_s(A) ∪ MIN_s(B), and the share of it found in both sketches is an unbiased estimate
  of the resemblance r(A, B) = |A ∩ B| / |A ∪ B|. A fixed-size sketch cannot estimate
  containment directly; with the set sizes |A| and |B| (kept with the sketch) it follows
  from r: |A ∩ B| = r (|A| + |B|) / (1 + r), so c(A, B) = |A ∩ B| / |A|.
- MOD_m(A): every value ≡ 0 mod m (m = 2^i). Its size grows with the page, and both
  r = |MOD(A) ∩ MOD(B)| / |MOD(A) ∪ MOD(B)| and c(A, B) = |MOD(A) ∩ MOD(B)| / |MOD(A)| are
  unbiased estimates. The 2^i adjustment: a page whose MOD_m sketch would hold more than
  `mod_max` values keeps MOD_{2^j} for the smallest j that fits; since 2^i divides 2^j,
  MOD_{2^j}(A) is the subset of MOD_{2^i}(A) with j trailing zero bits, so two pages are
  compared at the larger of their two levels.

Broder's super-shingles (§"Super shingles"): the sorted MIN_s sketch shingled again, one
hash per run of `size` consecutive values; pages sharing one super-shingle share a run of
sketch values and are very likely similar. (Fetterly's super-shingles, in
`supershingles.py`, hash fixed positions of a min-hash signature instead.)

All estimates run in numba kernels over flat sketches plus offsets, one call per batch of
pairs.
"""

from __future__ import annotations

import numpy as np

from neardup.kernels.hashing import U64, as_int64, combine, derive_seed, finish, mix64
from neardup.kernels.jit import njit

TAG_BRODER = 10
TAG_BRODER_SUPER = 11


def permutation_seed(seed: int) -> np.uint64:
    return derive_seed(seed, TAG_BRODER)


@njit(cache=True)
def _tz_at_least(v: np.uint64, level: int) -> bool:
    if level == 0:
        return True
    mask = (U64(1) << U64(level)) - U64(1)
    return (v & mask) == U64(0)


@njit(cache=True)
def min_s_kernel(
    flat: np.ndarray, offsets: np.ndarray, s: int, seed: np.uint64
) -> tuple[np.ndarray, np.ndarray]:
    """MIN_s of every set (flat uint64 + offsets): sorted uint64, flat, with offsets."""
    n = offsets.shape[0] - 1
    out_offsets = np.empty(n + 1, dtype=np.int64)
    total = 0
    for d in range(n):
        total += min(s, offsets[d + 1] - offsets[d])
    out = np.empty(total, dtype=np.uint64)
    o = 0
    for d in range(n):
        out_offsets[d] = o
        a = offsets[d]
        b = offsets[d + 1]
        if b == a:
            continue
        tmp = np.empty(b - a, dtype=np.uint64)
        for i in range(a, b):
            tmp[i - a] = mix64(flat[i] ^ seed)
        tmp.sort()
        k = min(s, b - a)
        out[o : o + k] = tmp[:k]
        o += k
    out_offsets[n] = o
    return out, out_offsets


@njit(cache=True)
def mod_m_kernel(
    flat: np.ndarray, offsets: np.ndarray, log_m: int, max_size: int, seed: np.uint64
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MOD_{2^i} of every set with the 2^i adjustment: sorted uint64 values, offsets, and
    the level i of each page (log_m, or more for a page whose sketch would exceed
    `max_size`)."""
    n = offsets.shape[0] - 1
    out = np.empty(offsets[-1] - offsets[0], dtype=np.uint64)
    out_offsets = np.empty(n + 1, dtype=np.int64)
    levels = np.empty(n, dtype=np.int8)
    o = 0
    for d in range(n):
        out_offsets[d] = o
        level = log_m
        count = 0
        for i in range(offsets[d], offsets[d + 1]):
            count += _tz_at_least(mix64(flat[i] ^ seed), level)
        while count > max_size and level < 63:
            level += 1
            count = 0
            for i in range(offsets[d], offsets[d + 1]):
                count += _tz_at_least(mix64(flat[i] ^ seed), level)
        start = o
        for i in range(offsets[d], offsets[d + 1]):
            v = mix64(flat[i] ^ seed)
            if _tz_at_least(v, level):
                out[o] = v
                o += 1
        out[start:o] = np.sort(out[start:o])
        levels[d] = level
    out_offsets[n] = o
    return out[:o], out_offsets, levels


@njit(cache=True)
def min_s_estimates(
    values: np.ndarray,
    offsets: np.ndarray,
    sizes: np.ndarray,
    pa: np.ndarray,
    pb: np.ndarray,
    s: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair (a, b): estimated resemblance from MIN_s(A ∪ B), and the containments
    c(A, B), c(B, A) derived from it with the set sizes."""
    m = pa.shape[0]
    res = np.zeros(m, dtype=np.float64)
    ca = np.zeros(m, dtype=np.float64)
    cb = np.zeros(m, dtype=np.float64)
    for k in range(m):
        i = offsets[pa[k]]
        ie = offsets[pa[k] + 1]
        j = offsets[pb[k]]
        je = offsets[pb[k] + 1]
        taken = 0
        both = 0
        while taken < s and (i < ie or j < je):
            if j >= je or (i < ie and values[i] < values[j]):
                i += 1
            elif i >= ie or values[j] < values[i]:
                j += 1
            else:
                both += 1
                i += 1
                j += 1
            taken += 1
        if taken == 0:
            continue
        r = both / taken
        res[k] = r
        na = sizes[pa[k]]
        nb = sizes[pb[k]]
        inter = r * (na + nb) / (1.0 + r)
        ca[k] = min(1.0, inter / na) if na else 0.0
        cb[k] = min(1.0, inter / nb) if nb else 0.0
    return res, ca, cb


@njit(cache=True)
def mod_m_estimates(
    values: np.ndarray,
    offsets: np.ndarray,
    levels: np.ndarray,
    pa: np.ndarray,
    pb: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair (a, b), both sketches cut to the larger of their levels: the resemblance
    |∩| / |∪| and the containments |∩| / |MOD(A)|, |∩| / |MOD(B)|."""
    m = pa.shape[0]
    res = np.zeros(m, dtype=np.float64)
    ca = np.zeros(m, dtype=np.float64)
    cb = np.zeros(m, dtype=np.float64)
    for k in range(m):
        level = max(levels[pa[k]], levels[pb[k]])
        i = offsets[pa[k]]
        ie = offsets[pa[k] + 1]
        j = offsets[pb[k]]
        je = offsets[pb[k] + 1]
        na = 0
        nb = 0
        both = 0
        while i < ie or j < je:
            if i < ie and not _tz_at_least(values[i], level):
                i += 1
                continue
            if j < je and not _tz_at_least(values[j], level):
                j += 1
                continue
            if j >= je or (i < ie and values[i] < values[j]):
                na += 1
                i += 1
            elif i >= ie or values[j] < values[i]:
                nb += 1
                j += 1
            else:
                both += 1
                na += 1
                nb += 1
                i += 1
                j += 1
        union = na + nb - both
        if union:
            res[k] = both / union
        if na:
            ca[k] = both / na
        if nb:
            cb[k] = both / nb
    return res, ca, cb


@njit(cache=True)
def _sorted_supershingles(
    values: np.ndarray, offsets: np.ndarray, size: int, seed: np.uint64
) -> tuple[np.ndarray, np.ndarray]:
    n = offsets.shape[0] - 1
    out = np.empty(max(1, offsets[-1]), dtype=np.uint64)
    out_offsets = np.empty(n + 1, dtype=np.int64)
    o = 0
    for d in range(n):
        out_offsets[d] = o
        a = offsets[d]
        b = offsets[d + 1]
        if b == a:
            continue
        width = min(size, b - a)
        for p in range(a, b - width + 1):
            h = seed
            for q in range(p, p + width):
                h = combine(h, values[q])
            out[o] = finish(h, width)
            o += 1
    out_offsets[n] = o
    return out[:o], out_offsets


def sorted_sketch_supershingles(
    values: np.ndarray, offsets: np.ndarray, size: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Broder's super-shingles of sorted sketches: one hash per run of `size` consecutive
    values (a sketch shorter than `size` gives one of all its values). int64, flat, with
    offsets."""
    flat, out_offsets = _sorted_supershingles(
        np.ascontiguousarray(values, dtype=np.uint64),
        np.ascontiguousarray(offsets, dtype=np.int64),
        int(size),
        derive_seed(seed, TAG_BRODER_SUPER),
    )
    return as_int64(flat), out_offsets


def min_s(shingles: np.ndarray, s: int, seed: int) -> np.ndarray:
    """MIN_s of one shingle set (sorted permuted uint64 values)."""
    flat = np.ascontiguousarray(shingles, dtype=np.uint64)
    values, _ = min_s_kernel(flat, np.array([0, flat.size]), int(s), permutation_seed(seed))
    return values


def mod_m(shingles: np.ndarray, m: int, max_size: int, seed: int) -> tuple[np.ndarray, int]:
    """MOD_m of one shingle set with the 2^i adjustment: (sorted values, level i)."""
    flat = np.ascontiguousarray(shingles, dtype=np.uint64)
    values, _, levels = mod_m_kernel(
        flat,
        np.array([0, flat.size]),
        int(m).bit_length() - 1,
        int(max_size),
        permutation_seed(seed),
    )
    return values, int(levels[0])


def _two(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values = np.concatenate([np.asarray(a, np.uint64), np.asarray(b, np.uint64)])
    return values, np.array([0, len(a), len(a) + len(b)], dtype=np.int64)


def min_s_compare(
    a: np.ndarray, b: np.ndarray, size_a: int, size_b: int, s: int
) -> tuple[float, float, float]:
    """(resemblance, c(A, B), c(B, A)) estimated from two MIN_s sketches and set sizes."""
    values, offsets = _two(a, b)
    r, ca, cb = min_s_estimates(
        values,
        offsets,
        np.array([size_a, size_b], dtype=np.int64),
        np.array([0]),
        np.array([1]),
        int(s),
    )
    return float(r[0]), float(ca[0]), float(cb[0])


def mod_m_compare(
    a: np.ndarray, b: np.ndarray, level_a: int, level_b: int
) -> tuple[float, float, float]:
    """(resemblance, c(A, B), c(B, A)) estimated from two MOD sketches and their levels."""
    values, offsets = _two(a, b)
    r, ca, cb = mod_m_estimates(
        values, offsets, np.array([level_a, level_b], dtype=np.int8), np.array([0]), np.array([1])
    )
    return float(r[0]), float(ca[0]), float(cb[0])
