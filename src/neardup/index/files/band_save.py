"""The band index saved a table at a time, each table by a writer of its own (issue 27).

A save folds the band index's two levels (`band_buckets.py`: the base mapped from the save
before, the delta of the nodes that entered since, the base nodes that left) into one base.
The tables are independent of one another: a table's new row is its old row without the
nodes that left, merged with the table's delta, both sorted by key. So each is written by
a task of its own into its place in files made at their full size beforehand
(`store.FilledInPlace`): on Spark by the executors, where the save's folder is (storage
every worker shares), so the process that applies batches neither reads the old band index
nor holds the new one, the largest part of a save (18 keys of 12 bytes a page); embedded,
one table after the other in this process. A task reads the old save's row in blocks and
writes the new one as it goes, so its memory is a block's, not a table's.

What a task needs beyond the old save's files (the delta and the slots that left, a few
arrays the size of what changed since the save) the saving process writes into the new
folder's `DELTA` subfolder first; it is removed once the tables are written, before the
folder is flushed and renamed.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from neardup.index.state.arrays import BandDelta, BandWriter
from neardup.npy_files import data_start
from neardup.store.file_vectors import FileVector

DELTA = "band-delta"  # in the folder being saved, while its tables are written
BAND_FILES = ("band_keys", "band_slots")
_BLOCK = 1 << 22  # entries of the old row read and written at a time (48 MB)

# Writes the tables `range(tables)` of the band index into `folder` from the save `before`
# (None: no save before) and `folder / DELTA`: one after the other here (`fill_tables`),
# or elsewhere (`spark_jobs.band_tables_on_spark`).
TableWriter = Callable[[Path, Path | None, int], None]


def write_delta(
    folder: Path,
    delta_keys: list[np.ndarray],
    delta_slots: list[np.ndarray],
    left: np.ndarray,
    base_width: int,
    width: int,
) -> None:
    """What the table writers need beyond the save before: each table's delta (every node of
    the delta is in every table once, so they stack into (tables, nodes) matrices), the base
    slots that left (sorted), and the widths of the old row and of the new one (checked by
    each writer against the files it reads and writes)."""
    out = folder / DELTA
    out.mkdir()
    np.save(out / "keys.npy", np.stack(delta_keys).astype(np.int64))
    np.save(out / "slots.npy", np.stack(delta_slots).astype(np.int32))
    np.save(out / "left.npy", np.asarray(left, np.int64))
    (out / "widths.json").write_text(json.dumps({"base": base_width, "new": width}))


def fill_tables(folder: Path, before: Path | None, tables: int) -> None:
    """Each table written by this process, one after the other."""
    for t in range(tables):
        write_table(folder, before, t)


def filled(folder: Path, before: Path | None, tables: int, writer: TableWriter) -> None:
    """The band index's files in `folder` (made at their full size) filled by `writer`, then
    the delta removed (also when a writer failed: the folder is then a leftover)."""
    try:
        writer(folder, before, tables)
    finally:
        shutil.rmtree(folder / DELTA, ignore_errors=True)


def widths(folder: Path) -> dict[str, int]:
    """The entries of each table in the save before (`base`) and in this one (`new`)."""
    return json.loads((folder / DELTA / "widths.json").read_text())


def write_table(folder: Path, before: Path | None, t: int) -> None:
    """Table `t` of the save in `folder`: the row of the save `before` without the slots that
    left, merged with the table's delta (at equal keys the old entries first, as a stable
    sort of both would place them), written in place a block at a time and flushed."""
    delta = folder / DELTA
    wide = widths(folder)
    dk = np.load(delta / "keys.npy", mmap_mode="r")[t]  # (tables, nodes): never no table
    ds = np.load(delta / "slots.npy", mmap_mode="r")[t]
    left = np.load(delta / "left.npy")
    bk: Any = np.empty(0, np.int64)
    bs: Any = np.empty(0, np.int32)
    if wide["base"]:
        if before is None:
            raise ValueError("a band index with a base and no save to read it from")
        # Read a block at a time with `pread` (`file_vectors`), not mapped: a map left the
        # whole old table resident in the writing process (1.16 GB of a 4 M-page save).
        bk = FileVector.of(before / "band_keys.npy")[t]
        bs = FileVector.of(before / "band_slots.npy")[t]
    if bk.size != wide["base"]:
        raise ValueError(f"the save before holds {bk.size} entries a table, not {wide['base']}")
    width = int(wide["new"])
    fds = [os.open(folder / f"{name}.npy", os.O_WRONLY) for name in BAND_FILES]
    try:
        starts = [
            data_start(folder / f"{name}.npy") + t * width * size
            for name, size in zip(BAND_FILES, (8, 4), strict=True)
        ]
        done, taken = 0, 0  # entries written; delta entries taken
        for lo in range(0, max(bk.size, 1), _BLOCK):
            hi = min(lo + _BLOCK, bk.size)
            keys, slots = np.asarray(bk[lo:hi]), np.asarray(bs[lo:hi])
            if left.size and slots.size:
                live = ~np.isin(slots, left)
                keys, slots = keys[live], slots[live]
            # The delta's keys below the next block's first key go here (after this block's
            # equal keys); the last block takes the rest.
            upto = dk.size if hi >= bk.size else int(np.searchsorted(dk, bk[hi], side="left"))
            upto = max(upto, taken)
            new_k, new_s = np.asarray(dk[taken:upto]), np.asarray(ds[taken:upto])
            keys, slots = _merged(keys, slots, new_k, new_s)
            taken = upto
            for fd, start, values in zip(fds, starts, (keys, slots), strict=True):
                _pwrite_all(fd, values.tobytes(), start + done * values.itemsize)
            done += keys.size
        if done != width or taken != dk.size:
            raise ValueError(f"table {t}: {done} entries written of {width}")
        for fd in fds:
            os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)


def _merged(
    keys: np.ndarray, slots: np.ndarray, new_keys: np.ndarray, new_slots: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Two runs sorted by key merged into one (the first run's entries first at equal keys),
    the slots as int32."""
    if not new_keys.size:
        return keys.astype(np.int64, copy=False), slots.astype(np.int32, copy=False)
    n = keys.size + new_keys.size
    at = np.searchsorted(keys, new_keys, side="right") + np.arange(new_keys.size)
    old = np.ones(n, bool)
    old[at] = False
    out_k, out_s = np.empty(n, np.int64), np.empty(n, np.int32)
    out_k[at], out_s[at] = new_keys, new_slots
    out_k[old], out_s[old] = keys, slots
    return out_k, out_s


def _pwrite_all(fd: int, data: bytes, at: int) -> None:
    view = memoryview(data)
    while view:
        done = os.pwrite(fd, view, at)
        view, at = view[done:], at + done


def band_writer(tables: TableWriter = fill_tables) -> BandWriter:
    """The writer of a save's band index (`BandBuckets.saved`): the delta written beside
    the save, each table then written by `tables` (this process's `fill_tables`, or an
    engine's elsewhere), the delta removed."""

    def write(folder: Path, before: Path | None, delta: BandDelta) -> None:
        write_delta(folder, delta.keys, delta.slots, delta.left, delta.base_width, delta.width)
        filled(folder, before, delta.tables, tables)

    return write
