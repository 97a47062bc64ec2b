"""64-bit mixing, row hashing and seed derivation shared by every sketch kernel.

Everything that is stored (shingle fingerprints, super-shingles, band keys, ...) must be the
same on any machine and in any number of processes, so every hash here is a pure function of
its input and of values derived from `Settings.seed`; nothing depends on Python's `hash()`,
on the process, or on the CPU. The kernels use wrapping uint64 arithmetic, which numba and
LLVM define identically everywhere.

Stored fingerprints are int64 (the two's-complement view of the uint64 value) so that DuckDB
BIGINT, Arrow int64 and Spark LongType hold them without loss.
"""

from __future__ import annotations

import numpy as np
import xxhash

from neardup.kernels.jit import njit

U64 = np.uint64
# Constants of SplitMix64 / Stafford's "Mix13" finaliser and of MurmurHash3's x64 block step.
GOLDEN = U64(0x9E3779B97F4A7C15)
_M1 = U64(0xBF58476D1CE4E5B9)
_M2 = U64(0x94D049BB133111EB)
_C1 = U64(0x87C37B91114253D5)
_C2 = U64(0x4CF5AD432745937F)
_S27 = U64(27)
_S30 = U64(30)
_S31 = U64(31)
_S33 = U64(33)
_S64 = U64(64)

# Domain tags: one independent stream of seeded constants per use, so that (for example) a
# band key can never equal a super-shingle of the same values by construction.
TAG_TOKEN = 1
TAG_SHINGLE = 2
TAG_MINHASH = 3
TAG_SUPERSHINGLE = 4
TAG_MEGASHINGLE = 5
TAG_BAND = 6
TAG_COUNTMIN = 7
TAG_SHINGLE_SET = 8


@njit(inline="always")
def mix64(x: np.uint64) -> np.uint64:
    """Stafford's Mix13 finaliser (the one in SplitMix64): a bijection of uint64 whose every
    output bit depends on every input bit. Bijective, so it never adds collisions."""
    x = (x ^ (x >> _S30)) * _M1
    x = (x ^ (x >> _S27)) * _M2
    return x ^ (x >> _S31)


@njit(inline="always")
def rotl64(x: np.uint64, r: np.uint64) -> np.uint64:
    return (x << r) | (x >> (_S64 - r))


@njit(inline="always")
def combine(h: np.uint64, v: np.uint64) -> np.uint64:
    """Absorb one 64-bit word into a running hash (MurmurHash3 x64 block step). Order matters,
    so hashing a sequence this way distinguishes permutations of the same values."""
    k = rotl64(v * _C1, _S31) * _C2
    h = h ^ k
    return rotl64(h, _S27) * U64(5) + U64(0x52DCE729)


@njit(inline="always")
def finish(h: np.uint64, length: int) -> np.uint64:
    """Finalise a `combine` chain; the length keeps prefixes of a sequence apart."""
    return mix64(h ^ (U64(length) * GOLDEN))


@njit(cache=True)
def _derive(base: np.uint64, n: int) -> np.ndarray:
    out = np.empty(n, dtype=np.uint64)
    x = base
    for i in range(n):
        x = x + GOLDEN
        out[i] = mix64(x)
    return out


def derive_seeds(seed: int, tag: int, n: int) -> np.ndarray:
    """`n` well-mixed uint64 constants for one purpose (`tag`) from the user's seed.

    A SplitMix64 stream: value i does not depend on `n`, so the first 84 min-hash functions of
    a K=128 sketch are exactly the 84 functions of a K=84 sketch with the same seed.
    """
    base = (seed ^ (tag * 0x87C37B91114253D5)) & 0xFFFFFFFFFFFFFFFF
    return _derive(mix64_scalar(base), int(n))


def mix64_scalar(x: int) -> np.uint64:
    """`mix64` for one Python int, without going through numba (used for seeds)."""
    m = 0xFFFFFFFFFFFFFFFF
    x &= m
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
    return U64(x ^ (x >> 31))


def derive_seed(seed: int, tag: int) -> np.uint64:
    """One seeded constant for `tag` (the first of `derive_seeds`)."""
    return U64(derive_seeds(seed, tag, 1)[0])


@njit(cache=True)
def hash_row_segments(values: np.ndarray, width: int, count: int, seeds: np.ndarray) -> np.ndarray:
    """Hash each of `count` consecutive segments of `width` values in every row of `values`
    (N x >= count*width), segment j seeded with `seeds[j]`: the shared kernel of super-shingles
    and LSH band keys. Returns N x count uint64."""
    n = values.shape[0]
    out = np.empty((n, count), dtype=np.uint64)
    for r in range(n):
        row = values[r]
        for j in range(count):
            h = seeds[j]
            base = j * width
            for i in range(width):
                h = combine(h, U64(row[base + i]))
            out[r, j] = finish(h, width)
    return out


def as_int64(values: np.ndarray) -> np.ndarray:
    """The int64 (two's-complement) view of uint64 fingerprints, for storage."""
    return np.ascontiguousarray(values, dtype=np.uint64).view(np.int64)


def fingerprint64(data: bytes | bytearray | memoryview) -> int:
    """Signed 64-bit xxh3 fingerprint of raw bytes (exact payload / text identity).

    Not seeded on purpose: an exact fingerprint identifies content across runs and settings.
    """
    v = xxhash.xxh3_64_intdigest(data)
    return v - (1 << 64) if v >= (1 << 63) else v
