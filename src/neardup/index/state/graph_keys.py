"""The band keys of the scan graph's nodes: the keys each node is filed under in the band
index, and the keys a batch asks the band index for.

Why a module of its own: a node's keys are those of the sketch it had when it was filed,
which may no longer be the page table's (a batch rewrites the sketch before the node
leaves; opening replays rows written after the save). So a node's keys come, in this order,
from what the band index kept for it (`BandBuckets.keys_of`), from keys computed elsewhere
from the saved sketches (`BatchLookups.node_keys`, the Spark engine), or from its sketch
here; and the reads of saved sketches that costs are counted
(`ScanGraph.sketch_key_reads`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from neardup.config import Settings
from neardup.index.state.found import node_keys
from neardup.index.state.pages import PageTable
from neardup.kernels.sorting import sorted_distinct
from neardup.pipeline.steps.near_pairs import lsh_keys, lsh_shape

if TYPE_CHECKING:
    from neardup.index.state.scangraph import ScanGraph


def keys_of(
    graph: ScanGraph, nodes: list[int], known: dict[int, np.ndarray] | None = None
) -> np.ndarray:
    """The band keys each node is filed under (nodes x tables): kept by the band index,
    else its sketch's (`sketch_keys`)."""
    out = np.empty((len(nodes), graph.bands), np.int64)
    todo = []
    for i, s in enumerate(nodes):
        got = graph.buckets.keys_of(s)
        if got is None:
            todo.append(i)
        else:
            out[i] = got
    if todo:
        out[todo] = sketch_keys(graph, [nodes[i] for i in todo], known)
    return out


def sketch_keys(
    graph: ScanGraph, slots: list[int], known: dict[int, np.ndarray] | None = None
) -> np.ndarray:
    """The band keys of the current sketches of base nodes (len(slots) x tables): from
    `known` (saved nodes' keys computed elsewhere, `BatchLookups.node_keys`) where a
    sketch is still the saved one, else computed here (and a saved row read for it,
    counted)."""
    out = np.empty((len(slots), graph.bands), np.int64)
    pages, known = graph.pages, known or {}
    saved_n = pages.saved_from[1] if pages.saved_from is not None else 0
    todo = []
    for i, s in enumerate(slots):
        got = None if pages.sig_changed[s] else known.get(s)
        if got is None:
            todo.append(i)
            graph.sketch_key_reads += s < saved_n and not pages.sig_changed[s]
        else:
            out[i] = got
    if todo:
        sigs = pages.sigs[[slots[i] for i in todo]]
        out[todo] = lsh_keys(sigs, None, graph.bands, graph.rows)
    return out


def batch_keys(
    graph: ScanGraph,
    signatures: np.ndarray,
    slots: np.ndarray,
    known: dict[int, np.ndarray] | None = None,
) -> list[np.ndarray]:
    """The band keys a batch asks the band index for, per table (sorted, distinct): its
    new sketches' keys and the keys its stored pages (`slots`) that are nodes are filed
    under. (A node that leaves because a page of the batch joins its class shares that
    page's sketch; a page that is no node takes no node's keys with it.) What
    `ServiceIndex` has searched elsewhere before the batch (`BandBuckets.preload`); a key
    it misses is searched here, so a guess that is short costs time, not the answer."""
    parts = [np.empty((0, graph.bands), np.int64)]
    if signatures.shape[0]:
        parts.append(lsh_keys(signatures, None, graph.bands, graph.rows))
    slots = slots[slots < min(graph.pages.n, graph.node.size)]
    nodes = slots[graph.node[slots]]
    if nodes.size:
        parts.append(keys_of(graph, nodes.tolist(), known))
    every = np.concatenate(parts)
    return [sorted_distinct(every[:, t]) for t in range(graph.bands)]


def saved_node_keys(
    settings: Settings, pages: PageTable, slots: np.ndarray, node: np.ndarray
) -> dict[int, np.ndarray]:
    """The band keys of those of `slots` that `node` (a saved graph's column) marks as
    nodes, from the page table's sketches: read before the rows written since the save
    replace them, these are the sketches the saved band index filed those nodes under
    (`ScanGraph.replay`), found without a pass over the band index."""
    nodes, keys = node_keys(node, pages.sigs.__getitem__, slots, *lsh_shape(settings))
    return dict(zip(nodes.tolist(), keys, strict=True))
