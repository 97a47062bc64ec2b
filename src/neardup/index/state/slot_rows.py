"""A matrix of rows by slot in blocks that are never copied: the page table's sketches and
length vectors (`pages.PageTable`).

Kept apart from the table because it is a storage shape of its own (rows opened from
segments' maps, `arrays.Stacked`, then blocks added as slots are) that knows nothing of
pages: the table reads and writes its rows by slot, and opening decides which rows it
adopts without a copy (`adopt`).
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from neardup.index.state.arrays import Stacked, gather_rows
from neardup.kernels.sorting import sorted_distinct


class SlotRows:
    """A matrix of rows by slot (the sketches, the length vectors) in blocks that are never
    copied: the rows as opened (a copy-on-write map of a segment's file, one array, or
    several segments' maps read through the row of each slot, `store.Stacked`), then
    blocks added as slots are, each as large as half the rows before it (so a few dozen
    blocks at the most). Growing one matrix by half copied it, and held the old and the new
    copy at once: the first page added to an index of a million pages copied its half a
    gigabyte of sketches (0.47 s); gathering the rows of several segments into one matrix
    at opening copied them twice (2.1 s). Reads take a slot (a row, a view), a slice or
    many slots (a new array); writes take a slot."""

    _FIRST = 65_536  # rows of the first block added

    def __init__(
        self, width: int, dtype: type, base: np.ndarray | Stacked | list[np.ndarray] | None = None
    ) -> None:
        self.width, self.dtype = width, np.dtype(dtype)
        self.blocks: list[np.ndarray] = []
        self.starts: list[int] = []  # each block's first row (`bisect`: 10x numpy's search)
        self.rows = 0  # slots with a row (written or not)
        self._end = 0  # rows across the blocks
        # Slots opened through `Stacked` (0 .. `_opened` - 1) read row `_where[slot]`; the
        # slots after them row `slot + _shift` (the blocks added since).
        self._where: np.ndarray | None = None
        self._opened = 0
        self._shift = 0
        if isinstance(base, Stacked):
            for part in base.parts:
                self._append(part.view(np.ndarray) if isinstance(part, np.memmap) else part)
            self._where = base.rows
            self._opened = self.rows = int(base.rows.size)
            self._shift = self._end - self._opened
        elif isinstance(base, list):  # a saved matrix's partitions, in order
            for part in base:
                self._append(part)
            self.rows = self._end
        elif base is not None and base.shape[0]:
            self._append(base)
            self.rows = self._end

    def _append(self, block: np.ndarray) -> None:
        self.blocks.append(block)
        self.starts.append(self._end)
        self._end += block.shape[0]

    def reserve(self, need: int) -> None:
        """Rows for slots up to `need` (zeros, resident only once written)."""
        while self.rows < need:
            size = max(self._FIRST, self.rows // 2, need - self.rows)
            self._append(np.zeros((size, self.width), self.dtype))
            self.rows += size

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.width)

    def _at(self, slot: int) -> tuple[np.ndarray, int]:
        if not 0 <= slot < self.rows:
            raise IndexError(f"slot {slot} of {self.rows}")
        row = int(self._where[slot]) if slot < self._opened else slot + self._shift  # type: ignore[index]
        b = bisect_right(self.starts, row) - 1
        return self.blocks[b], row - self.starts[b]

    def _row_of(self, idx: np.ndarray) -> np.ndarray:
        """The rows of slots `idx` (in range)."""
        if self._where is None:
            return idx
        rows = idx + self._shift
        opened = idx < self._opened
        rows[opened] = self._where[idx[opened]]
        return rows

    def __getitem__(self, key: int | slice | np.ndarray | list[int]) -> np.ndarray:
        if isinstance(key, (int, np.integer)):
            if len(self.blocks) == 1 and self._where is None and key >= 0:
                return self.blocks[0][key]
            block, i = self._at(int(key))
            return block[i]
        if isinstance(key, slice):
            key = np.arange(*key.indices(self.rows))
        idx = np.asarray(key, np.int64).reshape(-1)
        if len(self.blocks) == 1 and self._where is None:
            return self.blocks[0][idx]
        out = np.empty((idx.size, self.width), self.dtype)
        if not idx.size:
            return out
        if idx.min() < 0 or idx.max() >= self.rows:
            raise IndexError(f"slots outside 0 .. {self.rows - 1}")
        return gather_rows(self.blocks, np.array(self.starts, np.int64), self._row_of(idx))

    def put(self, slots: np.ndarray, values: np.ndarray) -> None:
        """Write the rows of many slots (distinct, in range) at once: a block's rows in
        one assignment."""
        idx = np.asarray(slots, np.int64).reshape(-1)
        if not idx.size:
            return
        if idx.min() < 0 or idx.max() >= self.rows:
            raise IndexError(f"slots outside 0 .. {self.rows - 1}")
        rows = self._row_of(idx.copy())
        starts = np.array(self.starts, np.int64)
        block = np.searchsorted(starts, rows, "right") - 1
        values = np.asarray(values)
        for b in sorted_distinct(block).tolist():
            here = block == b
            self.blocks[b][rows[here] - starts[b]] = values[here]

    def __setitem__(self, slot: int, value: np.ndarray | int) -> None:
        if len(self.blocks) == 1 and self._where is None and slot >= 0:
            self.blocks[0][slot] = value
            return
        block, i = self._at(int(slot))
        block[i] = value


def adopt(
    rows: np.ndarray | Stacked, n: int, shape: tuple[int, ...], dtype: type
) -> np.ndarray | Stacked:
    """`rows` as a column of the table when it already has the column's shape and layout
    (writable: a copy-on-write map or an array of its own; the parts of `Stacked` rows are
    a segment's maps), else a copy that has. A map is taken as a plain array view: slicing
    a `np.memmap` makes a memmap each time, slower."""
    if isinstance(rows, Stacked):
        if all(p.shape[1:] == shape and p.dtype == dtype and p.flags.writeable for p in rows.parts):
            return rows
        return adopt(np.asarray(rows), n, shape, dtype)
    if isinstance(rows, np.memmap):
        rows = rows.view(np.ndarray)
    if (
        rows.shape == (n, *shape)
        and rows.dtype == dtype
        and rows.flags.c_contiguous
        and rows.flags.writeable
    ):
        return rows
    out = np.zeros((n, *shape), dtype)
    out[:] = rows
    return out
