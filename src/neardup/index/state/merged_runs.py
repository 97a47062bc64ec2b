"""Sorted arrays merged block by block: a saved base (memory-mapped) with the entries
changed since (few, sorted), handed to a save's files without the merged arrays ever being
whole in memory.

Why (issue 49: nothing in the applying process grows with the index): a save folded each
store's overlay into new whole arrays first, and the process held them until the files were
written and mapped; at a million pages the winners' fold alone made 93 MiB of them, the
groups' 53 MiB, and ten times as much at ten million. A merge of a sorted base with a
sorted delta needs a block of each at a time, so a save's memory is its blocks and the
delta, whatever the index holds.

The rule of every merge here: the base's entries whose key is in `drop` leave (a changed
entry is replaced whole: a class, a group, a node's edges), the `new` entries go in, and
among equal keys the base's come first (a key both kept and new: the page keys, where two
URLs may share one).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from neardup.index.state.arrays import RowBlocks
from neardup.kernels.sorting import found_in_sorted

BLOCK = 1 << 18  # base entries a block (2 MiB of 64-bit keys)


def dropped_count(keys: np.ndarray, drop: np.ndarray | None) -> int:
    """The entries of the sorted `keys` whose key is in `drop` (sorted, distinct): a search
    a dropped key, so a save knows its files' sizes before it writes them."""
    if drop is None or not drop.size or not keys.size:
        return 0
    return int((np.searchsorted(keys, drop, "right") - np.searchsorted(keys, drop, "left")).sum())


def merged_blocks(
    base: Sequence[np.ndarray],
    new: Sequence[np.ndarray],
    drop: np.ndarray | None = None,
    block: int = BLOCK,
) -> Iterator[tuple[np.ndarray, ...]]:
    """The columns of `base` (its first the sorted keys) without the entries whose key is in
    `drop` (sorted, distinct), merged with the columns of `new` (its keys sorted too), in
    blocks of about `block` base entries: each block ends after the last entry of a key, so
    a key's entries are never split across two blocks."""
    keys, new_keys = base[0], new[0]
    size, new_size = int(keys.shape[0]), int(new_keys.shape[0])
    lo = new_lo = 0
    while lo < size:
        hi = min(lo + block, size)
        if hi < size:  # the whole run of the block's last key
            hi = max(hi, int(np.searchsorted(keys, keys[hi - 1], "right")))
        new_hi = new_size if hi == size else int(np.searchsorted(new_keys, keys[hi - 1], "right"))
        part = [np.asarray(c[lo:hi]) for c in base]
        if drop is not None and drop.size:
            kept = ~found_in_sorted(drop, part[0])[1]
            if not kept.all():
                part = [c[kept] for c in part]
        yield _merged(part, [np.asarray(c[new_lo:new_hi]) for c in new])
        lo, new_lo = hi, new_hi
    while new_lo < new_size:  # (an empty base: the new entries alone, a key's together)
        new_hi = min(new_lo + block, new_size)
        if new_hi < new_size:
            new_hi = max(new_hi, int(np.searchsorted(new_keys, new_keys[new_hi - 1], "right")))
        yield tuple(np.asarray(c[new_lo:new_hi]) for c in new)
        new_lo = new_hi


def _merged(base: list[np.ndarray], new: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    """Two sorted blocks as one, the base's first among equal keys."""
    if not new[0].size:
        return tuple(base)
    total = base[0].size + new[0].size
    is_new = np.zeros(total, bool)
    is_new[np.searchsorted(base[0], new[0], "right") + np.arange(new[0].size)] = True
    out = []
    for b, n in zip(base, new, strict=True):
        column = np.empty((total, *b.shape[1:]), np.result_type(b.dtype, n.dtype))
        column[~is_new], column[is_new] = b, n
        out.append(column)
    return tuple(out)


def merged_rows(
    specs: dict[str, Any],
    base: Sequence[np.ndarray],
    new: Sequence[np.ndarray],
    drop: np.ndarray | None = None,
    block: int = BLOCK,
) -> RowBlocks:
    """`merged_blocks` as the files `specs` names (file name -> dtype, a column each, in
    order), their sizes known before a block is made."""
    rows = int(base[0].shape[0]) - dropped_count(base[0], drop) + int(new[0].shape[0])
    shapes = {name: ((rows,), dtype) for name, dtype in specs.items()}

    def blocks() -> Iterator[tuple[np.ndarray, ...]]:
        for got in merged_blocks(base, new, drop, block):
            yield tuple(c.astype(d, copy=False) for c, d in zip(got, specs.values(), strict=True))

    return RowBlocks(shapes, blocks())
