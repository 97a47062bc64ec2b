"""The incremental duplicate index: pages, duplicate groups with winners, tier 1 and tier 2.

After Ask.com's incremental system (paper 004): every group of near-duplicates has one
*winner*, elected by popularity, static URL, length and market suffix. The groups themselves
are the scan's clusters of the same pages: the index keeps the scan's graph (classes, band
index, bucket rule, verified pairs; `scangraph.ScanGraph`) and clusters again, with the
scan's rule, only the components a batch touched. A page sent again with the same sketch
is tier 1 (no work). The tier-2 row store (`tier2.SignatureStore`, partitioned by the
multidimensional length mapping) answers `check`, the lookup of a text that is not stored.

The files hold the truth (`files/store.py`: a manifest naming versioned segments of Parquet and
`.npy` files); the process holds a copy for lookups (the pages as columns, `pages.py`; the
scan's graph and the groups), so one update batch is:
compute in memory, write the touched rows as a new segment, commit by replacing the
manifest, and on any exception reload the last committed version (so memory never runs
ahead of the last commit). One process writes (`store.WriterLock`); any number read.

This module is that state and its reads; the batch algorithm is in `state/apply_batch.py`,
the winner rule in `state/winner_rule.py`, the rows and their write in
`files/segment_rows.py`, the request and report types in `state/updates.py`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import itertools
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from neardup.config import Settings, SettingsError
from neardup.index.files.band_save import TableWriter, band_writer, fill_tables
from neardup.index.files.graph_changes import (
    CHANGE_ARRAYS,
    changes_name,
    graph_changes,
    slot_changes_into,
    take_changes,
)
from neardup.index.files.saves import read_arrays, write_arrays, write_segment
from neardup.index.files.segment_rows import (
    SERVICE_KIND,
    invariant_errors,
    segment_rows,
)
from neardup.index.files.segments import merge_plan, read_committed, write_merged
from neardup.index.files.store import (
    GRAPH_PREFIX,
    GROUP_SCHEMA,
    LEGACY_DB,
    PAGE_SCHEMA,
    Manifest,
    Segment,
    commit,
    empty_segment,
    graph_name,
    has_index,
    legacy_rows,
    read_manifest,
    remove_leftovers,
    segment_name,
)
from neardup.index.files.writer_lock import WriterLock
from neardup.index.state import reads
from neardup.index.state.apply_batch import compute_batch
from neardup.index.state.found import Found
from neardup.index.state.groups import GROUP_ARRAYS, GroupMembers, Winners
from neardup.index.state.index_state import IndexState
from neardup.index.state.lengths import LengthMap
from neardup.index.state.lookups import HERE, BatchLookups
from neardup.index.state.overlay import FoldRule
from neardup.index.state.pages import PAGE_ARRAYS, PageTable
from neardup.index.state.popularity import RedirectGraph
from neardup.index.state.prepare import PreparedBatch, prepare_batch
from neardup.index.state.scangraph import GRAPH_ARRAYS, SLOT_COLUMNS, ScanGraph, saved_node_keys
from neardup.index.state.tier2 import SignatureStore
from neardup.index.state.updates import (
    BatchReport,
    PageUpdate,
    ServiceError,
    ServiceOptions,
)
from neardup.kernels import fingerprint64
from neardup.kernels.lsh import recall_first_bands
from neardup.kernels.sorting import sorted_distinct
from neardup.pipeline.steps.near_pairs import url_key
from neardup.store.outputs import open_folder

TIER2_MODES = ("bands", "lengths", "lsh")  # how `check` finds a text's stored neighbours
# The scan graph's arrays are saved again (`graph-N/`) by a batch once the pages written since
# the last save exceed this many and this share of the index (a server or a crash never
# leaves more to replay on opening, nor more changes in memory; each page is rewritten a
# bounded number of times however the index grew), and when the writer closes once they
# exceed the smaller `GRAPH_AT_CLOSE_*` (what the next opening replays after a clean close).
# A share of 8 (not 4): the changes held in memory between saves were about 0.1 KB a page
# at a million pages, for a save that writes about 0.3 KB a page (streamed).
GRAPH_EVERY_PAGES = 4096
GRAPH_EVERY_SHARE = 8
GRAPH_AT_CLOSE_PAGES = 4096
GRAPH_AT_CLOSE_SHARE = 8
# A writer that closes with more rows than this for the next opening to replay (and no save
# due) writes the graph's changes since the save instead (`graph_changes.py`): with them,
# the next opening replays only what was written after them, so a save at close is due no
# sooner than after a batch (a share of 8, where it was 32 when openings replayed all).
CHANGES_AT_CLOSE_PAGES = 1024
TRIM_AFTER_ROWS = 65_536  # merges of at least this many rows give the freed heap back


class ServiceIndex:
    """A persistent two-tier duplicate index in the folder `store` (see `files/store.py`).

    `read_only` opens the last committed version without the writer lock (any number of
    readers beside one writer); a writer opening a store another process writes is refused
    with one line naming the holder, or with `wait` waits for it. Not thread-safe by itself;
    the HTTP app serialises calls with `lock`.
    """

    def __init__(
        self,
        store: str | Path,
        settings: Settings | None = None,
        options: ServiceOptions | None = None,
        *,
        read_only: bool = False,
        wait: bool = False,
    ) -> None:
        self.store = Path(store)
        self.read_only = read_only
        self.writer: WriterLock | None = None
        self.lock = threading.RLock()
        self._commit_lock = threading.Lock()  # the manifest: a batch's commit, a merge's
        self._merging = threading.Lock()  # one merge at a time, outside `lock`
        self._writing = threading.Lock()  # one batch at a time, until its graph is saved
        if read_only:
            if not has_index(self.store):
                raise ServiceError(f"{self.store} holds no service index to open read-only")
        else:
            open_folder(self.store, SERVICE_KIND)  # never a folder of the user's
            self.writer = WriterLock(self.store, wait)
        self._opened = False  # whether the last committed version was opened whole
        try:
            self._open(settings, options)
        except BaseException:
            self.close()
            raise

    # The state in memory (`index_state.IndexState`), read through the index.
    @property
    def pages(self) -> PageTable:
        return self.state.pages

    @property
    def groups(self) -> GroupMembers:
        return self.state.groups

    @property
    def winners(self) -> Winners:
        return self.state.winners

    @property
    def scan_graph(self) -> ScanGraph:
        return self.state.scan_graph

    @property
    def store_rows(self) -> SignatureStore:
        return self.state.store_rows

    @property
    def redirects(self) -> RedirectGraph:
        return self.state.redirects

    @property
    def next_group(self) -> int:
        return self.state.next_group

    def _open(self, settings: Settings | None, options: ServiceOptions | None) -> None:
        manifest = read_manifest(self.store)
        if manifest is None and (self.store / LEGACY_DB).is_file():
            if self.read_only:
                raise ServiceError(
                    f"{self.store} is an index of an older neardup: open it once for writing "
                    "(neardup add, or open_index without read_only) to convert it"
                )
            manifest = self._convert_legacy()
        if manifest is not None:
            mine, stored = stored_config(manifest.meta)
            if settings is not None:
                mine.check_compatible(settings)
                mine.check_same_pages(settings)
                if settings.threshold != mine.threshold:
                    raise SettingsError(
                        f"threshold: {settings.threshold!r} here, {mine.threshold!r} in the index"
                    )
            self.settings = mine
            self.options = options if options is not None else stored
        else:
            self.settings = settings or Settings()
            self.options = options or ServiceOptions()
        s = self.settings
        if s.bands and s.rows:
            self.bands, self.rows = s.bands, s.rows
        else:
            self.bands, self.rows = recall_first_bands(s.threshold, s.num_perm, s.band_recall)
        self.threshold = s.threshold
        o = self.options
        if o.tier2 not in TIER2_MODES:
            raise ServiceError(f"tier2 must be one of {', '.join(TIER2_MODES)}, not {o.tier2!r}")
        if o.dims < 1 or o.parts < 1 or o.rho < 1:
            raise ServiceError("dims and parts must be >= 1 and rho >= 1")
        if self.writer is not None:
            remove_leftovers(self.store, manifest)
            if manifest is None:  # a new store: its settings are its first version
                self.manifest = Manifest(meta=self._meta(1))
                commit(self.store, self.manifest)
        self._load()

    # ---------------------------------------------------------------- state

    def _meta(self, next_group: int) -> dict[str, Any]:
        """What the manifest says besides the segments: settings, options, the next group
        id and tier 2's length grid."""
        meta: dict[str, Any] = {
            "settings": self.settings.to_json(),
            "options": json.dumps(self.options.__dict__),
            "next_group": next_group,
            "num_perm": self.settings.num_perm,
            "dims": self.options.dims,
        }
        graph = getattr(self, "graph_meta", None)
        if graph is not None:
            meta["graph"] = graph
        changes = getattr(self, "changes_meta", None)
        if changes is not None:
            meta["changes"] = changes
        store = getattr(self, "store_rows", None)
        if store is not None and store.map is not None:
            meta["length_map"] = {"edges": store.map.to_json(), "rows": store.map_rows}
        return meta

    def _convert_legacy(self) -> Manifest:
        """Rewrite an index kept in one DuckDB file (neardup before issue 26) as the
        versioned files, once; the old file is kept beside, renamed."""
        db = self.store / LEGACY_DB
        print(
            f"neardup: converting {db} to the versioned column files (once)",
            file=sys.stderr,
            flush=True,
        )
        stored, pages, groups = legacy_rows(db)
        settings, options = stored_config(stored)
        num_perm, dims = settings.num_perm, options.dims
        n = pages.num_rows
        sigs = np.zeros((n, num_perm), dtype=np.uint32)
        lens = np.zeros((n, dims), dtype=np.int32)
        has = np.zeros(n, dtype=bool)
        length = pages.column("length").to_numpy(zero_copy_only=False)
        sfp = pages.column("shingle_fp").to_pylist()
        ntok = pages.column("n_tokens").to_pylist()
        for i, (sig, dl) in enumerate(
            zip(
                pages.column("signature").to_pylist(),
                pages.column("dim_lengths").to_pylist(),
                strict=True,
            )
        ):
            if sig is None:
                continue
            has[i] = True
            sigs[i] = np.frombuffer(sig, dtype="<u4")
            if dl and len(dl) == dims:
                lens[i] = dl
            else:  # a store written before the length mapping: spread evenly
                lens[i] = int(length[i] or 0) // dims
            # A store written before the scan's graph: the signature stands for the set.
            if sfp[i] is None:
                sfp[i] = fingerprint64(sig)
            if ntok[i] is None:
                ntok[i] = int(length[i] or 0)
        table = pa.table(
            {
                "url": pages.column("url"),
                "group_id": pages.column("group_id"),
                "length": pages.column("length").cast(pa.int32()),
                "has_signature": pa.array(has),
                "exact_fp": pages.column("exact_fp"),
                "redirect_to": pages.column("redirect_to"),
                "links_in": pages.column("links_in").cast(pa.int32()),
                "verified": pages.column("verified"),
                "removed": pages.column("removed"),
                "shingle_fp": pa.array(sfp, pa.int64()),
                "page_key": pa.nulls(n, pa.int64()),
                "n_tokens": pa.array(ntok, pa.int32()),
                "slot": pa.array(np.arange(n, dtype=np.int64)),
                "version": pa.array(np.ones(n, np.int64)),
            },
            schema=PAGE_SCHEMA,
        )
        gtable = groups.cast(GROUP_SCHEMA)
        name = segment_name(1)
        write_segment(self.store, name, Segment(table, sigs, lens, gtable))
        meta: dict[str, Any] = {
            "settings": stored["settings"],
            "options": stored["options"],
            "next_group": int(stored.get("next_group", "1")),
            "num_perm": num_perm,
            "dims": dims,
        }
        if "length_map" in stored:
            meta["length_map"] = json.loads(stored["length_map"])
        manifest = Manifest(1, [name], [n], meta)
        commit(self.store, manifest)
        os.replace(db, self.store / f"{LEGACY_DB}.converted")
        with contextlib.suppress(FileNotFoundError):
            (self.store / f"{LEGACY_DB}.wal").unlink()
        return manifest

    def _load(self) -> None:
        """Open the last committed version: the index as saved with its graph (pages,
        groups, winners and the scan graph's arrays, memory-mapped: nothing read until a
        batch or a lookup reads it) and the rows written after it, put in place and
        replayed into the graph. An index saved by an older neardup (no pages beside its
        graph) has its pages read from its segments; one without a graph builds it at
        once. A writer then saves both, so the next opening maps them."""
        self._opened = False  # until the whole version is in memory (what `close` may save)
        # The slots of the page rows written since the save the page table was opened
        # from: the rows the next save takes from memory (`PageTable.saved_arrays`).
        self._written: list[np.ndarray] = [np.empty(0, np.int64)]
        manifest, state, saved, changes = self._read_version()
        at = _saved_at(manifest) if saved is not None else None  # the saved pages' version
        if self.writer is not None and at is None and state.pages.column("slot").null_count:
            manifest, state = self._give_slots(manifest, state)
        self.manifest = manifest
        self.graph_meta: dict[str, Any] | None = manifest.meta.get("graph")
        # The graph's changes since the save that this version names (None: none).
        self.changes_meta = _changes_of(manifest) if changes is not None else None
        o = self.options
        store_rows = SignatureStore(
            self.settings.num_perm,
            o.dims,
            self.threshold,
            "lengths" if o.tier2 == "bands" else o.tier2,  # unused with "bands"
            o.parts,
            o.rho,
            self.bands,
            self.rows,
        )
        st = self.state = IndexState(
            self.settings, o, store_rows, int(manifest.meta.get("next_group", 1))
        )
        saved_keys = None  # the band keys the saved graph filed the replayed nodes under
        replay = None  # the rows to replay into the graph (None: every row since the save)
        if saved is not None and at is not None:
            assert self.graph_meta is not None
            tail = state.pages.column("slot").to_numpy()
            if changes is not None:  # replayed: only the rows written after the changes
                assert self.changes_meta is not None
                slot_changes_into(saved, changes)
                after = state.pages.column("version").to_numpy()
                replay = tail[after > int(self.changes_meta["version"])]
            st.pages, st.groups, st.winners, saved_keys = self._saved_tables(
                self.graph_meta, saved, state, tail if replay is None else replay
            )
            self._written = [tail]  # rows that differ from the save's (`_save_graph_now`)
        else:
            # The pages as columns (`pages.PageTable`): one signature matrix, no object a
            # page.
            st.pages = PageTable.from_rows(
                state.pages, state.signatures, state.dim_lengths, self.settings.num_perm, o.dims
            )
            # Which pages were written after the saved graph (to replay), by row version.
            slot_col, version_col = state.pages.column("slot"), state.pages.column("version")
            tail = np.empty(0, np.int64)
            if self.graph_meta is not None and not slot_col.null_count:
                newer = version_col.fill_null(0).to_numpy() > int(self.graph_meta["version"])
                tail = slot_col.to_numpy()[newer]
            # The groups and winners as arrays (`state/groups.py`): no object a page or a group.
            st.groups = GroupMembers(st.pages)
            st.winners = Winners(state.groups)
        t = self.pages
        n = t.n
        del state  # its columns and signatures are the table's now: freed before the graph
        for slot, target in t.redirect.items():
            source = t.url_at(slot)
            st.redirect_slot[source] = slot
            st.redirects.set(source, None, target)
        if o.tier2 != "bands":  # tier 2's own row store holds the sketched pages again
            has = np.flatnonzero(t.has_sig[:n] & (t.length[:n] > 0))
            for slot in has.tolist():
                self.store_rows.put(t.url_at(slot), t.sigs[slot], t.lens[slot])
        with _no_collection():
            st.scan_graph = ScanGraph(self.settings, t, saved)
            if saved is None:  # no saved graph: built at once from the pages
                self.graph_meta = None
                all_slots = np.arange(n, dtype=np.int64)
                self.scan_graph.build(all_slots[self.scan_graph.eligible(all_slots)])
            else:
                if changes is not None:
                    take_changes(self.scan_graph, changes)
                replay = tail if replay is None else replay
                if replay.size:
                    self.scan_graph.replay(replay, saved_keys)
        self.graph_tail = int(tail.size)  # rows written since the save
        self.replay_tail = int(tail.size if replay is None else replay.size)  # to replay
        grid = manifest.meta.get("length_map")
        if grid is not None and len(grid["edges"]) == o.dims:
            self.store_rows.map = LengthMap.from_json(grid["edges"])
            self.store_rows.map_rows = int(grid["rows"])
        if self.writer is not None and n and (self.graph_meta is None or at is None):
            self._save_graph_now()
        # Arrow's allocator and glibc's heap keep what the files' tables used for their next
        # tables; an index holds none after opening, so it goes back to the system (about
        # 0.9 KB a page).
        _return_freed()
        _freeze_objects()
        self._opened = True

    def _read_version(
        self,
    ) -> tuple[Manifest, Segment, dict[str, np.ndarray] | None, dict[str, np.ndarray] | None]:
        """The last committed version, its state and its graph's arrays mapped (None: it
        names none, or its pages have no slots yet). Of an index saved with its pages
        (`_saved_at`), the state is only what was written since, and the arrays hold the
        rest; with them, the graph's changes since the save when the version names them
        (`graph_changes.py`). A writer may replace the graph folder between our reading the
        manifest and mapping it; then the newer version is read (`read_committed`)."""

        Arrays = dict[str, np.ndarray]

        def graph_arrays(manifest: Manifest, state: Segment) -> tuple[Arrays, Arrays | None] | None:
            name = graph_name(manifest)
            saved = _saved_at(manifest) is not None
            if name is None or (not saved and state.pages.column("slot").null_count):
                return None
            try:
                names = GRAPH_ARRAYS + (PAGE_ARRAYS + GROUP_ARRAYS if saved else ())
                arrays = read_arrays(self.store, name, names, writable=True)
                changes = _changes_of(manifest) if saved else None
                if changes is None:
                    return arrays, None
                return arrays, read_arrays(self.store, str(changes["name"]), CHANGE_ARRAYS)
            except FileNotFoundError:
                if read_manifest(self.store) == manifest and (self.store / name).is_dir():
                    if saved:  # the segments it holds are gone: nothing to rebuild from
                        raise ServiceError(
                            f"{self.store / name}: the saved index lacks files this neardup"
                            " reads (written by a newer neardup, or damaged)"
                        ) from None
                    # Still named, yet lacking a file: not arrays this neardup reads; the
                    # graph is built at once instead (and a writer saves it anew).
                    raise _Unreadable(name) from None
                raise  # replaced by a writer meanwhile: the newer version is read

        fallback = Manifest(meta=self._meta(1))
        try:
            got, state, read = read_committed(self.store, fallback, graph_arrays, _saved_at)
            return (got, state, None, None) if read is None else (got, state, *read)
        except _Unreadable:

            def unsaved(manifest: Manifest) -> Manifest:
                manifest.meta.pop("graph", None)
                manifest.meta.pop("changes", None)
                return manifest

            got, state, _ = read_committed(self.store, fallback, lambda m, s: unsaved(m))
            return got, state, None, None

    def _saved_tables(
        self, graph: dict[str, Any], saved: dict[str, np.ndarray], tail: Segment, replay: np.ndarray
    ) -> tuple[PageTable, GroupMembers, Winners, dict[int, np.ndarray]]:
        """The pages, groups and winners as saved with the graph `graph` names (maps), then
        the rows written since (`tail`) put in place: a page's row, its group's members,
        the group rows. A group that lost its last page since is no group (a merge that
        reached the oldest segment may have dropped its deletion row). With them, the band
        keys the saved graph filed the nodes among `replay` under (`ScanGraph.replay`)."""
        folder = self.store / str(graph["name"])
        n, dims = int(graph["pages"]), self.options.dims
        t = PageTable.from_saved(saved, n, self.settings.num_perm, dims, folder)
        slots = tail.pages.column("slot").to_numpy()
        keys = saved_node_keys(self.settings, t, replay, saved["node"])
        before = t.apply_rows(tail.pages, tail.signatures, tail.dim_lengths)
        groups = GroupMembers(t, saved)
        groups.move(slots, before)
        winners = Winners(tail.groups, saved)
        for gid in sorted_distinct(before[before >= 0]).tolist():
            if not groups.get(gid):
                winners.pop(gid)
        groups.fold_if_due()
        winners.fold_if_due()
        return t, groups, winners, keys

    def _give_slots(self, manifest: Manifest, state: Segment) -> tuple[Manifest, Segment]:
        """Save the pages of an index written before slots were kept (issue 26) once as one
        segment with a slot per row (its place when opened), the key of the graph's saved
        arrays; committed as a version of its own."""
        n = state.pages.num_rows
        version = manifest.version + 1
        pages = state.pages.drop_columns(["slot", "version"])
        pages = pages.append_column("slot", pa.array(np.arange(n, dtype=np.int64)))
        pages = pages.append_column("version", pa.array(np.full(n, version, np.int64)))
        seg = Segment(pages.cast(PAGE_SCHEMA), state.signatures, state.dim_lengths, state.groups)
        name = segment_name(version)
        write_segment(self.store, name, seg)
        new = Manifest(version, [name], [n], manifest.meta)
        commit(self.store, new)
        remove_leftovers(self.store, new)
        return new, seg

    def _save_graph_now(self, write_tables: TableWriter = fill_tables) -> None:
        """Save the graph's arrays (`ScanGraph.arrays`: the graph of the committed pages,
        overlay folded in) as a `graph-N/` folder and commit a version naming it, with the
        same segments: the next opening maps it. A kill before that commit leaves a folder
        no manifest names (removed by the next writer). Then the graph is mapped from the
        new folder (its overlay dropped from memory) and the old folder removed (a reader
        that mapped it keeps its mapping)."""
        _return_freed()  # the batches' freed blocks, before the save makes its own
        with self.lock:  # what is added since is folded in, so the save only reads
            self.pages.fold()
            self.groups.fold()
            self.winners.fold()
        with self._commit_lock:
            old = self.manifest
            name = f"{GRAPH_PREFIX}{old.version + 1:08d}"  # a version's number is used once
            n = self.pages.n
            room = n // GRAPH_EVERY_SHARE + 1024  # for the next batches' pages
            mapped = None if self.graph_meta is None else self.store / str(self.graph_meta["name"])
            arrays = itertools.chain(
                self.scan_graph.arrays(band_writer(write_tables), room, mapped),
                self.pages.saved_arrays(room, sorted_distinct(np.concatenate(self._written))),
                self.groups.saved_arrays(),
                self.winners.saved_arrays(),
            )
            write_arrays(self.store, name, arrays, hook=True)
            before, changed = self.graph_meta, self.changes_meta
            saved: dict[str, Any] = {"name": name, "version": old.version, "pages": n}
            self.graph_meta, self.changes_meta = saved, None  # changes against the old save
            try:
                # The save holds every row of every segment (the state of `old.version`):
                # the new version names none, so the index is on disk once, not twice.
                new = Manifest(old.version + 1, [], [], self._meta(self.next_group))
                commit(self.store, new)
            except BaseException:
                self.graph_meta, self.changes_meta = before, changed
                raise
            self.manifest = new
            self.replay_tail = 0
        self._map_graph(saved)
        # Readers that mapped the old files keep their maps; one opening meanwhile finds a
        # file gone and reads the new version (`read_committed`).
        gone = [*old.segments, *(str(m["name"]) for m in (before, changed) if m is not None)]
        for folder in gone:
            shutil.rmtree(self.store / folder, ignore_errors=True)
        _return_freed()  # the overlay folded into the files, and the save's blocks

    def _save_changes_now(self) -> None:
        """Write the graph's changes since the save (`graph_changes.py`) and commit a
        version naming them, with the same segments: the next opening takes them in and
        replays only the rows written after them. A kill before the commit leaves a folder
        no manifest names (removed by the next writer); the changes they replace are
        removed after it."""
        assert self.graph_meta is not None
        with self._commit_lock:
            old = self.manifest
            name = changes_name(old.version + 1)
            graph = str(self.graph_meta["name"])
            as_saved = read_arrays(self.store, graph, SLOT_COLUMNS)
            changes = graph_changes(self.scan_graph, as_saved)
            write_arrays(self.store, name, changes.items(), hook=True)
            before = self.changes_meta
            self.changes_meta = {"name": name, "version": old.version, "graph": graph}
            try:
                new = Manifest(old.version + 1, old.segments, old.rows, self._meta(self.next_group))
                commit(self.store, new)
            except BaseException:
                self.changes_meta = before
                raise
            self.manifest = new
            self.replay_tail = 0
        if before is not None:
            shutil.rmtree(self.store / str(before["name"]), ignore_errors=True)

    def _map_graph(self, graph: dict[str, Any]) -> None:
        """The graph mapped from its saved folder `graph` (`graph_meta` of the version it
        was saved with), in place of the one in memory and its overlay; with the pages,
        groups and winners saved beside it, those too (the state in memory is the one
        saved), so a long-lived writer or server holds what it changed since its last
        save, not every page it ever changed."""
        pages_saved = "pages" in graph
        names = GRAPH_ARRAYS + (PAGE_ARRAYS + GROUP_ARRAYS if pages_saved else ())
        arrays = read_arrays(self.store, str(graph["name"]), names, writable=True)
        pages, groups, winners = self.pages, self.groups, self.winners
        if pages_saved:
            nothing = empty_segment(self.settings.num_perm, self.options.dims)
            none = np.empty(0, np.int64)
            pages, groups, winners, _ = self._saved_tables(graph, arrays, nothing, none)
        mapped = ScanGraph(self.settings, pages, arrays)
        with self.lock:
            assert pages.n == self.pages.n, "the saved pages are not the ones in memory"
            mapped.verifications = self.scan_graph.verifications
            st = self.state
            st.pages, st.groups, st.winners, st.scan_graph = pages, groups, winners, mapped
            self.graph_meta = graph
            self.graph_tail = 0
            self._written = [np.empty(0, np.int64)]

    def follow(self, prepared: PreparedBatch, graph: dict[str, Any] | None) -> None:
        """Apply in memory a batch that another copy of this index (the writer, in this
        process) applied and committed, so that this copy holds the same version: the
        server's copy for reads (`served.py`). Nothing is written. `graph`: the writer's
        saved graph after the batch; when it saved a new one, this copy maps it too (its
        overlay then stays as small as the writer's)."""
        with self.lock, _no_collection():
            try:
                compute_batch(self.state, prepared)
                self.pages.fold_if_due()
                self.groups.fold_if_due()
                self.winners.fold_if_due()
            except BaseException:
                self._load()  # the writer's committed version, read from the files
                raise
        if graph is not None and graph != self.graph_meta:
            self._map_graph(graph)
        _freeze_objects()

    def close(self, write_tables: TableWriter = fill_tables) -> None:
        """Save the graph's arrays if many pages were written since they were (so the next
        opening maps them instead of replaying those pages), then release the writer lock
        (committed batches stay). `write_tables`: who writes a save's band tables (the
        engine's: here, or a Spark add's executors)."""
        try:
            if self.writer is not None and self._opened:
                at_close = FoldRule(GRAPH_AT_CLOSE_PAGES, GRAPH_AT_CLOSE_SHARE)
                if at_close.due(self.graph_tail, self.pages.n):
                    with self.lock:
                        self._save_graph_now(write_tables)
                elif self.replay_tail > CHANGES_AT_CLOSE_PAGES and _saved_at(self.manifest):
                    with self.lock:
                        self._save_changes_now()
        finally:
            self._release()

    def _release(self) -> None:
        if self.writer is not None:
            self.writer.release()
            self.writer = None
        gc.unfreeze()  # what `_freeze_objects` hid is collectable again (and finalised at exit)

    def refresh(self) -> bool:
        """Read a newer committed version, if a writer made one since this index was
        opened (for a read-only index); True when it did."""
        manifest = read_manifest(self.store)
        if manifest is None or manifest.version == self.manifest.version:
            return False
        with self.lock:
            self._load()
        return True

    def __enter__(self) -> ServiceIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- reads

    def resolve(self, url: str) -> tuple[str, list[str]]:
        """Final URL of a redirect chain (and the chain), stopping at cycles or 32 hops."""
        return self.state.resolve(url)

    def status(self, url: str) -> dict[str, Any] | None:
        """Group, winner and duplicate status of a stored URL (following redirects)."""
        return reads.status(self.state, url)

    def group(self, gid: int) -> dict[str, Any] | None:
        """A group's members (the winner first) and the redirects into it."""
        return reads.group(self.state, gid)

    def popularity(self, url: str) -> int:
        """In-links of `url` plus those of every page redirecting to it (see popularity.py)."""
        return self.state.popularity(url)

    def resemblance_to_winner(self, signature: np.ndarray | None, gid: int) -> float | None:
        """Estimated resemblance of a sketch to group `gid`'s winner (`reads`)."""
        return reads.resemblance_to_winner(self.state, signature, gid)

    def check(self, text: str | None = None, html: str | bytes | None = None) -> dict[str, Any]:
        """Which stored group a text (or the visible text of an HTML document) would join,
        without adding it (a tier-2 lookup), and its resemblance to that group's winner.
        Both `POST /check` and the Python handle call this, so they answer alike."""
        if (text is None) == (html is None):
            raise ServiceError("give exactly one of text or html")
        # Parsing and sketching need no state: done before the lock.
        update = PageUpdate("check:", text=text, html=html)
        sk = prepare_batch([update], self.settings, self.options.dims).sketches["check:"]
        with self.lock:
            return reads.matches(self.state, sk)

    def counts(self) -> dict[str, int]:
        return reads.counts(self.state)

    # ---------------------------------------------------------------- updates

    def apply(self, updates: Iterable[PageUpdate]) -> BatchReport:
        """Apply one batch as one transaction; on any error nothing of it remains."""
        t0 = time.perf_counter()
        return self.apply_prepared(self.prepared(updates), t0)

    def prepared(self, updates: Iterable[PageUpdate]) -> PreparedBatch:
        """A batch keyed by URL, turned into text and sketched as this index takes it
        (`prepare.prepare_batch` with its settings, the URL rule applied). It needs no
        state: done before the lock, for the whole batch."""
        return prepare_batch(updates, self.settings, self.options.dims, by_url=True)

    def saved_queries(
        self,
        prepared: PreparedBatch,
        pages: Found | None = None,
        node_keys: dict[int, np.ndarray] | None = None,
    ) -> tuple[Path, dict[str, list[np.ndarray]]] | None:
        """Where the index is saved (the graph folder) and the keys the batch will look up
        in its saved sorted arrays (`saved_search.SEARCHED`), a list of sorted keys a row,
        for a search elsewhere (Spark's executors, `spark_jobs.saved_entries_on_spark`)
        whose answers `apply_prepared` takes as `found`; None when nothing is saved yet.
        In two rounds: first (`pages` None) the page keys of its URLs and of the pages its
        redirects lead to; then, with those keys' entries (`pages`), what needs the stored
        pages' slots: the band keys a table (`ScanGraph.batch_keys`), the classes'
        fingerprints (its sketches' and those of the classes its stored pages are in), and
        the page keys of where its stored pages redirected to. `node_keys`: the band keys of
        saved nodes, computed elsewhere from their saved sketches (`ScanGraph.saved_keys`)."""
        if self.graph_meta is None:
            return None
        folder = self.store / str(self.graph_meta["name"])
        urls = list(prepared.updates)
        keys = [sk.key if (sk := prepared.sketches.get(u)) is not None else None for u in urls]
        if pages is None:
            targets = [u.redirect_to for u in prepared.updates.values() if u.redirect_to]
            page_keys = [url_key(u) if k is None else k for u, k in zip(urls, keys, strict=True)]
            page_keys += [url_key(t) for t in targets]
            return folder, {"page": [sorted_distinct(np.array(page_keys, np.int64))]}
        found = self.pages.lookup(urls, keys, pages)
        slots = np.array([s for s in found if s is not None], np.int64)
        sigs = [sk.signature for sk in prepared.sketches.values()]
        matrix = np.stack(sigs) if sigs else np.empty((0, self.settings.num_perm), np.uint32)
        graph = self.scan_graph
        stored = slots[slots < graph.member.size]
        fps = np.concatenate(
            [
                np.array([sk.shingle_fp for sk in prepared.sketches.values()], np.int64),
                graph.mfp[stored[graph.member[stored]]],
            ]
        )
        redirect = self.pages.redirect
        old_targets = [url_key(redirect[s]) for s in slots.tolist() if s in redirect]
        band = graph.batch_keys(matrix, slots, node_keys)
        queries = {
            "band": band,
            "class": [sorted_distinct(fps)],
            "page": [sorted_distinct(np.array(old_targets, np.int64))],
        }
        return folder, queries

    def apply_prepared(
        self,
        prepared: PreparedBatch,
        t0: float | None = None,
        lookups: BatchLookups = HERE,
        write_tables: TableWriter = fill_tables,
    ) -> BatchReport:
        """`apply` of a batch already sketched by `prepare.prepare_batch` with this index's
        settings (elsewhere: another process, while this one applies the previous batch).
        `lookups`: what the engine found elsewhere of the saved arrays for the keys
        `saved_queries` named, and where the batch's saved sketches are compared
        (`engines.IndexEngine.lookups`; by default all is read here). `write_tables`: who
        writes the band tables of a save the batch makes (the engine's)."""
        t0 = time.perf_counter() if t0 is None else t0
        if self.writer is None:
            raise ServiceError(f"{self.store} is open read-only: it takes no updates")
        with self._writing:  # one batch at a time, its graph saved before the next
            with self.lock, _no_collection():
                try:
                    report, dirty_pages, dirty_groups, dropped = compute_batch(
                        self.state, prepared, lookups
                    )
                    self._write(dirty_pages, dirty_groups, dropped)
                    self.pages.fold_if_due()
                    self.groups.fold_if_due()
                    self.winners.fold_if_due()
                except BaseException:
                    self._load()  # memory never runs ahead of the last commit
                    raise
            # After the lock: saving the graph only reads it, as reads do, so they need not
            # wait for it (the next batch does, holding `_writing`).
            if FoldRule(GRAPH_EVERY_PAGES, GRAPH_EVERY_SHARE).due(self.graph_tail, self.pages.n):
                self._save_graph_now(write_tables)
        self._merge_due()  # after the lock: reads need not wait for a merge
        _freeze_objects()
        report.seconds = time.perf_counter() - t0
        return report

    # ---------------------------------------------------------------- writes

    def _write(self, dirty: set[str], groups: set[int], dropped: set[int]) -> None:
        """Commit a batch: its touched page and group rows as a new segment, then the
        manifest naming it (the commit point)."""
        with self._commit_lock:
            old = self.manifest
            version = old.version + 1
            seg = segment_rows(
                self.pages, self.groups, self.winners, dirty, groups, dropped, version
            )
            self.graph_tail += seg.pages.num_rows
            self.replay_tail += seg.pages.num_rows
            self._written.append(seg.pages.column("slot").to_numpy())
            name = segment_name(version)
            write_segment(self.store, name, seg, hook=True)
            new = Manifest(
                version,
                [*old.segments, name],
                [*old.rows, seg.pages.num_rows],
                self._meta(self.next_group),
            )
            commit(self.store, new)
            self.manifest = new

    def _merge_due(self) -> None:
        """Merge the newest segments while `merge_plan` asks for it, each merge committed as
        a version of its own. It changes no state in memory, so it runs outside `lock`: reads
        (and even the next batch) go on meanwhile; a merge already under way in another
        thread is left to finish the work."""
        if not self._merging.acquire(blocking=False):
            return
        try:
            merged = 0
            while (rows := self._merge_once()) is not None:
                merged += rows
            # A large merge's blocks, freed: given back, not kept for later. Not after the
            # small ones (most of them): a trim walks the whole heap, which at a million
            # pages cost more time than the memory was worth.
            if merged >= TRIM_AFTER_ROWS:
                _return_freed()
        finally:
            self._merging.release()

    def _merge_once(self) -> int | None:
        """One merge of the newest segments `merge_plan` names: its page rows, None when no
        merge is due. Batches committed meanwhile only append segments, so the merged ones
        keep their places; their files are removed once the manifest no longer names them
        (a reader that mapped them keeps its map)."""
        with self._commit_lock:
            start = self.manifest
        k = merge_plan(start.rows)
        if not k:
            return None
        names = start.segments[-k:]
        name = f"{segment_name(start.version)}-merged"  # the one merge from this version
        # It reaches the oldest segment and nothing is saved: deleted groups have nothing
        # older to hide. (A saved index's groups are older: their deletions stay.)
        oldest = len(names) == len(start.segments) and _saved_at(start) is None
        try:
            merged_rows = write_merged(self.store, name, names, oldest)
        except FileNotFoundError:
            if self._named_at(names) is not None:
                raise
            merged_rows = -1  # a save took them in and removed their files meanwhile
        with self._commit_lock:
            at = self._named_at(names)
            if at is None or merged_rows < 0:
                # A save took the segments in meanwhile (it holds their rows): nothing to do.
                for folder in (name, f"{name}.tmp"):
                    shutil.rmtree(self.store / folder, ignore_errors=True)
                return None
            cur = self.manifest
            new = Manifest(
                cur.version + 1,
                [*cur.segments[:at], name, *cur.segments[at + k :]],
                [*cur.rows[:at], merged_rows, *cur.rows[at + k :]],
                cur.meta,
            )
            commit(self.store, new)
            self.manifest = new
        for gone in names:
            shutil.rmtree(self.store / gone, ignore_errors=True)
        return merged_rows

    def _named_at(self, names: list[str]) -> int | None:
        """Where the committed version names the segments `names`, in a row; None when it
        does not (a save took them in)."""
        segments = self.manifest.segments
        at = segments.index(names[0]) if names[0] in segments else -1
        return at if at >= 0 and segments[at : at + len(names)] == names else None

    # ---------------------------------------------------------------- checks

    def consistency_errors(self) -> list[str]:
        """Invariants of the last committed version (used by tests and after a crash)."""
        return invariant_errors(self.committed_state())

    def committed_state(self) -> Segment:
        """Every page and group row of the last committed version, as one segment (its
        rows' version: that version's): read by a new read-only opening of the files (the
        save and the segments since), so it is what the files hold, not this copy's
        memory. The segments alone no longer hold it once a save took them in."""
        with ServiceIndex(self.store, read_only=True) as copy:
            live = {g for g, members in copy.groups.items() if members}
            version = copy.manifest.version
            return segment_rows(
                copy.pages, copy.groups, copy.winners, set(copy.pages), live, set(), version
            )


class _Unreadable(Exception):
    """A graph folder the manifest names lacks a file this neardup reads."""


def _changes_of(manifest: Manifest) -> dict[str, Any] | None:
    """The graph's changes the version names, when they were written against its save."""
    changes = manifest.meta.get("changes")
    graph = graph_name(manifest)
    return changes if changes is not None and changes.get("graph") == graph else None


def _saved_at(manifest: Manifest) -> int | None:
    """The version whose pages, groups and winners the manifest's graph folder holds
    beside the graph (`_save_graph_now`); None when it holds the graph only (an older
    neardup's) or there is none."""
    graph = manifest.meta.get("graph")
    return None if graph is None or "pages" not in graph else int(graph["version"])


def stored_config(meta: Mapping[str, Any]) -> tuple[Settings, ServiceOptions]:
    """The settings and options an index was written with: a committed version's (its
    manifest's `meta`), or an older neardup's (its `settings` table)."""
    options = ServiceOptions(**_tuple_lists(json.loads(meta["options"])))
    return Settings.from_json(meta["settings"]), options


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """No garbage collection while a batch builds its objects: they form no cycles, and a
    collection in the middle would walk every object the batch made so far, again and
    again. `_freeze_objects` puts them out of reach after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _freeze_objects() -> None:
    """Move the index's objects out of the garbage collector's sight (`gc.freeze`).

    A million pages are millions of long-lived dicts, sets and page objects; without this,
    every full collection walks them all (about a second at a million pages), and a request
    that happens to trigger one waits for it: the p99 of `/status`. They form no cycles to
    collect, and objects dropped later are still freed by reference counting."""
    gc.collect(0)
    gc.freeze()


def _return_freed() -> None:
    """Give the C heap's free pages back to the system (glibc's `malloc_trim`) after
    opening, a merge or a save of the graph. Each makes and frees large blocks (opening
    reads each segment, joins them and copies the columns into the page table; a merge
    and a save fold many rows); glibc keeps those freed blocks for later (its mmap
    threshold rises with each large block freed): about 0.75 KB a page at 100 k pages
    after opening, 169 MB at the end of adding a million pages, never used again.
    Elsewhere than glibc there is nothing to call."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    pa.default_memory_pool().release_unused()  # Arrow's own allocator, likewise


# An index left open at exit is finalised like any object (its writer lock released).
atexit.register(gc.unfreeze)


def _tuple_lists(d: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
