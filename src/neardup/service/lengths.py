"""Multidimensional length mapping (paper 004), as a partitioning model of tier 2.

Two sets with resemblance ≥ τ have sizes within a factor τ of each other, so a page of
length L need only meet pages of length in [L·τ, L/τ]. One length gives few, very unequal
partitions (most pages have similar lengths). Splitting the word dictionary into N
sub-dictionaries (each word hashed into one of N buckets) gives each page N lengths; slicing
every dimension into intervals balanced by page counts makes more, better balanced cells,
and a page is compared only with cells whose interval intersects [L_i·τ/ρ, L_i·ρ/τ] in every
dimension.

ρ ≥ 1 is a slack: the bound is exact for the whole set but not per sub-dictionary (two
pages at overall resemblance τ can differ more in one bucket), so ρ widens every window;
ρ = 1 is the paper's bound, larger ρ trades avoided comparisons for recall (measured by
`pairs_kept` when true pairs are given).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xxhash


def word_lengths(canonical: str, dims: int, seed: int = 1) -> np.ndarray:
    """Distinct words of a canonical text per sub-dictionary (N = `dims` buckets)."""
    out = np.zeros(dims, dtype=np.int64)
    for word in set(canonical.split()):
        out[xxhash.xxh3_64_intdigest(word.encode("utf-8"), seed) % dims] += 1
    return out


def _cells(col: np.ndarray, parts: int) -> np.ndarray:
    """Interval edges of one dimension: `parts` quantile slices (fewer when lengths tie)."""
    qs = np.quantile(col, np.linspace(0, 1, parts + 1)[1:-1])
    return np.unique(qs)


def length_partition_report(
    lengths: np.ndarray,
    dims: int,
    parts: int,
    threshold: float = 0.8,
    slack: float = 1.0,
    pairs: np.ndarray | None = None,
    sample: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Load imbalance and avoided comparisons of a `parts`-per-dimension partitioning.

    `lengths` is n x D (D ≥ dims; the first `dims` columns are used) or n (one dimension).
    Imbalance is the largest non-empty cell over the mean non-empty cell. `avoided` is the
    share of the n² page-to-page comparisons that the windows skip, estimated on `sample`
    query pages. `pairs` (m x 2 indexes of true duplicate pairs) gives `pairs_kept`, the
    share of those pairs whose cells still meet.
    """
    if slack < 1:
        raise ValueError("slack must be >= 1")
    lens = np.asarray(lengths, dtype=np.float64)
    if lens.ndim == 1:
        lens = lens[:, None]
    lens = lens[:, :dims]
    n = len(lens)
    edges = [_cells(lens[:, d], parts) for d in range(dims)]
    idx = np.stack(
        [np.searchsorted(edges[d], lens[:, d], side="right") for d in range(dims)], axis=1
    )
    shape = tuple(len(e) + 1 for e in edges)
    flat = np.ravel_multi_index(idx.T, shape) if n else np.empty(0, dtype=np.int64)
    counts = np.bincount(flat, minlength=int(np.prod(shape)))
    nonempty = counts[counts > 0]
    lo_f, hi_f = threshold / slack, slack / threshold
    # Each cell's interval per dimension: [left edge, right edge) with open outer ends.
    bounds = [(np.concatenate([[-np.inf], e]), np.concatenate([e, [np.inf]])) for e in edges]

    def reach(q: np.ndarray) -> np.ndarray:
        """Cells meeting the windows of query lengths q (one per dimension) → bool over cells."""
        ok = np.ones(shape, dtype=bool)
        for d in range(dims):
            left, right = bounds[d]
            hit = (right > q[d] * lo_f) & (left <= q[d] * hi_f)
            view = [1] * dims
            view[d] = -1
            ok &= hit.reshape(view)
        return ok.ravel()

    rng = np.random.default_rng(seed)
    queries = rng.choice(n, size=min(n, sample), replace=False) if n else np.empty(0, int)
    compared = sum(int(counts[reach(lens[i])].sum()) for i in queries)
    avoided = 1.0 - compared / (len(queries) * n) if n else 0.0
    out: dict[str, Any] = {
        "dims": dims,
        "parts": parts,
        "cells": int(np.prod(shape)),
        "nonempty_cells": len(nonempty),
        "imbalance": float(nonempty.max() / nonempty.mean()) if len(nonempty) else 0.0,
        "avoided": float(avoided),
        "slack": slack,
    }
    if pairs is not None and len(pairs):
        kept = sum(bool(reach(lens[a])[flat[b]]) for a, b in np.asarray(pairs))
        out["pairs_kept"] = kept / len(pairs)
    return out
