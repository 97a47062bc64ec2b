"""How the service index lies on disk: versioned column files named by a manifest.

Why: the index used to live in one DuckDB file. DuckDB holds a file lock per process, so a
second process (`neardup add` while `neardup serve` runs, a reader) ended in a traceback, and
the rows were not files another engine could read. Now the store folder holds:

    manifest.json           the committed version: its number, the settings, and the
                            segments that make it up, oldest first
    writer.lock             the one writer's lock (fcntl), holding its PID and command
    seg-000001/ ...         one segment per batch (or per merge of segments):
        pages.parquet       the page rows the batch rewrote (URL, group, flags, lengths)
        signatures.npy      their min-hash sketches, one (rows, num_perm) uint32 matrix
        dim_lengths.npy     their words per sub-dictionary, (rows, dims) int32
        groups.parquet      the group rows the batch rewrote; a null winner deletes one
    graph-000001/ ...       the index saved as of one version (the manifest's "graph"
                            names it and that version): the scan graph's sorted arrays
                            (`scangraph.ScanGraph.arrays`), the page table by slot, the
                            groups and winners (`.npy`), memory-mapped on opening
    changes-000001/ ...     the scan graph's changes since that save, written by a writer
                            that closed with rows to replay (`graph_changes.py`); the
                            manifest's "changes" names them with the save they are against

A save holds every row of the segments committed before it, so the version that commits it
names no segment (format 3; an index of format 2 kept them, and is written on as 3): the
index is on disk once, and the segments are what batches wrote since the last save. A
page's state is its row in the newest segment that holds it, else the save's (likewise a
group's). A batch
writes a new segment folder beside the others (`.tmp`, then renamed) and then the manifest
(written to a temporary file and `os.replace`d), so a reader sees the previous version or the
next, never half of one, and a kill at any moment leaves the last committed manifest: a
segment it does not name is a leftover, removed by the next writer. Segments are never
changed once written; the newest ones are merged into one, four of a size class at a time
(`merge_plan`: a store of n pages has at most about 3 log4(n / batch) segments, and each row
is rewritten about log4(n / batch) times), and a merge that reaches the oldest segment drops
deleted groups for good. Parquet and `.npy` are what the
Spark engine and DuckDB read without a translation step, as they read a scan's run.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import mmap
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.index.files.npy_files import header, write_header
from neardup.index.state.arrays import (
    FilledInPlace,
    PatchedRows,
    RowBlocks,
    Stacked,
    rows_read,
)
from neardup.index.state.updates import ServiceError

if sys.platform != "win32":
    import fcntl

MANIFEST = "manifest.json"
LOCK_NAME = "writer.lock"
# 1 was the DuckDB file (`LEGACY_DB`); 2 kept every page's row in a segment; 3 drops the
# segments a save holds (older neardups, which read only segments, refuse it by this number).
FORMAT = 3
READ_FORMATS = (2, 3)
LEGACY_DB = "service.duckdb"
SEG_PREFIX = "seg-"
GRAPH_PREFIX = "graph-"
CHANGES_PREFIX = "changes-"  # the graph's changes since its save (`graph_changes.py`)
# Test hook: seconds to sleep while a batch's segment is half written (pages written, groups
# not yet, manifest not yet), printing a marker first, so a test can kill the process there.
SLEEP_HOOK = "NEARDUP_SERVICE_SLEEP_IN_TX"
TX_MARKER = "neardup-service: inside transaction"
# Test hook: seconds to sleep once a graph folder is written and before the manifest naming
# it, printing `TX_MARKER` first, so a test can kill the process there.
GRAPH_SLEEP_HOOK = "NEARDUP_SERVICE_SLEEP_IN_GRAPH"

PAGE_SCHEMA = pa.schema(
    [
        ("url", pa.string()),
        ("group_id", pa.int64()),  # null for redirects and removed pages
        ("length", pa.int32()),  # distinct shingles
        ("has_signature", pa.bool_()),  # whether its row of signatures.npy is a sketch
        ("exact_fp", pa.int64()),
        ("redirect_to", pa.string()),
        ("links_in", pa.int32()),  # the page's own in-links
        ("verified", pa.bool_()),  # resemblance to its winner >= threshold (winners: true)
        ("removed", pa.bool_()),
        ("shingle_fp", pa.int64()),  # shingle-set fingerprint: the scan's classes
        ("page_key", pa.int64()),  # the scan's tie-break key (`url_key`), kept to skip rehashing
        ("n_tokens", pa.int32()),  # words, for the scan's min_tokens
        # The page's slot: its place in the page columns and the node id of the scan graph's
        # saved arrays, given once and never changed (null in files before the graph files).
        ("slot", pa.int64()),
        ("version", pa.int64()),  # the version whose batch wrote this row
    ]
)
GROUP_SCHEMA = pa.schema(
    [
        ("group_id", pa.int64()),
        ("winner_url", pa.string()),  # null: the group was deleted
        ("size", pa.int32()),
        ("failed", pa.int32()),  # losers that failed verification against the winner
    ]
)


class IndexBusy(ServiceError):
    """Another process holds the store's writer lock."""


@dataclass
class Segment:
    """The rows of one segment (or of several merged): pages with their matrices, groups."""

    pages: pa.Table
    signatures: np.ndarray | Stacked  # (len(pages), num_perm) uint32
    dim_lengths: np.ndarray | Stacked  # (len(pages), dims) int32
    groups: pa.Table


# Rows of a partition of the saved sketches and length vectors (32 MB of 128-value
# sketches): a save links a partition whose rows did not change since the save before.
PART_ROWS = 1 << 16
PARTED = ("page_sigs", "page_lens")  # the matrices saved in partitions (`PatchedRows`)


def part_file(folder: Path, name: str, i: int) -> Path:
    """The file of partition `i` of a matrix saved in partitions (`PatchedRows`)."""
    return folder / f"{name}.p{i:05d}.npy"


def _parts(folder: Path, name: str) -> list[Path]:
    """A saved matrix's files in order: its partitions, or the one file older saves wrote."""
    whole = folder / f"{name}.npy"
    if whole.is_file():
        return [whole]
    found = []
    while (p := part_file(folder, name, len(found))).is_file():
        found.append(p)
    if not found:
        raise FileNotFoundError(whole)
    return found


Arrays = Iterable[tuple[str, np.ndarray] | RowBlocks | PatchedRows | FilledInPlace]


@dataclass
class Manifest:
    """One committed version of the index."""

    version: int = 0
    segments: list[str] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)  # page rows of each segment
    meta: dict[str, Any] = field(default_factory=dict)  # settings, options, next_group, ...

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "version": self.version,
                "segments": self.segments,
                "rows": self.rows,
                **self.meta,
            },
            indent=1,
        )


def has_index(store: Path) -> bool:
    """Whether the folder holds an index (in this layout or the old one)."""
    return (store / MANIFEST).is_file() or (store / LEGACY_DB).is_file()


def read_manifest(store: Path) -> Manifest | None:
    """The last committed version, or None for a store that has none yet."""
    try:
        raw = json.loads((store / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise ServiceError(f"{store / MANIFEST}: unreadable ({err})") from None
    if raw.get("format") not in READ_FORMATS:
        raise ServiceError(
            f"{store / MANIFEST}: format {raw.get('format')!r}, not one of {READ_FORMATS}"
            " (an index written by a newer neardup?)"
        )
    meta = {k: v for k, v in raw.items() if k not in ("format", "version", "segments", "rows")}
    return Manifest(int(raw["version"]), list(raw["segments"]), list(raw["rows"]), meta)


def commit(store: Path, manifest: Manifest) -> None:
    """Make `manifest` the committed version: write it beside, flush it, rename it over."""
    tmp = store / f"{MANIFEST}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(manifest.to_json())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, store / MANIFEST)
    _fsync_dir(store)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ------------------------------------------------------------------ segments


def write_segment(store: Path, name: str, seg: Segment, hook: bool = False) -> None:
    """Write a segment folder completely (under a temporary name, then renamed)."""
    matrices = [("signatures", seg.signatures), ("dim_lengths", seg.dim_lengths)]
    _write_segment(store, name, [seg.pages], matrices, seg.groups, hook)


def write_merged(store: Path, name: str, names: list[str], drop_deleted: bool) -> int:
    """The segments `names` merged (`merged`) and written as segment `name`, a block of
    rows at a time: the newest row of each page found from the slot column alone, the page
    rows then read from each segment's file batch by batch and filtered, the matrices' rows
    read from their files (not their maps, so what was read is not left resident). A merge
    of a million pages held all their rows and their half a gigabyte of sketches once more.
    Returns its page rows."""
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
    group_rows = [_read_parquet(store / n / "groups.parquet", GROUP_SCHEMA) for n in names]
    groups = _newest_groups(pa.concat_tables(group_rows), drop_deleted)
    del group_rows
    sigs = [np.load(store / n / "signatures.npy", mmap_mode="r") for n in names]
    lens = [np.load(store / n / "dim_lengths.npy", mmap_mode="r") for n in names]
    blocks = RowBlocks(
        {
            "signatures": ((rows.size, sigs[0].shape[1]), sigs[0].dtype),
            "dim_lengths": ((rows.size, lens[0].shape[1]), lens[0].dtype),
        },
        (
            (_gather(sigs, rows[lo : lo + _BLOCK]), _gather(lens, rows[lo : lo + _BLOCK]))
            for lo in range(0, rows.size, _BLOCK)
        ),
    )
    _write_segment(store, name, _kept_rows(files, keep), [blocks], groups)
    return int(rows.size)


def _kept_rows(files: list[Path], keep: np.ndarray) -> Iterator[pa.Table]:
    """The rows of Parquet files read one after the other where `keep` (over all their
    rows, in file order) says so, a batch at a time."""
    at = 0
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=_BLOCK):
            part = _conform(pa.Table.from_batches([batch]), PAGE_SCHEMA)
            yield part.filter(pa.array(keep[at : at + part.num_rows]))
            at += part.num_rows


_BLOCK = 65_536  # rows of a segment's matrices gathered at a time by a merge


def _write_segment(
    store: Path,
    name: str,
    pages: Iterable[pa.Table],
    matrices: Arrays,
    groups: pa.Table,
    hook: bool = False,
) -> None:
    """A segment folder from its page rows (in blocks), matrices and group rows."""
    final = store / name
    tmp = store / f"{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    with pq.ParquetWriter(tmp / "pages.parquet", PAGE_SCHEMA, compression="snappy") as out:
        for block in pages:
            out.write_table(block.cast(PAGE_SCHEMA))
    _save_all(tmp, matrices)
    delay = os.environ.get(SLEEP_HOOK) if hook else None
    if delay:
        print(TX_MARKER, flush=True)
        print(TX_MARKER, file=sys.stderr, flush=True)
        time.sleep(float(delay))
    pq.write_table(groups, tmp / "groups.parquet", compression="snappy")
    _flush_and_rename(tmp, final)


def _flush_and_rename(tmp: Path, final: Path) -> None:
    """A folder written completely under `tmp`: each file flushed, then the folder renamed
    to `final` (made durable by the next commit's flush of the store's folder)."""
    for f in tmp.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    os.replace(tmp, final)


def _save_npy(path: Path, arr: np.ndarray) -> None:
    with open(path, "wb") as f:
        np.save(f, np.ascontiguousarray(arr))


def read_segment(store: Path, name: str) -> Segment:
    """One segment; the matrices are memory-mapped copy-on-write (a segment is never changed
    once written: a page table that adopts them writes its changes to private pages; and a
    mapping outlives the file's removal by a merge)."""
    folder = store / name
    return Segment(
        _read_parquet(folder / "pages.parquet", PAGE_SCHEMA),
        np.load(folder / "signatures.npy", mmap_mode="c"),
        np.load(folder / "dim_lengths.npy", mmap_mode="c"),
        _read_parquet(folder / "groups.parquet", GROUP_SCHEMA),
    )


def _read_parquet(path: Path, schema: pa.Schema, columns: tuple[str, ...] = ()) -> pa.Table:
    """One Parquet file, as written (`ParquetFile`, not `read_table`: that one loads the
    dataset layer and pandas, half a second of a command's start), or only its `columns`.
    Columns that files of an older neardup lack (`slot`, `version`) are read as nulls."""
    f = pq.ParquetFile(path)
    if columns:
        have = [c for c in columns if c in f.schema_arrow.names]
        return _conform(f.read(columns=have), pa.schema([schema.field(c) for c in columns]))
    return _conform(f.read(), schema)


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with `schema`'s columns in its order, those it lacks as nulls."""
    for name in schema.names:
        if name not in table.column_names:
            table = table.append_column(
                schema.field(name), pa.nulls(table.num_rows, schema.field(name).type)
            )
    return table.select(schema.names).cast(schema)


def merged(segs: list[Segment], drop_deleted: bool) -> Segment:
    """Segments read as one, the newest row of each page and group winning; deleted groups
    are dropped when `drop_deleted` (the merge reaches the oldest segment)."""
    if len(segs) == 1:  # a segment holds each page and group once
        one = segs[0]
        if drop_deleted:
            one.groups = one.groups.filter(one.groups.column("winner_url").is_valid())
        return one
    pages = pa.concat_tables([s.pages for s in segs])
    groups = _newest_groups(pa.concat_tables([s.groups for s in segs]), drop_deleted)
    rows = np.sort(_newest_pages(pages))  # in segment order (a page table reads by slot)
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
    grows = np.sort(_last_of(groups.column("group_id").to_numpy()))
    if drop_deleted:
        alive = groups.column("winner_url").is_valid().to_numpy(False)[grows]
        grows = grows[alive]
    return _picked(groups, grows)


def _gather(parts: list[np.ndarray], rows: np.ndarray) -> np.ndarray:
    """Rows `rows` (ascending, numbered across `parts`) of the stacked matrices, read from
    each part in turn without stacking them first, `_BLOCK` rows at a time. A part mapped
    read-only (a merge's, `write_merged`) is read from its file, the span of a block's rows
    at once (a merge keeps most rows, in order), so that a long-lived writer is not left
    holding what it read in the maps; a copy-on-write map (opening's, `read_segment`) is
    read through the map, one copy fewer, and dropped once the index is open."""
    starts = np.concatenate([[0], np.cumsum([p.shape[0] for p in parts])])
    out = np.empty((rows.size, parts[0].shape[1]), dtype=parts[0].dtype)
    for lo in range(0, rows.size, _BLOCK):
        block = rows[lo : lo + _BLOCK]
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
    return _last_of(slots.to_numpy())


def _last_of(ids: np.ndarray) -> np.ndarray:
    """The position of the last occurrence of each id in `ids`, in the ids' order (one
    stable sort of integers; Arrow's hash aggregation took twice as long)."""
    order = np.argsort(ids, kind="stable")  # one id's rows stay in segment order
    ordered = ids[order]
    last = np.ones(ordered.size, bool)
    last[:-1] = ordered[1:] != ordered[:-1]
    return order[last]


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
    state = merged(segs, drop_deleted=after is None)
    if after is None:
        return state
    version = state.pages.column("version").fill_null(0).to_numpy()
    newer = np.flatnonzero(version > after)
    if newer.size == version.size:
        return state
    return Segment(
        _picked(state.pages, newer),
        rows_read(state.signatures, newer),
        rows_read(state.dim_lengths, newer),
        state.groups,
    )


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


def empty_segment(num_perm: int, dims: int) -> Segment:
    return Segment(
        PAGE_SCHEMA.empty_table(),
        np.zeros((0, num_perm), np.uint32),
        np.zeros((0, dims), np.int32),
        GROUP_SCHEMA.empty_table(),
    )


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


def remove_leftovers(store: Path, manifest: Manifest | None) -> None:
    """Delete segment, graph and graph-changes folders the committed manifest does not name
    (a batch killed before its commit, a merge's inputs, a graph replaced by a newer one);
    only the writer calls this."""
    named = set(manifest.segments) if manifest else set()
    graph = graph_name(manifest)
    if graph is not None:
        named.add(graph)
    changes = manifest.meta.get("changes") if manifest else None
    if changes is not None:
        named.add(str(changes["name"]))
    for p in store.iterdir():
        if p.name.startswith((SEG_PREFIX, GRAPH_PREFIX, CHANGES_PREFIX)) and p.name not in named:
            shutil.rmtree(p, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        (store / f"{MANIFEST}.tmp").unlink()


def segment_name(version: int) -> str:
    return f"{SEG_PREFIX}{version:08d}"


def segment_version(name: str) -> int:
    """The newest version whose rows a segment may hold: a batch's own version, or for a
    merge the version it started from (it merges segments named up to it)."""
    return int(name[len(SEG_PREFIX) :].split("-")[0])


# ------------------------------------------------------------------ the scan graph's arrays


def graph_name(manifest: Manifest | None) -> str | None:
    """The graph folder the manifest names (None: it names none)."""
    got = manifest.meta.get("graph") if manifest is not None else None
    return None if got is None else str(got["name"])


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
        elif isinstance(item, FilledInPlace):
            for key, (shape, dtype) in item.specs.items():
                with open(folder / f"{key}.npy", "wb") as fh:
                    start = write_header(fh, dtype, shape)
                    fh.truncate(start + int(np.prod(shape)) * np.dtype(dtype).itemsize)
            item.fill(folder)
        else:
            _save_npy(folder / f"{item[0]}.npy", item[1])


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
                cuts = [0, *(np.flatnonzero(np.diff(block) != 1) + 1).tolist(), block.size]
                for x, y in itertools.pairwise(cuts):  # a run of slots: one write
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
                fh.write(np.ascontiguousarray(block, dtype).tobytes())
                written[i] += block.shape[0]
        for (_, shape, _), n in zip(files, written, strict=True):
            if n != shape[0]:
                raise ValueError(f"{n} rows written of an array of {shape}")


def read_arrays(
    store: Path, name: str, names: tuple[str, ...], writable: bool = False
) -> dict[str, Any]:
    """The `.npy` files `names` of a folder, memory-mapped read-only (`writable`:
    copy-on-write, what is changed goes to private pages, never to the file): opening reads
    none of them, and a mapping outlives the folder's removal by a writer that replaced it
    (a folder removed before it was mapped raises FileNotFoundError). A map a name, or for
    a matrix saved in partitions (`PARTED`) the list of its partitions' maps, in order."""
    folder = store / name
    mode: Any = "c" if writable else "r"

    def mapped(path: Path) -> np.ndarray:
        # Plain array views of the maps: a `np.memmap` slice is a new memmap object each
        # time, several times slower to make than a view, and lookups slice them a lot.
        return np.load(path, mmap_mode=mode).view(np.ndarray)

    return {
        k: [mapped(p) for p in _parts(folder, k)] if k in PARTED else mapped(folder / f"{k}.npy")
        for k in names
    }


# ------------------------------------------------------------------ the writer lock


class WriterLock:
    """The store's one writer: an exclusive lock on `writer.lock` (`flock`; on Windows a
    byte range past the text), which holds the holder's PID and command line so that a
    refused writer can say who holds it. The kernel drops the lock when its process ends,
    however it ends: a killed writer never leaves a stale lock."""

    def __init__(self, store: Path, wait: bool = False) -> None:
        self.path = store / LOCK_NAME
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _lock(self.fd, wait):
            holder = self.holder()
            os.close(self.fd)
            raise IndexBusy(
                f"{store} is being written by {holder}; send pages to that process "
                "(a running `neardup serve` takes POST /pages), wait for it (--wait), "
                "or open the index read-only"
            )
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)
        os.write(self.fd, json.dumps({"pid": os.getpid(), "command": _command()}).encode())

    def holder(self) -> str:
        """The holder as `PID n (command)`, from the lock file."""
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8") or "{}")
            return f"PID {raw['pid']} ({raw['command']})"
        except (OSError, ValueError, KeyError):
            return "another process"

    def release(self) -> None:
        if self.fd >= 0:
            os.ftruncate(self.fd, 0)
            _unlock(self.fd)
            os.close(self.fd)
            self.fd = -1


_WIN_LOCK_AT = 1 << 20  # the byte Windows locks: past any holder text, which stays readable


def _lock(fd: int, wait: bool) -> bool:
    """Take the exclusive lock on `fd`; False when another process holds it and not `wait`."""
    if sys.platform == "win32":
        import msvcrt

        while True:
            os.lseek(fd, _WIN_LOCK_AT, os.SEEK_SET)
            try:
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
                return True
            except OSError:
                if not wait:
                    return False
                time.sleep(0.2)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def _unlock(fd: int) -> None:
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, _WIN_LOCK_AT, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _command() -> str:
    try:
        raw = Path(f"/proc/{os.getpid()}/cmdline").read_bytes()
        words = [w.decode("utf-8", "replace") for w in raw.split(b"\0") if w]
    except OSError:
        words = list(sys.argv)
    return " ".join(words)[:300]


# ------------------------------------------------------------------ the old layout


def legacy_rows(db: Path) -> tuple[dict[str, str], pa.Table, pa.Table]:
    """The settings, page rows and group rows of an index written as one DuckDB file (the
    columns a store of an older neardup lacked come as nulls). DuckDB is imported here, for
    the one conversion, not by every command that opens an index (30 ms of its start)."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        settings = dict(con.execute("SELECT key, value FROM settings").fetchall())
        have = {r[0] for r in con.execute("DESCRIBE pages").fetchall()}
        types = {"dim_lengths": "INTEGER[]", "shingle_fp": "BIGINT", "n_tokens": "INTEGER"}
        extra = ", ".join(c if c in have else f"NULL::{t} AS {c}" for c, t in types.items())
        pages = con.sql(
            "SELECT url, group_id, length, signature, exact_fp, redirect_to, links_in, "
            f"verified, removed, {extra} FROM pages"
        ).to_arrow_table()
        groups = con.sql("SELECT group_id, winner_url, size, failed FROM groups").to_arrow_table()
    finally:
        con.close()
    return settings, pages, groups
