"""Charikar's SimHash (2002), as Manku et al. (2007) used it for web pages.

Every distinct shingle fingerprint of a page (after a seeded mix) votes +1 on the bits it
has set and -1 on the others; bit i of the page's 64-bit SimHash is set when the votes on
bit i are positive. Pages with similar shingle sets get SimHashes at a small Hamming
distance (the probability that one bit differs is θ/π, θ the angle between the two pages'
shingle vectors).

Finding every pair within Hamming distance k uses permuted-block tables: cut the 64 bits
into k + 1 blocks; two values differing in at most k bits agree exactly on at least one
block (pigeonhole), so pages agreeing on one block are candidates, and the full distance is
checked afterwards. The similarity of a pair is reported as 1 - hamming / 64.
"""

from __future__ import annotations

import numpy as np

from neardup.kernels.hashing import U64, as_int64, derive_seed, mix64
from neardup.kernels.jit import njit

TAG_SIMHASH = 12


@njit(cache=True)
def _simhash_kernel(flat: np.ndarray, offsets: np.ndarray, seed: np.uint64) -> np.ndarray:
    n = offsets.shape[0] - 1
    out = np.zeros(n, dtype=np.uint64)
    votes = np.zeros(64, dtype=np.int64)
    for d in range(n):
        votes[:] = 0
        for i in range(offsets[d], offsets[d + 1]):
            h = mix64(flat[i] ^ seed)
            for b in range(64):
                votes[b] += np.int64((h >> U64(b)) & U64(1)) * 2 - 1
        v = U64(0)
        for b in range(64):
            if votes[b] > 0:
                v |= U64(1) << U64(b)
        out[d] = v
    return out


def simhash_packed(flat: np.ndarray, offsets: np.ndarray, seed: int) -> np.ndarray:
    """The SimHash (int64 view) of every set of uint64 fingerprints (flat + offsets)."""
    return as_int64(
        _simhash_kernel(
            np.ascontiguousarray(flat, dtype=np.uint64),
            np.ascontiguousarray(offsets, dtype=np.int64),
            derive_seed(seed, TAG_SIMHASH),
        )
    )


def simhash(shingles: np.ndarray, seed: int) -> int:
    """The SimHash of one shingle set (int64 view)."""
    flat = np.ascontiguousarray(shingles, dtype=np.uint64)
    return int(simhash_packed(flat, np.array([0, flat.size]), seed)[0])


def hamming(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray | int:
    """Bits that differ between SimHashes (elementwise for arrays)."""
    x = np.bitwise_xor(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
    d = np.bitwise_count(x.view(np.uint64))
    return int(d) if d.ndim == 0 else d.astype(np.int64)


def block_bounds(k: int) -> list[tuple[int, int]]:
    """The k + 1 bit ranges [lo, hi) that cut 64 bits into blocks as equal as possible."""
    n = k + 1
    edges = [round(64 * i / n) for i in range(n + 1)]
    return [(edges[i], edges[i + 1]) for i in range(n)]


def block_keys(simhashes: np.ndarray, k: int) -> np.ndarray:
    """(N, k + 1) int64: block j of each SimHash (one table per block)."""
    u = np.asarray(simhashes, dtype=np.int64).view(np.uint64)
    cols = []
    for lo, hi in block_bounds(k):
        mask = np.uint64((1 << (hi - lo)) - 1) if hi - lo < 64 else np.uint64(2**64 - 1)
        cols.append(((u >> np.uint64(lo)) & mask).astype(np.int64))
    return np.stack(cols, axis=1) if cols else np.empty((u.size, 0), dtype=np.int64)
