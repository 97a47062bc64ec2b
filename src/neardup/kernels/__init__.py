"""Sketching: canonical tokens, shingles, min-hash signatures, super-shingles, LSH keys.

Broder et al. (1997) and Fetterly et al. (2004), with every hot loop in a numba kernel over
UTF-8 bytes and numpy arrays. All hashes are seeded by `Settings.seed` (or fixed, for keys
derived from already-seeded values) and identical on every machine and in every process.
Stored 64-bit fingerprints are int64 (two's complement of the uint64 value).
"""

from pathlib import Path

from neardup.kernels._cache import drop_stale_kernels

drop_stale_kernels(Path(__file__).parent)  # before any kernel module is imported

# ruff: noqa: E402

from neardup.kernels.batch import (
    Sketch,
    SketchBatch,
    canonical_shingles,
    set_fingerprint,
    sketch_arrow,
    sketch_batch,
    sketch_packed,
    sketch_text,
    sketch_texts,
)
from neardup.kernels.common import CommonShingles
from neardup.kernels.hashing import as_int64, fingerprint64
from neardup.kernels.lsh import (
    BandTable,
    band_keys,
    candidate_probability,
    optimal_bands,
    recall_first_bands,
)
from neardup.kernels.minhash import (
    EMPTY_VALUE,
    SIGNATURE_DTYPE,
    containment,
    estimate_resemblance,
    intersection_size,
    jaccard,
    minhash_packed,
    minhash_params,
    minhash_signature,
)
from neardup.kernels.oph import oph_packed
from neardup.kernels.shingles import (
    doc_shingle_counts,
    doc_shingle_counts_arrow,
    doc_shingle_counts_packed,
    shingle_hashes,
)
from neardup.kernels.supershingles import (
    megashingle_pairs,
    megashingles,
    supershingle_agreement,
    supershingle_probability,
    supershingles,
)
from neardup.kernels.tokens import (
    canonicalize,
    canonicalize_batch,
    canonicalize_packed,
    pack_arrow,
    pack_texts,
)

__all__ = [
    "EMPTY_VALUE",
    "SIGNATURE_DTYPE",
    "BandTable",
    "CommonShingles",
    "Sketch",
    "SketchBatch",
    "as_int64",
    "band_keys",
    "candidate_probability",
    "canonical_shingles",
    "canonicalize",
    "canonicalize_batch",
    "canonicalize_packed",
    "containment",
    "doc_shingle_counts",
    "doc_shingle_counts_arrow",
    "doc_shingle_counts_packed",
    "estimate_resemblance",
    "fingerprint64",
    "intersection_size",
    "jaccard",
    "megashingle_pairs",
    "megashingles",
    "minhash_packed",
    "minhash_params",
    "minhash_signature",
    "oph_packed",
    "optimal_bands",
    "pack_arrow",
    "pack_texts",
    "recall_first_bands",
    "set_fingerprint",
    "shingle_hashes",
    "sketch_arrow",
    "sketch_batch",
    "sketch_packed",
    "sketch_text",
    "sketch_texts",
    "supershingle_agreement",
    "supershingle_probability",
    "supershingles",
]
