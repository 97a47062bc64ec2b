"""The common-shingle filter of Broder et al. §5.1, as a count-min sketch.

"Very common shingles (for us, this means shingles shared by more than 1000 documents)" are
mechanically generated boilerplate; they either do not change resemblance or create false
resemblance, and they blow up the pair counting. So a first pass counts, for every shingle,
the documents that contain it, and the sketching pass ignores the shingles counted in more
than `Settings.max_shingle_df` documents.

Counting exactly needs a table as large as the set of distinct shingles of the crawl (about
10^9 for a million pages). A count-min sketch (Cormode & Muthukrishnan) holds the counts in
`depth` rows of `width` saturating uint32 counters: a shingle adds its count to one counter
per row, chosen by a seeded hash, and its estimate is the minimum over its counters. Counters
only ever receive extra counts from other shingles, never lose any, so the estimate never
undercounts: every truly common shingle is flagged, and the only error is flagging a rare
shingle whose counters all happen to be crowded.

Sizing (the defaults, 3 x 2^24 counters, 192 MiB). Let M be the total of all counts added
(pages x distinct shingles per page) and T = max_df. The extra count in one counter of a rare
shingle has mean M / width; by Markov's inequality it exceeds T with probability at most
M / (width T), whatever the distribution of shingle frequencies, and the rows are hashed
independently, so

    P(rare shingle flagged) <= (M / (width * T)) ^ depth.

For 1M pages x 1000 shingles (M = 1e9) and T = 1000: 0.0596^3 = 2.1e-4 in the worst case.
That worst case needs all the mass in shingles counted just under T. On real pages the
counters are crowded past T essentially only by a truly common shingle sharing the cell:
with H distinct shingles above T/2, P is about (H / width)^depth, e.g. 2e-7 for H = 1e5. And
a false flag removes the same shingle from every page, so it deletes a random sliver of the
shingle universe rather than biasing any pair: resemblance estimates are unaffected.
`false_flag_bound()` gives the bound for the counts actually added.

Counts add up (plus, saturating at 2^32 - 1), so batches may be counted in any order or in
separate processes and merged: the table, and thus the filter, never depends on the split.
`save` writes one .npy (a small header, then the counters) that workers memory-map.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neardup.errors import SettingsError
from neardup.kernels.hashing import TAG_COUNTMIN, U64, derive_seeds, mix64
from neardup.kernels.jit import njit
from neardup.kernels.params import SketchParams

DEFAULT_DEPTH = 3
DEFAULT_WIDTH = 1 << 24
_MAGIC = 0x4E44434D  # "NDCM"
_VERSION = 1
_HEADER = 16  # uint32 words before the counters
_MAX = np.uint32(0xFFFFFFFF)
_M32 = 0xFFFFFFFF


@njit(inline="always")
def cell(h: np.uint64, seed: np.uint64, shift: np.uint64) -> np.int64:
    """Counter index of fingerprint `h` in the row with `seed` (width = 2^(64 - shift))."""
    return np.int64(mix64(h ^ seed) >> shift)


@njit(cache=True)
def _add(
    table: np.ndarray, seeds: np.ndarray, shift: np.uint64, hashes: np.ndarray, counts: np.ndarray
) -> None:
    for d in range(table.shape[0]):
        row = table[d]
        s = seeds[d]
        for i in range(hashes.shape[0]):
            j = cell(hashes[i], s, shift)
            v = np.uint64(row[j]) + np.uint64(counts[i])
            row[j] = np.uint32(min(v, np.uint64(0xFFFFFFFF)))


@njit(cache=True)
def _merge(table: np.ndarray, other: np.ndarray) -> None:
    flat = table.reshape(-1)
    src = other.reshape(-1)
    for i in range(flat.shape[0]):
        flat[i] = np.uint32(min(np.uint64(flat[i]) + np.uint64(src[i]), np.uint64(0xFFFFFFFF)))


@njit(cache=True)
def _estimate(
    table: np.ndarray, seeds: np.ndarray, shift: np.uint64, hashes: np.ndarray
) -> np.ndarray:
    out = np.full(hashes.shape[0], np.uint32(0xFFFFFFFF), dtype=np.uint32)
    for d in range(table.shape[0]):
        row = table[d]
        s = seeds[d]
        for i in range(hashes.shape[0]):
            out[i] = min(out[i], row[cell(hashes[i], s, shift)])
    return out


@njit(inline="always")
def is_common_bit(h: np.uint64, bits: np.ndarray, seeds: np.ndarray, shift: np.uint64) -> bool:
    """True when every row's counter of `h` exceeds the threshold (see `heavy_bits`)."""
    for d in range(bits.shape[0]):
        j = cell(h, seeds[d], shift)
        if not (bits[d, j >> 3] >> (j & 7)) & 1:
            return False
    return True


def _as_u64(hashes: np.ndarray) -> np.ndarray:
    h = np.ascontiguousarray(hashes)
    if h.dtype == np.int64:
        return h.view(np.uint64)
    return h.astype(np.uint64, copy=False)


@dataclass
class CommonShingles:
    """Count-min sketch of shingle document frequencies; see the module docstring."""

    table: np.ndarray  # (depth, width) uint32; a read-only memory map after `load`
    max_df: int
    seed: int
    shingle_size: int
    wrap: bool
    total: int = 0  # sum of all counts added, for `false_flag_bound`
    _bits: np.ndarray | None = field(default=None, repr=False, compare=False)

    @classmethod
    def empty(
        cls, settings: SketchParams, depth: int = DEFAULT_DEPTH, width: int = DEFAULT_WIDTH
    ) -> CommonShingles:
        if depth < 1 or width < 8 or width & (width - 1):
            raise ValueError("need depth >= 1 and a power-of-two width >= 8")
        return cls(
            table=np.zeros((depth, width), dtype=np.uint32),
            max_df=settings.max_shingle_df,
            seed=settings.seed & 0xFFFFFFFFFFFFFFFF,
            shingle_size=settings.shingle_size,
            wrap=settings.wrap_shingles,
        )

    @property
    def depth(self) -> int:
        return int(self.table.shape[0])

    @property
    def width(self) -> int:
        return int(self.table.shape[1])

    @property
    def shift(self) -> np.uint64:
        return U64(64 - (self.width.bit_length() - 1))

    @property
    def row_seeds(self) -> np.ndarray:
        return derive_seeds(self.seed, TAG_COUNTMIN, self.depth)

    def check(self, settings: SketchParams) -> None:
        """Raise SettingsError unless this filter was counted with these sketch settings."""
        mine = (self.seed, self.shingle_size, self.wrap, self.max_df)
        theirs = (
            settings.seed & 0xFFFFFFFFFFFFFFFF,
            settings.shingle_size,
            settings.wrap_shingles,
            settings.max_shingle_df,
        )
        if mine != theirs:
            raise SettingsError(
                "common-shingle filter was built with (seed, shingle_size, wrap, max_df)="
                f"{mine}, the settings say {theirs}"
            )

    def add(self, hashes: np.ndarray, counts: np.ndarray | None = None) -> None:
        """Add document counts (default 1 each) of uint64 shingle fingerprints."""
        h = _as_u64(hashes)
        c = (
            np.ones(h.size, dtype=np.int64)
            if counts is None
            else np.ascontiguousarray(counts, dtype=np.int64)
        )
        if c.shape != h.shape:
            raise ValueError("hashes and counts differ in length")
        if not self.table.flags.writeable:
            raise ValueError("this filter is a read-only memory map")
        _add(self.table, self.row_seeds, self.shift, h, c)
        self.total += int(c.sum())
        self._bits = None

    def merge(self, other: CommonShingles) -> None:
        """Add the counts of a filter counted elsewhere with the same settings and size."""
        if self.table.shape != other.table.shape or (self.seed, self.shingle_size, self.wrap) != (
            other.seed,
            other.shingle_size,
            other.wrap,
        ):
            raise SettingsError("cannot merge count-min sketches of different shape or seed")
        _merge(self.table, np.ascontiguousarray(other.table))
        self.total += other.total
        self._bits = None

    def estimate(self, hashes: np.ndarray) -> np.ndarray:
        """Estimated document frequency (never below the true one), uint32."""
        return _estimate(self.table, self.row_seeds, self.shift, _as_u64(hashes))

    def is_common(self, hashes: np.ndarray) -> np.ndarray:
        """Boolean mask: estimated document frequency > max_df (always False when the
        filter is disabled with max_df = 0)."""
        if self.max_df <= 0:
            return np.zeros(np.shape(hashes), dtype=bool)
        return self.estimate(hashes) > self.max_df

    def heavy_bits(self) -> np.ndarray:
        """(depth, width/8) uint8: bit j of row d is set when counter j exceeds max_df.
        A shingle is common exactly when all its bits are set; the sketch kernel reads
        these 6 MiB instead of the 192 MiB of counters."""
        if self._bits is None:
            self._bits = np.packbits(self.table > self.max_df, axis=1, bitorder="little")
        return self._bits

    @property
    def n_common_estimate(self) -> int:
        """Estimated number of distinct common shingles: the fewest over-threshold counters
        of any row (each common shingle sets one per row; collisions between them lower it,
        crowded rare cells raise it)."""
        return int(np.count_nonzero(self.table > self.max_df, axis=1).min())

    def false_flag_bound(self, total: int | None = None) -> float:
        """Upper bound on P(a shingle seen once is flagged), given `total` counts added
        (default: what was added): (total / (width * max_df)) ^ depth, Markov per row."""
        m = self.total if total is None else total
        if self.max_df <= 0:
            return 0.0
        return float(min(1.0, m / (self.width * self.max_df)) ** self.depth)

    def save(self, path: str | Path) -> None:
        """One .npy: a 16-word uint32 header (settings, total) followed by the counters."""
        header = np.zeros(_HEADER, dtype=np.uint32)
        header[:11] = [
            _MAGIC,
            _VERSION,
            self.depth,
            self.width.bit_length() - 1,
            self.max_df,
            self.seed & _M32,
            self.seed >> 32,
            self.shingle_size,
            int(self.wrap),
            self.total & _M32,
            (self.total >> 32) & _M32,
        ]
        out = np.lib.format.open_memmap(
            str(path), mode="w+", dtype=np.uint32, shape=(_HEADER + self.table.size,)
        )
        out[:_HEADER] = header
        out[_HEADER:] = self.table.reshape(-1)
        out.flush()
        del out

    @classmethod
    def load(cls, path: str | Path, mmap: bool = True) -> CommonShingles:
        """Read a saved filter; with `mmap` the counters stay on disk, shared between the
        processes that map them."""
        raw = np.load(str(path), mmap_mode="r" if mmap else None)
        if raw.dtype != np.uint32 or raw.ndim != 1 or raw.size < _HEADER:
            raise ValueError(f"{path} is not a saved CommonShingles")
        head = [int(x) for x in raw[:_HEADER]]
        if head[0] != _MAGIC or head[1] != _VERSION:
            raise ValueError(f"{path} is not a saved CommonShingles (version {_VERSION})")
        depth, width = head[2], 1 << head[3]
        if raw.size != _HEADER + depth * width:
            raise ValueError(f"{path} is truncated")
        return cls(
            table=raw[_HEADER:].reshape(depth, width),
            max_df=head[4],
            seed=head[5] | (head[6] << 32),
            shingle_size=head[7],
            wrap=bool(head[8]),
            total=head[9] | (head[10] << 32),
        )
