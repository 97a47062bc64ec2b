"""A committed version read from its segments, and segments merged: the newest row of each
page and group over the segments a manifest names (`read_state`, `read_committed`), and
the merge plan that keeps their number logarithmic in the index's size (`merge_plan`,
`write_merged`).
"""

from __future__ import annotations

import mmap
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.index.memory import return_freed
from neardup.index.state.arrays import (
    RowBlocks,
    Stacked,
    rows_read,
)
from neardup.index.state.updates import ServiceError
from neardup.kernels.sorting import last_of

if sys.platform != "win32":
    pass

from neardup.index.files.saves import _write_segment, write_segment
from neardup.index.files.store import (
    GROUP_SCHEMA,
    PAGE_SCHEMA,
    Manifest,
    Segment,
    _conform,
    _read_parquet,
    empty_segment,
    read_manifest,
    read_segment,
    segment_version,
)

_BLOCK = 65_536  # rows of a segment's tables read and written at a time by a merge
# Rows of its matrices gathered at a time: 8 MiB of sketches, read, picked and written.
_MATRIX_BLOCK = 16_384


def write_merged(store: Path, name: str, names: list[str], drop_deleted: bool) -> int:
    """The segments `names` merged (`merged`) and written as segment `name`, a block of
    rows at a time: the newest row of each page found from the slot column alone, and of
    each group from its id column; the page and group rows then read from each segment's
    file batch by batch and filtered, the matrices' rows read from their files (not their
    maps, so what was read is not left resident). A merge reaches an eighth of the index's
    rows: one that held them whole, its group rows or its half a gigabyte of sketches, was
    the peak of an add at ten million pages. Returns its page rows."""
    if len(names) == 1:
        seg = read_segment(store, names[0])
        write_segment(store, name, merged([seg], drop_deleted))
        return seg.pages.num_rows
    files = [store / n / "pages.parquet" for n in names]
    keys = pa.concat_tables([_read_parquet(f, PAGE_SCHEMA, ("slot",)) for f in files])
    if keys.column("slot").null_count:  # an older neardup's rows: by URL
        keys = pa.concat_tables([_read_parquet(f, PAGE_SCHEMA, ("slot", "url")) for f in files])
    keep = np.zeros(keys.num_rows, bool)
    keep[_newest_pages(keys)] = True
    rows = np.flatnonzero(keep)
    del keys
    group_files = [store / n / "groups.parquet" for n in names]
    sigs = [np.load(store / n / "signatures.npy", mmap_mode="r") for n in names]
    lens = [np.load(store / n / "dim_lengths.npy", mmap_mode="r") for n in names]
    blocks = RowBlocks(
        {
            "signatures": ((rows.size, sigs[0].shape[1]), sigs[0].dtype),
            "dim_lengths": ((rows.size, lens[0].shape[1]), lens[0].dtype),
        },
        (
            (
                _gather(sigs, rows[lo : lo + _MATRIX_BLOCK]),
                _gather(lens, rows[lo : lo + _MATRIX_BLOCK]),
            )
            for lo in range(0, rows.size, _MATRIX_BLOCK)
        ),
    )
    pages = _kept_rows(files, PAGE_SCHEMA, keep)
    groups = _kept_rows(group_files, GROUP_SCHEMA, _newest_group_rows(group_files, drop_deleted))
    _write_segment(store, name, pages, [blocks], groups)
    return int(rows.size)


def _newest_group_rows(files: list[Path], drop_deleted: bool) -> np.ndarray:
    """Which rows of the group files (read one after the other) `_newest_groups` keeps,
    found from their ids and whether each has a winner, read a batch at a time."""
    ids, alive = [], []
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(_BLOCK, columns=["group_id", "winner_url"]):
            ids.append(batch.column(0).to_numpy())
            alive.append(batch.column(1).is_valid().to_numpy(False))
    keep = np.zeros(sum(a.size for a in ids), bool)
    if keep.size:
        rows = _newest_group_positions(np.concatenate(ids), np.concatenate(alive), drop_deleted)
        keep[rows] = True
    return keep


def _kept_rows(files: list[Path], schema: pa.Schema, keep: np.ndarray) -> Iterator[pa.Table]:
    """The rows of Parquet files read one after the other where `keep` (over all their
    rows, in file order) says so, a batch at a time."""
    at = 0
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=_BLOCK):
            part = _conform(pa.Table.from_batches([batch]), schema)
            yield part.filter(pa.array(keep[at : at + part.num_rows]))
            at += part.num_rows


def merged(segs: list[Segment], drop_deleted: bool, after: int | None = None) -> Segment:
    """Segments read as one, the newest row of each page and group winning; deleted groups
    are dropped when `drop_deleted` (the merge reaches the oldest segment). With `after`,
    only the page rows of a later version, picked in the same pass (the rows written since
    a save: picking them from the merged rows copied every row twice, URLs included)."""
    if len(segs) == 1:  # a segment holds each page and group once
        one = segs[0]
        if drop_deleted:
            one.groups = one.groups.filter(one.groups.column("winner_url").is_valid())
        if after is None:
            return one
        newer = _newer(one.pages, np.arange(one.pages.num_rows), after)
        if newer.size == one.pages.num_rows:
            return one
        return Segment(
            _picked(one.pages, newer),
            rows_read(one.signatures, newer),
            rows_read(one.dim_lengths, newer),
            one.groups,
        )
    pages = pa.concat_tables([s.pages for s in segs])
    groups = _newest_groups(pa.concat_tables([s.groups for s in segs]), drop_deleted)
    rows = np.sort(_newest_pages(pages))  # in segment order (a page table reads by slot)
    if after is not None:
        rows = _newer(pages, rows, after)
    if pages.column("slot").null_count:  # an older neardup's rows (by URL): one copy
        sigs = _gather([s.signatures for s in segs], rows)
        lens = _gather([s.dim_lengths for s in segs], rows)
        return Segment(_picked(pages, rows), sigs, lens, groups)
    return Segment(
        _picked(pages, rows),
        Stacked([_plain(s.signatures) for s in segs], rows),
        Stacked([_plain(s.dim_lengths) for s in segs], rows),
        groups,
    )


def _newer(pages: pa.Table, rows: np.ndarray, after: int) -> np.ndarray:
    """Those of `rows` (ascending) whose page row is of a version after `after`."""
    version = pages.column("version").fill_null(0).to_numpy()
    return rows[version[rows] > after]


def _picked(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """Rows `rows` (ascending) of `table`: a filter, which Arrow does in one pass over
    each chunk (a take of the same rows across chunks took 0.01 to 0.4 s a million)."""
    keep = np.zeros(table.num_rows, bool)
    keep[rows] = True
    return table.filter(pa.array(keep))


def _plain(m: np.ndarray | Stacked) -> np.ndarray:
    """A segment's matrix as read (`read_segment`: never `Stacked`)."""
    assert isinstance(m, np.ndarray)
    return m


def _newest_groups(groups: pa.Table, drop_deleted: bool) -> pa.Table:
    """The last row of each group (rows in segment order), deleted groups out when
    `drop_deleted`."""
    ids = groups.column("group_id").to_numpy()
    alive = groups.column("winner_url").is_valid().to_numpy(False)
    return _picked(groups, _newest_group_positions(ids, alive, drop_deleted))


def _newest_group_positions(ids: np.ndarray, alive: np.ndarray, drop_deleted: bool) -> np.ndarray:
    """The rows (ascending) of the last row of each group id of `ids` (rows in segment
    order), those whose group has no winner (`alive` false: deleted) out when
    `drop_deleted`."""
    rows = np.sort(last_of(ids))
    return rows[alive[rows]] if drop_deleted else rows


def _gather(parts: list[np.ndarray], rows: np.ndarray) -> np.ndarray:
    """Rows `rows` (ascending, numbered across `parts`) of the stacked matrices, read from
    each part in turn without stacking them first, `_MATRIX_BLOCK` rows at a time. A part mapped
    read-only (a merge's, `write_merged`) is read from its file, the span of a block's rows
    at once (a merge keeps most rows, in order), so that a long-lived writer is not left
    holding what it read in the maps; a copy-on-write map (opening's, `read_segment`) is
    read through the map, one copy fewer, and dropped once the index is open."""
    starts = np.concatenate([[0], np.cumsum([p.shape[0] for p in parts])])
    out = np.empty((rows.size, parts[0].shape[1]), dtype=parts[0].dtype)
    for lo in range(0, rows.size, _MATRIX_BLOCK):
        block = rows[lo : lo + _MATRIX_BLOCK]
        cuts = np.searchsorted(block, starts)
        for i, part in enumerate(parts):
            a, b = int(cuts[i]), int(cuts[i + 1])
            if b > a:
                at = block[a:b] - starts[i]
                first = int(at[0])
                out[lo + a : lo + b] = _span(part, first, int(at[-1]) + 1)[at - first]
    return out


def _span(part: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Rows lo .. hi-1 of a matrix; of a file's read-only map, read from the file."""
    # Only a whole file's map: a slice of a `np.memmap` keeps the map's offset, not its own.
    if (
        isinstance(part, np.memmap)
        and part.mode == "r"
        and isinstance(part.base, mmap.mmap)
        and part.filename
    ):
        width = part.shape[1]
        offset = part.offset + lo * width * part.dtype.itemsize
        got = np.fromfile(part.filename, part.dtype, (hi - lo) * width, offset=offset)
        return got.reshape(hi - lo, width)
    return part[lo:hi]


def _newest_pages(pages: pa.Table) -> np.ndarray:
    """The position of the last row of each page in `pages` (rows in segment order): by its
    slot, which a page keeps for good (one sort of integers), or by URL for the rows of an
    older neardup that have none (a hash aggregation over strings, several times slower)."""
    slots = pages.column("slot")
    if slots.null_count or not pages.num_rows:
        at = pa.array(np.arange(pages.num_rows, dtype=np.int64))
        return _newest(pages.append_column("_row", at), "url")
    return last_of(slots.to_numpy())


def _newest(table: pa.Table, key: str) -> np.ndarray:
    """The position of the last row of each `key` in `table` (its `_row` column)."""
    last = table.group_by(key, use_threads=False).aggregate([("_row", "max")])
    return last.column("_row_max").to_numpy()


def read_state(store: Path, manifest: Manifest, after: int | None = None) -> Segment:
    """The committed state of `manifest`: every page and group once, deleted groups out.
    With `after` (a saved index's version, `ServiceIndex`), only what was written since:
    the segments that may hold a row newer than it, and of those only the page rows of a
    later version; their group rows all, deletions included (a group row written before
    `after` is the state the saved index holds already)."""
    names = manifest.segments
    if after is not None:
        names = [name for name in names if segment_version(name) > after]
    segs = [read_segment(store, name) for name in names]
    if not segs:
        return empty_segment(
            int(manifest.meta.get("num_perm", 0)), int(manifest.meta.get("dims", 1))
        )
    state = merged(segs, drop_deleted=after is None, after=after)
    del segs  # the rows read and not kept (a merge picks the newest), given back now:
    return_freed()  # Parquet's decoding left about 1.7x the rows it read in Arrow's pool
    return state


T = TypeVar("T")  # what a reader reads of a version beside its state (`read_committed`)


def read_committed(
    store: Path,
    fallback: Manifest,
    also: Callable[[Manifest, Segment], T] | None = None,
    after: Callable[[Manifest], int | None] | None = None,
) -> tuple[Manifest, Segment, T | None]:
    """The last committed version, its state, and what `also(manifest, state)` reads of the
    version's other files (None without it). A writer may commit a merge (or save a graph)
    and delete the files it replaced between our reading the manifest and its files; then
    the newer manifest is read (a reader never takes the writer's lock), also when `also`
    raises FileNotFoundError. `fallback` stands for a store with none yet. With `after`,
    the state is only what was written after the version it names (`read_state`)."""
    for _ in range(100):
        manifest = read_manifest(store) or fallback
        try:
            state = read_state(store, manifest, after(manifest) if after is not None else None)
            return manifest, state, also(manifest, state) if also is not None else None
        except FileNotFoundError:
            time.sleep(0.01)
    raise ServiceError(f"{store}: its files keep changing under this reader; try again")


FANOUT = 4  # segments of one size class merged at a time


def merge_plan(rows: list[int]) -> int:
    """How many of the newest segments to merge into one after a batch (0 or >= 2).

    Tiered, as log-structured stores do: segments fall into size classes (powers of
    `FANOUT`); once the newest `FANOUT` segments are of one class they are merged, and the
    result may complete a run of the next class, merged in the same step. A store of n rows
    written in batches of b thus holds at most about (FANOUT - 1) log_FANOUT(n / b) segments,
    and a row is rewritten about log_FANOUT(n / b) times."""
    sizes = list(rows)
    k = 0
    while True:
        cls = _size_class(sizes[-1]) if sizes else 0
        run = 0
        while run < len(sizes) and _size_class(sizes[-1 - run]) <= cls:
            run += 1
        if run < FANOUT:
            return k
        k = run if k == 0 else k + run - 1  # the merged one stands for k segments
        sizes[-run:] = [sum(sizes[-run:])]


def _size_class(rows: int) -> int:
    return int(np.log(max(rows, 1)) / np.log(FANOUT))
