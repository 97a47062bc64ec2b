"""Verified pairs for the methods built on `stages.features`: chunks, Broder's MIN_s and
MOD_m sketches, Broder's super-shingles, SimHash.

Every method works on the class representatives only (exact and shingle-equivalent copies
are collapsed first, as Shivakumar & Garcia-Molina remove exact copies before counting) and
returns pairs of positions into them with a similarity:

- chunks: pairs sharing >= T distinct chunks (iceberg or sort-based join); similarity is the
  resemblance of the two chunk sets, shared / (|A| + |B| - shared);
- broder-min, broder-mod: pairs sharing a sketch element (sort-based join) are verified by
  the estimated resemblance (>= threshold); with `containment` set, pairs where the smaller
  page is contained in the larger at least that much are reported apart;
- broder-supershingles: pairs sharing a super-shingle of the sorted MIN_s sketch, verified
  by the MIN_s resemblance;
- simhash: pairs agreeing on one of k + 1 bit blocks, kept within Hamming distance k;
  similarity 1 - hamming / 64.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neardup.config import Settings
from neardup.kernels.broder import min_s_estimates, mod_m_estimates
from neardup.kernels.buckets import bucket_candidates, unpack_pairs
from neardup.kernels.simhash import block_keys, hamming
from neardup.pipeline.steps.features import Features
from neardup.pipeline.steps.shared_pairs import shared_pairs

SIMHASH_BUCKET_PAIRS = 4096  # a block bucket larger than this emits a chain (see docs)


@dataclass
class FeaturePairs:
    """Pairs between nodes (indices into the representatives given), a < b."""

    a: np.ndarray
    b: np.ndarray
    similarity: np.ndarray
    candidates: int = 0
    stats: dict[str, Any] = field(default_factory=dict)
    # containment rows: (small node, large node, containment, resemblance)
    contained: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None


def gather(values: np.ndarray, offsets: np.ndarray, rows: np.ndarray):
    """The values of `rows` (a variable-length set each), flat, with the owner index."""
    starts = offsets[rows]
    lengths = offsets[rows + 1] - starts
    total = int(lengths.sum())
    first = np.cumsum(lengths) - lengths
    pos = np.arange(total, dtype=np.int64) - np.repeat(first, lengths) + np.repeat(starts, lengths)
    return values[pos], np.repeat(np.arange(rows.size, dtype=np.int64), lengths)


def _join(settings: Settings, values: np.ndarray, owner: np.ndarray, threshold: int, join: str):
    feats = np.ascontiguousarray(values).view(np.int64)
    return shared_pairs(
        feats,
        owner,
        threshold,
        max_df=settings.feature_df_cap,
        join=join,
        buckets=settings.iceberg_buckets,
    )


def chunk_pairs(settings: Settings, features: Features, rows: np.ndarray) -> FeaturePairs:
    values, owner = gather(features.values, features.offsets, rows)
    t = settings.chunk_min_shared
    a, b, shared, stats = _join(settings, values, owner, t, settings.chunk_join)
    n = features.counts()[rows]
    sim = shared / np.maximum(n[a] + n[b] - shared, 1)
    info = stats.as_dict() | {"chunking": settings.chunking, "chunks": int(values.size)}
    return FeaturePairs(a, b, sim.astype(np.float32), stats.candidates, info)


def _containment_rows(
    settings: Settings,
    a: np.ndarray,
    b: np.ndarray,
    sizes: np.ndarray,
    res: np.ndarray,
    ca: np.ndarray,
    cb: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One row per pair: the page with fewer shingles (ties: the first) in the other."""
    a_small = sizes[a] <= sizes[b]
    small = np.where(a_small, a, b)
    large = np.where(a_small, b, a)
    c = np.where(a_small, ca, cb)
    keep = c >= settings.containment
    return small[keep], large[keep], c[keep].astype(np.float32), res[keep].astype(np.float32)


def broder_pairs(settings: Settings, features: Features, rows: np.ndarray) -> FeaturePairs:
    method = settings.method
    if method == "broder-supershingles":
        values, owner = gather(features.supers, features.super_offsets, rows)
    else:
        values, owner = gather(features.values, features.offsets, rows)
    a, b, _shared, stats = _join(settings, values, owner, 1, "sort")
    ra, rb = rows[a], rows[b]
    if method == "broder-mod":
        res, ca, cb = mod_m_estimates(features.values, features.offsets, features.levels, ra, rb)
    else:
        res, ca, cb = min_s_estimates(
            features.values, features.offsets, features.sizes, ra, rb, settings.min_s
        )
    keep = res >= settings.threshold
    info = stats.as_dict() | {"sketch_elements": int(values.size)}
    if method == "broder-mod":
        info["mod_levels"] = {
            int(k): int(v)
            for k, v in zip(*np.unique(features.levels[rows], return_counts=True), strict=False)
        }
    contained = None
    if settings.containment is not None:
        contained = _containment_rows(settings, a, b, features.sizes[rows], res, ca, cb)
        info["containment_pairs"] = int(contained[0].size)
    return FeaturePairs(
        a[keep], b[keep], res[keep].astype(np.float32), int(a.size), info, contained
    )


def simhash_pairs(settings: Settings, features: Features, rows: np.ndarray) -> FeaturePairs:
    k = settings.simhash_distance
    sims = features.simhash[rows]
    keys = block_keys(sims, k)
    cap = max(settings.max_bucket_pairs, SIMHASH_BUCKET_PAIRS)
    packed, cstats = bucket_candidates(keys, np.arange(rows.size), cap)
    a, b = unpack_pairs(packed)
    dist = hamming(sims[a], sims[b]) if a.size else np.empty(0, dtype=np.int64)
    keep = dist <= k
    sim = 1.0 - dist[keep] / 64.0
    info = {
        "blocks": k + 1,
        "emitted": cstats.emitted,
        "large_buckets": cstats.large_buckets,
        "candidates": int(a.size),
        "pairs": int(keep.sum()),
    }
    return FeaturePairs(a[keep], b[keep], sim.astype(np.float32), int(a.size), info)


def feature_pairs(settings: Settings, features: Features, rows: np.ndarray) -> FeaturePairs:
    """Verified pairs among the pages at signature rows `rows` (class representatives)."""
    rows = np.asarray(rows, dtype=np.int64)
    if settings.method == "chunks":
        return chunk_pairs(settings, features, rows)
    if settings.method == "simhash":
        return simhash_pairs(settings, features, rows)
    return broder_pairs(settings, features, rows)
