"""The saves of an open index: its state as one `graph-N/` folder (the scan graph's arrays,
the page table, the groups and winners), or the graph's changes since that save as a
`changes-N/` folder, each committed as a version; and the state mapped from a save.

A save only reads the state (each store's saved arrays and what changed since, merged a
block at a time as the files take them), so reads need not wait for it; the next batch
does. Why functions here: a save needs the committed version (`committed.Committed`), the
state and the index's lock, and nothing else of the index.
"""

from __future__ import annotations

import itertools
import shutil
import threading
from typing import Any

import numpy as np

from neardup.index.committed import Committed
from neardup.index.files.band_save import TableWriter, band_writer, fill_tables
from neardup.index.files.graph_changes import changes_name, graph_changes
from neardup.index.files.manifest_meta import saved_at
from neardup.index.files.saves import read_arrays, write_arrays
from neardup.index.files.store import GRAPH_PREFIX, Manifest, commit, empty_segment
from neardup.index.memory import return_freed
from neardup.index.opening import read_graph, saved_tables
from neardup.index.state.groups import GROUP_ARRAYS
from neardup.index.state.index_state import IndexState
from neardup.index.state.overlay import FoldRule
from neardup.index.state.pages import PAGE_ARRAYS
from neardup.index.state.scangraph import GRAPH_ARRAYS, ScanGraph
from neardup.kernels.sorting import sorted_distinct

# The state is saved again (`graph-N/`) by a batch once the pages written since the last
# save exceed this many and this share of the index (a server or a crash never leaves
# more to replay on opening, nor more changes in memory; each page is rewritten a bounded
# number of times however the index grew), and when the writer closes once they exceed
# the smaller `GRAPH_AT_CLOSE_*` (what the next opening replays after a clean close).
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


def save_graph(
    committed: Committed,
    state: IndexState,
    lock: threading.RLock,
    write_tables: TableWriter = fill_tables,
) -> None:
    """Save the state (`ScanGraph.arrays`: the graph of the committed pages, overlay
    folded in; the pages, groups and winners) as a `graph-N/` folder and commit a version
    naming it and no segment: the next opening maps it. A kill before that commit leaves
    a folder no manifest names (removed by the next writer). Then the state is mapped from
    the new folder (its overlay dropped from memory) and the old folders removed (a reader
    that mapped them keeps its mapping). `write_tables`: who writes the band tables."""
    return_freed()  # the batches' freed blocks, before the save makes its own
    # Nothing is folded in memory first: each store hands its saved arrays with what changed
    # since merged in, block by block (`state/merged_runs.py`), and reads only; batches wait
    # for the save (`ServiceIndex._writing`), reads need not.
    store = committed.store
    with committed.lock:
        old = committed.manifest
        name = f"{GRAPH_PREFIX}{old.version + 1:08d}"  # a version's number is used once
        n = state.pages.n
        # Slots for the next batches' pages: the next save is due once the rows written
        # since pass n/7 (`save_due`: 8 x rows > n + new pages), so with a batch more the
        # columns never outgrow the room before it (a grow copies every column: at a
        # million pages 35 MiB, made just before the save, when room was n/8).
        room = n // max(GRAPH_EVERY_SHARE - 1, 1) + 1024
        before, changed = committed.graph_meta, committed.changes_meta
        mapped = None if before is None else store / str(before["name"])
        written = sorted_distinct(np.concatenate(committed.written))
        arrays = itertools.chain(
            state.scan_graph.arrays(band_writer(write_tables), room, mapped),
            state.pages.saved_arrays(room, written),
            state.groups.saved_arrays(),
            state.winners.saved_arrays(),
        )
        write_arrays(store, name, arrays, hook=True)
        saved: dict[str, Any] = {"name": name, "version": old.version, "pages": n}
        if state.groups.written_counts is not None:  # (groups of >= 1 and >= 2 pages)
            saved["group_counts"] = list(state.groups.written_counts)
        committed.graph_meta, committed.changes_meta = saved, None  # against the old save
        try:
            # The save holds every row of every segment (the state of `old.version`):
            # the new version names none, so the index is on disk once, not twice.
            new = Manifest(old.version + 1, [], [], committed.meta(state))
            commit(store, new)
        except BaseException:
            committed.graph_meta, committed.changes_meta = before, changed
            raise
        committed.manifest = new
        committed.replay_tail = 0
    map_graph(committed, state, lock, saved)
    # Readers that mapped the old files keep their maps; one opening meanwhile finds a
    # file gone and reads the new version (`read_committed`).
    gone = [*old.segments, *(str(m["name"]) for m in (before, changed) if m is not None)]
    for folder in gone:
        shutil.rmtree(store / folder, ignore_errors=True)
    return_freed()  # the overlay folded into the files, and the save's blocks


def save_changes(committed: Committed, state: IndexState) -> None:
    """Write the graph's changes since the save (`graph_changes.py`) and commit a version
    naming them, with the same segments: the next opening takes them in and replays only
    the rows written after them. A kill before the commit leaves a folder no manifest
    names (removed by the next writer); the changes they replace are removed after it."""
    assert committed.graph_meta is not None
    store = committed.store
    with committed.lock:
        old = committed.manifest
        name = changes_name(old.version + 1)
        graph = str(committed.graph_meta["name"])
        saved_slots = read_arrays(store, graph, ("member",))["member"].size  # (its header)
        changes = graph_changes(state.scan_graph, saved_slots)
        write_arrays(store, name, changes, hook=True)
        before = committed.changes_meta
        committed.changes_meta = {"name": name, "version": old.version, "graph": graph}
        try:
            new = Manifest(old.version + 1, old.segments, old.rows, committed.meta(state))
            commit(store, new)
        except BaseException:
            committed.changes_meta = before
            raise
        committed.manifest = new
        committed.replay_tail = 0
    if before is not None:
        shutil.rmtree(store / str(before["name"]), ignore_errors=True)


def map_graph(
    committed: Committed, state: IndexState, lock: threading.RLock, graph: dict[str, Any]
) -> None:
    """The graph mapped from its saved folder `graph` (`graph_meta` of the version it was
    saved with), in place of the one in memory and its overlay; with the pages, groups
    and winners saved beside it, those too (the state in memory is the one saved), so a
    long-lived writer or server holds what it changed since its last save, not every
    page it ever changed."""
    pages_saved = "pages" in graph
    names = GRAPH_ARRAYS + (PAGE_ARRAYS + GROUP_ARRAYS if pages_saved else ())
    arrays = read_graph(committed.store, str(graph["name"]), names)
    pages, groups, winners = state.pages, state.groups, state.winners
    if pages_saved:
        settings, dims = state.settings, state.options.dims
        nothing = empty_segment(settings.num_perm, dims)
        none = np.empty(0, np.int64)
        tables = saved_tables(committed.store, settings, dims, graph, arrays, nothing, none)
        pages, groups, winners, _ = tables
    mapped = ScanGraph(state.settings, pages, arrays)
    with lock:
        assert pages.n == state.pages.n, "the saved pages are not the ones in memory"
        mapped.verifications = state.scan_graph.verifications
        state.pages, state.groups, state.winners, state.scan_graph = pages, groups, winners, mapped
        committed.graph_meta = graph
        committed.graph_tail = 0
        committed.written = [np.empty(0, np.int64)]


def save_due(committed: Committed, pages: int) -> bool:
    """Whether the writer saves the state after a batch, the index holding `pages`."""
    return FoldRule(GRAPH_EVERY_PAGES, GRAPH_EVERY_SHARE).due(committed.graph_tail, pages)


def due_at_close(committed: Committed, pages: int) -> str | None:
    """What a writer that closes saves: "graph" (the state), "changes" (the graph's changes
    since the save, when many rows would be replayed and no save is due) or None."""
    if FoldRule(GRAPH_AT_CLOSE_PAGES, GRAPH_AT_CLOSE_SHARE).due(committed.graph_tail, pages):
        return "graph"
    if committed.replay_tail > CHANGES_AT_CLOSE_PAGES and saved_at(committed.manifest):
        return "changes"
    return None
