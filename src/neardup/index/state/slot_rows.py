"""A matrix of rows by slot in blocks that are never copied: the page table's sketches and
length vectors (`pages.PageTable`).

Kept apart from the table because it is a storage shape of its own (rows opened from
segments' maps, `arrays.Stacked`, then blocks added as slots are) that knows nothing of
pages: the table reads and writes its rows by slot, and opening decides which rows it
adopts without a copy (`adopt`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator

import numpy as np

from neardup.index.state.arrays import Stacked, gather_rows
from neardup.kernels.sorting import found_in_sorted, sorted_distinct
from neardup.store.rows import FileMap, rows_of


class SlotRows:
    """A matrix of rows by slot (the sketches, the length vectors) in blocks that are never
    copied: the rows as opened (a copy-on-write map of a segment's file, one array, or
    several segments' maps read through the row of each slot, `store.Stacked`), then
    blocks added as slots are, each as large as half the rows before it (so a few dozen
    blocks at the most). Growing one matrix by half copied it, and held the old and the new
    copy at once: the first page added to an index of a million pages copied its half a
    gigabyte of sketches (0.47 s); gathering the rows of several segments into one matrix
    at opening copied them twice (2.1 s). Some slots may be read from other matrices
    instead (`redirect`: the rows written since a save, in their segments' maps). Reads
    take a slot (a row, a view), a slice or many slots (a new array); writes take a slot or
    many."""

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
        # Slots redirected to rows of other matrices (`redirect`): ascending, with the row of
        # each across `_mblocks` (a space of rows of its own, so that blocks added to the
        # first keep their rows `slot + _shift`).
        self._moved: np.ndarray | None = None
        self._moved_rows = np.empty(0, np.int64)
        self._mblocks: list[np.ndarray] = []
        self._mstarts: list[int] = []
        # Blocks that are a saved file's maps (`rows.FileMap`, by block): their rows are read
        # with `pread`, but those written since (by block, a mask), which the map's private
        # pages hold.
        self._readers: dict[int, FileMap] = {}
        self._written: dict[int, np.ndarray] = {}
        if isinstance(base, Stacked):
            for part in base.parts:
                self._append(part.view(np.ndarray) if isinstance(part, np.memmap) else part)
            self._where = base.rows
            self._opened = self.rows = int(base.rows.size)
            self._shift = self._end - self._opened
        elif isinstance(base, list):  # a saved matrix's partitions, in order
            for part in base:
                if isinstance(part, FileMap):  # read with `pread`, written to the map
                    self._readers[len(self.blocks)] = part
                    part = part.view(np.ndarray)
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

    def redirect(self, slots: np.ndarray, rows: np.ndarray | Stacked) -> None:
        """Read and write the rows of `slots` (distinct, in range) in `rows` from now on
        (slot `slots[i]`: row i of `rows`), not in this matrix's own blocks. Opening puts
        the rows written since a save in place this way, as the segments' copy-on-write
        maps hold them: copying them into the save's maps gathered the segments' rows into
        one array, ordered it by slot (a second array) and wrote each row to a private page
        of the save's map (a third copy): at ten million pages, 319,566 rows since the save,
        three times 156 MiB of a 1 % add's peak. A later redirect of a slot replaces the
        earlier; a write to a redirected slot goes to `rows` (private pages of a map)."""
        idx = np.asarray(slots, np.int64).reshape(-1)
        if not idx.size:
            return
        if idx.min() < 0 or idx.max() >= self.rows:
            raise IndexError(f"slots outside 0 .. {self.rows - 1}")
        parts, where = (rows.parts, rows.rows) if isinstance(rows, Stacked) else ([rows], None)
        first = self._mend
        for part in parts:
            if part.shape[1:] != (self.width,):
                raise ValueError(f"rows of shape {part.shape[1:]}, not ({self.width},)")
            block = part.view(np.ndarray) if isinstance(part, np.memmap) else part
            if block.dtype != self.dtype or not block.flags.writeable:  # (an older file's)
                block = block.astype(self.dtype)
            self._mstarts.append(self._mend)
            self._mblocks.append(block)
        at = np.arange(idx.size, dtype=np.int64) if where is None else np.asarray(where, np.int64)
        if at.size != idx.size or (where is None and parts[0].shape[0] != idx.size):
            raise ValueError(f"{at.size} rows for {idx.size} slots")
        at = at + first
        if self._moved is not None:  # redirected before: the newer row wins
            keep = ~np.isin(self._moved, idx)
            idx = np.concatenate([self._moved[keep], idx])
            at = np.concatenate([self._moved_rows[keep], at])
        order = np.argsort(idx, kind="stable")
        self._moved, self._moved_rows = idx[order], at[order]

    @property
    def _mend(self) -> int:
        """Rows across the redirected blocks."""
        return self._mstarts[-1] + self._mblocks[-1].shape[0] if self._mblocks else 0

    def _moved_of(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Which of slots `idx` are redirected, and their rows (None: none is)."""
        if self._moved is None:
            return None
        at, hit = found_in_sorted(self._moved, idx)
        if not hit.any():
            return None
        return hit, self._moved_rows[at[hit]]

    @property
    def _plain(self) -> bool:
        """One block of its own, read and written by slot as it is."""
        return (
            len(self.blocks) == 1
            and self._where is None
            and self._moved is None
            and not self._readers
        )

    def _at(self, slot: int) -> tuple[bool, int, int]:
        """Where slot's row is: whether among the redirected blocks, the block, the row."""
        if not 0 <= slot < self.rows:
            raise IndexError(f"slot {slot} of {self.rows}")
        if self._moved is not None:
            i = int(np.searchsorted(self._moved, slot))
            if i < self._moved.size and self._moved[i] == slot:
                row = int(self._moved_rows[i])
                b = bisect_right(self._mstarts, row) - 1
                return True, b, row - self._mstarts[b]
        row = int(self._where[slot]) if slot < self._opened else slot + self._shift  # type: ignore[index]
        b = bisect_right(self.starts, row) - 1
        return False, b, row - self.starts[b]

    def _own_rows(self, rows: np.ndarray) -> np.ndarray:
        """Rows `rows` of the own blocks, those of a saved file's blocks not written since
        read from the file."""
        if not self._readers:
            return gather_rows(self.blocks, np.array(self.starts, np.int64), rows)
        out = np.empty((rows.size, self.width), self.dtype)
        for b, here, local in _by_block(self.starts, rows):
            reader, written = self._readers.get(b), self._written.get(b)
            if reader is None:
                out[here] = self.blocks[b][local]
                continue
            at = np.flatnonzero(here)
            fresh = np.ones(local.size, bool) if written is None else ~written[local]
            if fresh.any():
                out[at[fresh]] = rows_of(reader, local[fresh])
            if not fresh.all():
                out[at[~fresh]] = self.blocks[b][local[~fresh]]
        return out

    def _put_own(self, rows: np.ndarray, values: np.ndarray) -> None:
        """Rows `rows` of the own blocks written (and marked, in a saved file's blocks)."""
        for b, here, local in _by_block(self.starts, rows):
            self.blocks[b][local] = values[here]
            if b in self._readers:
                mask = self._written.get(b)
                if mask is None:
                    mask = self._written[b] = np.zeros(self.blocks[b].shape[0], bool)
                mask[local] = True

    def _row_of(self, idx: np.ndarray) -> np.ndarray:
        """The rows of slots `idx` (in range)."""
        if self._where is None:
            return idx
        rows = idx + self._shift
        opened = idx < self._opened
        rows[opened] = self._where[idx[opened]]
        return rows

    def __getitem__(self, key: int | slice | np.ndarray | list[int]) -> np.ndarray:
        plain = self._plain
        if isinstance(key, (int, np.integer)):
            if plain and key >= 0:
                return self.blocks[0][key]
            moved, b, i = self._at(int(key))
            if moved:
                return self._mblocks[b][i]
            reader, written = self._readers.get(b), self._written.get(b)
            if reader is not None and (written is None or not written[i]):
                return rows_of(reader, np.array([i], np.int64))[0]
            return self.blocks[b][i]
        if isinstance(key, slice):
            key = np.arange(*key.indices(self.rows))
        idx = np.asarray(key, np.int64).reshape(-1)
        if plain:
            return self.blocks[0][idx]
        out = np.empty((idx.size, self.width), self.dtype)
        if not idx.size:
            return out
        if idx.min() < 0 or idx.max() >= self.rows:
            raise IndexError(f"slots outside 0 .. {self.rows - 1}")
        moved = self._moved_of(idx)
        if moved is None:
            return self._own_rows(self._row_of(idx))
        hit, rows = moved
        own = ~hit
        if own.any():
            out[own] = self._own_rows(self._row_of(idx[own]))
        out[hit] = gather_rows(self._mblocks, np.array(self._mstarts, np.int64), rows)
        return out

    def put(self, slots: np.ndarray, values: np.ndarray) -> None:
        """Write the rows of many slots (distinct, in range) at once: a block's rows in
        one assignment."""
        idx = np.asarray(slots, np.int64).reshape(-1)
        if not idx.size:
            return
        if idx.min() < 0 or idx.max() >= self.rows:
            raise IndexError(f"slots outside 0 .. {self.rows - 1}")
        values = np.asarray(values)
        moved = self._moved_of(idx)
        if moved is None:
            self._put_own(self._row_of(idx.copy()), values)
            return
        hit, rows = moved
        own = ~hit
        self._put_own(self._row_of(idx[own]), values[own])
        _put_rows(self._mblocks, self._mstarts, rows, values[hit])

    def __setitem__(self, slot: int, value: np.ndarray | int) -> None:
        if self._plain and slot >= 0:
            self.blocks[0][slot] = value
            return
        moved, b, i = self._at(int(slot))
        if moved:
            self._mblocks[b][i] = value
        else:
            row = np.array([self.starts[b] + i], np.int64)
            self._put_own(row, np.broadcast_to(np.asarray(value, self.dtype), (1, self.width)))


def _put_rows(
    blocks: list[np.ndarray], starts: list[int], rows: np.ndarray, values: np.ndarray
) -> None:
    """`values` written to rows `rows` of a matrix kept as `blocks` (`starts`: each one's
    first row): a block's rows in one assignment."""
    for b, here, local in _by_block(starts, rows):
        blocks[b][local] = values[here]


def _by_block(starts: list[int], rows: np.ndarray) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Rows of a matrix kept as blocks (`starts`: each one's first row) by block: the block,
    which of `rows` are in it, and their rows in it."""
    first = np.array(starts, np.int64)
    block = np.searchsorted(first, rows, "right") - 1
    for b in sorted_distinct(block).tolist():
        here = block == b
        yield b, here, rows[here] - first[b]


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
