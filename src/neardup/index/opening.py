"""The opening of an index's last committed version into the state in memory.

Of an index saved with its pages, the pages, groups, winners and the scan graph's arrays
are memory-mapped from the save (nothing is read until a batch or a lookup reads it), and
the rows written since are put in place and replayed into the graph, after the graph's
changes since the save when the version names them (`files/graph_changes.py`). An index
saved by an older neardup (no pages beside its graph) has its pages read from its
segments; one without a graph builds it at once (and a writer then saves both, so the next
opening maps them).

Why functions here and not the index's methods: opening needs the files and the state and
nothing of the index's locks; `ServiceIndex` calls `open_version` and holds what it gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from neardup.config import Settings
from neardup.index.committed import Committed
from neardup.index.files.graph_changes import (
    BAND_CHANGE_ARRAYS,
    CHANGE_ARRAYS,
    CHANGE_ARRAYS_SINCE,
    slot_changes_into,
    take_changes,
)
from neardup.index.files.legacy import give_slots
from neardup.index.files.manifest_meta import changes_of, saved_at, stored_config, version_meta
from neardup.index.files.saves import (
    CHANGES_BY_BLOCKS,
    FLAT_VECTORS,
    read_arrays,
    read_vectors,
)
from neardup.index.files.segment_rows import segment_rows
from neardup.index.files.segments import read_committed
from neardup.index.files.store import Manifest, Segment, graph_name, read_manifest
from neardup.index.memory import no_collection
from neardup.index.state.groups import GROUP_ARRAYS, GroupMembers, Winners
from neardup.index.state.index_state import IndexState
from neardup.index.state.lengths import LengthMap
from neardup.index.state.pages import PAGE_ARRAYS, PageTable
from neardup.index.state.scangraph import GRAPH_ARRAYS, ScanGraph, saved_node_keys
from neardup.index.state.tier2 import SignatureStore
from neardup.index.state.updates import ServiceError, ServiceOptions
from neardup.kernels.sorting import sorted_distinct

Arrays = dict[str, np.ndarray]


class _Unreadable(Exception):
    """A graph folder the manifest names lacks a file this neardup reads."""


def open_version(
    committed: Committed,
    settings: Settings,
    options: ServiceOptions,
    bands_rows: tuple[int, int],
    writer: bool,
) -> tuple[IndexState, bool]:
    """The state of the last committed version of `committed.store`, and whether a writer
    should save it now (its graph was built at once, or its pages are not saved beside
    it). `committed` is set to that version: its manifest, saved graph and changes, and
    the rows written since the save."""
    store = committed.store
    committed.written = [np.empty(0, np.int64)]
    manifest, state, saved, changes = read_version(store, settings, options)
    at = saved_at(manifest) if saved is not None else None  # the saved pages' version
    if writer and at is None and state.pages.column("slot").null_count:
        manifest, state = give_slots(store, manifest, state)
    committed.manifest = manifest
    graph_meta: dict[str, Any] | None = manifest.meta.get("graph")
    committed.graph_meta = graph_meta
    # The graph's changes since the save that this version names (None: none).
    committed.changes_meta = changes_of(manifest) if changes is not None else None
    store_rows = SignatureStore(
        settings.num_perm,
        options.dims,
        settings.threshold,
        "lengths" if options.tier2 == "bands" else options.tier2,  # unused with "bands"
        options.parts,
        options.rho,
        *bands_rows,
    )
    st = IndexState(settings, options, store_rows, int(manifest.meta.get("next_group", 1)))
    saved_keys = None  # the band keys the saved graph filed the replayed nodes under
    replay = None  # the rows to replay into the graph (None: every row since the save)
    if saved is not None and at is not None:
        assert graph_meta is not None
        tail = state.pages.column("slot").to_numpy()
        if changes is not None:  # replayed: only the rows written after the changes
            assert committed.changes_meta is not None
            slot_changes_into(saved, changes)
            after = state.pages.column("version").to_numpy()
            replay = tail[after > int(committed.changes_meta["version"])]
        replayed = tail if replay is None else replay
        st.pages, st.groups, st.winners, saved_keys = saved_tables(
            store, settings, options.dims, graph_meta, saved, state, replayed
        )
        committed.written = [tail]  # rows that differ from the save's (`save_graph`)
    else:
        # The pages as columns (`pages.PageTable`): one signature matrix, no object a page.
        st.pages = PageTable.from_rows(
            state.pages, state.signatures, state.dim_lengths, settings.num_perm, options.dims
        )
        # Which pages were written after the saved graph (to replay), by row version.
        slot_col, version_col = state.pages.column("slot"), state.pages.column("version")
        tail = np.empty(0, np.int64)
        if graph_meta is not None and not slot_col.null_count:
            newer = version_col.fill_null(0).to_numpy() > int(graph_meta["version"])
            tail = slot_col.to_numpy()[newer]
        # The groups and winners as arrays (`state/groups.py`): no object a page or a group.
        st.groups = GroupMembers(st.pages)
        st.winners = Winners(state.groups)
    t = st.pages
    n = t.n
    del state  # its columns and signatures are the table's now: freed before the graph
    for slot, target in t.redirect.items():
        source = t.url_at(slot)
        st.redirect_slot[source] = slot
        st.redirects.set(source, None, target)
    if options.tier2 != "bands":  # tier 2's own row store holds the sketched pages again
        has = np.flatnonzero(t.has_sig[:n] & (t.length[:n] > 0))
        for slot in has.tolist():
            store_rows.put(t.url_at(slot), t.sigs[slot], t.lens[slot])
    with no_collection():
        st.scan_graph = graph = ScanGraph(settings, t, saved)
        if saved is None:  # no saved graph: built at once from the pages
            committed.graph_meta = None
            all_slots = np.arange(n, dtype=np.int64)
            graph.build(all_slots[graph.eligible(all_slots)])
        else:
            if changes is not None:
                take_changes(graph, changes)
            replay = tail if replay is None else replay
            if replay.size:
                graph.replay(replay, saved_keys)
    committed.graph_tail = int(tail.size)  # rows written since the save
    committed.replay_tail = int(tail.size if replay is None else replay.size)  # to replay
    grid = manifest.meta.get("length_map")
    if grid is not None and len(grid["edges"]) == options.dims:
        store_rows.map = LengthMap.from_json(grid["edges"])
        store_rows.map_rows = int(grid["rows"])
    save_due = writer and n > 0 and (committed.graph_meta is None or at is None)
    return st, save_due


def read_version(
    store: Path, settings: Settings, options: ServiceOptions
) -> tuple[Manifest, Segment, Arrays | None, Arrays | None]:
    """The last committed version, its state and its graph's arrays mapped (None: it
    names none, or its pages have no slots yet). Of an index saved with its pages
    (`saved_at`), the state is only what was written since, and the arrays hold the
    rest; with them, the graph's changes since the save when the version names them
    (`graph_changes.py`). A writer may replace the graph folder between our reading the
    manifest and mapping it; then the newer version is read (`read_committed`)."""

    def graph_arrays(manifest: Manifest, state: Segment) -> tuple[Arrays, Arrays | None] | None:
        name = graph_name(manifest)
        saved = saved_at(manifest) is not None
        if name is None or (not saved and state.pages.column("slot").null_count):
            return None
        try:
            names = GRAPH_ARRAYS + (PAGE_ARRAYS + GROUP_ARRAYS if saved else ())
            arrays = read_graph(store, name, names)
            changes = changes_of(manifest) if saved else None
            if changes is None:
                return arrays, None
            return arrays, changes_arrays(store, str(changes["name"]))
        except FileNotFoundError:
            if read_manifest(store) == manifest and (store / name).is_dir():
                if saved:  # the segments it holds are gone: nothing to rebuild from
                    raise ServiceError(
                        f"{store / name}: the saved index lacks files this neardup"
                        " reads (written by a newer neardup, or damaged)"
                    ) from None
                # Still named, yet lacking a file: not arrays this neardup reads; the
                # graph is built at once instead (and a writer saves it anew).
                raise _Unreadable(name) from None
            raise  # replaced by a writer meanwhile: the newer version is read

    fallback = Manifest(meta=version_meta(settings, options, 1))
    try:
        got, state, read = read_committed(store, fallback, graph_arrays, saved_at)
        return (got, state, None, None) if read is None else (got, state, *read)
    except _Unreadable:

        def unsaved(manifest: Manifest) -> Manifest:
            manifest.meta.pop("graph", None)
            manifest.meta.pop("changes", None)
            return manifest

        got, state, _ = read_committed(store, fallback, lambda m, s: unsaved(m))
        return got, state, None, None


def read_graph(store: Path, name: str, names: tuple[str, ...]) -> dict[str, Any]:
    """The arrays `names` of the saved graph `name`, mapped copy-on-write (`read_arrays`),
    and under "band_run" the band index's changes the save wrote beside the base it kept
    (`BandBuckets.saved`; None where it folded them in), for `ScanGraph` to take in."""
    arrays: dict[str, Any] = read_arrays(store, name, names, writable=True)
    kept = (store / name / f"{BAND_CHANGE_ARRAYS[0]}.npy").exists()
    arrays["band_run"] = changes_arrays(store, name, BAND_CHANGE_ARRAYS) if kept else None
    return arrays


def changes_arrays(
    store: Path, name: str, wanted: tuple[str, ...] = CHANGE_ARRAYS
) -> dict[str, Any]:
    """A `changes-N/` folder's arrays `wanted` (or a save's band changes: `read_graph`),
    mapped, but the band delta's, read by blocks (`read_vectors`); those of
    `CHANGE_ARRAYS_SINCE` None where an older writer wrote none."""
    since = tuple(k for k in CHANGE_ARRAYS_SINCE if (store / name / f"{k}.npy").exists())
    names = (*wanted, *since)
    vectors = tuple(k for k in names if k in CHANGES_BY_BLOCKS or k in FLAT_VECTORS)
    mapped = tuple(k for k in names if k not in vectors)
    got: dict[str, Any] = dict(read_arrays(store, name, mapped, by_blocks=False))
    got.update(read_vectors(store, name, vectors))
    got.update({k: None for k in CHANGE_ARRAYS_SINCE if k not in since})
    return got


def saved_tables(
    store: Path,
    settings: Settings,
    dims: int,
    graph: dict[str, Any],
    saved: Arrays,
    tail: Segment,
    replay: np.ndarray,
) -> tuple[PageTable, GroupMembers, Winners, dict[int, np.ndarray]]:
    """The pages, groups and winners as saved with the graph `graph` names (maps), then
    the rows written since (`tail`) put in place: a page's row, its group's members,
    the group rows. A group that lost its last page since is no group (a merge that
    reached the oldest segment may have dropped its deletion row). With them, the band
    keys the saved graph filed the nodes among `replay` under (`ScanGraph.replay`)."""
    folder = store / str(graph["name"])
    n = int(graph["pages"])
    t = PageTable.from_saved(saved, n, settings.num_perm, dims, folder)
    slots = tail.pages.column("slot").to_numpy()
    keys = saved_node_keys(settings, t, replay, saved["node"])
    before = t.apply_rows(tail.pages, tail.signatures, tail.dim_lengths)
    groups = GroupMembers(t, saved, graph.get("group_counts"))
    groups.move(slots, before)
    winners = Winners(tail.groups, saved)
    for gid in sorted_distinct(before[before >= 0]).tolist():
        if not groups.get(gid):
            winners.pop(gid)
    groups.fold_if_due()
    winners.fold_if_due()
    return t, groups, winners, keys


def committed_rows(store: Path, bands_rows: tuple[int, int]) -> Segment:
    """Every page and group row of the last committed version of `store`, as one segment
    (its rows' version: that version's), read by a new opening of the files (the save and
    the segments since) with the settings and options stored: what the files hold, not
    an open copy's memory. The segments alone no longer hold it once a save took them in."""
    manifest = read_manifest(store)
    if manifest is None:
        raise ServiceError(f"{store} holds no committed version")
    settings, options = stored_config(manifest.meta)
    committed = Committed(store)
    st, _ = open_version(committed, settings, options, bands_rows, writer=False)
    # (`keys` lists the groups with a page: listing their members too read every saved
    # group's URLs, one read a group, minutes at ten million pages)
    live = set(st.groups.keys())
    version = committed.manifest.version
    return segment_rows(st.pages, st.groups, st.winners, set(st.pages), live, set(), version)
