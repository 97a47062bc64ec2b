"""w-word shingles of a canonical token stream, as one 64-bit fingerprint per shingle.

Broder et al. (1997) take every run of w consecutive tokens; Fetterly et al. (2004) wrap
around at the end "so that every word in the document starts a shingle", i.e. n tokens give
exactly n shingles. Without wrap a document of n >= w tokens gives n - w + 1 shingles, and a
document shorter than w gives one shingle of all its tokens (so it can still be compared).

Fingerprints are computed in two numba passes over the UTF-8 bytes, with no Python object
per token or shingle:

1. token hashes: the bytes between spaces, read eight at a time, into a seeded 64-bit hash
   (see `token_hashes`);
2. shingle fingerprints: sum_j c_j * t_{p+j} (mod 2^64, random odd c_j, so the order of
   the tokens matters) passed through the bijective `mix64`; the two loops vectorise.

These 64-bit values are the paper's "pre-images". They are seeded with `Settings.seed`, so
sketches made with different seeds are never comparable (which `Settings.check_compatible`
enforces).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neardup.kernels.hashing import (
    GOLDEN,
    TAG_SHINGLE,
    TAG_TOKEN,
    U64,
    combine,
    derive_seed,
    derive_seeds,
    mix64,
)
from neardup.kernels.jit import njit
from neardup.kernels.params import ShingleParams, Shingling
from neardup.kernels.tokens import canonicalize_packed, pack_arrow, pack_texts
from neardup.kernels.wordops import ctz64, load_u64, padded

_SPACES = U64(0x2020202020202020)
_ONES = U64(0x0101010101010101)
_HIGHS = U64(0x8080808080808080)


def shingle_params(seed: int, shingle_size: int) -> tuple[np.uint64, np.ndarray, np.uint64]:
    """Seeded constants of token and shingle hashing: (token seed, w odd coefficients,
    shingle seed)."""
    coeffs = derive_seeds(seed, TAG_SHINGLE, shingle_size + 1)
    return derive_seed(seed, TAG_TOKEN), coeffs[:shingle_size] | U64(1), U64(coeffs[-1])


@njit(cache=True)
def token_hashes(buf: np.ndarray, start: int, end: int, seed: np.uint64, out: np.ndarray) -> int:
    """Hash the space-separated tokens of buf[start:end] into `out`; returns their count.

    Token hash: H = `seed` absorbing each full 8-byte little-endian chunk with `combine`,
    then mix64((H ^ tail) + length * GOLDEN), tail being the last 0-7 bytes. One iteration
    per token (or per 8 bytes of a long one): load 8 bytes, find the first space with the
    SWAR zero-byte test, hash. Runs of spaces count as one separator. Needs 8 readable bytes
    after `end` (their content does not matter).
    """
    n = 0
    i = start
    h = seed
    length = 0
    while i < end:
        word = load_u64(buf, i)
        x = word ^ _SPACES
        # Exact for the lowest zero byte, which is the only one used.
        zero = (x - _ONES) & ~x & _HIGHS
        rest = end - i
        if rest < 8:
            zero |= U64(0x80) << U64(8 * rest)
        if zero == U64(0):  # eight token bytes, no space: absorb and go on
            h = combine(h, word)
            length += 8
            i += 8
            continue
        tz = ctz64(zero)
        k = np.int64(tz >> U64(3))
        length += k
        if length:
            tail = word & ((U64(1) << (tz - U64(7))) - U64(1))
            out[n] = mix64((h ^ tail) + U64(length) * GOLDEN)
            n += 1
        h = seed
        length = 0
        i += k + 1
    if length:  # a long token ending exactly at `end`
        out[n] = mix64(h + U64(length) * GOLDEN)
        n += 1
    return n


@njit(cache=True)
def shingle_fps(
    tok: np.ndarray,
    n_tokens: int,
    w: int,
    wrap: bool,
    coeffs: np.ndarray,
    seed: np.uint64,
    out: np.ndarray,
) -> int:
    """Fingerprints of the shingles of `n_tokens` token hashes into `out`; returns their
    count. `tok` needs room for n_tokens + w values (the wrap-around copies go after the end).
    """
    if n_tokens == 0:
        return 0
    if wrap:
        for j in range(w - 1):
            tok[n_tokens + j] = tok[j % n_tokens]
        n_sh = n_tokens
        width = w
    elif n_tokens >= w:
        n_sh = n_tokens - w + 1
        width = w
    else:
        n_sh = 1
        width = n_tokens
    for p in range(n_sh):
        out[p] = U64(0)
    for j in range(width):
        c = coeffs[j]
        for p in range(n_sh):
            out[p] += c * tok[p + j]
    final = seed + U64(width) * GOLDEN
    for p in range(n_sh):
        out[p] = mix64(out[p] ^ final)
    return n_sh


@njit(cache=True)
def unique_into(values: np.ndarray, n: int, table: np.ndarray, out: np.ndarray) -> int:
    """Distinct values of values[:n], in order of first occurrence, into `out`.

    Open addressing over a prefix of `table` sized for this document (4 slots per value up
    to 4096 values, so it stays in L1/L2 and probes rarely collide), cleared per document.
    The insert is written without a branch on "new or seen", which is unpredictable and was
    the main cost. 0 marks an empty slot, so the value 0 is tracked on the side.
    """
    factor = 4 if n <= 4096 else 2
    size = 16
    bits = 4
    while size < factor * n and size < table.shape[0]:
        size *= 2
        bits += 1
    mask = size - 1
    shift = U64(64 - bits)
    table[:size] = U64(0)
    m = 0
    seen_zero = False
    for i in range(n):
        v = values[i]
        if v == U64(0):  # probability 2^-64 per shingle; kept exact all the same
            if not seen_zero:
                seen_zero = True
                out[m] = v
                m += 1
            continue
        slot = np.int64(v >> shift)
        k = table[slot]
        while k != U64(0) and k != v:
            slot = (slot + 1) & mask
            k = table[slot]
        table[slot] = v
        out[m] = v
        m += k == U64(0)
    return m


def scratch_capacity(offsets: np.ndarray, w: int) -> int:
    """Most tokens any document of the batch can have (one byte and one space each), plus
    room for the wrap-around copies."""
    longest = int(np.max(np.diff(offsets))) if offsets.size > 1 else 0
    return longest // 2 + 1 + w


def table_capacity(capacity: int) -> int:
    """Slots of the de-duplication table for documents of up to `capacity` shingles."""
    size = 1 << 14
    while size < 2 * capacity:
        size *= 2
    return size


@njit(cache=True)
def _packed_shingles(
    buf: np.ndarray,
    offsets: np.ndarray,
    capacity: int,
    table_size: int,
    tseed: np.uint64,
    coeffs: np.ndarray,
    sseed: np.uint64,
    wrap: bool,
    unique: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Shingle fingerprints of every document (in position order, or distinct per document
    when `unique`), flattened, with per-document offsets."""
    n_docs = offsets.shape[0] - 1
    w = coeffs.shape[0]
    tok = np.empty(capacity, dtype=np.uint64)
    fps = np.empty(capacity, dtype=np.uint64)
    table = np.empty(table_size if unique else 1, dtype=np.uint64)
    total = 0
    for d in range(n_docs):
        total += (offsets[d + 1] - offsets[d]) // 2 + 1
    flat = np.empty(total, dtype=np.uint64)
    out_offsets = np.empty(n_docs + 1, dtype=np.int64)
    o = 0
    for d in range(n_docs):
        out_offsets[d] = o
        nt = token_hashes(buf, offsets[d], offsets[d + 1], tseed, tok)
        ns = shingle_fps(tok, nt, w, wrap, coeffs, sseed, fps)
        if unique:
            ns = unique_into(fps, ns, table, flat[o:])
        else:
            flat[o : o + ns] = fps[:ns]
        o += ns
    out_offsets[n_docs] = o
    return flat[:o], out_offsets


def packed_shingles(
    buf: np.ndarray, offsets: np.ndarray, settings: ShingleParams, unique: bool
) -> tuple[np.ndarray, np.ndarray]:
    """`_packed_shingles` with the constants of `settings`."""
    tseed, coeffs, sseed = shingle_params(settings.seed, settings.shingle_size)
    cap = scratch_capacity(offsets, settings.shingle_size)
    return _packed_shingles(
        padded(buf, int(offsets[-1])),
        offsets,
        cap,
        table_capacity(cap),
        tseed,
        coeffs,
        sseed,
        bool(settings.wrap_shingles),
        unique,
    )


def shingle_hashes(canonical: str, shingle_size: int, wrap: bool, seed: int) -> np.ndarray:
    """One uint64 fingerprint per shingle position of a canonical text (see module doc)."""
    if shingle_size < 1:
        raise ValueError("shingle_size must be at least 1")
    params = Shingling(shingle_size=shingle_size, wrap_shingles=wrap, seed=seed)
    flat, _ = packed_shingles(*pack_texts([canonical]), params, unique=False)
    return flat


def doc_shingle_counts(
    canonical_texts: list[str], settings: ShingleParams
) -> tuple[np.ndarray, np.ndarray]:
    """Document frequency of every shingle of a batch: (sorted unique uint64 fingerprints,
    int64 number of documents containing each). Each document counts a shingle once, as
    Broder's "shared by more than 1000 documents" requires. Counts of batches add up, so
    workers can count their own batches and the totals do not depend on the split."""
    return doc_shingle_counts_packed(*pack_texts(canonical_texts), settings)


def doc_shingle_counts_packed(
    buf: np.ndarray, offsets: np.ndarray, settings: ShingleParams
) -> tuple[np.ndarray, np.ndarray]:
    """`doc_shingle_counts` of canonical texts packed as UTF-8 + offsets."""
    flat, _ = packed_shingles(buf, offsets, settings, unique=True)
    hashes, counts = np.unique(flat, return_counts=True)
    return hashes, counts.astype(np.int64)


def doc_shingle_counts_arrow(texts: Any, settings: ShingleParams) -> tuple[np.ndarray, np.ndarray]:
    """`doc_shingle_counts` of *raw* texts in an Arrow string (chunked) array, canonicalised
    in the kernel, without Python strings."""
    return doc_shingle_counts_packed(*canonicalize_packed(*pack_arrow(texts)), settings)
