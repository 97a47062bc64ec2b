"""Multidimensional length mapping of tier 2 (paper 004, §4).

Two pages whose shingle sets have resemblance ≥ τ have sizes within a factor τ of each other,
so a page only needs to meet pages of similar length. One length is a poor partition key: web
page lengths are skewed, and a spike of equal-length pages lands in one indivisible interval.
The paper splits the dictionary into N sub-dictionaries (here: every canonical word hashed into
one of N buckets), so a page has N lengths L_1..L_N, L_i being the number of word occurrences
of the page that fall in bucket i (the "summation of frequencies" of the sub-document's words).
Each dimension is sliced into intervals balanced by page counts (`balanced_edges`), the
partitions are the cells of that grid, and a page A is compared only with the cells whose
interval meets (L_i·τ/ρ, L_i·ρ/τ) in every dimension i (the paper's expression (1)).

ρ = (1+δ)(1+ε)/((1−δ)(1−ε)) is the paper's interval enlarging factor: ε bounds how far the
distinct-shingle count strays from the word count, δ how far one bucket strays from L/N. With
those worst-case bounds the window is exact; the paper samples them and uses ρ ∈ [1, 1.3],
accepting that a pair whose buckets drift further is missed. `rho_estimate` gives the sampled
value, `length_partition_report` measures what a choice of ρ keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neardup.kernels.hashing import U64, derive_seed, mix64
from neardup.kernels.jit import njit
from neardup.kernels.shingles import scratch_capacity, shingle_params, token_hashes
from neardup.kernels.sorting import sorted_distinct
from neardup.kernels.tokens import canonicalize_packed, pack_texts

TAG_SUBDICT = 101  # seed tag of the word -> sub-dictionary hash (distinct from sketch tags)


@njit(cache=True, nogil=True)
def _dim_lengths_kernel(
    buf: np.ndarray,
    offsets: np.ndarray,
    tseed: np.uint64,
    dseed: np.uint64,
    capacity: int,
    out: np.ndarray,
) -> None:
    dims = out.shape[1]
    tok = np.empty(capacity, dtype=np.uint64)
    for d in range(offsets.shape[0] - 1):
        n = token_hashes(buf, offsets[d], offsets[d + 1], tseed, tok)
        for i in range(n):
            out[d, mix64(tok[i] ^ dseed) % U64(dims)] += 1


def dim_lengths(texts: Sequence[str], dims: int, seed: int = 1) -> np.ndarray:
    """N-dimensional length vectors (len(texts) x dims, int32) of raw texts.

    The words are the canonical tokens of the sketches; a word's bucket depends only on the
    word and `seed`, so the same word counts in the same dimension on every page.
    """
    return dim_lengths_packed(*canonicalize_packed(*pack_texts(list(texts))), dims, seed)


def dim_lengths_packed(
    buf: np.ndarray, offsets: np.ndarray, dims: int, seed: int = 1
) -> np.ndarray:
    """`dim_lengths` of texts already canonical and packed (`kernels.canonicalize_packed`),
    so a batch that is sketched too is canonicalised once."""
    if dims < 1:
        raise ValueError("dims must be >= 1")
    out = np.zeros((offsets.size - 1, dims), dtype=np.int32)
    if not out.shape[0]:
        return out
    tseed, _, _ = shingle_params(seed, 1)
    cap = scratch_capacity(offsets, 1)
    _dim_lengths_kernel(buf, offsets, tseed, derive_seed(seed, TAG_SUBDICT), cap, out)
    return out


def fine_bounds(values: np.ndarray, threshold: float) -> np.ndarray:
    """Left bounds p_1 < p_2 < ... of the paper's fine-grain intervals (SpotSigs' slicing).

    Scanning the distinct values upwards, a new interval starts at the first value v with
    p/v < τ (p: the current left bound), so every fine interval spans a length ratio of about
    1/τ and cannot be split further. Sizes 1..10 at τ = 0.8 give [1,2) [2,3) [3,4) [4,6)
    [6,8) [8,10].
    """
    distinct = sorted_distinct(np.asarray(values, dtype=np.float64))
    if distinct.size == 0:
        return distinct
    bounds = [distinct[0]]
    for v in distinct[1:].tolist():  # one step per distinct length, not per page
        if v > 0 and bounds[-1] / v < threshold:
            bounds.append(v)
    return np.asarray(bounds)


def balanced_edges(values: np.ndarray, threshold: float, parts: int) -> np.ndarray:
    """Inner edges of at most `parts` coarse intervals with about equal page counts.

    Fine-grain intervals are merged consecutively; the cut for the k-th of `parts` targets
    (k·M/parts pages) is placed at the fine boundary whose cumulative count is nearest to it,
    as in the paper's example (counts 2,3,4,5,2,1 into 4 intervals give 5,4,5,3). A spike
    stays in one interval: that is the 1-D imbalance the extra dimensions relieve.
    """
    vals = np.asarray(values, dtype=np.float64)
    if vals.size == 0 or parts <= 1:
        return np.empty(0)
    bounds = fine_bounds(vals, threshold)
    if bounds.size <= 1:
        return np.empty(0)
    counts = np.bincount(np.searchsorted(bounds, vals, side="right") - 1, minlength=bounds.size)
    cum = np.cumsum(counts)[:-1]  # pages left of each inner fine boundary
    targets = vals.size * np.arange(1, parts) / parts
    pos = np.clip(np.searchsorted(cum, targets), 0, cum.size - 1)
    left = np.clip(pos - 1, 0, cum.size - 1)
    nearest = np.where(np.abs(cum[left] - targets) <= np.abs(cum[pos] - targets), left, pos)
    return bounds[1:][sorted_distinct(nearest)]


@dataclass(frozen=True)
class LengthMap:
    """Interval edges per dimension: the partition grid of tier 2."""

    edges: tuple[np.ndarray, ...]

    @classmethod
    def fit(cls, lengths: np.ndarray, threshold: float, parts: int) -> LengthMap:
        """Slice every dimension of `lengths` (n x N) into `parts` balanced intervals."""
        lens = np.atleast_2d(np.asarray(lengths))
        cols = range(lens.shape[1])
        return cls(tuple(balanced_edges(lens[:, d], threshold, parts) for d in cols))

    @property
    def dims(self) -> int:
        return len(self.edges)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(e) + 1 for e in self.edges)

    def intervals(self, lengths: np.ndarray) -> np.ndarray:
        """Interval index per dimension of each length vector (n x N)."""
        lens = np.atleast_2d(lengths)
        return np.stack(
            [np.searchsorted(e, lens[:, d], side="right") for d, e in enumerate(self.edges)],
            axis=1,
        ).astype(np.int64)

    def cells(self, lengths: np.ndarray) -> np.ndarray:
        """Flat cell id of each length vector."""
        idx = self.intervals(lengths)
        if idx.shape[0] == 0:
            return np.empty(0, dtype=np.int64)
        return np.ravel_multi_index(idx.T, self.shape).astype(np.int64)

    def windows(self, lengths: np.ndarray, threshold: float, rho: float) -> np.ndarray:
        """Per query and dimension, the first and last interval meeting the window
        (L_i·τ/ρ, L_i·ρ/τ) widened to at least L_i ± s: an n x N x 2 array of inclusive
        interval indexes.

        The factor alone collapses to the single point 0 where L_i = 0 (and to under one
        word for L_i = 1 or 2), yet a page with no word in a bucket resembles one with a
        word there as soon as a single word differs: a short page missed its duplicate,
        or found it only when it was the other page's turn to ask. s is the window the
        factor gives an average dimension of the page, s = (ρ/τ − 1)·L/N with L the page's
        total, and at least one word, so every length, 0 included, has a window."""
        lens = np.atleast_2d(lengths).astype(np.float64)
        n_dims = max(lens.shape[1], 1)
        slack = np.maximum(np.ceil((rho / threshold - 1.0) * lens.sum(axis=1) / n_dims), 1.0)
        lo = self.intervals(np.minimum(lens * (threshold / rho), lens - slack[:, None]))
        hi = self.intervals(np.maximum(lens * (rho / threshold), lens + slack[:, None]))
        return np.stack([lo, hi], axis=2)

    def to_json(self) -> list[list[float]]:
        return [e.tolist() for e in self.edges]

    @classmethod
    def from_json(cls, data: list[list[float]]) -> LengthMap:
        return cls(tuple(np.asarray(e, dtype=np.float64) for e in data))


def reached_mask(lm: LengthMap, window: np.ndarray) -> np.ndarray:
    """Boolean mask over the flat cells that one query's window (N x 2) reaches."""
    ok = np.ones(lm.shape, dtype=bool)
    for d, size in enumerate(lm.shape):
        hit = np.zeros(size, dtype=bool)
        hit[window[d, 0] : window[d, 1] + 1] = True
        view = [1] * lm.dims
        view[d] = -1
        ok &= hit.reshape(view)
    return ok.ravel()


def assign_machines(cell_counts: np.ndarray, machines: int) -> np.ndarray:
    """Machine of each cell: largest cells first, each to the least loaded machine (LPT).

    The paper maps partitions evenly onto machines when there are more partitions than
    machines; greedy longest-processing-time is the standard way to do that.
    """
    order = np.argsort(-cell_counts, kind="stable")
    load = np.zeros(machines, dtype=np.int64)
    out = np.zeros(cell_counts.size, dtype=np.int64)
    for c in order[cell_counts[order] > 0].tolist():  # one step per non-empty cell
        m = int(np.argmin(load))
        out[c] = m
        load[m] += cell_counts[c]
    return out


def rho_estimate(lengths: np.ndarray, shingles: np.ndarray, quantile: float = 0.9) -> float:
    """The paper's ρ = (1+δ)(1+ε)/((1−δ)(1−ε)) from sampled ε and δ.

    ε: relative gap between distinct shingles and words; δ: relative gap between a bucket's
    length times N and the total. Taken at `quantile` of the pages (the worst case would make
    the window useless on short pages, whose buckets vary most).
    """
    lens = np.atleast_2d(np.asarray(lengths, dtype=np.float64))
    total = lens.sum(1)
    ok = (total > 0) & (lens.min(1) > 0)
    eps = np.abs(np.asarray(shingles, dtype=np.float64)[ok] / total[ok] - 1)
    delta = np.abs(total[ok, None] / (lens.shape[1] * lens[ok]) - 1).max(1)
    e = min(float(np.quantile(eps, quantile)), 0.99) if eps.size else 0.0
    d = min(float(np.quantile(delta, quantile)), 0.99) if delta.size else 0.0
    return (1 + d) * (1 + e) / ((1 - d) * (1 - e))


def length_partition_report(
    lengths: np.ndarray,
    dims: int,
    parts: int,
    threshold: float = 0.8,
    slack: float = 1.0,
    pairs: np.ndarray | None = None,
    sample: int = 2000,
    seed: int = 0,
    machines: int | None = None,
) -> dict[str, Any]:
    """Load imbalance and avoided comparisons of the first `dims` length dimensions.

    Every dimension is cut into `parts` balanced intervals (`balanced_edges`). The cells are
    mapped onto `machines` (default: one per cell, so `imbalance` is the largest non-empty
    cell over the mean non-empty cell; with `machines`, the largest machine over the mean
    machine after `assign_machines`). `avoided` is the share of page-to-page comparisons
    that the windows skip, over `sample` query pages against all n pages. `pairs` (m x 2
    indexes of true duplicate pairs) gives `pairs_kept`, the share whose cells still meet.
    """
    if slack < 1:
        raise ValueError("slack must be >= 1")
    lens = np.asarray(lengths, dtype=np.float64)
    if lens.ndim == 1:
        lens = lens[:, None]
    lens = lens[:, :dims]
    n = len(lens)
    lm = LengthMap.fit(lens, threshold, parts)
    flat = lm.cells(lens)
    counts = np.bincount(flat, minlength=int(np.prod(lm.shape)))
    if machines:
        load = np.bincount(assign_machines(counts, machines), weights=counts, minlength=machines)
        imbalance = float(load.max() / load.mean()) if n else 0.0
    else:
        nonempty = counts[counts > 0]
        imbalance = float(nonempty.max() / nonempty.mean()) if nonempty.size else 0.0
    rng = np.random.default_rng(seed)
    queries = rng.choice(n, size=min(n, sample), replace=False) if n else np.empty(0, int)
    wins = lm.windows(lens[queries], threshold, slack)
    compared = sum(int(counts[reached_mask(lm, w)].sum()) for w in wins)
    out: dict[str, Any] = {
        "dims": dims,
        "parts": parts,
        "cells": int(np.prod(lm.shape)),
        "nonempty_cells": int((counts > 0).sum()),
        "machines": machines,
        "imbalance": imbalance,
        "avoided": 1.0 - compared / (len(queries) * n) if n else 0.0,
        "slack": slack,
    }
    if pairs is not None and len(pairs):
        p = np.asarray(pairs)
        pw = lm.windows(lens[p[:, 0]], threshold, slack)
        other = lm.intervals(lens[p[:, 1]])
        kept = ((other >= pw[:, :, 0]) & (other <= pw[:, :, 1])).all(1)
        out["pairs_kept"] = float(kept.mean())
    return out
