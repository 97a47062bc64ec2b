"""The scan's near-duplicate graph, kept up to date between batches, on page slots.

Why: the service must give the scan's answer for the same pages. Earlier it grouped pages by
its own rules (tier-2 matches merged transitively, groups split around winners), which on a
re-crawl found a quarter fewer of the exact-Jaccard >= 0.9 pairs than the scan. So the
service keeps exactly what the scan computes, and changes only what a batch touches:

- equivalence classes: pages with one shingle set collapse to the page with the lowest page
  key (`near_pairs.page_keys`: the URL's hash), which alone is a node of the graph;
- the LSH band index of the nodes (`near_pairs.lsh_shape`, `lsh_keys`; `band_buckets.py`);
- the candidate pairs of each bucket by the scan's rule (`kernels.buckets`): all pairs while
  the bucket holds at most `max_bucket_pairs` pages, the chain in page-key order above, so a
  page joining a large bucket replaces the chain link it falls into;
- the verified pairs (`near_pairs.pair_scores` / `passes`, similarity cast to float32 as the
  scan stores it).

After a batch, only the connected components holding a node whose edges, class or weight
changed are clustered again, with the scan's own rule (`kernels.graph`, class sizes as
weights, page keys as tie-breaks). A cluster never crosses a component, and an untouched
component has the same nodes, edges, weights and keys as before, so its clusters stand.

Storage (issue 26): a node is a page *slot* (an int that never changes, `pages.PageTable`),
and each structure is a sorted array saved with a committed version (`arrays`, written by
`ServiceIndex` as a `graph-N/` folder of `.npy` files) and memory-mapped when the index
opens, plus a small in-memory overlay of what changed since (`graph_stores.py`): classes by
shingle fingerprint (sorted fingerprints and their pages; a touched class becomes a set),
candidate pairs (packed `a << 32 | b`, sorted, with the tables that emit them; changed
counts in a dict), verified edges (both directions sorted by node, float32 similarity; a
touched node's edges become a dict) and the band index (`BandBuckets`). Opening maps the
files and replays the pages written after them (`replay`): no structure is rebuilt, no page
becomes an object.

The graph's state and its reads are this class; what is done with them is in modules of
their own, each a function of the graph: the build at once (`graph_build.py`), a batch's
update (`graph_update.py`), the nodes' band keys (`graph_keys.py`), the clustering
(`graph_clusters.py`), and the arrays handed to the files (`graph_saves.py`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

import numpy as np

from neardup.config import Settings
from neardup.index.state.arrays import BandWriter, FilledInPlace, RowBlocks
from neardup.index.state.band_buckets import BandBuckets
from neardup.index.state.graph_build import build_graph
from neardup.index.state.graph_clusters import cluster, components, similar
from neardup.index.state.graph_keys import batch_keys, saved_node_keys, sketch_keys
from neardup.index.state.graph_saves import (
    EDGE_ARRAYS,
    GRAPH_ARRAYS,
    SLOT_COLUMNS,
    empty_arrays,
    graph_arrays,
    graph_view,
)
from neardup.index.state.graph_stores import CandidateCounts, ShingleClasses, VerifiedEdges
from neardup.index.state.graph_update import update_graph
from neardup.index.state.lookups import HERE, BatchLookups
from neardup.index.state.pages import PageTable
from neardup.ingest.eligibility import enough_words
from neardup.pipeline.steps.near_pairs import lsh_shape, tie_order

# Names other modules import from here.
__all__ = ["EDGE_ARRAYS", "GRAPH_ARRAYS", "SLOT_COLUMNS", "ScanGraph", "saved_node_keys"]


_NO_SLOTS = np.empty(0, np.int64)
_WRITTEN_PARTS = 64  # a batch's written slots kept apart until this many are joined


class ScanGraph:
    """Classes, band index, candidate counts and verified edges of the eligible pages, by
    page slot; the pages' keys and sketches are read from the page table (`pages`), the one
    copy of each."""

    def __init__(
        self, settings: Settings, pages: PageTable, saved: dict[str, np.ndarray] | None = None
    ) -> None:
        """`saved`: the arrays of a saved graph (`graph_saves.GRAPH_ARRAYS`, mapped
        copy-on-write); None: a graph of no page."""
        self.settings = settings
        self.pages = pages
        self.bands, self.rows = lsh_shape(settings)
        self.verifications = 0  # pairs verified since the index was opened
        # The saved sketches read here for band keys, counted (`graph_keys.sketch_keys`).
        self.sketch_key_reads = 0
        a = saved if saved is not None else empty_arrays(self.bands)
        cap = max(pages.cap, a["member"].size)
        # Per slot (10 bytes a slot): in a class, its class, a node. Saved with room for
        # the page table's slots (`arrays`) and mapped copy-on-write, they are the maps
        # themselves; else copied.
        m = a["member"].size
        if m >= cap and a["member"].flags.writeable:
            self.member, self.mfp, self.node = a["member"], a["mfp"], a["node"]
        else:
            self.member = np.zeros(cap, bool)
            self.mfp = np.zeros(cap, np.int64)
            self.node = np.zeros(cap, bool)
            self.member[:m], self.mfp[:m], self.node[:m] = a["member"], a["mfp"], a["node"]
        # The saved arrays (mapped) and what changed since, a store each.
        self.classes = ShingleClasses(a["cls_fp"], a["cls_slot"])
        self.pairs = CandidateCounts(a["pair_keys"], a["pair_counts"])
        self.edges = VerifiedEdges(a["adj_u"], a["adj_v"], a["adj_s"], a["adj_ptr"])
        self.buckets = BandBuckets(self.bands, a["band_keys"], a["band_slots"], cap)
        if a.get("band_run") is not None:  # the changes a save kept beside its base
            self.buckets.take_changes(a["band_run"])
        # Slots whose per-slot columns were written since the save, a batch's at a time
        # (`written_slots`): the changes list them, where finding them by comparing the
        # columns with the save's read all three whole (200 MB at ten million pages).
        self._written: list[np.ndarray] = []

    @property
    def shape(self) -> tuple[int, int]:
        """(bands, rows) of the band index."""
        return self.bands, self.rows

    @property
    def class_searches(self) -> int:
        """The classes' fingerprints searched here (not found elsewhere: `BatchLookups`)."""
        return self.classes.searches

    # ------------------------------------------------------------------ reading the state

    def _fit(self) -> None:
        """Room in the per-slot columns for every slot of the page table."""
        need = self.pages.n
        if need <= self.member.size:
            return
        cap = max(need, self.member.size + self.member.size // 2, 1024)
        for name in SLOT_COLUMNS:
            old = getattr(self, name)
            new = np.zeros(cap, old.dtype)
            new[: old.size] = old
            setattr(self, name, new)

    def note_written(self, slots: Iterable[int] | np.ndarray) -> None:
        """Slots whose per-slot columns (`SLOT_COLUMNS`) were written: kept until the
        graph is saved (a graph mapped from a save starts with none)."""
        got = np.asarray(slots if isinstance(slots, np.ndarray) else list(slots), np.int64)
        if got.size:
            self._written.append(got.ravel())
        if len(self._written) > _WRITTEN_PARTS:
            self._written = [self.written_slots()]

    def written_slots(self) -> np.ndarray:
        """The slots written since the save (`note_written`), ascending, each once."""
        return np.unique(np.concatenate([_NO_SLOTS, *self._written]))

    def is_node(self, slot: int) -> bool:
        return slot < self.node.size and bool(self.node[slot])

    def ordered(self, slots: Collection[int]) -> list[int]:
        """Slots in tie-break order: page key, then (for an exact key collision) URL."""
        if len(slots) < 2:  # nearly every class and bucket
            return list(slots)
        s = np.fromiter(slots, np.int64, len(slots))
        k = self.pages.key[s]
        o = tie_order(k)
        if not (k[o][1:] == k[o][:-1]).any():
            return s[o].tolist()
        # An exact key collision (URLs of one identity): the URL decides, as the doc_id
        # decides in the scan, whose reference reads its pages in URL order.
        by_url = sorted(range(s.size), key=lambda i: self.pages.url_at(int(s[i])))
        rank = np.empty(s.size, np.int64)
        rank[by_url] = np.arange(s.size)
        return s[tie_order(k, rank)].tolist()

    def class_members(self, fp: int) -> Collection[int]:
        """The pages of a shingle-set class (empty for an unknown one)."""
        return self.classes.members(fp)

    def _rep(self, fp: int) -> int | None:
        """A class's representative: its one member that is a node."""
        return next((s for s in self.classes.members(fp) if self.node[s]), None)

    def neighbours(self, u: int) -> dict[int, float]:
        """The verified edges of a node: {other node: similarity}."""
        return self.edges.neighbours(u)

    def edge_count(self) -> int:
        """Verified edges (each once)."""
        return self.edges.count()

    def eligible(self, slots: np.ndarray) -> np.ndarray:
        """Which pages are the graph's: sketched, live, and with the scan's words."""
        p = self.pages
        return (
            p.has_sig[slots]
            & ~p.removed[slots]
            & np.asarray(
                enough_words(p.n_tokens[slots], p.length[slots], self.settings.min_tokens),
                dtype=bool,
            )
        )

    # ------------------------------------------------------------------ changing it

    def build(self, slots: np.ndarray) -> None:
        """Build the graph of a whole stored index at once, as the scan builds its own
        (`graph_build.build_graph`): `slots` are the eligible live pages. Only for an empty
        graph."""
        build_graph(self, slots)

    def update(
        self, gone: Iterable[int], put: dict[int, int], lookups: BatchLookups = HERE
    ) -> set[int]:
        """Remove the pages `gone`, add or replace the pages `put` (slot -> shingle
        fingerprint); return the nodes whose component must be clustered again
        (`graph_update.update_graph`)."""
        return update_graph(self, gone, put, lookups)

    def replay(self, slots: np.ndarray, saved_keys: dict[int, np.ndarray] | None = None) -> None:
        """Bring graph arrays saved at an older version up to the page table: the pages
        written since (`slots`) leave the graph, and those eligible now enter it again with
        their current sketch and class, as a batch would have put them. A page already in
        that state is taken out and put back, which leaves the same graph. `saved_keys`:
        the band keys of those that were nodes at the save, from the sketches saved with
        it (`saved_node_keys`), when the caller has them."""
        self._fit()
        # Their sketches may have changed since the save: the keys they were filed under
        # come from the sketches saved with the graph, or from the base's own entries.
        if saved_keys is None:
            saved_keys = self.buckets.base_keys_of(slots[self.node[slots]])
        for slot, keys in saved_keys.items():
            self.buckets.stash(slot, keys)
        eligible = self.eligible(slots)
        put = dict(
            zip(
                slots[eligible].tolist(),
                self.pages.shingle_fp[slots[eligible]].tolist(),
                strict=True,
            )
        )
        self.update(slots[~eligible].tolist(), put)

    def signature_changing(self, slot: int, lookups: BatchLookups = HERE) -> None:
        """A page's sketch is about to change: a node keeps the keys it is filed under."""
        self.signatures_changing([slot], lookups)

    def signatures_changing(self, slots: list[int], lookups: BatchLookups = HERE) -> None:
        """`signature_changing` of many pages at once: their sketches read and their keys
        computed together (a batch that removes pages, where a page at a time was a fifth
        of removing 1 % of a four-million-page index)."""
        todo = [
            s
            for s in slots
            if s < self.node.size and self.node[s] and self.buckets.keys_of(s) is None
        ]
        if todo:
            for slot, keys in zip(todo, sketch_keys(self, todo, lookups.node_keys), strict=True):
                self.buckets.stash(slot, keys)

    # ------------------------------------------------------------------ reading it

    def batch_keys(
        self,
        signatures: np.ndarray,
        slots: np.ndarray,
        known: dict[int, np.ndarray] | None = None,
    ) -> list[np.ndarray]:
        """The band keys a batch asks the band index for (`graph_keys.batch_keys`)."""
        return batch_keys(self, signatures, slots, known)

    def similar(self, sig: np.ndarray) -> list[tuple[int, float]]:
        """Pages a sketch would be joined to by the scan (`graph_clusters.similar`)."""
        return similar(self, sig)

    def components(self, seeds: Iterable[int]) -> list[list[int]]:
        """The connected components holding `seeds` (`graph_clusters.components`)."""
        return components(self, seeds)

    def cluster(self, components: list[list[int]]) -> list[list[int]]:
        """The clusters of whole components by the scan's rule, each with its
        representative first (`graph_clusters.cluster`)."""
        return cluster(self, components)

    def arrays(
        self, writer: BandWriter, room: int = 0, before: Path | None = None
    ) -> Iterator[tuple[str, np.ndarray] | RowBlocks | FilledInPlace]:
        """The graph as base arrays with no overlay, what `graph-N/` holds
        (`graph_saves.graph_arrays`)."""
        return graph_arrays(self, writer, room, before)

    def view(self) -> tuple[dict, ...]:
        """The whole graph keyed by URL (for tests: two graphs are one when these are)."""
        return graph_view(self)
