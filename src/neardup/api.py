"""Small helpers of the Python API that work on single texts, without a run."""

from __future__ import annotations

import numpy as np

from neardup.config import Settings
from neardup.kernels import (
    Sketch,
    canonical_shingles,
    canonicalize,
    containment,
    jaccard,
    sketch_text,
)


def shingle_set(text: str, settings: Settings | None = None) -> np.ndarray:
    """The sorted unique 64-bit shingle fingerprints of a raw text."""
    return canonical_shingles(canonicalize(text), settings or Settings())


def sketch(text: str, settings: Settings | None = None) -> Sketch:
    """The min-hash sketch (and fingerprints, super-shingles) of one raw text."""
    return sketch_text(text, settings or Settings())


def resemblance(a: str, b: str, settings: Settings | None = None) -> float:
    """Exact resemblance r(A, B) = |S(A) ∩ S(B)| / |S(A) ∪ S(B)| of two raw texts."""
    return float(jaccard(shingle_set(a, settings), shingle_set(b, settings)))


def contained(a: str, b: str, settings: Settings | None = None) -> float:
    """Exact containment c(A, B) = |S(A) ∩ S(B)| / |S(A)| of text `a` in text `b`."""
    return float(containment(shingle_set(a, settings), shingle_set(b, settings)))
