"""The shapes in which the index's state hands its arrays to the files and takes them back:
rows in blocks (`RowBlocks`), a matrix patched over its save (`PatchedRows`), a file filled
in place (`FilledInPlace`), files of an earlier save taken as they are (`Linked`), strings
as offsets and bytes (`string_blocks`, `mapped_strings`), stacked and gathered rows.

Why a module of its own: the state (pages, groups, the graph) says what a save holds, the
files (`files/store.py`) write and map it; these records are the words both use, so they
sit below both and neither imports the other's code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from neardup.kernels.sorting import sorted_distinct
from neardup.store.rows import FileMap, rows_of


@dataclass(frozen=True)
class Stacked:
    """Rows of matrices stacked one after the other (rows numbered across `parts`), picked
    by `rows` and not copied: what opening several segments (or one whose rows are not in
    slot order) reads as the sketches. Gathering them into one matrix was most of the
    opening of a million-page index (two copies of its half a gigabyte: 2.1 s of 3.9);
    the page table reads them through `rows` instead (`pages.SlotRows`)."""

    parts: list[np.ndarray]
    rows: np.ndarray  # int64, a row across `parts` for each row of the state

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.rows.size), int(self.parts[0].shape[1]))

    @property
    def dtype(self) -> np.dtype:
        return self.parts[0].dtype

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """The rows gathered into one array (a segment written from a state)."""
        out = np.empty(self.shape, self.dtype if dtype is None else dtype)
        at = 0
        for part in self.parts:
            mine = np.flatnonzero((self.rows >= at) & (self.rows < at + part.shape[0]))
            out[mine] = part[self.rows[mine] - at]
            at += part.shape[0]
        return out


@dataclass(frozen=True)
class RowBlocks:
    """`.npy` files written together block by block along their first axis, so that no
    file's whole array is ever in memory: `specs` names each file's shape and dtype,
    `blocks` yields a tuple of one block a file (in `specs`' order) at a time."""

    specs: dict[str, tuple[tuple[int, ...], Any]]
    blocks: Iterable[tuple[np.ndarray, ...]]


@dataclass(frozen=True)
class PatchedRows:
    """A matrix of `rows` rows saved in partitions of `part_rows` rows (`part_file`, each a
    `.npy` file): an earlier save's matrix of it (in the folder `source`, its first
    `source_rows` rows) with the rows of `changed` slots (and every row from `source_rows`
    on up to `filled`) taken from `read` instead; the rows after `filled` are zeros. A
    partition with no row to take from `read` is the earlier save's file, linked (a save
    of a growing index writes its new partitions and the ones its batches changed, not the
    whole matrix: copying four million pages' sketches took 7 s); the unchanged rows of the
    others are copied by the kernel from file to file (`os.copy_file_range`), not read into
    this process. Without `source`, every row up to `filled` comes from `read`."""

    name: str
    rows: int
    width: int
    dtype: Any
    filled: int
    read: Callable[[np.ndarray], np.ndarray]  # slots -> their rows
    source: Path | None = None
    source_rows: int = 0
    changed: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    part_rows: int | None = None  # None: `PART_ROWS`


@dataclass(frozen=True)
class FilledInPlace:
    """`.npy` files made at their full size (a header, then a hole of zeros) and then filled
    by `fill(folder)`, which writes parts of them where they belong (`npy_files.data_start`), from
    this process or from others (Spark's executors, on the storage the folder is on):
    files whose parts are made independently, such as the band index's tables, written
    by several writers at once."""

    specs: dict[str, tuple[tuple[int, ...], Any]]
    fill: Callable[[Path], None]


@dataclass(frozen=True)
class Linked:
    """Files of an earlier save taken into this one as they are (hard links: no byte is
    written): arrays a save did not change, such as the band index's base while the
    changes since it are saved beside it (`band_buckets.BandBuckets.saved`). `files` are
    paths in the earlier save's folder; each keeps its name."""

    files: tuple[Path, ...]


def rows_read(m: np.ndarray | Stacked, rows: np.ndarray) -> Stacked:
    """The rows `rows` of a state's matrix, in that order, read through `Stacked`, not
    copied."""
    if isinstance(m, Stacked):
        return Stacked(m.parts, m.rows[rows])
    return Stacked([m], rows)


def gather_rows(blocks: list[np.ndarray], starts: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Rows `rows` of a matrix kept as blocks one after the other (`starts`: each block's
    first row), read block by block into one array."""
    out = np.empty((rows.size, *blocks[0].shape[1:]), blocks[0].dtype)
    which = starts.searchsorted(rows, "right") - 1
    for b in sorted_distinct(which).tolist():
        at = np.flatnonzero(which == b)
        block = blocks[b]
        # A saved file's map (`rows.FileMap`) is read with `pread`, not through the map.
        local = rows[at] - starts[b]
        out[at] = rows_of(block, local) if isinstance(block, FileMap) else block[local]
    return out


def parted_rows(parts: list[np.ndarray], rows: np.ndarray) -> np.ndarray:
    """Rows of a matrix read as its partitions' maps (`read_arrays`)."""
    starts = np.cumsum([0, *(p.shape[0] for p in parts[:-1])]).astype(np.int64)
    return gather_rows(parts, starts, rows)


def string_blocks(prefix: str, strings: pa.Array | pa.ChunkedArray) -> RowBlocks:
    """Strings as two `.npy` files that `mapped_strings` reads back without a copy: their
    bytes one after the other (`PREFIX_bytes`) and where each starts (`PREFIX_offsets`,
    one more than the strings), written a chunk at a time."""
    chunks = strings.chunks if isinstance(strings, pa.ChunkedArray) else [strings]
    return strings_in_blocks(prefix, len(strings), lambda: chunks)


def strings_in_blocks(
    prefix: str, count: int, blocks: Callable[[], Iterable[pa.Array]]
) -> RowBlocks:
    """`count` strings made a block at a time by `blocks` (called twice: once to size the
    files, once to write them), as `string_blocks` writes them: a save's strings in a new
    order (the winners' URLs in group order) without all of them in memory at once."""

    def spans() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for block in blocks():
            if len(block):
                yield _string_span(block.cast(pa.large_string()))

    total = sum(int(offsets[-1] - offsets[0]) for offsets, _ in spans())

    def rows() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        yield np.zeros(1, np.int64), np.zeros(0, np.uint8)
        at = 0
        for offsets, data in spans():
            yield offsets[1:] - offsets[0] + at, data
            at += int(offsets[-1] - offsets[0])

    return RowBlocks(
        {f"{prefix}_offsets": ((count + 1,), np.int64), f"{prefix}_bytes": ((total,), np.uint8)},
        rows(),
    )


def _string_span(chunk: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A large-string array's offsets (its own `len + 1`) and the bytes they span."""
    _, offs, data = chunk.buffers()
    offsets = np.frombuffer(offs, np.int64)[chunk.offset : chunk.offset + len(chunk) + 1]
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return offsets, raw[int(offsets[0]) : int(offsets[-1])]


def in_mask_order(inside: np.ndarray, first: pa.Array, second: pa.Array) -> pa.Array:
    """Two arrays of strings put back in one order, as large strings: where `inside` is
    true the next of `first`, elsewhere the next of `second`."""
    both = pa.concat_arrays([first.cast(pa.large_string()), second.cast(pa.large_string())])
    place = np.empty(inside.size, np.int64)  # each value's place in `both`
    place[inside] = np.arange(len(first))
    place[~inside] = np.arange(len(first), inside.size)
    return both.take(pa.array(place))


def mapped_strings(offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    """The strings `string_blocks` wrote, over the arrays as given (maps: not read)."""
    return pa.Array.from_buffers(
        pa.large_string(),
        int(offsets.size) - 1,
        [None, pa.py_buffer(offsets), pa.py_buffer(data)],
    )


@dataclass(frozen=True)
class BandDelta:
    """A save's band index as the state hands it over: each table's delta (every node of the
    delta is in every table once), the base slots that left (sorted), and the widths of
    the old row and of the new one. The files room writes it with the save before
    (`files/band_save.py`)."""

    tables: int
    keys: list[np.ndarray]
    slots: list[np.ndarray]
    left: np.ndarray
    base_width: int
    width: int


# Writes a save's band index into a folder (the save's) from the save before it (None: none)
# and the delta: `files/band_save.band_writer`, with the engine's table writer.
BandWriter = Callable[[Path, "Path | None", BandDelta], None]
