"""Tier 2: batched many-to-all comparison of pages against the whole index.

The index keeps every live signature in one row store (a K-column uint32 matrix, the N length
vectors, an alive mask), so a batch is compared with compiled kernels, never a Python loop per
pair. Two ways to pick the pages a query meets:

- `lengths` (default; the paper's design): the rows are grouped by cell of the
  multidimensional length mapping (`lengths.LengthMap`), and a query is compared with every
  row of every cell its window reaches. Nothing but length decides, so every pair whose
  lengths fit the window is compared: a deterministic recall, at the price of more
  comparisons than LSH. This is what the Ask.com paper deploys, because page-based
  partitions map onto machines, balance, and can run any pairwise test, not just min-hash.
- `lsh`: rows sharing one of the b LSH band keys (`sketch.band_keys`). Far fewer
  comparisons, but a pair at resemblance τ is caught only with probability `band_recall`
  (0.95), and the index cannot be cut into balanced, length-disjoint partitions.

Both return verified pairs (agreement ≥ τ·K) and the number of signature comparisons made.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neardup.index.state.lengths import LengthMap
from neardup.kernels import SIGNATURE_DTYPE, band_keys
from neardup.kernels.jit import njit
from neardup.kernels.lsh import BandTable

REFIT_GROWTH = 1.25  # re-slice the length grid when the live rows grew or shrank this much


@njit(cache=True)
def _agreement(a: np.ndarray, b: np.ndarray) -> int:
    n = 0
    for k in range(a.shape[0]):
        n += a[k] == b[k]
    return n


@njit(cache=True)
def _cells_many_to_all(
    qsigs: np.ndarray,
    qrows: np.ndarray,
    windows: np.ndarray,
    shape: np.ndarray,
    sigs: np.ndarray,
    order: np.ndarray,
    cell_start: np.ndarray,
    need: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Compare every query with every row of every cell its window reaches.

    windows: q x N x 2 inclusive interval ranges; cells are row-major over `shape`; `order`
    lists rows sorted by cell with `cell_start` offsets. A query's own row (`qrows`, -1 for
    none) is skipped. Returns (query index, row, agreement) of pairs with agreement ≥ need.
    """
    dims = shape.shape[0]
    cap = 1024
    oq = np.empty(cap, dtype=np.int64)
    orow = np.empty(cap, dtype=np.int64)
    oag = np.empty(cap, dtype=np.int32)
    m = 0
    compared = 0
    idx = np.empty(dims, dtype=np.int64)
    for q in range(qsigs.shape[0]):
        empty = False
        for d in range(dims):
            idx[d] = windows[q, d, 0]
            if windows[q, d, 0] > windows[q, d, 1]:
                empty = True
        if empty:
            continue
        while True:
            cell = 0
            for d in range(dims):
                cell = cell * shape[d] + idx[d]
            for j in range(cell_start[cell], cell_start[cell + 1]):
                r = order[j]
                if r == qrows[q]:
                    continue
                compared += 1
                ag = _agreement(qsigs[q], sigs[r])
                if ag >= need:
                    if m == cap:
                        cap *= 2
                        oq2 = np.empty(cap, dtype=np.int64)
                        orow2 = np.empty(cap, dtype=np.int64)
                        oag2 = np.empty(cap, dtype=np.int32)
                        oq2[:m] = oq[:m]
                        orow2[:m] = orow[:m]
                        oag2[:m] = oag[:m]
                        oq, orow, oag = oq2, orow2, oag2
                    oq[m] = q
                    orow[m] = r
                    oag[m] = ag
                    m += 1
            # next cell of the box (mixed-radix counter, last dimension fastest)
            d = dims - 1
            while d >= 0:
                idx[d] += 1
                if idx[d] <= windows[q, d, 1]:
                    break
                idx[d] = windows[q, d, 0]
                d -= 1
            if d < 0:
                break
    return oq[:m], orow[:m], oag[:m], compared


@njit(cache=True)
def _pairs_agreement(qsigs: np.ndarray, qi: np.ndarray, sigs: np.ndarray, rows: np.ndarray):
    out = np.empty(qi.shape[0], dtype=np.int32)
    for i in range(qi.shape[0]):
        out[i] = _agreement(qsigs[qi[i]], sigs[rows[i]])
    return out


@njit(cache=True)
def agreement_matrix(sigs: np.ndarray) -> np.ndarray:
    """n x n agreement counts of a small set of signatures (a group being re-checked)."""
    n = sigs.shape[0]
    out = np.zeros((n, n), dtype=np.int32)
    for i in range(n):
        out[i, i] = sigs.shape[1]
        for j in range(i + 1, n):
            a = _agreement(sigs[i], sigs[j])
            out[i, j] = a
            out[j, i] = a
    return out


@njit(cache=True)
def all_pairs(sigs: np.ndarray, need: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i < j) of rows agreeing on ≥ `need` values: the brute-force all-to-all
    that a centralised recomputation runs (no partitioning, nothing missed)."""
    n = sigs.shape[0]
    cap = 1024
    a = np.empty(cap, dtype=np.int64)
    b = np.empty(cap, dtype=np.int64)
    m = 0
    for i in range(n):
        for j in range(i + 1, n):
            if _agreement(sigs[i], sigs[j]) >= need:
                if m == cap:
                    cap *= 2
                    a2 = np.empty(cap, dtype=np.int64)
                    b2 = np.empty(cap, dtype=np.int64)
                    a2[:m] = a[:m]
                    b2[:m] = b[:m]
                    a, b = a2, b2
                a[m] = i
                b[m] = j
                m += 1
    return a[:m], b[:m]


@dataclass
class Matches:
    """Verified pairs of one many-to-all call: query index, store row, resemblance."""

    query: np.ndarray
    row: np.ndarray
    resemblance: np.ndarray
    comparisons: int


class SignatureStore:
    """Live signatures and length vectors by row, with the tier-2 lookup over them.

    Rows of removed or re-sketched pages are freed and reused, so memory follows the live
    index. `mode` is "lengths" or "lsh" (see the module doc).
    """

    def __init__(
        self,
        num_perm: int,
        dims: int,
        threshold: float,
        mode: str = "lengths",
        parts: int = 16,
        rho: float = 1.3,
        bands: int = 0,
        rows: int = 0,
    ) -> None:
        if mode not in ("lengths", "lsh"):
            raise ValueError(f"tier2 mode must be 'lengths' or 'lsh', not {mode!r}")
        if rho < 1:
            raise ValueError("rho must be >= 1")
        self.k, self.dims, self.threshold = num_perm, dims, threshold
        self.mode, self.parts, self.rho = mode, parts, rho
        self.bands, self.rows_per_band = bands, rows
        self.need = int(np.ceil(threshold * num_perm - 1e-9))
        self.sigs = np.zeros((64, num_perm), dtype=SIGNATURE_DTYPE)
        self.lens = np.zeros((64, dims), dtype=np.int32)
        self.alive = np.zeros(64, dtype=bool)
        self.urls: list[str | None] = [None] * 64
        self.row_of: dict[str, int] = {}
        self.free: list[int] = []
        self.top = 0
        self.map: LengthMap | None = None
        self.map_rows = 0  # live rows when `map` was fitted
        self._layout: tuple | None = None  # rows by cell (or band keys) until the next change

    # ------------------------------------------------------------ rows

    def _grow(self) -> None:
        cap = 2 * len(self.alive)
        for name in ("sigs", "lens"):
            old = getattr(self, name)
            new = np.zeros((cap, old.shape[1]), dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)
        alive = np.zeros(cap, dtype=bool)
        alive[: len(self.alive)] = self.alive
        self.alive = alive
        self.urls.extend([None] * (cap - len(self.urls)))

    def put(self, url: str, sig: np.ndarray, lengths: np.ndarray) -> int:
        """Store (or replace) a page's signature and length vector; returns its row."""
        row = self.row_of.get(url)
        if row is None:
            if self.free:
                row = self.free.pop()
            else:
                if self.top == len(self.alive):
                    self._grow()
                row = self.top
                self.top += 1
            self.row_of[url] = row
            self.urls[row] = url
        self.sigs[row] = sig
        self.lens[row] = lengths
        self.alive[row] = True
        self._layout = None
        return row

    def drop(self, url: str) -> None:
        """Forget a page (removed, redirecting, or without shingles)."""
        row = self.row_of.pop(url, None)
        if row is not None:
            self.alive[row] = False
            self.urls[row] = None
            self.free.append(row)
            self._layout = None

    def __len__(self) -> int:
        return len(self.row_of)

    # ------------------------------------------------------------ lookup

    def fit(self, force: bool = False) -> LengthMap:
        """The length grid, re-sliced from the live rows when their number moved by more
        than REFIT_GROWTH since the last slicing (slicing is cheap, but a stable grid keeps
        the partitions, and so the comparisons made, independent of batch sizes)."""
        n = len(self)
        stale = self.map is None or not (
            self.map_rows / REFIT_GROWTH <= n <= self.map_rows * REFIT_GROWTH
        )
        if force or stale:
            self._layout = None
            live = self.alive[: self.top]
            self.map = LengthMap.fit(self.lens[: self.top][live], self.threshold, self.parts)
            self.map_rows = n
        assert self.map is not None
        return self.map

    def many_to_all(
        self, qsigs: np.ndarray, qlens: np.ndarray, qrows: np.ndarray | None = None
    ) -> Matches:
        """Verified pairs of the queries (q x K signatures, q x N lengths) with the store.

        `qrows` gives each query's own row (skipped), -1 for a query not stored.
        """
        q = len(qsigs)
        qrows = np.full(q, -1, dtype=np.int64) if qrows is None else qrows.astype(np.int64)
        if q == 0 or len(self) == 0:
            e = np.empty(0, dtype=np.int64)
            return Matches(e, e, np.empty(0), 0)
        if self.mode == "lsh":
            return self._lsh(qsigs, qrows)
        lm = self.fit()
        if self._layout is None:  # rows sorted by cell, reused until the store changes
            live = np.flatnonzero(self.alive[: self.top])
            cells = lm.cells(self.lens[live])
            ncell = int(np.prod(lm.shape))
            start = np.zeros(ncell + 1, dtype=np.int64)
            np.cumsum(np.bincount(cells, minlength=ncell), out=start[1:])
            self._layout = (live[np.argsort(cells, kind="stable")], start)
        order, cell_start = self._layout
        windows = lm.windows(qlens, self.threshold, self.rho)
        qi, rows, ag, compared = _cells_many_to_all(
            np.ascontiguousarray(qsigs, dtype=SIGNATURE_DTYPE),
            qrows,
            windows,
            np.asarray(lm.shape, dtype=np.int64),
            self.sigs,
            order,
            cell_start,
            self.need,
        )
        return Matches(qi, rows, ag / self.k, int(compared))

    def _lsh(self, qsigs: np.ndarray, qrows: np.ndarray) -> Matches:
        if self._layout is None:  # band keys sorted per band, reused until the store changes
            live = np.flatnonzero(self.alive[: self.top])
            keys = band_keys(self.sigs[live], self.bands, self.rows_per_band)
            self._layout = (BandTable.build(keys.T, live),)
        (table,) = self._layout
        qkeys = band_keys(np.ascontiguousarray(qsigs), self.bands, self.rows_per_band)
        qi, rows = table.lookup(qkeys)  # one vectorised join per band, no bucket cap
        keep = rows != qrows[qi]
        qi, rows = qi[keep], rows[keep]
        ag = _pairs_agreement(np.ascontiguousarray(qsigs), qi, self.sigs, rows)
        ok = ag >= self.need
        return Matches(qi[ok], rows[ok], ag[ok] / self.k, len(qi))
