"""Sketch a batch of pages in one kernel call: the hot path of a scan.

Per page: tokens -> shingle fingerprints -> distinct shingles -> drop the common ones ->
min-hash signature and the shingle-set fingerprint; then super-shingles for the whole batch
from the signature matrix. The texts travel as one UTF-8 buffer plus offsets, so numba is
entered once per batch, and its scratch buffers are allocated once per batch too.

Fingerprints per page, after Broder et al. §5.2 (each finds one kind of equivalence):

- `lexical_fp`: xxh3 of the canonical text (lexically-equivalent pages);
- `shingle_fp`: a hash of the set of selected shingles (shingle-equivalent pages). It is an
  order-free set hash, the sum mod 2^64 of a seeded mix of each distinct shingle, finalised
  with the set size: equal for equal sets whatever the order, as a hash of the sorted set
  would be, without sorting every page.

A page with no selected shingle (no words, or only common shingles) gets n_shingles = 0 and
a signature of EMPTY_VALUE everywhere; callers keep such pages out of candidate generation.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import xxhash

from neardup.errors import SettingsError
from neardup.kernels.common import CommonShingles, is_common_bit
from neardup.kernels.hashing import (
    TAG_SHINGLE_SET,
    U64,
    as_int64,
    derive_seed,
    fingerprint64,
    finish,
    mix64,
)
from neardup.kernels.jit import njit
from neardup.kernels.minhash import SIGNATURE_DTYPE, SKETCHES, minhash_into, minhash_params
from neardup.kernels.oph import oph_into, oph_params
from neardup.kernels.params import ShingleParams, SketchParams
from neardup.kernels.shingles import (
    scratch_capacity,
    shingle_fps,
    shingle_hashes,
    shingle_params,
    table_capacity,
    token_hashes,
    unique_into,
)
from neardup.kernels.sorting import sorted_distinct
from neardup.kernels.supershingles import supershingles as make_supershingles
from neardup.kernels.tokens import canonicalize, canonicalize_packed, pack_arrow, pack_texts
from neardup.kernels.wordops import padded


@dataclass
class SketchBatch:
    """Sketches of N pages, row i for input text i."""

    n_tokens: np.ndarray  # int32: words in the canonical text
    n_shingles: np.ndarray  # int32: distinct shingles kept after the common filter
    n_common: np.ndarray  # int32: distinct shingles dropped as common
    lexical_fp: np.ndarray  # int64: xxh3 of the canonical text
    shingle_fp: np.ndarray  # int64: hash of the selected shingle set
    minhash: np.ndarray  # N x K SIGNATURE_DTYPE
    supershingles: np.ndarray  # N x count int64 (N x 0 when the sketch is too short)

    def __len__(self) -> int:
        return int(self.n_tokens.shape[0])


@dataclass
class Sketch:
    """Everything known about one text (see `sketch_text`)."""

    minhash: np.ndarray  # K SIGNATURE_DTYPE
    shingles: np.ndarray  # sorted unique uint64: the selected shingle set
    lexical_fp: int
    shingle_fp: int
    supershingles: np.ndarray  # count int64 (empty when the sketch is too short)
    n_tokens: int


@njit(inline="always")
def _set_add(acc: np.uint64, v: np.uint64, seed: np.uint64) -> np.uint64:
    return acc + mix64(v ^ seed)


@njit(cache=True)
def set_fingerprint(values: np.ndarray, seed: np.uint64) -> np.uint64:
    """Order-free hash of a set of distinct uint64 values (see module doc)."""
    acc = U64(0)
    for i in range(values.shape[0]):
        acc = _set_add(acc, values[i], seed)
    return finish(acc ^ seed, values.shape[0])


@njit(cache=True, nogil=True)  # threads sketch batches side by side (the service)
def _sketch_kernel(
    buf: np.ndarray,
    offsets: np.ndarray,
    capacity: int,
    table_size: int,
    tseed: np.uint64,
    coeffs: np.ndarray,
    sseed: np.uint64,
    wrap: bool,
    a: np.ndarray,
    b: np.ndarray,
    oph: bool,
    oph_seed: np.uint64,
    probe_seed: np.uint64,
    set_seed: np.uint64,
    use_filter: bool,
    bits: np.ndarray,
    row_seeds: np.ndarray,
    shift: np.uint64,
    n_tokens: np.ndarray,
    n_shingles: np.ndarray,
    n_common: np.ndarray,
    shingle_fp: np.ndarray,
    minhash: np.ndarray,
) -> None:
    n_docs = offsets.shape[0] - 1
    w = coeffs.shape[0]
    tok = np.empty(capacity, dtype=np.uint64)
    fps = np.empty(capacity, dtype=np.uint64)
    uniq = np.empty(capacity, dtype=np.uint64)
    table = np.empty(table_size, dtype=np.uint64)
    filled = np.empty(minhash.shape[1], dtype=np.bool_)
    for d in range(n_docs):
        nt = token_hashes(buf, offsets[d], offsets[d + 1], tseed, tok)
        ns = shingle_fps(tok, nt, w, wrap, coeffs, sseed, fps)
        nu = unique_into(fps, ns, table, uniq)
        kept = nu
        if use_filter:
            kept = 0
            for i in range(nu):
                v = uniq[i]
                if not is_common_bit(v, bits, row_seeds, shift):
                    uniq[kept] = v
                    kept += 1
        if oph:
            oph_into(uniq, kept, oph_seed, probe_seed, filled, minhash[d])
        else:
            minhash_into(uniq, kept, a, b, minhash[d])
        acc = U64(0)
        for i in range(kept):
            acc = _set_add(acc, uniq[i], set_seed)
        shingle_fp[d] = finish(acc ^ set_seed, kept)
        n_tokens[d] = nt
        n_shingles[d] = kept
        n_common[d] = nu - kept


def _uses_oph(settings: SketchParams) -> bool:
    """Whether the settings ask for the one-permutation sketch (`kernels.oph`) rather than
    the classic K-function min-hash (`kernels.minhash`)."""
    if settings.sketch not in SKETCHES:
        raise SettingsError(f"sketch must be one of {', '.join(SKETCHES)}, not {settings.sketch!r}")
    return settings.sketch == "oph"


def _filter_args(
    common: CommonShingles | None, settings: SketchParams
) -> tuple[bool, np.ndarray, np.ndarray, np.uint64]:
    if common is None or settings.max_shingle_df <= 0:
        return False, np.zeros((1, 1), dtype=np.uint8), np.zeros(1, dtype=np.uint64), U64(63)
    common.check(settings)
    return True, common.heavy_bits(), common.row_seeds, common.shift


def sketch_packed(
    buf: np.ndarray,
    offsets: np.ndarray,
    settings: SketchParams,
    common: CommonShingles | None = None,
) -> SketchBatch:
    """`sketch_batch` of canonical texts already packed as UTF-8 + offsets."""
    n = offsets.shape[0] - 1
    k = settings.num_perm
    tseed, coeffs, sseed = shingle_params(settings.seed, settings.shingle_size)
    oph = _uses_oph(settings)
    # the classic constants are tiny (K values); the kernel takes both and uses one
    a, b = minhash_params(settings.seed, k)
    oph_seed, probe_seed = oph_params(settings.seed)
    use_filter, bits, row_seeds, shift = _filter_args(common, settings)
    cap = scratch_capacity(offsets, settings.shingle_size)
    n_tokens = np.empty(n, dtype=np.int32)
    n_shingles = np.empty(n, dtype=np.int32)
    n_common = np.empty(n, dtype=np.int32)
    shingle_fp = np.empty(n, dtype=np.uint64)
    minhash = np.empty((n, k), dtype=SIGNATURE_DTYPE)
    _sketch_kernel(
        padded(buf, int(offsets[-1])),
        offsets,
        cap,
        table_capacity(cap),
        tseed,
        coeffs,
        sseed,
        bool(settings.wrap_shingles),
        a,
        b,
        oph,
        oph_seed,
        probe_seed,
        derive_seed(settings.seed, TAG_SHINGLE_SET),
        use_filter,
        bits,
        row_seeds,
        shift,
        n_tokens,
        n_shingles,
        n_common,
        shingle_fp,
        minhash,
    )
    data = memoryview(buf)
    bounds = offsets.tolist()
    lexical = np.array(
        [xxhash.xxh3_64_intdigest(data[s:e]) for s, e in itertools.pairwise(bounds)],
        dtype=np.uint64,
    )
    if settings.has_supershingles:
        supers = make_supershingles(
            minhash, settings.supershingle_count, settings.supershingle_size, settings.seed
        )
    else:
        supers = np.empty((n, 0), dtype=np.int64)
    return SketchBatch(
        n_tokens=n_tokens,
        n_shingles=n_shingles,
        n_common=n_common,
        lexical_fp=as_int64(lexical),
        shingle_fp=as_int64(shingle_fp),
        minhash=minhash,
        supershingles=supers,
    )


def sketch_batch(
    canonical_texts: list[str], settings: SketchParams, common: CommonShingles | None = None
) -> SketchBatch:
    """Sketch canonical texts (see `canonicalize`); `common` drops the shingles it flags."""
    return sketch_packed(*pack_texts(canonical_texts), settings, common)


def canonical_shingles(canonical: str, settings: ShingleParams) -> np.ndarray:
    """The sorted distinct 64-bit shingle fingerprints of one canonical text (see
    `canonicalize`): what the one-text paths (`sketch_text`, `neardup.shingle_set`, the
    scan's exact verification) compare."""
    return sorted_distinct(
        shingle_hashes(canonical, settings.shingle_size, settings.wrap_shingles, settings.seed)
    )


def sketch_text(text: str, settings: SketchParams, common: CommonShingles | None = None) -> Sketch:
    """Sketch one raw text, from its full sorted shingle set.

    This path shares the kernels' building blocks but not the batch kernel itself (sorting
    instead of the hash set, a separate filter and min-hash call), so the tests can check
    one against the other.
    """
    canonical = canonicalize(text)
    shingles = canonical_shingles(canonical, settings)
    if common is not None and settings.max_shingle_df > 0 and shingles.size:
        common.check(settings)
        shingles = shingles[~common.is_common(shingles)]
    minhash = np.empty(settings.num_perm, dtype=SIGNATURE_DTYPE)
    if _uses_oph(settings):
        oph_seed, probe_seed = oph_params(settings.seed)
        filled = np.empty(settings.num_perm, dtype=np.bool_)
        oph_into(shingles, shingles.size, oph_seed, probe_seed, filled, minhash)
    else:
        a, b = minhash_params(settings.seed, settings.num_perm)
        minhash_into(shingles, shingles.size, a, b, minhash)
    if settings.has_supershingles:
        supers = make_supershingles(
            minhash[None, :],
            settings.supershingle_count,
            settings.supershingle_size,
            settings.seed,
        )[0]
    else:
        supers = np.empty(0, dtype=np.int64)
    set_fp = set_fingerprint(shingles, derive_seed(settings.seed, TAG_SHINGLE_SET))
    return Sketch(
        minhash=minhash,
        shingles=shingles,
        lexical_fp=fingerprint64(canonical.encode("utf-8")),
        shingle_fp=int(as_int64(np.array([set_fp], dtype=np.uint64))[0]),
        supershingles=supers,
        n_tokens=canonical.count(" ") + 1 if canonical else 0,
    )


def sketch_texts(
    texts: list[str], settings: SketchParams, common: CommonShingles | None = None
) -> SketchBatch:
    """Sketch raw texts: canonicalise and sketch the packed batch without building the
    canonical strings (the fastest route from text to sketches)."""
    return sketch_packed(*canonicalize_packed(*pack_texts(texts)), settings, common)


def sketch_arrow(
    texts: Any, settings: SketchParams, common: CommonShingles | None = None
) -> SketchBatch:
    """Sketch *raw* texts given as an Arrow string (chunked) array, e.g. a Parquet column:
    the fastest route, since Arrow already holds the texts as packed UTF-8 and no Python
    string is built. Nulls sketch as empty texts."""
    return sketch_packed(*canonicalize_packed(*pack_arrow(texts)), settings, common)
