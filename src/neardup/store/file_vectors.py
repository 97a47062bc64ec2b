"""Saved sorted arrays searched and read with `pread`, never mapped (issue 49).

Why: the index's largest files are sorted keys (the band index's tables, the page keys, the
shingle classes, the group ids), each searched for a batch's keys. Searched through a memory
map, every page a binary search lands on stays in the process's resident memory: a batch of
100,000 pages at ten million pages touched 1.33 GB of the band keys' map, the largest part
of its 3 GB peak, for a few hundred thousand keys. Here an array keeps in memory only every
`STRIDE`-th key (its *sparse index*: 8 bytes per 4 KiB of keys, saved beside the file by the
save, `save_sparse`); a search finds each key's block in it and reads the blocks it needs
with one `pread` per run of them, into a buffer dropped after the search. The bytes pass
through the page cache as before, but the process holds a chunk at a time, not the file.
(Searched densely, a map is cheaper in time: the ten-million-page add went from 32 to 37 s.)

`FileVector` is one flat run of a `.npy` file's values (a whole 1-D file, or one row of a
2-D one such as a band table), read by position; `SortedVector` adds the search. They answer
the few array operations the index's stores use on their saved arrays (`size`, `shape`,
`len`, indexing by an integer, a slice or an array of positions, `np.searchsorted`), and
refuse to be turned into a whole array (`__array__` raises): a caller that needs every value
reads them in blocks (`blocks`), so none reads a file whole by accident.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from neardup.npy_files import layout
from neardup.store.rows import read_into

STRIDE = 512  # values a block of the sparse index covers (4 KiB of int64 keys: a page)
_GAP_BLOCKS = 8  # unasked blocks between two asked ones read rather than skipped
_CHUNK_BLOCKS = 1024  # blocks in memory at once (4 MiB of int64 keys)


class OpenFile:
    """A file's descriptor, open while a vector of it is kept: like a map, it outlives the
    file's removal (a writer that saved again removes the folder a reader still reads),
    and it is closed once no vector holds it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDONLY)

    def __del__(self) -> None:
        fd = getattr(self, "fd", None)
        if fd is not None:
            os.close(fd)

    def __reduce__(self) -> tuple[Any, ...]:
        return (OpenFile, (self.path,))  # opened again where it is unpickled


class FileVector:
    """Values `first .. first + size - 1` of a C-order `.npy` file, read with `pread`."""

    ndim = 1

    def __init__(
        self,
        path: str | os.PathLike[str],
        first: int = 0,
        size: int | None = None,
        file: OpenFile | None = None,
    ):
        """Values `first ..` (`size` of them, None: to the end) of the file at `path`,
        through `file` (shared by the rows of one file; None: opened here)."""
        self.path = Path(path)
        self._file = OpenFile(self.path) if file is None else file
        shape, fortran, self.dtype, start = layout(self.path)
        if fortran or self.dtype.hasobject:
            raise ValueError(f"{self.path}: not a C-order array of numbers")
        total = int(np.prod(shape, dtype=np.int64))
        self.size = total - first if size is None else size
        if first < 0 or first + self.size > total:
            raise ValueError(f"{self.path}: values {first} .. {first + self.size} of {total}")
        self._at = start + first * self.dtype.itemsize  # where value 0 is in the file

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> Any:
        """The vector of a 1-D `.npy` file, or the rows of a 2-D one (`FileRows`)."""
        shape = layout(Path(path))[0]
        if len(shape) == 1:
            return cls(path)
        width, file = int(shape[1]), OpenFile(Path(path))
        rows = [cls(path, r * width, width, file) for r in range(int(shape[0]))]
        return FileRows(rows, width)

    @property
    def shape(self) -> tuple[int]:
        return (self.size,)

    def __len__(self) -> int:
        return self.size

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(f"{self.path} is read in blocks (`FileVector.blocks`), not as one array")

    def read(self, lo: int, hi: int) -> np.ndarray:
        """Values `lo .. hi - 1` (clipped to the vector), one `pread`."""
        out = np.empty(max(min(hi, self.size) - max(lo, 0), 0), self.dtype)
        self.read_into(out, lo, hi)
        return out

    def read_into(self, out: np.ndarray, lo: int, hi: int) -> int:
        """Values `lo .. hi - 1` (clipped to the vector) into the start of `out`, one
        `pread`; returns how many."""
        lo, hi = max(lo, 0), min(hi, self.size)
        count = max(hi - lo, 0)
        view = memoryview(out[:count]).cast("B")
        read_into(self._file.fd, view, self._at + lo * self.dtype.itemsize)
        return count

    def blocks(self, rows: int = 1 << 18) -> Iterator[tuple[int, np.ndarray]]:
        """Every value, `rows` at a time: (first position, values)."""
        for lo in range(0, self.size, rows):
            yield lo, self.read(lo, lo + rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, (int, np.integer)):
            i = int(index) + (self.size if index < 0 else 0)
            if not 0 <= i < self.size:
                raise IndexError(f"position {index} of {self.size}")
            return self.read(i, i + 1)[0]
        if isinstance(index, slice):
            lo, hi, step = index.indices(self.size)
            if step != 1:  # (positions, as numpy's slice names them)
                return self.take(np.arange(lo, hi, step, dtype=np.int64))
            return self.read(lo, max(lo, hi))
        return self.take(np.asarray(index))

    def take(self, positions: np.ndarray) -> np.ndarray:
        """The values at `positions` (any order, repeats allowed), the blocks they fall in
        read a run at a time."""
        positions = np.asarray(positions)
        if positions.dtype == bool:
            positions = np.flatnonzero(positions)
        flat = positions.astype(np.int64).ravel()
        if flat.size and (int(flat.min()) < -self.size or int(flat.max()) >= self.size):
            raise IndexError(f"positions outside 0 .. {self.size - 1}")
        flat = np.where(flat < 0, flat + self.size, flat)
        out = np.empty(flat.size, self.dtype)
        for got, where, asked in self._gathered(flat // STRIDE):
            out[asked] = got[where(asked) + flat[asked] % STRIDE]
        return out.reshape(positions.shape)

    def _gathered(
        self, block: np.ndarray
    ) -> Iterator[tuple[np.ndarray, Callable[[np.ndarray], np.ndarray], np.ndarray]]:
        """The blocks `block` names (one a query, any order), read in chunks of up to
        twice `_CHUNK_BLOCKS` blocks: (the chunk's values, the place in them of the first
        value of the block of each query given, the queries in the chunk). A chunk is runs
        of blocks in order, a `pread` each, a gap of up to `_GAP_BLOCKS` unasked blocks
        read rather than skipped (a read costs about what 32 KiB more of it does): so a
        chunk's values are a sorted vector's values in order, still sorted."""
        order = np.argsort(block, kind="stable")
        ordered = block[order]
        needed = np.unique(ordered)
        if not needed.size:
            return
        # Runs: needed blocks closer than the gap joined, cut at `_CHUNK_BLOCKS`; a chunk:
        # the runs that start in one window of `_CHUNK_BLOCKS` blocks (at most twice that).
        cut = np.flatnonzero(np.diff(needed) > _GAP_BLOCKS + 1) + 1
        firsts = needed[np.concatenate([[0], cut])]
        lasts = needed[np.concatenate([cut - 1, [needed.size - 1]])] + 1
        pieces = -(-(lasts - firsts) // _CHUNK_BLOCKS)
        firsts = np.repeat(firsts, pieces) + _CHUNK_BLOCKS * (
            np.arange(int(pieces.sum())) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        )
        lasts = np.minimum(np.repeat(lasts, pieces), firsts + _CHUNK_BLOCKS)
        sizes = lasts - firsts
        before = np.cumsum(sizes) - sizes
        chunk_of = before // _CHUNK_BLOCKS
        bounds = np.flatnonzero(np.diff(chunk_of)) + 1
        width, fd = self.dtype.itemsize, self._file.fd
        for i, j in zip([0, *bounds.tolist()], [*bounds.tolist(), firsts.size], strict=True):
            lo_run, hi_run = firsts[i:j], lasts[i:j]
            at = (before[i:j] - before[i]) * STRIDE  # where each run starts in the chunk
            values_lo = lo_run * STRIDE
            values_hi = np.minimum(hi_run * STRIDE, self.size)
            got = np.empty(int(values_hi[-1] - values_lo[-1] + at[-1]), self.dtype)
            view = memoryview(got).cast("B")
            for place, a, b in zip(
                (at * width).tolist(), values_lo.tolist(), values_hi.tolist(), strict=True
            ):
                read_into(fd, view[place : place + (b - a) * width], self._at + a * width)
            q_lo = np.searchsorted(ordered, lo_run[0], "left")
            q_hi = np.searchsorted(ordered, hi_run[-1] - 1, "right")

            def where(q: np.ndarray, firsts: np.ndarray = lo_run, at: np.ndarray = at) -> Any:
                run = np.searchsorted(firsts, block[q], "right") - 1
                return at[run] + (block[q] - firsts[run]) * STRIDE

            yield got, where, order[q_lo:q_hi]


class SortedVector(FileVector):
    """A `FileVector` of ascending values, searched through its sparse index."""

    _sparse: np.ndarray | None = None  # (an instance's own once saved or read)

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> Any:
        """`FileVector.of`, each vector with its sparse index as saved beside the file
        (`save_sparse`), so that opening reads none of the file itself; an older save
        without one has its sparse index read on the first search."""
        got = super().of(path)
        sparse_path = sparse_file(Path(path))
        if sparse_path.exists():
            vectors = list(got) if isinstance(got, FileRows) else [got]
            saved = np.load(sparse_path)
            if vectors:
                for vector, row in zip(vectors, saved.reshape(len(vectors), -1), strict=True):
                    vector._sparse = row
        return got

    @property
    def sparse(self) -> np.ndarray:
        """Every `STRIDE`-th value: as saved, or read on the first search (a `pread` each:
        a read of every page of a file of int64 keys)."""
        if self._sparse is None:
            out = np.empty((self.size + STRIDE - 1) // STRIDE, self.dtype)
            width = self.dtype.itemsize
            for b in range(out.size):
                got = os.pread(self._file.fd, width, self._at + b * STRIDE * width)
                out[b] = np.frombuffer(got, self.dtype)[0]
            self._sparse = out
        return self._sparse

    def searchsorted(self, v: Any, side: str = "left", sorter: Any = None) -> Any:
        """`np.searchsorted` of the vector (which `np.searchsorted(vector, v)` calls)."""
        if sorter is not None:
            raise ValueError("a saved sorted vector is searched without a sorter")
        values = np.asarray(v)
        got = self.bounds(values.ravel(), (side,))[0]
        return got.reshape(values.shape) if values.ndim else got[0]

    def bounds(
        self, values: np.ndarray, sides: tuple[str, ...] = ("left", "right")
    ) -> list[np.ndarray]:
        """`searchsorted(values, side)` for each of `sides`, the blocks read once for all."""
        values = np.asarray(values).ravel()
        out = [np.zeros(values.size, np.int64) for _ in sides]
        if not self.size or not values.size:
            return out
        sparse = self.sparse
        # Value v's answer on a side lies in the block before the first sparse value past
        # it on that side (block 0 when none is): one block a value and side. The blocks a
        # chunk holds are in order, so one search of the chunk finds each answer, which is
        # then counted from its own block's first value.
        blocks = [np.maximum(np.searchsorted(sparse, values, s) - 1, 0) for s in sides]
        both = np.concatenate(blocks)
        n = values.size
        for got, where, asked in self._gathered(both):
            for k, side in enumerate(sides):
                mine = asked[(asked >= k * n) & (asked < (k + 1) * n)]
                if not mine.size:
                    continue
                place = np.searchsorted(got, values[mine - k * n], side) - where(mine)
                out[k][mine - k * n] = both[mine] * STRIDE + place
        return out


class FileRows(list[Any]):
    """The rows of a 2-D `.npy` file, each a vector (a band table a row): indexed by row,
    with the matrix's `shape` and `size`."""

    def __init__(self, rows: list[Any], width: int) -> None:
        super().__init__(rows)
        self.shape = (len(rows), width)
        self.size = len(rows) * width


def in_blocks(values: Any, rows: int = 1 << 18) -> Iterator[tuple[int, np.ndarray]]:
    """Every value of an array in memory or of a vector read by blocks, `rows` at a time:
    (first position, values); for a vector, a block in memory at a time."""
    if isinstance(values, FileVector):
        yield from values.blocks(rows)
        return
    for lo in range(0, len(values), rows):
        yield lo, np.asarray(values[lo : lo + rows])


def whole(values: Any) -> np.ndarray:
    """Every value of an array in memory, a vector read by blocks or the rows of a matrix
    (`FileRows`), as one array in memory: for what is small, or a test's check."""
    if isinstance(values, FileRows):
        return np.stack([whole(row) for row in values]) if len(values) else np.empty(values.shape)
    if isinstance(values, FileVector):
        return values.read(0, values.size)
    return np.asarray(values)


def sparse_file(path: Path) -> Path:
    """Where the sparse index of a sorted `.npy` file is saved (`STRIDE` in its name: an
    index of another stride is not this one's)."""
    return path.with_name(f"{path.stem}.sparse-{STRIDE}.npy")


def save_sparse(path: Path) -> None:
    """Save the sparse index of a sorted `.npy` file (of each row of a 2-D one) beside it:
    a save writes it once, so that no opening reads the file to make it."""
    got = SortedVector.of(path)
    rows = got if isinstance(got, FileRows) else [got]
    if rows:
        np.save(sparse_file(path), np.stack([row.sparse for row in rows]))
