"""Stable sorts of int64 keys at the speed of numpy's default sort, and distinct values.

numpy's stable argsort of 64-bit keys is a merge sort (0.10 s for a million random keys,
0.46 s for four million, here); its default argsort is a vectorised quicksort (0.02 and
0.14 s) that leaves equal keys in any order. `stable_argsort` takes the quicksort's
permutation and sorts the positions of every run of equal keys (`_order_ties`): the stable
sort's permutation exactly, whatever order the quicksort left ties in, so it is the same on
every machine. Tie runs are short for hash keys; a long run (a bucket of many documents)
is sorted by numpy's sort inside the kernel.

`sorted_distinct` is `np.unique(values)` (no `return_*`) by a sort and one comparison of
neighbours: numpy 2.3 and later answer that call from a hash table, which here took 1.25 s
for 1.6 million distinct int64 values that a sort orders in 9 ms (25 µs against 3 µs for
500 values), and the scan asks it of every page's shingles and of its whole candidate set.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np

from neardup.kernels.jit import njit

# Runs of equal keys up to this long are put in order by insertion; longer ones by a sort.
_SHORT_RUN = 16


@njit(cache=True, nogil=True)
def _order_ties(sorted_keys: np.ndarray, positions: np.ndarray) -> None:
    """Sort the positions of every run of equal keys in `sorted_keys` (`positions` being
    the permutation that sorted them), so that equal keys keep their input order."""
    n = sorted_keys.shape[0]
    i = 0
    while i < n:
        j = i + 1
        while j < n and sorted_keys[j] == sorted_keys[i]:
            j += 1
        if j - i > _SHORT_RUN:
            positions[i:j] = np.sort(positions[i:j])
        elif j - i > 1:
            for p in range(i + 1, j):
                value = positions[p]
                q = p - 1
                while q >= i and positions[q] > value:
                    positions[q + 1] = positions[q]
                    q -= 1
                positions[q + 1] = value
        i = j


def sorted_stably(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(`stable_argsort(keys)`, the keys in that order: sorted by numpy, not gathered).

    Above `_PARTITION_ABOVE` keys, the keys are first spread by their top bits into
    partitions of about `_PARTITION_SIZE` (`_partition`: in key order, each in input order),
    and each partition is sorted where it fits in the cache: numpy's sort of four million
    keys took 7 times as long as that of one million, the partitioned sort 4 times."""
    keys = np.asarray(keys, dtype=np.int64)
    if keys.size <= _PARTITION_ABOVE:
        positions = np.argsort(keys)
        sorted_keys = np.sort(keys)  # keys[positions], without a gather (5x faster at 4 M)
    else:
        bits = min(max(int(keys.size // _PARTITION_SIZE).bit_length(), 1), 16)
        starts, sorted_keys, inputs = _partition(keys, bits)
        local = np.empty(keys.size, np.int64)
        for s, e in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True):
            if e - s > 1:
                local[s:e] = np.argsort(sorted_keys[s:e])
                sorted_keys[s:e] = sorted_keys[s:e][local[s:e]]
            else:
                local[s:e] = 0
        positions = _in_input(inputs, local, starts)
    _order_ties(sorted_keys, positions)
    return positions, sorted_keys


# Keys sorted by partitions above this many (about the last level of cache in 8-byte keys
# and positions), in partitions of about this many.
_PARTITION_ABOVE = 1 << 21
_PARTITION_SIZE = 1 << 15


@njit(cache=True, nogil=True)
def _partition(keys: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The keys spread into 2**bits partitions (1 <= bits < 64) by their top bits (signed:
    the partitions follow in key order), each holding its keys in input order: (partition
    starts, the keys so spread, the input position of each)."""
    n = keys.shape[0]
    parts = 1 << bits
    shift = 64 - bits
    half = parts >> 1
    starts = np.zeros(parts + 1, np.int64)
    for i in range(n):
        starts[(keys[i] >> shift) + half + 1] += 1
    for p in range(parts):
        starts[p + 1] += starts[p]
    fill = starts[:parts].copy()
    spread = np.empty(n, np.int64)
    inputs = np.empty(n, np.int64)
    for i in range(n):
        b = (keys[i] >> shift) + half
        j = fill[b]
        spread[j] = keys[i]
        inputs[j] = i
        fill[b] = j + 1
    return starts, spread, inputs


@njit(cache=True, nogil=True)
def _in_input(inputs: np.ndarray, local: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Input positions of the partitioned sort: partition p's sorted place q holds the key
    at `inputs[starts[p] + local[q]]`."""
    out = np.empty(inputs.shape[0], np.int64)
    for p in range(starts.shape[0] - 1):
        s = starts[p]
        for q in range(s, starts[p + 1]):
            out[q] = inputs[s + local[q]]
    return out


def stable_argsort(keys: np.ndarray) -> np.ndarray:
    """`np.argsort(keys, kind="stable")` of int64 keys, three to five times faster."""
    return sorted_stably(keys)[0]


def lexsort_pair(minor: np.ndarray, major: np.ndarray) -> np.ndarray:
    """`np.lexsort((minor, major))` of int64 keys: by `major`, ties by `minor`, remaining
    ties in input order; two stable sorts, the minor key's first."""
    by_minor = stable_argsort(minor)
    return by_minor[stable_argsort(np.asarray(major, dtype=np.int64)[by_minor])]


def sorted_distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of `values` (flattened), as `np.unique(values)` gives them:
    one NaN stands for all NaNs."""
    ordered = np.sort(np.asarray(values).ravel())
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    if ordered.dtype.kind in "fc" and np.isnan(ordered[-1]):  # NaNs sort last, unequal
        first_nan = int(np.searchsorted(np.isnan(ordered), True))
        keep[first_nan + 1 :] = False
    return ordered[keep]


def last_of(ids: np.ndarray) -> np.ndarray:
    """The position of the last occurrence of each id in `ids`, in the ids' order (one
    stable sort of integers; Arrow's hash aggregation took twice as long)."""
    order = np.argsort(ids, kind="stable")  # one id's rows stay in their order
    ordered = ids[order]
    last = np.ones(ordered.size, bool)
    last[:-1] = ordered[1:] != ordered[:-1]
    return order[last]


def consecutive_runs(values: np.ndarray) -> list[tuple[int, int]]:
    """The runs of `values` that rise by one, as [start, end) positions: the rows of a
    matrix file one read or write each (`store/rows.py` reads them, `index/files/saves.py`
    writes them). None for no value."""
    cuts = [0, *(np.flatnonzero(np.diff(values) != 1) + 1).tolist(), int(values.size)]
    return [(a, b) for a, b in pairwise(cuts) if a < b]


def runs_in_sorted(sorted_values: Any, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The run [lo, hi) of each of `values` in the increasing `sorted_values`: a search each
    side, or of a saved array read by blocks (`store/file_vectors.SortedVector.bounds`)
    both sides at once, its blocks read once."""
    bounds = getattr(sorted_values, "bounds", None)
    if bounds is not None:
        lo, hi = bounds(values)
        return lo, hi
    return (
        np.searchsorted(sorted_values, values, side="left"),
        np.searchsorted(sorted_values, values, side="right"),
    )


def run_in_sorted(sorted_values: Any, value: int) -> tuple[int, int]:
    """`runs_in_sorted` of one value, as ints."""
    lo, hi = runs_in_sorted(sorted_values, np.array([value], np.int64))
    return int(lo[0]), int(hi[0])


def found_in_sorted(sorted_values: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of `values` is, or would be, in the increasing `sorted_values` (clipped to
    its last position), and whether it is there: one search, no hash table."""
    if not sorted_values.size:
        return np.zeros(values.size, dtype=np.int64), np.zeros(values.size, dtype=bool)
    at = np.minimum(np.searchsorted(sorted_values, values), sorted_values.size - 1)
    return at, sorted_values[at] == values
