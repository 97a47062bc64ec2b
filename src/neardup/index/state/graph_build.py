"""The scan graph of a whole stored index built at once, as the scan builds its own.

Why a path of its own beside the batch's update (`graph_update.py`): an index opened without
saved graph arrays (one of an older neardup, or whose graph was never saved) has every page
to put in at once, and a page at a time would cost what all its batches cost. Here the
scan's kernels run over arrays (classes by the scan's rule, every band table, the bucket
rule, verification in chunks) and give the same state the update reaches page by page,
as the base arrays a save writes (`graph_saves.graph_arrays`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow.compute as pc

from neardup.index.state.band_buckets import BandBuckets
from neardup.index.state.graph_stores import joined
from neardup.kernels.buckets import CandidateStats, table_pairs, unpack_pairs
from neardup.pipeline.steps.near_pairs import equivalence_classes, lsh_keys, pair_scores, passes

if TYPE_CHECKING:
    from neardup.index.state.scangraph import ScanGraph

_VERIFY_CHUNK = 65_536  # candidate pairs verified at a time (their sketches)


def build_graph(graph: ScanGraph, slots: np.ndarray) -> None:
    """Put the eligible live pages `slots` into the empty `graph`: classes, band index,
    candidate counts and verified edges."""
    assert not graph.member.any(), "build makes an empty graph"
    graph._fit()
    n = slots.size
    if not n:
        return
    pages, settings = graph.pages, graph.settings
    slots = np.asarray(slots, np.int64)
    keys = pages.key[slots]
    fps = pages.shingle_fp[slots]
    # URL order (Arrow's string order is Python's: UTF-8 bytes sort as code points).
    by_url = np.asarray(pc.sort_indices(pages.url_array(slots)), dtype=np.int64)
    rank = np.empty(n, np.int64)
    rank[by_url] = np.arange(n)
    # Classes: the representative of a shingle set is its first page in (key, URL)
    # order, by the scan's rule on the pages in URL order.
    reps = by_url[np.unique(equivalence_classes(fps[by_url], keys[by_url]))]
    order = by_url[np.argsort(fps[by_url], kind="stable")]
    graph.member[slots] = True
    graph.mfp[slots] = fps
    graph.note_written(slots)
    graph.classes.fp, graph.classes.slot = fps[order], slots[order]
    # The nodes in URL order, as the scan numbers them (its chains break key ties so).
    reps = reps[np.argsort(rank[reps], kind="stable")]
    rep_slots = slots[reps]
    graph.node[rep_slots] = True
    node_sigs = pages.sigs[rep_slots]
    band = lsh_keys(node_sigs, None, graph.bands, graph.rows)
    bk, bs = [], []
    for t in range(graph.bands):
        o = np.argsort(band[:, t], kind="stable")
        bk.append(band[o, t])
        bs.append(rep_slots[o].astype(np.int32))
    graph.buckets = BandBuckets(graph.bands, np.stack(bk), np.stack(bs), graph.member.size)
    # Candidates: each table's pairs by the scan's bucket rule (chains in key order),
    # counted over the tables that emit them.
    docs = np.arange(reps.size, dtype=np.int64)
    stats = CandidateStats()
    per_table = [
        table_pairs(
            np.ascontiguousarray(band[:, t]), docs, settings.max_bucket_pairs, stats, keys[reps]
        )
        for t in range(graph.bands)
    ]
    packed, counts = np.unique(np.concatenate(per_table), return_counts=True)
    a, b = unpack_pairs(packed)
    sa, sb = rep_slots[a], rep_slots[b]
    lo, hi = np.minimum(sa, sb), np.maximum(sa, sb)
    by_slot = (lo << 32) | hi
    o = np.argsort(by_slot)
    graph.pairs.keys, graph.pairs.counts = by_slot[o], counts[o].astype(np.int16)
    eu, ev, es = [], [], []
    for start in range(0, packed.size, _VERIFY_CHUNK):
        pa_, pb = a[start : start + _VERIFY_CHUNK], b[start : start + _VERIFY_CHUNK]
        sim, agree = pair_scores(node_sigs[pa_], node_sigs[pb])
        ok = passes(sim, agree, settings.threshold, False)
        eu.append(rep_slots[pa_[ok]])
        ev.append(rep_slots[pb[ok]])
        es.append(sim[ok].astype(np.float32))
    graph.edges.set_base(
        joined(eu, np.int64), joined(ev, np.int64), joined(es, np.float32), graph.member.size
    )
    graph.verifications += int(packed.size)
