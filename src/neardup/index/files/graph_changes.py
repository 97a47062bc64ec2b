"""The scan graph's changes since the last save, written when a writer closes (issue 27).

An index opens from its save (mapped) and the rows its segments hold since; the pages,
groups and winners take those rows in place, but the scan graph (classes, candidate
counts, edges, band index) has to be brought up to date by replaying them, about as dear as
applying them was (65 µs a page at a million pages). A writer saved at close once more than
1/32 of the index was written since, so each `neardup add` replayed up to that much: at a
billion pages, half an hour of one core a day. Instead, a writer that closes with rows to
replay writes what its graph changed since the save, a small folder (`changes-N/`) of the
overlay's entries only: the per-slot columns that differ from the save's, the classes,
candidate counts and edges changed, and the band index's own changes
(`BandBuckets.changes`: its delta, stashed keys and the nodes that left). The next opening
maps the save, takes these in, and replays only the rows written after them. A save makes
them stale (the manifest names them with the save they were written against, and a save's
version names none); a writer removes stale ones as leftovers.

Everything here is kept exactly as the graph holds it in memory (edge resemblances as
float64, the order of a class's members and of a node's edges), so the opened graph is the
writer's, not an approximation of it (tested against the writer's and a twin's replay).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from neardup.index.files.store import CHANGES_PREFIX
from neardup.index.state.arrays import RowBlocks
from neardup.index.state.overlay import Overlay
from neardup.index.state.scangraph import EDGE_ARRAYS, SLOT_COLUMNS

if TYPE_CHECKING:
    from neardup.index.state.scangraph import ScanGraph

CHANGE_ARRAYS = (
    "slots",
    *SLOT_COLUMNS,
    "cls_fp",
    "cls_ptr",
    "cls_slots",
    *EDGE_ARRAYS,
    "delta_keys",
    "delta_slots",
    "stash_slots",
    "stash_keys",
    "dead",
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
    out["cls_fp"], out["cls_ptr"], out["cls_slots"] = _packed(graph.cls_over)
    out["pair_keys"] = np.fromiter(graph.pair_over, np.int64, len(graph.pair_over))
    out["pair_counts"] = np.fromiter(graph.pair_over.values(), np.int64, len(graph.pair_over))
    out["adj_u"], out["adj_ptr"], out["adj_v"] = _packed(graph.adj_over)
    adj_s = chain.from_iterable(nb.values() for nb in graph.adj_over.values())
    out["adj_s"] = np.fromiter(adj_s, np.float64, int(out["adj_ptr"][-1]))
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
    graph.cls_over = Overlay(_unpacked(changes["cls_fp"], changes["cls_ptr"], changes["cls_slots"]))
    graph.pair_over = dict(
        zip(
            np.asarray(changes["pair_keys"]).tolist(),
            np.asarray(changes["pair_counts"]).tolist(),
            strict=True,
        )
    )
    s = np.asarray(changes["adj_s"]).tolist()
    ptr = np.asarray(changes["adj_ptr"]).tolist()
    graph.adj_over = {
        u: dict(zip(v, s[ptr[i] : ptr[i + 1]], strict=True))
        for i, (u, v) in enumerate(
            _unpacked(changes["adj_u"], changes["adj_ptr"], changes["adj_v"])
        )
    }
    graph.buckets.take_changes(changes)


def _packed(d: Mapping[int, object]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """{key: members (an iterable of ints, kept in its order)} as keys, pointers, members."""
    keys = np.fromiter(d, np.int64, len(d))
    sizes = np.fromiter((len(v) for v in d.values()), np.int64, len(d))  # type: ignore[arg-type]
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    # Straight into the array: a list of them first was a Python int a member (28 bytes and
    # a pointer each, at the peak of a writer's close).
    flat = np.fromiter(chain.from_iterable(d.values()), np.int64, int(ptr[-1]))  # type: ignore[arg-type]
    return keys, ptr, flat


def _unpacked(
    keys: np.ndarray, ptr: np.ndarray, flat: np.ndarray
) -> Iterator[tuple[int, tuple[int, ...]]]:
    """`_packed`'s arrays as (key, members) pairs: a tuple's slices are tuples, made once
    each (a list sliced, then made a tuple, was two copies of every member)."""
    p, f = np.asarray(ptr).tolist(), tuple(np.asarray(flat).tolist())
    return ((k, f[p[i] : p[i + 1]]) for i, k in enumerate(np.asarray(keys).tolist()))
