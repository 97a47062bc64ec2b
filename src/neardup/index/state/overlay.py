"""A sorted base plus an overlay, folded in at an eighth: the one shape of the index's state.

Why: the index's structures (the page table's keys, the groups and their winners, the scan
graph's classes and edges, the band index) are each saved as sorted arrays that the index
maps when it opens, and a batch changes a few entries of them. Rewriting a sorted array per
batch would cost the whole index; keeping every change in Python objects forever would cost
hundreds of bytes a page. So each keeps the changes since its base in a small overlay and
folds them into a new base once the overlay holds more than an eighth as many entries as the
base (`FoldRule`): a fold costs the base's size, and happens once the base has grown by an
eighth, so its cost per change stays constant.

`Overlay` is the overlay of the structures whose entry is a collection (a group's pages, a
class's pages): a set while a batch changes it, a tuple once the batch is done (a set of
one costs 216 bytes, a tuple 48; most groups and classes hold one page).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

K = TypeVar("K")
V = TypeVar("V")

FOLD_SHARE = 8  # an overlay is folded once it holds more than 1/FOLD_SHARE of the base


@dataclass(frozen=True)
class FoldRule:
    """When an overlay of `overlay` entries is folded into a base of `base` entries: once it
    holds more than `at_least` entries (small indexes never pay for a fold) and more than
    1/`share` of the base."""

    at_least: int
    share: int = FOLD_SHARE

    def due(self, overlay: int, base: int) -> bool:
        return overlay > self.at_least and overlay * self.share > base


class Overlay(dict[K, "set[V] | tuple[V, ...]"], Generic[K, V]):
    """key -> the entry's members as changed since the base (an empty collection: the
    entry is gone). Read it as a dict; change an entry through `mutable`, and call
    `freeze` when the batch is done."""

    def __init__(self, frozen: Iterable[tuple[K, tuple[V, ...]]] = ()) -> None:
        """`frozen`: entries of a batch already done (read back from saved changes)."""
        super().__init__(frozen)
        self._changing: set[K] = set()  # entries made sets since the last `freeze`

    def mutable(self, key: K, base: Callable[[], Iterable[V]]) -> set[V]:
        """The entry as a set to change in place; `base` lists its members when the
        overlay has none of its own yet (the base's, or those of a frozen entry)."""
        got = self.get(key)
        if isinstance(got, set):
            return got
        made: set[V] = set(got) if got is not None else set(base())
        self[key] = made
        self._changing.add(key)
        return made

    def thaw(self, keys: Iterable[K]) -> None:
        """The frozen entries among `keys` as sets again (a batch about to change them)."""
        for key in keys:
            got = self.get(key)
            if isinstance(got, tuple):
                self[key] = set(got)
                self._changing.add(key)

    def set_members(self, key: K, members: Collection[V]) -> None:
        """A new entry for `key`, made while a batch changes it (`freeze` makes a tuple)."""
        self[key] = set(members)
        self._changing.add(key)

    def freeze(self) -> None:
        """The batch is done: every entry it changed becomes a tuple."""
        for key in self._changing:
            got = self.get(key)
            if isinstance(got, set):
                self[key] = tuple(got)
        self._changing = set()

    def keys_array(self) -> np.ndarray:
        """The changed keys, as int64 (to mask them out of the base's sorted keys)."""
        return np.fromiter(self, np.int64, len(self))

    def clear(self) -> None:
        super().clear()
        self._changing = set()
