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
import json
import os
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.index.state.arrays import (
    FilledInPlace,
    PatchedRows,
    RowBlocks,
    Stacked,
)
from neardup.index.state.updates import ServiceError

if sys.platform != "win32":
    pass

MANIFEST = "manifest.json"
LOCK_NAME = "writer.lock"
# 1 was the DuckDB file (`LEGACY_DB`); 2 kept every page's row in a segment; 3 drops the
# segments a save holds (older neardups, which read only segments, refuse it by this number);
# 4: a save may keep the band index's base and write its changes beside it
# (`BandBuckets.saved`), which a neardup of format 3 would not read.
FORMAT = 4
READ_FORMATS = (2, 3, 4)
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


def empty_segment(num_perm: int, dims: int) -> Segment:
    return Segment(
        PAGE_SCHEMA.empty_table(),
        np.zeros((0, num_perm), np.uint32),
        np.zeros((0, dims), np.int32),
        GROUP_SCHEMA.empty_table(),
    )


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


def graph_name(manifest: Manifest | None) -> str | None:
    """The graph folder the manifest names (None: it names none)."""
    got = manifest.meta.get("graph") if manifest is not None else None
    return None if got is None else str(got["name"])


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
