"""The saves of the index's arrays (`graph-N/`: the scan graph, the pages, the groups and
winners, as `.npy` files mapped on opening): written group by group as the state yields
them (`RowBlocks`, `PatchedRows`, `FilledInPlace`), flushed and renamed into place, and
read back as maps.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.index.state.arrays import (
    FilledInPlace,
    Linked,
    PatchedRows,
    RowBlocks,
)
from neardup.kernels.sorting import consecutive_runs
from neardup.npy_files import header, write_header
from neardup.store.file_vectors import FileVector, SortedVector, save_sparse, sparse_file
from neardup.store.rows import file_map

if sys.platform != "win32":
    pass

from neardup.index.files.store import (
    GRAPH_SLEEP_HOOK,
    GROUP_SCHEMA,
    PAGE_SCHEMA,
    PARTED,
    SLEEP_HOOK,
    TX_MARKER,
    Arrays,
    Segment,
    _flush_and_rename,
    _parts,
    _save_npy,
    part_file,
)

# The saved sorted arrays searched for a batch's keys, and the values beside them: read by
# blocks with `pread` (`store/file_vectors.py`), not mapped, so that what the searches read
# does not stay in the process's memory (1.33 GB of the band keys' map at ten million pages).
BY_BLOCKS: dict[str, type[FileVector]] = {
    "band_keys": SortedVector,
    "band_slots": FileVector,
    "cls_fp": SortedVector,
    "cls_slot": FileVector,
    "page_skeys": SortedVector,
    "page_sslots": FileVector,
    "group_gid": SortedVector,
    "group_slot": FileVector,
    "group_ids": SortedVector,
    "group_sizes": FileVector,
    "winner_gid": SortedVector,
    "winner_row": FileVector,
}

# The band index's delta in a `changes-N/` folder (`band_buckets.TakenRun`), read the same
# way: searched through maps, its tables stayed resident (43 MB at ten million pages,
# and as much again of its keys by node when a writer's close read them). Its keys by
# node (`node_keys`, a row of keys a node) are read as one flat vector. Its nodes
# (`node_slots`, 8 bytes a node) stay a map: they are searched a node at a time (a
# removal's), which a read by blocks made a `pread` each, and three times slower.
CHANGES_BY_BLOCKS: dict[str, type[FileVector]] = {
    "delta_keys": SortedVector,
    "delta_slots": FileVector,
}
FLAT_VECTORS = ("node_keys",)

# Rows of a partition of the saved sketches and length vectors (32 MB of 128-value
# sketches): a save links a partition whose rows did not change since the save before.
PART_ROWS = 1 << 16


def write_arrays(store: Path, name: str, arrays: Arrays, hook: bool = False) -> None:
    """A folder of `.npy` files written completely (under a temporary name, flushed, then
    renamed); it counts only once a manifest committed after it names it. `arrays` yields
    (file name, array) pairs or `RowBlocks`, each written before the next is made."""
    final = store / name
    tmp = store / f"{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(final, ignore_errors=True)  # a leftover of a killed writer
    tmp.mkdir()
    _save_all(tmp, arrays)
    sorted_ones = {**BY_BLOCKS, **CHANGES_BY_BLOCKS}
    for key, vector in sorted_ones.items():  # the sorted ones' sparse indexes, beside them
        path = tmp / f"{key}.npy"
        # (a linked file came with its own: made again, it would read the whole file)
        if vector is SortedVector and path.exists() and not sparse_file(path).exists():
            save_sparse(path)
    _flush_and_rename(tmp, final)
    delay = os.environ.get(GRAPH_SLEEP_HOOK) if hook else None
    if delay:
        print(TX_MARKER, flush=True)
        time.sleep(float(delay))


def _save_all(folder: Path, arrays: Arrays) -> None:
    for item in arrays:
        if isinstance(item, RowBlocks):
            _save_blocks(folder, item)
        elif isinstance(item, PatchedRows):
            _save_patched(folder, item)
        elif isinstance(item, Linked):
            for source in item.files:
                _link(source, folder / source.name)
        elif isinstance(item, FilledInPlace):
            for key, (shape, dtype) in item.specs.items():
                with open(folder / f"{key}.npy", "wb") as fh:
                    start = write_header(fh, dtype, shape)
                    fh.truncate(start + int(np.prod(shape)) * np.dtype(dtype).itemsize)
            item.fill(folder)
        else:
            _save_npy(folder / f"{item[0]}.npy", item[1])


def _link(source: Path, target: Path) -> None:
    """`source` as `target`: the same file (a hard link), or a copy where the file system
    offers no links. Saved files are never changed in place, so two saves may share one."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


_PATCH_BLOCK = 8192  # rows read and written at a time


def _save_patched(folder: Path, m: PatchedRows) -> None:
    """The files of `m` (see `PatchedRows`), a partition at a time."""
    dtype = np.dtype(m.dtype)
    row_bytes = m.width * dtype.itemsize
    kept = min(m.source_rows, m.filled) if m.source is not None else 0
    before = _parts(m.source, m.name) if kept and m.source is not None else []
    headers = [header(p) for p in before]  # (rows, where its data starts) of each
    starts = np.cumsum([0, *(rows for rows, _ in headers)]).tolist()  # first rows, the end
    part_rows = m.part_rows or PART_ROWS
    for i, lo in enumerate(range(0, m.rows, part_rows) or [0]):  # (no row: one empty)
        hi = min(lo + part_rows, m.rows)
        copy_hi = max(lo, min(hi, kept))  # rows lo .. copy_hi - 1 come from the save before
        changed = m.changed[(m.changed >= lo) & (m.changed < copy_hi)]
        slots = np.concatenate([changed, np.arange(max(lo, kept), min(hi, m.filled))])
        path = part_file(folder, m.name, i)
        if copy_hi == hi and not slots.size and lo in starts and hi in starts:
            j = starts.index(lo)
            if starts[j + 1] == hi:  # the same rows, unchanged: the same file
                with contextlib.suppress(OSError):  # (no links here: copied below)
                    os.link(before[j], path)
                    continue
        with open(path, "wb") as fh:
            start = write_header(fh, dtype, (hi - lo, m.width))
            for j, source in enumerate(before):  # the rows lo .. copy_hi - 1 it holds
                a, b = max(lo, starts[j]), min(copy_hi, starts[j + 1])
                if a >= b:
                    continue
                with open(source, "rb") as src:
                    at = headers[j][1] + (a - starts[j]) * row_bytes
                    _copy_range(
                        src.fileno(),
                        at,
                        fh.fileno(),
                        start + (a - lo) * row_bytes,
                        (b - a) * row_bytes,
                    )
            for a in range(0, slots.size, _PATCH_BLOCK):
                block = slots[a : a + _PATCH_BLOCK]
                got = np.ascontiguousarray(m.read(block), dtype)
                for x, y in consecutive_runs(block):  # a run of slots: one write
                    offset = start + int(block[x] - lo) * row_bytes
                    os.pwrite(fh.fileno(), got[x:y].tobytes(), offset)
            fh.truncate(start + (hi - lo) * row_bytes)  # rows after `filled`: zeros (a hole)


def _copy_range(src: int, src_at: int, dst: int, dst_at: int, size: int) -> None:
    """`size` bytes from one file to another, by the kernel where it can."""
    while size > 0:
        try:
            done = os.copy_file_range(src, dst, size, src_at, dst_at)
        except OSError:  # a file system that does not offer it: through this process
            done = len(data := os.pread(src, min(size, 1 << 24), src_at))
            os.pwrite(dst, data, dst_at)
        if done <= 0:
            raise OSError("the saved file is shorter than its header says")
        src_at, dst_at, size = src_at + done, dst_at + done, size - done


def _save_blocks(folder: Path, rows: RowBlocks) -> None:
    """The files of `rows`: each `.npy` header, then the blocks' bytes in order (a C-order
    array is its first axis' blocks one after the other); the rows written must add up to
    each shape's first axis."""
    with contextlib.ExitStack() as stack:
        files = []
        for key, (shape, dtype) in rows.specs.items():
            fh = stack.enter_context(open(folder / f"{key}.npy", "wb"))
            write_header(fh, dtype, shape)
            files.append((fh, shape, np.dtype(dtype)))
        written = [0] * len(files)
        for blocks in rows.blocks:
            for i, ((fh, shape, dtype), block) in enumerate(zip(files, blocks, strict=True)):
                if block.shape[1:] != tuple(shape[1:]):
                    raise ValueError(f"a block of {block.shape} for an array of {shape}")
                fh.write(np.ascontiguousarray(block, dtype).data)  # no copy as `bytes`
                written[i] += block.shape[0]
        for (_, shape, _), n in zip(files, written, strict=True):
            if n != shape[0]:
                raise ValueError(f"{n} rows written of an array of {shape}")


def read_arrays(
    store: Path, name: str, names: tuple[str, ...], writable: bool = False, by_blocks: bool = True
) -> dict[str, Any]:
    """The `.npy` files `names` of a folder, memory-mapped read-only (`writable`:
    copy-on-write, what is changed goes to private pages, never to the file): opening reads
    none of them, and a mapping outlives the folder's removal by a writer that replaced it
    (a folder removed before it was mapped raises FileNotFoundError). A map a name, or for
    a matrix saved in partitions (`PARTED`) the list of its partitions' maps, in order; of
    a save's sorted arrays (`BY_BLOCKS`, with `by_blocks`: not for the same names in a
    `changes-N/` folder, which are not sorted), vectors read by blocks instead."""
    folder = store / name
    mode: Any = "c" if writable else "r"

    def mapped(path: Path) -> np.ndarray:
        # Plain array views of the maps: a `np.memmap` slice is a new memmap object each
        # time, several times slower to make than a view, and lookups slice them a lot.
        return np.load(path, mmap_mode=mode).view(np.ndarray)

    def opened(k: str) -> Any:
        if k in PARTED:  # maps whose rows are also read with `pread` (`rows.FileMap`)
            return [file_map(p, mode) for p in _parts(folder, k)]
        path = folder / f"{k}.npy"
        vector = BY_BLOCKS.get(k) if by_blocks else None
        if vector is not None:
            if not path.exists():
                raise FileNotFoundError(path)
            return vector.of(path)
        return mapped(path)

    return {k: opened(k) for k in names}


def read_vectors(store: Path, name: str, names: tuple[str, ...]) -> dict[str, Any]:
    """The files `names` of a `changes-N/` folder read by blocks (`CHANGES_BY_BLOCKS`: a
    vector a row of a 2-D file; `FLAT_VECTORS`: one vector of the whole file)."""
    folder = store / name
    out: dict[str, Any] = {}
    for k in names:
        path = folder / f"{k}.npy"
        out[k] = FileVector(path) if k in FLAT_VECTORS else CHANGES_BY_BLOCKS[k].of(path)
    return out


def write_segment(store: Path, name: str, seg: Segment, hook: bool = False) -> None:
    """Write a segment folder completely (under a temporary name, then renamed)."""
    matrices = [("signatures", seg.signatures), ("dim_lengths", seg.dim_lengths)]
    _write_segment(store, name, [seg.pages], matrices, [seg.groups], hook)


def _write_segment(
    store: Path,
    name: str,
    pages: Iterable[pa.Table],
    matrices: Arrays,
    groups: Iterable[pa.Table],
    hook: bool = False,
) -> None:
    """A segment folder from its page rows, matrices and group rows, the tables in blocks
    (a merge streams them: its rows are up to an eighth of the index)."""
    final = store / name
    tmp = store / f"{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    _write_tables(tmp / "pages.parquet", PAGE_SCHEMA, pages)
    _save_all(tmp, matrices)
    delay = os.environ.get(SLEEP_HOOK) if hook else None
    if delay:
        print(TX_MARKER, flush=True)
        print(TX_MARKER, file=sys.stderr, flush=True)
        time.sleep(float(delay))
    _write_tables(tmp / "groups.parquet", GROUP_SCHEMA, groups)
    _flush_and_rename(tmp, final)


def _write_tables(path: Path, schema: pa.Schema, blocks: Iterable[pa.Table]) -> None:
    with pq.ParquetWriter(path, schema, compression="snappy") as out:
        for block in blocks:
            out.write_table(block.cast(schema))
