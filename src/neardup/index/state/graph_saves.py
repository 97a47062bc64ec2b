"""The scan graph as a save holds it: the arrays handed to the files (`graph_arrays`, a
`graph-N/` folder of `.npy` files) and their names, the arrays of a graph of no page, and
the whole graph keyed by URL (`graph_view`, how tests tell two graphs are one).

Why apart from the graph: what a save holds is a contract with the files (`files/saves.py`
writes these shapes, `store.read_arrays` maps them back by these names, `ScanGraph`'s
constructor takes them, `files/graph_changes.py` writes the overlay beside them); each
store folds its own overlay in (`graph_stores`), and this module only lays them out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from neardup.index.state.arrays import BandWriter, FilledInPlace, RowBlocks
from neardup.index.state.graph_keys import keys_of
from neardup.index.state.graph_update import LOW32

if TYPE_CHECKING:
    from neardup.index.state.scangraph import ScanGraph

SLOT_COLUMNS = ("member", "mfp", "node")  # the graph's per-slot columns, saved by slot
# the candidate counts and the edges, saved whole and in a save's changes alike
EDGE_ARRAYS = ("pair_keys", "pair_counts", "adj_u", "adj_ptr", "adj_v", "adj_s")
GRAPH_ARRAYS = (  # the files of a saved graph (`graph_arrays`)
    *SLOT_COLUMNS,
    "cls_fp",
    "cls_slot",
    *EDGE_ARRAYS,
    "band_keys",
    "band_slots",
)


def empty_arrays(tables: int) -> dict[str, np.ndarray]:
    """The arrays of a graph of no page (`tables` band tables)."""
    return {
        "member": np.zeros(0, bool),
        "mfp": np.zeros(0, np.int64),
        "node": np.zeros(0, bool),
        "cls_fp": np.zeros(0, np.int64),
        "cls_slot": np.zeros(0, np.int64),
        "pair_keys": np.zeros(0, np.int64),
        "pair_counts": np.zeros(0, np.int16),
        "adj_u": np.zeros(0, np.int64),
        "adj_ptr": np.zeros(1, np.int64),
        "adj_v": np.zeros(0, np.int32),
        "adj_s": np.zeros(0, np.float32),
        "band_keys": np.zeros((tables, 0), np.int64),
        "band_slots": np.zeros((tables, 0), np.int32),
    }


def graph_arrays(
    graph: ScanGraph, writer: BandWriter, room: int = 0, before: Path | None = None
) -> Iterator[tuple[str, np.ndarray] | RowBlocks | FilledInPlace]:
    """The graph as base arrays with no overlay (what `graph-N/` holds): the saved arrays
    with what changed since folded in. Made one group of arrays at a time as the writer
    takes them (`store.write_arrays`): a save holds one group beside the graph, not a
    second copy of all of it. The per-slot columns have `room` empty slots after the
    pages. The band index is written by `writer` from the save `before` (the folder the
    graph's base maps) and the changes since (`files/band_save.band_writer`: its tables by
    this process, or elsewhere)."""
    n = graph.pages.n
    for name in SLOT_COLUMNS:
        col = getattr(graph, name)
        pad = np.zeros(room, col.dtype)
        yield RowBlocks({name: ((n + room,), col.dtype)}, [(col[:n],), (pad,)])
    yield graph.classes.arrays()
    yield graph.pairs.arrays()
    yield from graph.edges.arrays(n)
    yield from graph.buckets.saved(before, writer)


def graph_view(graph: ScanGraph) -> tuple[dict, ...]:
    """The whole graph keyed by URL (for tests: two graphs are one when these are): each
    node's edges, the candidates with their counts, each page's class fingerprint, each
    class's pages and representative, each node's band keys."""
    url = graph.pages.url_at
    members = np.flatnonzero(graph.member[: graph.pages.n]).tolist()
    nodes = [s for s in members if graph.node[s]]
    fps = {int(graph.mfp[s]) for s in members}
    pairs = graph.pairs.live()
    return (
        {url(u): {url(v): s for v, s in graph.neighbours(u).items()} for u in nodes},
        {tuple(sorted((url(p >> 32), url(p & LOW32)))): c for p, c in pairs.items()},
        {url(s): int(graph.mfp[s]) for s in members},
        {fp: frozenset(url(s) for s in graph.class_members(fp)) for fp in fps},
        {fp: url(r) for fp in fps if (r := graph._rep(fp)) is not None},
        {url(s): tuple(k) for s, k in zip(nodes, keys_of(graph, nodes).tolist(), strict=True)},
    )
