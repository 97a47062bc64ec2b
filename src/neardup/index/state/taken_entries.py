"""A store's changes since the save as a level of their own, read where they lie.

Why (issue 49: opening reads only the deltas' index, not every change): a writer that
closes writes what the scan graph's stores changed since the save (`files/graph_changes.py`:
the classes, the candidate counts, the edges), and the next opening took them back into
each store's overlay as Python dicts and tuples, an object a change: 0.4 s and about 70 MB
at ten million pages, held by every later batch until the next save. Kept as the arrays
they were written as (maps of the changes' files), each store reads an entry there when its
overlay has none, and copies it into the overlay only when a batch changes it, as it does
from its base. The band index's delta was made such a level first (`band_buckets.TakenRun`).

`TakenEntries` is one such level: key -> a run of members, with values beside them where
the store has some (an edge's resemblance); keys ascending and distinct, runs found by
pointers (CSR). An entry with an empty run was emptied since the save and hides the
base's. `packed` and `union` make the same arrays from an overlay, and from an overlay laid
over a level, which is what the next changes write.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from itertools import chain

import numpy as np

from neardup.kernels.sorting import found_in_sorted

_EMPTY_KEYS = np.empty(0, np.int64)


class TakenEntries:
    """key -> run of `columns` (`columns[0]` the members), as a changes folder holds a
    store's overlay."""

    def __init__(self, keys: np.ndarray, ptr: np.ndarray, columns: Sequence[np.ndarray]) -> None:
        """`keys` (distinct; sorted here when they are not, as an older neardup wrote
        them in the overlay's order), `ptr` (len(keys) + 1 offsets) and the flat runs."""
        keys = np.asarray(keys)
        if keys.size > 1 and not bool(np.all(keys[1:] > keys[:-1])):
            keys, ptr, columns = _sorted_runs(keys, np.asarray(ptr), columns)
        self.keys, self.ptr, self.columns = keys, ptr, tuple(columns)

    @classmethod
    def empty(cls, width: int) -> TakenEntries:
        """No entry, runs of `width` columns."""
        return cls(_EMPTY_KEYS, np.zeros(1, np.int64), [_EMPTY_KEYS] * width)

    def __len__(self) -> int:
        return int(self.keys.size)

    def run(self, key: int) -> tuple[np.ndarray, ...] | None:
        """The run of `key` (one array a column), None when it has no entry here."""
        if not self.keys.size:
            return None
        i = int(np.searchsorted(self.keys, key))
        if i >= self.keys.size or int(self.keys[i]) != key:
            return None
        lo, hi = int(self.ptr[i]), int(self.ptr[i + 1])
        return tuple(np.asarray(c[lo:hi]) for c in self.columns)

    def holds(self, keys: np.ndarray) -> np.ndarray:
        """Which of `keys` (sorted) have an entry here."""
        if not self.keys.size:
            return np.zeros(keys.size, bool)
        return found_in_sorted(self.keys, keys)[1]

    def sizes(self) -> np.ndarray:
        return np.diff(np.asarray(self.ptr))

    def rows(self, without: np.ndarray) -> tuple[np.ndarray, ...]:
        """Every (key, member, values...) row, keys ascending, but of the keys in
        `without` (sorted, distinct): the rows a save merges in with the overlay's."""
        keys = np.asarray(self.keys)
        keep = ~found_in_sorted(without, keys)[1] if without.size else None
        sizes = self.sizes()
        mask = np.repeat(keep, sizes) if keep is not None else None
        out = [np.repeat(keys, sizes)]
        for c in self.columns:
            out.append(np.asarray(c))
        return tuple(col[mask] if mask is not None else col for col in out)


def packed(
    over: Mapping[int, Collection[int]], with_values: bool = False
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """An overlay (key -> members, kept in their order) as keys ascending, pointers and
    the members; `with_values`: its entries are dicts (member -> value), whose values go
    beside the members as float64."""
    keys = np.fromiter(over, np.int64, len(over))
    order = np.argsort(keys, kind="stable")
    entries = [over[k] for k in keys[order].tolist()]
    sizes = np.fromiter((len(e) for e in entries), np.int64, keys.size)
    ptr = np.zeros(keys.size + 1, np.int64)
    np.cumsum(sizes, out=ptr[1:])
    total = int(ptr[-1])
    columns = [np.fromiter(chain.from_iterable(entries), np.int64, total)]
    if with_values:
        values = chain.from_iterable(e.values() for e in entries)  # type: ignore[attr-defined]
        columns.append(np.fromiter(values, np.float64, total))
    return keys[order], ptr, columns


def union(
    taken: TakenEntries, keys: np.ndarray, ptr: np.ndarray, columns: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The entries of `taken` and of a packed overlay (`packed`) as one packed level, keys
    ascending, the overlay's entry where both have one: what a store changed since the
    save, when part of it was taken in from the changes written before."""
    if not len(taken):
        return keys, ptr, list(columns)
    old_keys = np.asarray(taken.keys)
    keep = ~found_in_sorted(keys, old_keys)[1] if keys.size else np.ones(old_keys.size, bool)
    old_sizes, new_sizes = taken.sizes(), np.diff(ptr)
    all_keys = np.concatenate([old_keys[keep], keys])
    starts = np.concatenate([np.asarray(taken.ptr[:-1])[keep], ptr[:-1] + int(taken.ptr[-1])])
    sizes = np.concatenate([old_sizes[keep], new_sizes])
    flat = [
        np.concatenate([np.asarray(a, np.result_type(a, b)), np.asarray(b, np.result_type(a, b))])
        for a, b in zip(taken.columns, columns, strict=True)
    ]
    return _in_key_order(all_keys, starts, sizes, flat)


def _sorted_runs(
    keys: np.ndarray, ptr: np.ndarray, columns: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Runs put in key order (an older neardup's changes, in the overlay's order)."""
    return _in_key_order(keys, ptr[:-1], np.diff(ptr), [np.asarray(c) for c in columns])


def _in_key_order(
    keys: np.ndarray, starts: np.ndarray, sizes: np.ndarray, flat: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Runs (`starts`, `sizes` in the `flat` columns) of distinct `keys`, packed again in
    key order: keys ascending, pointers, the runs one after the other."""
    order = np.argsort(keys, kind="stable")
    out_ptr = np.zeros(keys.size + 1, np.int64)
    np.cumsum(sizes[order], out=out_ptr[1:])
    at = _run_positions(starts[order], sizes[order])
    return keys[order], out_ptr, [c[at] for c in flat]


def _run_positions(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The positions of runs (`starts`, `sizes`) one after the other."""
    total = int(sizes.sum())
    if not total:
        return np.empty(0, np.int64)
    firsts = np.cumsum(sizes) - sizes  # where each run begins in the output
    return np.repeat(starts - firsts, sizes) + np.arange(total, dtype=np.int64)
