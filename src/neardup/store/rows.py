"""Rows of a run's `.npy` matrices (signatures, super-shingles), read without keeping them
resident: used by the scan's later stages and by the store build."""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import Any

import numpy as np

from neardup.kernels.sorting import consecutive_runs
from neardup.npy_files import layout


class MappedRows:
    """The rows of a `.npy` matrix, read with `pread` (a slice, or an array of row numbers)
    or through a memory map opened for that read only (any other index).

    A map kept open for a whole stage holds every page it has touched in the process's
    resident memory (a full pass over a crawl's signatures adds 512 bytes per page at
    K = 128). A map opened per read still makes the pages around each row resident while
    it is open: the kernel maps up to 64 KiB around a touched page, so 8,192 scattered rows
    of a million-page matrix made 492 MiB of it resident at once, the peak of the scan's
    verification. Rows read with `pread` pass through the page cache into the array
    alone (4 MiB for the same rows). Indexing returns a copy in memory, as
    `np.asarray(memmap[index])` would."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        shape, fortran, self.dtype, self._start = layout(self.path)  # (where the data starts)
        self.shape: tuple[int, ...] = shape
        self._by_pread = not fortran and not self.dtype.hasobject
        self._row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index: Any) -> np.ndarray:
        if self.shape[0] == 0 or (len(self.shape) > 1 and self.shape[1] == 0):
            return np.empty((0, *self.shape[1:]), dtype=self.dtype)[index]
        if self._by_pread and isinstance(index, slice) and index.step in (None, 1):
            lo, hi, _ = index.indices(self.shape[0])
            return self._read(np.arange(lo, max(lo, hi), dtype=np.int64))
        if self._by_pread and isinstance(index, (np.ndarray, list)):
            rows = np.asarray(index)
            if rows.ndim == 1 and (rows.dtype.kind in "iu" or rows.size == 0):
                return self._read(rows.astype(np.int64))
        mapped = np.load(self.path, mmap_mode="r")
        try:
            return np.array(mapped[index])
        finally:
            del mapped

    def _read(self, rows: np.ndarray) -> np.ndarray:
        """Rows `rows` (negative ones from the end), each run of consecutive rows with one
        `pread`, in the order asked."""
        n = self.shape[0]
        if not rows.size:
            return np.empty((0, *self.shape[1:]), self.dtype)
        if int(rows.min()) < -n or int(rows.max()) >= n:
            raise IndexError(f"rows outside 0 .. {n - 1}")
        rows = np.where(rows < 0, rows + n, rows)
        order = np.argsort(rows, kind="stable")
        ordered = rows[order]
        got = np.empty((rows.size, *self.shape[1:]), self.dtype)
        flat = got.reshape(rows.size, -1).view(np.uint8)  # a row's bytes a line
        with open(self.path, "rb", buffering=0) as fh:
            for a, b in consecutive_runs(ordered):
                at = self._start + int(ordered[a]) * self._row_bytes
                read_into(fh.fileno(), memoryview(flat[a:b]).cast("B"), at)
        if np.any(np.diff(order) != 1):  # asked out of order: put back
            out = np.empty_like(got)
            out[order] = got
            return out
        return got


def read_into(fd: int, view: memoryview, at: int) -> None:
    """`view` filled from the file at `at` (a short read continues): the one `pread` loop
    of the run's matrices and of the index's vectors (`file_vectors.py`)."""
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], at + done)
        if got <= 0:
            raise OSError("the .npy file is shorter than its header says")
        done += got


class FileMap(np.ndarray):
    """A copy-on-write map of a `.npy` matrix whose rows are also read with `pread`
    (`rows`, `rows_of`): an index's saved sketch partitions (`saves.read_arrays`). A row
    written goes to the map (a private page); a row only read is read from the file, so
    that the 64 KiB the kernel maps around each page a read touches do not stay in the
    process (removing 1 % of a ten-million-page index read 96,810 scattered rows through
    the maps: 6 GB resident). No descriptor is kept open (an index of a billion pages
    has thousands of partitions): a read opens the file."""

    rows: MappedRows


def file_map(path: Path, mode: str) -> FileMap:
    """The map of the `.npy` matrix at `path` (`mode` as `np.load`'s) with its rows' reader."""
    out = np.load(path, mmap_mode=mode).view(FileMap)  # type: ignore[call-overload]
    out.rows = MappedRows(path)
    return out


def rows_of(block: FileMap, rows: np.ndarray) -> np.ndarray:
    """Rows `rows` of a saved file's map, read with `pread`; through the map once the file
    is gone (a writer's next save removed its folder; the map outlives it)."""
    try:
        return block.rows[rows]
    except FileNotFoundError:
        return np.array(block.view(np.ndarray)[rows])


def release_pages(array: np.ndarray) -> None:
    """The pages of a file's map that this process holds, given back (`MADV_DONTNEED`):
    read again from the page cache when next touched. The kernel maps up to 64 KiB around
    each page a read touches (`MADV_RANDOM` does not stop it), so scattered reads of a
    large file leave all of it resident: removing 1 % of a ten-million-page index read
    the saved URLs of 96,810 pages and held 640 MB of their maps. Only for a map never
    written: a copy-on-write map's written pages would be lost. An array that is no map
    is left alone."""
    base: object = array
    while base is not None and not isinstance(base, mmap.mmap):
        held = getattr(base, "_mmap", None)  # `np.memmap` keeps its map here
        base = held if isinstance(held, mmap.mmap) else getattr(base, "base", None)
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if isinstance(base, mmap.mmap) and advice is not None and not base.closed:
        base.madvise(advice)
