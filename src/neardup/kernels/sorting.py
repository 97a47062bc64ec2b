"""Stable sorts of int64 keys at the speed of numpy's default sort.

numpy's stable argsort of 64-bit keys is a merge sort (0.10 s for a million random keys,
0.46 s for four million, here); its default argsort is a vectorised quicksort (0.02 and
0.14 s) that leaves equal keys in any order. `stable_argsort` takes the quicksort's
permutation and sorts the positions of every run of equal keys (`_order_ties`): the stable
sort's permutation exactly, whatever order the quicksort left ties in, so it is the same on
every machine. Tie runs are short for hash keys; a long run (a bucket of many documents)
is sorted by numpy's sort inside the kernel.
"""

from __future__ import annotations

import numpy as np
from numba import njit

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
    """(`stable_argsort(keys)`, the keys in that order: sorted by numpy, not gathered)."""
    keys = np.asarray(keys, dtype=np.int64)
    positions = np.argsort(keys)
    sorted_keys = np.sort(keys)  # keys[positions], without a gather (5x faster at 4 M keys)
    _order_ties(sorted_keys, positions)
    return positions, sorted_keys


def stable_argsort(keys: np.ndarray) -> np.ndarray:
    """`np.argsort(keys, kind="stable")` of int64 keys, three to five times faster."""
    return sorted_stably(keys)[0]


def lexsort_pair(minor: np.ndarray, major: np.ndarray) -> np.ndarray:
    """`np.lexsort((minor, major))` of int64 keys: by `major`, ties by `minor`, remaining
    ties in input order; two stable sorts, the minor key's first."""
    by_minor = stable_argsort(minor)
    return by_minor[stable_argsort(np.asarray(major, dtype=np.int64)[by_minor])]
