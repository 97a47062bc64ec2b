"""The keys a batch looks up in the index's saved sorted arrays, for a search of them
elsewhere (Spark's executors, `engines/spark_jobs.saved_entries_on_spark`), whose answers
the batch's apply then takes as `found` (`state/lookups.BatchLookups`).

Why a function of the state: naming the keys reads the page table and the scan graph in
memory and nothing of the files but where the save lies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from neardup.index.state.found import Found
from neardup.index.state.index_state import IndexState
from neardup.index.state.prepare import PreparedBatch
from neardup.kernels.sorting import sorted_distinct
from neardup.pipeline.steps.near_pairs import url_key


def saved_queries(
    state: IndexState,
    folder: Path,
    prepared: PreparedBatch,
    pages: Found | None = None,
    node_keys: dict[int, np.ndarray] | None = None,
) -> tuple[Path, dict[str, list[np.ndarray]]]:
    """Where the index is saved (`folder`, the graph folder) and the keys the batch will
    look up in its saved sorted arrays (`saved_search.SEARCHED`), a list of sorted keys a
    row. In two rounds: first (`pages` None) the page keys of its URLs and of the pages
    its redirects lead to; then, with those keys' entries (`pages`), what needs the stored
    pages' slots: the band keys a table (`ScanGraph.batch_keys`), the classes'
    fingerprints (its sketches' and those of the classes its stored pages are in), and the
    page keys of where its stored pages redirected to. `node_keys`: the band keys of saved
    nodes, computed elsewhere from their saved sketches (`ScanGraph.saved_keys`)."""
    urls = list(prepared.updates)
    keys = [sk.key if (sk := prepared.sketches.get(u)) is not None else None for u in urls]
    if pages is None:
        targets = [u.redirect_to for u in prepared.updates.values() if u.redirect_to]
        page_keys = [url_key(u) if k is None else k for u, k in zip(urls, keys, strict=True)]
        page_keys += [url_key(t) for t in targets]
        return folder, {"page": [sorted_distinct(np.array(page_keys, np.int64))]}
    found = state.pages.lookup(urls, keys, pages)
    slots = np.array([s for s in found if s is not None], np.int64)
    sigs = [sk.signature for sk in prepared.sketches.values()]
    matrix = np.stack(sigs) if sigs else np.empty((0, state.settings.num_perm), np.uint32)
    graph = state.scan_graph
    stored = slots[slots < graph.member.size]
    fps = np.concatenate(
        [
            np.array([sk.shingle_fp for sk in prepared.sketches.values()], np.int64),
            graph.mfp[stored[graph.member[stored]]],
        ]
    )
    redirect = state.pages.redirect
    old_targets = [url_key(redirect[s]) for s in slots.tolist() if s in redirect]
    queries: dict[str, Any] = {
        "band": graph.batch_keys(matrix, slots, node_keys),
        "class": [sorted_distinct(fps)],
        "page": [sorted_distinct(np.array(old_targets, np.int64))],
    }
    return folder, queries
