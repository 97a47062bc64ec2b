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

This module is that index: its state, its files and its locks. The rest is where it is
done: the opening of a version in `opening.py`, the committed version and a batch's
commit in `committed.py`, the merges in `merges.py`, the saves in `index_saves.py`, the
reads in `state/reads.py`, the batch algorithm in `state/apply_batch.py`, the conversion
of older indexes in `files/legacy.py`, the process's memory in `memory.py`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from neardup.config import Settings
from neardup.index import index_saves
from neardup.index.batch_queries import saved_queries
from neardup.index.committed import Committed
from neardup.index.files.band_save import TableWriter, fill_tables
from neardup.index.files.legacy import convert_legacy
from neardup.index.files.manifest_meta import (
    TIER2_MODES,
    opened_config,
    stored_config,
    version_meta,
)
from neardup.index.files.segment_rows import SERVICE_KIND, invariant_errors
from neardup.index.files.store import (
    LEGACY_DB,
    Manifest,
    Segment,
    commit,
    has_index,
    read_manifest,
    remove_leftovers,
)
from neardup.index.files.writer_lock import WriterLock
from neardup.index.memory import freeze_objects, no_collection, return_freed, unfreeze_objects
from neardup.index.merges import merge_due
from neardup.index.opening import committed_rows, open_version
from neardup.index.state import reads
from neardup.index.state.apply_batch import compute_batch
from neardup.index.state.found import Found
from neardup.index.state.groups import GroupMembers, Winners
from neardup.index.state.index_state import IndexState
from neardup.index.state.lookups import HERE, BatchLookups
from neardup.index.state.pages import PageTable
from neardup.index.state.popularity import RedirectGraph
from neardup.index.state.prepare import PreparedBatch, prepare_batch
from neardup.index.state.read_records import CheckResult, GroupView, IndexCounts, UrlStatus
from neardup.index.state.scangraph import ScanGraph
from neardup.index.state.tier2 import SignatureStore
from neardup.index.state.updates import BatchReport, PageUpdate, ServiceError, ServiceOptions
from neardup.kernels.lsh import recall_first_bands
from neardup.store.outputs import open_folder

__all__ = ["TIER2_MODES", "ServiceIndex", "stored_config"]


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
        self.committed = Committed(self.store)  # the manifest, with its commits' lock
        self._merging = threading.Lock()  # one merge at a time, outside `lock`
        self._writing = threading.Lock()  # one batch at a time, until its graph is saved
        if read_only:
            if not has_index(self.store):
                raise ServiceError(f"{self.store} holds no service index to open read-only")
        else:
            open_folder(self.store, SERVICE_KIND)  # never a folder of the user's
            self.writer = WriterLock(self.store, wait)
        self._opened = False  # whether the last committed version was opened whole
        self.state: IndexState  # set by `_load`
        try:
            self._open(settings, options)
        except BaseException:
            self.close()
            raise

    # The state in memory (`index_state.IndexState`) and the committed version, read here.
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

    @property
    def manifest(self) -> Manifest:
        return self.committed.manifest

    @property
    def graph_meta(self) -> dict[str, Any] | None:
        return self.committed.graph_meta

    @property
    def graph_tail(self) -> int:
        return self.committed.graph_tail

    @property
    def replay_tail(self) -> int:
        return self.committed.replay_tail

    def _open(self, settings: Settings | None, options: ServiceOptions | None) -> None:
        """The settings and options (`opened_config`), then the last committed version."""
        manifest = read_manifest(self.store)
        if manifest is None and (self.store / LEGACY_DB).is_file():
            if self.read_only:
                raise ServiceError(
                    f"{self.store} is an index of an older neardup: open it once for writing "
                    "(neardup add, or open_index without read_only) to convert it"
                )
            manifest = convert_legacy(self.store)
        self.settings, self.options = opened_config(manifest, settings, options)
        s, o = self.settings, self.options
        if s.bands and s.rows:
            self.bands, self.rows = s.bands, s.rows
        else:
            self.bands, self.rows = recall_first_bands(s.threshold, s.num_perm, s.band_recall)
        self.threshold = s.threshold
        if self.writer is not None:
            remove_leftovers(self.store, manifest)
            if manifest is None:  # a new store: its settings are its first version
                self.committed.manifest = Manifest(meta=version_meta(s, o, 1))
                commit(self.store, self.committed.manifest)
        self._load()

    def _load(self) -> None:
        """Open the last committed version (`opening.open_version`); a writer saves it at
        once when its graph was built or its pages are not saved beside it."""
        self._opened = False  # until the whole version is in memory (what `close` may save)
        bands_rows = (self.bands, self.rows)
        writer = self.writer is not None
        self.state, save_now = open_version(
            self.committed, self.settings, self.options, bands_rows, writer
        )
        if save_now:
            self._save_graph_now()
        # Arrow's allocator and glibc's heap keep what the files' tables used for their next
        # tables; an index holds none after opening: it goes back (about 0.9 KB a page).
        return_freed()
        freeze_objects()
        self._opened = True

    # ---------------------------------------------------------------- updates

    def apply(self, updates: Iterable[PageUpdate]) -> BatchReport:
        """Apply one batch as one transaction; on any error nothing of it remains."""
        t0 = time.perf_counter()
        return self.apply_prepared(self.prepared(updates), t0)

    def prepared(self, updates: Iterable[PageUpdate]) -> PreparedBatch:
        """A batch keyed by URL and sketched as this index takes it (`prepare_batch`, the URL
        rule applied); it needs no state: done before the lock."""
        return prepare_batch(updates, self.settings, self.options.dims, by_url=True)

    def saved_queries(
        self,
        prepared: PreparedBatch,
        pages: Found | None = None,
        node_keys: dict[int, np.ndarray] | None = None,
    ) -> tuple[Path, dict[str, list[np.ndarray]]] | None:
        """The keys a batch looks up in the saved arrays (`batch_queries`); None: no save."""
        if self.graph_meta is None:
            return None
        folder = self.store / str(self.graph_meta["name"])
        return saved_queries(self.state, folder, prepared, pages, node_keys)

    def apply_prepared(
        self,
        prepared: PreparedBatch,
        t0: float | None = None,
        lookups: BatchLookups = HERE,
        write_tables: TableWriter = fill_tables,
    ) -> BatchReport:
        """`apply` of a batch `prepared` (perhaps elsewhere, meanwhile). `lookups`: what the
        engine found of the saved arrays for the keys `saved_queries` named (by default
        read here); `write_tables`: who writes a save's band tables (the engine's)."""
        t0 = time.perf_counter() if t0 is None else t0
        if self.writer is None:
            raise ServiceError(f"{self.store} is open read-only: it takes no updates")
        with self._writing:  # one batch at a time, its graph saved before the next
            with self.lock, no_collection():
                try:
                    report, dirty_pages, dirty_groups, dropped = compute_batch(
                        self.state, prepared, lookups
                    )
                    self.committed.commit_batch(self.state, dirty_pages, dirty_groups, dropped)
                    self._fold_if_due()
                except BaseException:
                    self._load()  # memory never runs ahead of the last commit
                    raise
            # After the lock: a save only reads, so reads need not wait (the next batch does).
            if index_saves.save_due(self.committed, self.pages.n):
                self._save_graph_now(write_tables)
        self._merge_due()  # after the lock: reads need not wait for a merge
        self.state.release_read()
        freeze_objects()
        report.seconds = time.perf_counter() - t0
        return report

    def _merge_due(self) -> None:
        merge_due(self.committed, self._merging)

    def _fold_if_due(self) -> None:
        """Between batches. The writer folds no overlay into new arrays in memory: its next
        save merges them in as it writes (`index_saves.save_graph`), and a fold before it
        made the arrays the save streams and held them until then (at a million pages,
        166 MiB of them). A copy that follows another's batches never saves: it folds."""
        if self.writer is not None:
            self.groups.freeze()
            return
        self.pages.fold_if_due()
        self.groups.fold_if_due()
        self.winners.fold_if_due()

    def _save_graph_now(self, write_tables: TableWriter = fill_tables) -> None:
        """Save the state as a `graph-N/` folder and map it (`index_saves.save_graph`)."""
        index_saves.save_graph(self.committed, self.state, self.lock, write_tables)

    def _save_changes_now(self) -> None:
        """Save the graph's changes since the save (`index_saves.save_changes`)."""
        index_saves.save_changes(self.committed, self.state)

    def follow(self, prepared: PreparedBatch, graph: dict[str, Any] | None) -> None:
        """Apply in memory a batch another copy of this index (the writer) committed, so this
        copy holds the same version (`served.py`); nothing is written. `graph`: the writer's
        save after the batch, mapped here too when new (the overlay stays as small)."""
        with self.lock, no_collection():
            try:
                compute_batch(self.state, prepared)
                self._fold_if_due()
            except BaseException:
                self._load()  # the writer's committed version, read from the files
                raise
        self.map_saved(graph)
        freeze_objects()

    def map_saved(self, graph: dict[str, Any] | None) -> None:
        """Map the save `graph` of another copy at this version, if this one holds another."""
        if graph is not None and graph != self.graph_meta:
            index_saves.map_graph(self.committed, self.state, self.lock, graph)

    def close(self, write_tables: TableWriter = fill_tables) -> None:
        """Save the state, or the graph's changes, when due (`index_saves.due_at_close`: so
        the next opening replays few pages), then release the writer lock. `write_tables`:
        who writes a save's band tables (the engine's)."""
        try:
            if self.writer is not None and self._opened:
                due = index_saves.due_at_close(self.committed, self.pages.n)
                if due == "graph":
                    with self.lock:
                        self._save_graph_now(write_tables)
                elif due == "changes":
                    with self.lock:
                        self._save_changes_now()
        finally:
            if self.writer is not None:
                self.writer.release()
                self.writer = None
            unfreeze_objects()  # what `freeze_objects` hid is collectable again

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

    def status(self, url: str) -> UrlStatus | None:
        """Group, winner and duplicate status of a stored URL (following redirects)."""
        return reads.status(self.state, url)

    def group(self, gid: int) -> GroupView | None:
        """A group's members (the winner first) and the redirects into it."""
        return reads.group(self.state, gid)

    def popularity(self, url: str) -> int:
        """In-links of `url` plus those of every page redirecting to it (see popularity.py)."""
        return self.state.popularity(url)

    def resemblance_to_winner(self, signature: np.ndarray | None, gid: int) -> float | None:
        """Estimated resemblance of a sketch to group `gid`'s winner (`reads`)."""
        return reads.resemblance_to_winner(self.state, signature, gid)

    def check(self, text: str | None = None, html: str | bytes | None = None) -> CheckResult:
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

    def counts(self) -> IndexCounts:
        return reads.counts(self.state)

    # ---------------------------------------------------------------- checks

    def consistency_errors(self) -> list[str]:
        """Invariants of the last committed version (used by tests and after a crash)."""
        return invariant_errors(self.committed_state())

    def committed_state(self) -> Segment:
        """Every page and group row of the last committed version, as the files hold it
        (`opening.committed_rows`)."""
        return committed_rows(self.store, (self.bands, self.rows))
