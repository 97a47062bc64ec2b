"""The scan graph's changes since the last save, written when a writer closes (issue 27).

An index opens from its save (mapped) and the rows its segments hold since; the pages,
groups and winners take those rows in place, but the scan graph (classes, candidate
counts, edges, band index) has to be brought up to date by replaying them, about as dear as
applying them was (65 µs a page at a million pages). A writer saved at close once more than
1/32 of the index was written since, so each `neardup add` replayed up to that much: at a
billion pages, half an hour of one core a day. Instead, a writer that closes with rows to
replay writes what its graph changed since the save, a small folder (`changes-N/`) of the
overlay's entries only: the per-slot columns of the slots written since the save, the
classes, candidate counts and edges changed (keys ascending), and the band index's own
changes (`BandBuckets.changes`: its delta, stashed keys and the nodes that left). The next
opening maps the save, takes these in as levels read where they lie
(`taken_entries.TakenEntries`, `band_buckets.TakenRun`: no object an entry), and replays
only the rows written after them. A save makes
them stale (the manifest names them with the save they were written against, and a save's
version names none); a writer removes stale ones as leftovers.

Everything here is kept exactly as the graph holds it in memory (edge resemblances as
float64, the order of a class's members and of a node's edges), so the opened graph is the
writer's, not an approximation of it (tested against the writer's and a twin's replay).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from neardup.index.files.store import CHANGES_PREFIX
from neardup.index.state.arrays import RowBlocks
from neardup.index.state.scangraph import EDGE_ARRAYS, SLOT_COLUMNS

if TYPE_CHECKING:
    from neardup.index.state.scangraph import ScanGraph

# The band index's own changes (`BandBuckets.changes`): here, and beside a base a save
# kept (`BandBuckets.saved`), with the keys by node (`CHANGE_ARRAYS_SINCE`).
BAND_CHANGE_ARRAYS = ("delta_keys", "delta_slots", "stash_slots", "stash_keys", "dead")
CHANGE_ARRAYS = (
    "slots",
    *SLOT_COLUMNS,
    "cls_fp",
    "cls_ptr",
    "cls_slots",
    *EDGE_ARRAYS,
    *BAND_CHANGE_ARRAYS,
)
# Written since the changes kept their delta's keys by node too (`BandBuckets.changes`);
# changes written before lack them, and their keys are sorted by node on opening instead.
CHANGE_ARRAYS_SINCE = ("node_slots", "node_keys")


def changes_name(version: int) -> str:
    return f"{CHANGES_PREFIX}{version:08d}"


def graph_changes(graph: ScanGraph, saved_slots: int) -> list[tuple[str, np.ndarray] | RowBlocks]:
    """What `graph` holds beyond the save whose per-slot columns have `saved_slots` rows,
    as files to write (`write_arrays`: arrays, and the band index's as blocks): the slots
    written since (`ScanGraph.written_slots`) and those past the save's."""
    n = graph.pages.n
    m = min(n, saved_slots)
    written = graph.written_slots()
    slots = np.concatenate([written[written < m], np.arange(m, n, dtype=np.int64)])
    out: dict[str, np.ndarray] = {"slots": slots}
    for name in SLOT_COLUMNS:
        out[name] = np.asarray(getattr(graph, name)[slots])
    out["cls_fp"], out["cls_ptr"], out["cls_slots"] = graph.classes.changes()
    out["pair_keys"], out["pair_counts"] = graph.pairs.changes()
    out["adj_u"], out["adj_ptr"], out["adj_v"], out["adj_s"] = graph.edges.changes()
    return [*out.items(), *graph.buckets.changes()]


def slot_changes_into(columns: Mapping[str, np.ndarray], changes: Mapping[str, np.ndarray]) -> None:
    """The per-slot changes put into columns of the save (copy-on-write maps), for the slots
    they hold: the graph's columns as of the changes, before the graph is made from them."""
    slots = np.asarray(changes["slots"])
    inside = slots < columns["member"].size
    for name in SLOT_COLUMNS:
        columns[name][slots[inside]] = np.asarray(changes[name])[inside]


def take_changes(graph: ScanGraph, changes: Mapping[str, Any]) -> None:
    """The changes put into a graph made from the save they were written against."""
    graph._fit()
    slots = np.asarray(changes["slots"])
    for name in SLOT_COLUMNS:
        getattr(graph, name)[slots] = np.asarray(changes[name])
    graph.note_written(slots)
    graph.classes.take(changes["cls_fp"], changes["cls_ptr"], changes["cls_slots"])
    graph.pairs.take(changes["pair_keys"], changes["pair_counts"])
    graph.edges.take(changes["adj_u"], changes["adj_ptr"], changes["adj_v"], changes["adj_s"])
    graph.buckets.take_changes(changes)
