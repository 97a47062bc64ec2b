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
opens, plus a small in-memory overlay of what changed since: classes by shingle fingerprint
(sorted fingerprints and their pages; a touched class becomes a set), candidate pairs
(packed `a << 32 | b`, sorted, with the tables that emit them; changed counts in a dict),
verified edges (both directions sorted by node, float32 similarity; a touched node's edges
become a dict) and the band index (`BandBuckets`). Opening maps the files and replays the
pages written after them (`replay`): no structure is rebuilt, no page becomes an object.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator
from itertools import pairwise
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

from neardup.config import Settings
from neardup.index.state.arrays import BandWriter, FilledInPlace, RowBlocks
from neardup.index.state.band_buckets import BandBuckets
from neardup.index.state.found import Found, hits, node_keys
from neardup.index.state.lookups import HERE, BatchLookups, ScorePairs
from neardup.index.state.overlay import Overlay
from neardup.index.state.pages import PageTable
from neardup.ingest.eligibility import enough_words
from neardup.kernels.buckets import CandidateStats, table_pairs, unpack_pairs
from neardup.kernels.graph import Graph
from neardup.kernels.sorting import sorted_distinct
from neardup.pipeline.steps.clusters import rule_representatives
from neardup.pipeline.steps.near_pairs import (
    equivalence_classes,
    lsh_keys,
    lsh_shape,
    pair_scores,
    passes,
    tie_order,
)

_VERIFY_CHUNK = 65_536  # candidate pairs verified at a time when building (their sketches)
_LOW32 = (1 << 32) - 1


def _pack(a: int, b: int) -> int:
    return (a << 32) | b if a < b else (b << 32) | a


class ScanGraph:
    """Classes, band index, candidate counts and verified edges of the eligible pages, by
    page slot; the pages' keys and sketches are read from the page table (`pages`), the one
    copy of each."""

    def __init__(
        self, settings: Settings, pages: PageTable, saved: dict[str, np.ndarray] | None = None
    ) -> None:
        self.settings = settings
        self.pages = pages
        self.bands, self.rows = lsh_shape(settings)
        self.verifications = 0  # pairs verified since the index was opened
        a = saved if saved is not None else _empty(self.bands)
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
        # The saved arrays (mapped) and what changed since.
        self.cls_fp, self.cls_slot = a["cls_fp"], a["cls_slot"]
        # The classes changed since the save.
        self.cls_over: Overlay[int, int] = Overlay()
        # The classes' fingerprints searched here (not found elsewhere: `BatchLookups`),
        # and the saved sketches read here for band keys, counted.
        self.class_searches = 0
        self.sketch_key_reads = 0
        self.pair_keys, self.pair_counts = a["pair_keys"], a["pair_counts"]
        self.pair_over: dict[int, int] = {}  # packed pair -> tables emitting it (0: none)
        self.adj_u, self.adj_v, self.adj_s = a["adj_u"], a["adj_v"], a["adj_s"]
        self.adj_ptr = a["adj_ptr"]  # node u's edges: adj_v[adj_ptr[u] : adj_ptr[u + 1]]
        self.adj_over: dict[int, dict[int, float]] = {}
        self.buckets = BandBuckets(self.bands, a["band_keys"], a["band_slots"], cap)

    @property
    def shape(self) -> tuple[int, int]:
        """(bands, rows) of the band index."""
        return self.bands, self.rows

    # ------------------------------------------------------------------ reading the state

    def _fit(self) -> None:
        """Room in the per-slot columns for every slot of the page table."""
        need = self.pages.n
        if need <= self.member.size:
            return
        cap = max(need, self.member.size + self.member.size // 2, 1024)
        for name in ("member", "mfp", "node"):
            old = getattr(self, name)
            new = np.zeros(cap, old.dtype)
            new[: old.size] = old
            setattr(self, name, new)

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
        got = self.cls_over.get(fp)
        if got is not None:
            return got
        lo, hi = _run(self.cls_fp, fp)
        return self.cls_slot[lo:hi].tolist()

    def _class_mut(self, fp: int) -> set[int]:
        return self.cls_over.mutable(fp, lambda: self.class_members(fp))

    def _classes_mut(self, fps: Collection[int], found: Found | None = None) -> None:
        """`_class_mut` of many classes, their saved members found with one search for all
        (a batch's classes: nearly all new, or of one page)."""
        self.cls_over.thaw(fps)
        todo = sorted_distinct(np.fromiter((fp for fp in fps if fp not in self.cls_over), np.int64))
        if not todo.size:
            return
        # The saved classes' entries searched elsewhere (`found`), or searched here.
        at, slots, searched = hits(found, todo, self.cls_fp, self.cls_slot)
        self.class_searches += searched
        members: list[set[int]] = [set() for _ in range(todo.size)]
        for q, s in zip(at.tolist(), slots.tolist(), strict=True):
            members[q].add(int(s))
        for fp, got in zip(todo.tolist(), members, strict=True):
            self.cls_over.set_members(fp, got)

    def _rep(self, fp: int) -> int | None:
        """A class's representative: its one member that is a node."""
        return next((s for s in self.class_members(fp) if self.node[s]), None)

    def neighbours(self, u: int) -> dict[int, float]:
        """The verified edges of a node: {other node: similarity}."""
        got = self.adj_over.get(u)
        if got is not None:
            return got
        if u + 1 >= self.adj_ptr.size:
            return {}
        lo, hi = int(self.adj_ptr[u]), int(self.adj_ptr[u + 1])
        return dict(zip(self.adj_v[lo:hi].tolist(), self.adj_s[lo:hi].tolist(), strict=True))

    def _adj_mut(self, u: int) -> dict[int, float]:
        got = self.adj_over.get(u)
        if got is None:
            got = self.adj_over[u] = self.neighbours(u)
        return got

    def _base_counts(self, packed: np.ndarray) -> np.ndarray:
        """The saved tables-count of each packed pair (0 where it is no saved candidate)."""
        out = np.zeros(packed.size, np.int64)
        if not self.pair_keys.size or not packed.size:
            return out
        i = np.searchsorted(self.pair_keys, packed)
        ok = i < self.pair_keys.size
        ok[ok] = self.pair_keys[i[ok]] == packed[ok]
        out[ok] = self.pair_counts[i[ok]]
        return out

    def edge_count(self) -> int:
        """Verified edges (each once)."""
        over = sum(len(v) for v in self.adj_over.values())
        keep = self.adj_u.size
        if self.adj_over:
            keep -= int(np.isin(self.adj_u, np.fromiter(self.adj_over, np.int64)).sum())
        return (keep + over) // 2

    # ------------------------------------------------------------------ building at once

    def build(self, slots: np.ndarray) -> None:
        """Build the graph of a whole stored index at once, as the scan builds its own:
        the same state `update` reaches page by page (classes, band index, candidate counts,
        verified edges), computed with the scan's kernels over arrays, as the base arrays
        `arrays` saves. `slots` are the eligible live pages (opened from the files: an
        index of an older neardup, or one without saved graph arrays). Only for an empty
        graph."""
        assert not self.member.any(), "build makes an empty graph"
        self._fit()
        n = slots.size
        if not n:
            return
        slots = np.asarray(slots, np.int64)
        keys = self.pages.key[slots]
        fps = self.pages.shingle_fp[slots]
        # URL order (Arrow's string order is Python's: UTF-8 bytes sort as code points).
        by_url = np.asarray(pc.sort_indices(self.pages.url_array(slots)), dtype=np.int64)
        rank = np.empty(n, np.int64)
        rank[by_url] = np.arange(n)
        # Classes: the representative of a shingle set is its first page in (key, URL)
        # order, by the scan's rule on the pages in URL order.
        reps = by_url[np.unique(equivalence_classes(fps[by_url], keys[by_url]))]
        order = by_url[np.argsort(fps[by_url], kind="stable")]
        self.member[slots] = True
        self.mfp[slots] = fps
        self.cls_fp, self.cls_slot = fps[order], slots[order]
        # The nodes in URL order, as the scan numbers them (its chains break key ties so).
        reps = reps[np.argsort(rank[reps], kind="stable")]
        rep_slots = slots[reps]
        self.node[rep_slots] = True
        node_sigs = self.pages.sigs[rep_slots]
        band = lsh_keys(node_sigs, None, self.bands, self.rows)
        bk, bs = [], []
        for t in range(self.bands):
            o = np.argsort(band[:, t], kind="stable")
            bk.append(band[o, t])
            bs.append(rep_slots[o].astype(np.int32))
        self.buckets = BandBuckets(self.bands, np.stack(bk), np.stack(bs), self.member.size)
        # Candidates: each table's pairs by the scan's bucket rule (chains in key order),
        # counted over the tables that emit them.
        docs = np.arange(reps.size, dtype=np.int64)
        stats = CandidateStats()
        per_table = [
            table_pairs(
                np.ascontiguousarray(band[:, t]),
                docs,
                self.settings.max_bucket_pairs,
                stats,
                keys[reps],
            )
            for t in range(self.bands)
        ]
        packed, counts = np.unique(np.concatenate(per_table), return_counts=True)
        a, b = unpack_pairs(packed)
        sa, sb = rep_slots[a], rep_slots[b]
        lo, hi = np.minimum(sa, sb), np.maximum(sa, sb)
        by_slot = (lo << 32) | hi
        o = np.argsort(by_slot)
        self.pair_keys, self.pair_counts = by_slot[o], counts[o].astype(np.int16)
        eu, ev, es = [], [], []
        for start in range(0, packed.size, _VERIFY_CHUNK):
            pa_, pb = a[start : start + _VERIFY_CHUNK], b[start : start + _VERIFY_CHUNK]
            sim, agree = pair_scores(node_sigs[pa_], node_sigs[pb])
            ok = passes(sim, agree, self.settings.threshold, False)
            eu.append(rep_slots[pa_[ok]])
            ev.append(rep_slots[pb[ok]])
            es.append(sim[ok].astype(np.float32))
        self._set_edges(*_cat(eu, np.int64), *_cat(ev, np.int64), *_cat(es, np.float32))
        self.verifications += int(packed.size)

    def _set_edges(self, u: np.ndarray, v: np.ndarray, s: np.ndarray) -> None:
        """The base edges from each edge once: both directions, sorted by (node, other)."""
        uu, vv, ss = np.concatenate([u, v]), np.concatenate([v, u]), np.concatenate([s, s])
        o = np.lexsort((vv, uu))
        self.adj_u, self.adj_v, self.adj_s = uu[o], vv[o].astype(np.int32), ss[o]
        self.adj_ptr = _pointers(self.adj_u, self.member.size)

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
        gone = slots[~eligible].tolist()
        put = dict(
            zip(
                slots[eligible].tolist(),
                self.pages.shingle_fp[slots[eligible]].tolist(),
                strict=True,
            )
        )
        self.update(gone, put)

    def signature_changing(self, slot: int, lookups: BatchLookups = HERE) -> None:
        """A page's sketch is about to change: a node keeps the keys it is filed under."""
        if slot < self.node.size and self.node[slot] and self.buckets.keys_of(slot) is None:
            self.buckets.stash(slot, self._sketch_keys([slot], lookups.node_keys)[0])

    def _keys_of(self, nodes: list[int], known: dict[int, np.ndarray] | None = None) -> np.ndarray:
        """The band keys each node is filed under (nodes x tables): kept by the band index,
        else its sketch's."""
        out = np.empty((len(nodes), self.bands), np.int64)
        todo = []
        for i, s in enumerate(nodes):
            got = self.buckets.keys_of(s)
            if got is None:
                todo.append(i)
            else:
                out[i] = got
        if todo:
            out[todo] = self._sketch_keys([nodes[i] for i in todo], known)
        return out

    def _sketch_keys(
        self, slots: list[int], known: dict[int, np.ndarray] | None = None
    ) -> np.ndarray:
        """The band keys of the current sketches of base nodes (len(slots) x tables): from
        `known` (saved nodes' keys computed elsewhere, `BatchLookups.node_keys`) where a
        sketch is still the saved one, else computed here (and a saved row read for it,
        counted)."""
        out = np.empty((len(slots), self.bands), np.int64)
        pages, known = self.pages, known or {}
        saved_n = pages.saved_from[1] if pages.saved_from is not None else 0
        todo = []
        for i, s in enumerate(slots):
            got = None if pages.sig_changed[s] else known.get(s)
            if got is None:
                todo.append(i)
                self.sketch_key_reads += s < saved_n and not pages.sig_changed[s]
            else:
                out[i] = got
        if todo:
            sigs = pages.sigs[[slots[i] for i in todo]]
            out[todo] = lsh_keys(sigs, None, self.bands, self.rows)
        return out

    def batch_keys(
        self,
        signatures: np.ndarray,
        slots: np.ndarray,
        known: dict[int, np.ndarray] | None = None,
    ) -> list[np.ndarray]:
        """The band keys a batch asks the band index for, per table (sorted, distinct): its
        new sketches' keys and the keys its stored pages (`slots`) that are nodes are filed
        under. (A node that leaves because a page of the batch joins its class shares that
        page's sketch; a page that is no node takes no node's keys with it.) What
        `ServiceIndex` has searched elsewhere before the batch (`BandBuckets.preload`); a
        key it misses is searched here, so a guess that is short costs time, not the
        answer."""
        parts = [np.empty((0, self.bands), np.int64)]
        if signatures.shape[0]:
            parts.append(lsh_keys(signatures, None, self.bands, self.rows))
        slots = slots[slots < min(self.pages.n, self.node.size)]
        nodes = slots[self.node[slots]]
        if nodes.size:
            parts.append(self._keys_of(nodes.tolist(), known))
        every = np.concatenate(parts)
        return [sorted_distinct(every[:, t]) for t in range(self.bands)]

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

    def arrays(
        self, writer: BandWriter, room: int = 0, before: Path | None = None
    ) -> Iterator[tuple[str, np.ndarray] | RowBlocks | FilledInPlace]:
        """The graph as base arrays with no overlay (what `graph-N/` holds): the saved
        arrays with what changed since folded in. Made one group of arrays at a time as the
        writer takes them (`store.write_arrays`): a save holds one group beside the graph,
        not a second copy of all of it. The band index is written by `writer` from the save
        `before` (the folder the graph's base maps) and the changes since
        (`files/band_save.band_writer`: its tables by this process, or elsewhere)."""
        n = self.pages.n
        for name in ("member", "mfp", "node"):  # with `room` slots after the pages
            col = getattr(self, name)
            pad = np.zeros(room, col.dtype)
            yield RowBlocks({name: ((n + room,), col.dtype)}, [(col[:n],), (pad,)])
        yield from self._class_arrays().items()
        yield from self._pair_arrays().items()
        yield from self._edge_arrays(n).items()
        yield self.buckets.saved(before, writer)

    def _class_arrays(self) -> dict[str, np.ndarray]:
        over = self.cls_over.keys_array()
        keep = ~np.isin(self.cls_fp, over) if over.size else slice(None)
        cf = [np.asarray(self.cls_fp[keep])]
        cs = [np.asarray(self.cls_slot[keep], np.int64)]
        for fp, members in self.cls_over.items():
            cf.append(np.full(len(members), fp, np.int64))
            cs.append(np.fromiter(sorted(members), np.int64, len(members)))
        cls_fp, cls_slot = np.concatenate(cf), np.concatenate(cs)
        o = np.argsort(cls_fp, kind="stable")
        return {"cls_fp": cls_fp[o], "cls_slot": cls_slot[o]}

    def _pair_arrays(self) -> dict[str, np.ndarray]:
        over_p = np.fromiter(self.pair_over, np.int64, len(self.pair_over))
        keep = ~np.isin(self.pair_keys, over_p) if over_p.size else slice(None)
        live = {p: c for p, c in self.pair_over.items() if c > 0}
        pk = np.concatenate([self.pair_keys[keep], np.fromiter(live, np.int64, len(live))])
        pc_ = np.concatenate(
            [self.pair_counts[keep], np.fromiter(live.values(), np.int16, len(live))]
        )
        po = np.argsort(pk)
        return {"pair_keys": pk[po], "pair_counts": pc_[po].astype(np.int16)}

    def _edge_arrays(self, n: int) -> dict[str, np.ndarray]:
        over_n = np.fromiter(self.adj_over, np.int64, len(self.adj_over))
        keep = ~np.isin(self.adj_u, over_n) if over_n.size else slice(None)
        eu = [np.asarray(self.adj_u[keep], np.int64)]
        ev = [np.asarray(self.adj_v[keep], np.int64)]
        es = [np.asarray(self.adj_s[keep], np.float32)]
        for u, nb in self.adj_over.items():
            eu.append(np.full(len(nb), u, np.int64))
            ev.append(np.fromiter(nb, np.int64, len(nb)))
            es.append(np.fromiter(nb.values(), np.float32, len(nb)))
        uu, vv, ss = _cat(eu, np.int64)[0], _cat(ev, np.int64)[0], _cat(es, np.float32)[0]
        eo = np.lexsort((vv, uu))
        return {
            "adj_u": uu[eo],
            "adj_ptr": _pointers(uu[eo], n),
            "adj_v": vv[eo].astype(np.int32),
            "adj_s": ss[eo],
        }

    def view(self) -> tuple[dict, ...]:
        """The whole graph keyed by URL (for tests: two graphs are one when these are)."""
        url = self.pages.url_at
        members = np.flatnonzero(self.member[: self.pages.n]).tolist()
        nodes = [s for s in members if self.node[s]]
        fps = {int(self.mfp[s]) for s in members}
        pairs = {
            p: c
            for p, c in zip(self.pair_keys.tolist(), self.pair_counts.tolist(), strict=True)
            if p not in self.pair_over
        }
        pairs.update({p: c for p, c in self.pair_over.items() if c > 0})
        return (
            {url(u): {url(v): s for v, s in self.neighbours(u).items()} for u in nodes},
            {tuple(sorted((url(p >> 32), url(p & _LOW32)))): c for p, c in pairs.items()},
            {url(s): int(self.mfp[s]) for s in members},
            {fp: frozenset(url(s) for s in self.class_members(fp)) for fp in fps},
            {fp: url(r) for fp in fps if (r := self._rep(fp)) is not None},
            {url(s): tuple(k) for s, k in zip(nodes, self._keys_of(nodes).tolist(), strict=True)},
        )

    # ------------------------------------------------------------------ updates

    def update(
        self, gone: Iterable[int], put: dict[int, int], lookups: BatchLookups = HERE
    ) -> set[int]:
        """Remove the pages `gone`, add or replace the pages `put` (slot -> shingle
        fingerprint; their signatures and keys already the page table's); return the nodes
        whose component must be clustered again. `lookups`: what the batch's engine found
        of the saved arrays elsewhere."""
        self._fit()
        gone = set(gone) - set(put)
        fps: set[int] = set(put.values())
        for s in [*gone, *put]:
            if self.member[s]:
                fps.add(int(self.mfp[s]))
        self._classes_mut(fps, lookups.classes)
        old_rep = {fp: self._rep(fp) for fp in fps}
        for s in [*gone, *put]:
            if self.member[s]:
                self._class_mut(int(self.mfp[s])).discard(s)
                self.member[s] = False
        for s, fp in put.items():
            self.member[s], self.mfp[s] = True, fp
            self._class_mut(fp).add(s)
        leaving: set[int] = set()
        entering: dict[int, int] = {}
        touched: set[int] = set()
        for fp in fps:
            old = old_rep[fp]
            members = self.class_members(fp)
            new = self.ordered(members)[0] if members else None
            if old is not None and (old != new or old in put):
                leaving.add(old)
            if new is not None:
                touched.add(new)  # its class size (the node's weight) may have moved
                if new != old or new in put:
                    entering[new] = fp
        touched |= self._move_nodes(leaving, entering, lookups)
        self.cls_over.freeze()  # the batch is done with these classes
        return {s for s in touched if self.node[s]}

    def _move_nodes(
        self, leaving: set[int], entering: dict[int, int], lookups: BatchLookups
    ) -> set[int]:
        """Take nodes out of and into the band index; update candidate counts and edges.
        Returns every node whose edges changed.

        Only buckets that hold two nodes before or after can hold a candidate pair, and
        nearly every bucket holds one, so the pairs of a bucket are listed only then."""
        new_slots = sorted(entering)
        new_keys = np.empty((0, self.bands), dtype=np.int64)
        if new_slots:
            new_keys = lsh_keys(self.pages.sigs[new_slots], None, self.bands, self.rows)
        every = np.concatenate([self._keys_of(sorted(leaving), lookups.node_keys), new_keys])
        wanted = [sorted_distinct(every[:, t]) for t in range(self.bands)]
        before = self.buckets.members(wanted, preloaded=lookups.band)
        self.buckets.remove(list(leaving))
        for s in leaving:
            self.node[s] = False
        self.buckets.add(new_slots, new_keys)
        for s in new_slots:
            self.node[s] = True
        after = self.buckets.members(wanted, preloaded=lookups.band)
        entered = set(new_slots)
        delta: dict[int, int] = defaultdict(int)
        # A node that entered again with a new signature keeps candidates whose count does
        # not move: they are verified again too.
        recheck: set[int] = set()
        for old in before.values():
            for pair in self._bucket_pairs(old):
                delta[pair] -= 1
        for new in after.values():
            for pair in self._bucket_pairs(new):
                delta[pair] += 1
                if pair >> 32 in entered or pair & _LOW32 in entered:
                    recheck.add(pair)
        changed: set[int] = set(leaving) | entered
        for u in leaving:  # a leaving node loses every edge, whatever its buckets say
            for other in list(self.neighbours(u)):
                self._adj_mut(other).pop(u, None)
                changed.add(other)
            self.adj_over[u] = {}
        keys = np.fromiter(delta, np.int64, len(delta))
        base = self._base_counts(keys)
        for pair, d, b in zip(keys.tolist(), delta.values(), base.tolist(), strict=True):
            was = self.pair_over.get(pair, b)
            count = was + d
            if count > 0:
                self.pair_over[pair] = count
                if not was:  # a new candidate
                    recheck.add(pair)
            else:
                self.pair_over[pair] = 0
                a, b_ = pair >> 32, pair & _LOW32
                if b_ in self.neighbours(a):
                    self._adj_mut(a).pop(b_, None)
                    self._adj_mut(b_).pop(a, None)
                    changed.update((a, b_))
        changed |= self._verify(recheck, lookups.score)
        return changed

    def _bucket_pairs(self, nodes: list[int]) -> list[int]:
        """The scan's candidate rule on one bucket: all pairs, or the chain in key order."""
        members = self.ordered(nodes)
        if len(members) > self.settings.max_bucket_pairs:
            links = pairwise(members)
        else:
            links = ((a, b) for i, a in enumerate(members) for b in members[i + 1 :])
        return [_pack(a, b) for a, b in links]

    def _verify(self, pairs: set[int], score: ScorePairs | None = None) -> set[int]:
        """Verify candidate pairs (edge in or out); returns the nodes whose edges changed."""
        todo = sorted(p for p in pairs if self.node[p >> 32] and self.node[p & _LOW32])
        changed: set[int] = set()
        if not todo:
            return changed
        packed = np.array(todo, np.int64)
        a, b = packed >> 32, packed & _LOW32
        sim = self.pages.resemblance(a, b, score)  # where the saved sketches are (Spark)
        ok = passes(sim, np.full(sim.size, -1), self.settings.threshold, False)
        self.verifications += len(todo)
        for x, y, s, keep in zip(
            a.tolist(), b.tolist(), sim.astype(np.float32).tolist(), ok.tolist(), strict=True
        ):
            old = self.neighbours(x).get(y)
            if keep:
                if old != s:
                    self._adj_mut(x)[y] = s
                    self._adj_mut(y)[x] = s
                    changed.update((x, y))
            elif old is not None:
                self._adj_mut(x).pop(y, None)
                self._adj_mut(y).pop(x, None)
                changed.update((x, y))
        return changed

    # ------------------------------------------------------------------ lookups

    def similar(self, sig: np.ndarray) -> list[tuple[int, float]]:
        """Pages a sketch would be joined to by the scan: those sharing a band key with it
        whose estimated resemblance passes the scan's verification, with that resemblance
        (class members of a matching node included). The cost is the size of its buckets,
        whatever the size of the index."""
        keys = lsh_keys(sig[None, :], None, self.bands, self.rows)[0]
        found = self.buckets.members([np.array([k], dtype=np.int64) for k in keys.tolist()], 1)
        nodes = sorted({u for members in found.values() for u in members})
        if not nodes:
            return []
        sims, agree = pair_scores(
            np.broadcast_to(sig, (len(nodes), sig.size)), self.pages.sigs[nodes]
        )
        ok = passes(sims, agree, self.settings.threshold, False)
        out = []
        for u, s, keep in zip(nodes, sims.tolist(), ok.tolist(), strict=True):
            if keep:
                out.extend((m, float(s)) for m in self._with_class([u]))
        return out

    # ------------------------------------------------------------------ clustering

    def components(self, seeds: Iterable[int]) -> list[list[int]]:
        """The connected components (of verified edges) holding `seeds`, each in tie-break
        order."""
        seen: set[int] = set()
        out = []
        for seed in sorted(seeds):
            if seed in seen or not self.is_node(seed):
                continue
            comp, stack = [], [seed]
            seen.add(seed)
            while stack:
                u = stack.pop()
                comp.append(u)
                for v in self.neighbours(u):
                    if v not in seen:
                        seen.add(v)
                        stack.append(v)
            out.append(self.ordered(comp))
        return out

    def cluster(self, components: list[list[int]]) -> list[list[int]]:
        """The clusters of whole components by the scan's rule: lists of pages (class
        members included), each with the scan's representative first.

        A component of one node is its own cluster. The others are clustered in one call
        over their union: the rule never looks across a component (every step follows
        edges, and ties are broken by page keys, whose order inside a component does not
        depend on the other nodes), which is why the scan can cluster the whole graph at
        once and the service only the components a batch touched, with the same answer.
        """
        out: list[list[int]] = []
        nodes: list[int] = []
        for comp in components:
            if len(comp) == 1:
                out.append(self._with_class([comp[0]]))
            else:
                nodes.extend(comp)
        if not nodes:
            return out
        n = len(nodes)
        pos = {u: i for i, u in enumerate(nodes)}
        a, b, s = [], [], []
        for u in nodes:
            for v, sim in self.neighbours(u).items():
                if u < v:
                    a.append(pos[u])
                    b.append(pos[v])
                    s.append(sim)
        graph = Graph.from_edges(
            n, np.array(a, np.int64), np.array(b, np.int64), np.array(s, np.float64)
        )
        weight = np.array(
            [len(self.class_members(int(self.mfp[u]))) for u in nodes], dtype=np.int64
        )
        tie = self.pages.key[np.array(nodes, np.int64)]
        rep = rule_representatives(graph, weight, tie, self.settings)
        groups: dict[int, list[int]] = {}  # the representative node first
        for i, r in enumerate(rep.tolist()):
            members = groups.setdefault(r, [nodes[r]])
            if i != r:
                members.append(nodes[i])
        out.extend(self._with_class(members) for members in groups.values())
        return out

    def _with_class(self, members: list[int]) -> list[int]:
        """Nodes followed each by the other pages of its class (same shingle set)."""
        pages = []
        for u in members:
            pages.append(u)
            cls = self.class_members(int(self.mfp[u]))
            if len(cls) > 1:
                pages.extend(self.ordered(set(cls) - {u}))
        return pages


def _run(sorted_keys: np.ndarray, key: int) -> tuple[int, int]:
    """The positions [lo, hi) of `key` in a sorted array: one binary search, then a walk over
    the (few) equal keys; most keys looked up are absent or once."""
    lo = int(sorted_keys.searchsorted(key))
    hi, size = lo, sorted_keys.size
    while hi < size and sorted_keys[hi] == key:
        hi += 1
    return lo, hi


def _pointers(sorted_nodes: np.ndarray, n: int) -> np.ndarray:
    """Where each node's run starts in a node-sorted edge array (n + 1 offsets, CSR): a
    node's edges are found without a search."""
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(sorted_nodes, minlength=n)[:n], out=ptr[1:])
    return ptr


def _cat(parts: list[np.ndarray], dtype: type) -> tuple[np.ndarray]:
    return (np.concatenate(parts).astype(dtype) if parts else np.empty(0, dtype),)


def saved_node_keys(
    settings: Settings, pages: PageTable, slots: np.ndarray, node: np.ndarray
) -> dict[int, np.ndarray]:
    """The band keys of those of `slots` that `node` (a saved graph's column) marks as
    nodes, from the page table's sketches: read before the rows written since the save
    replace them, these are the sketches the saved band index filed those nodes under
    (`ScanGraph.replay`), found without a pass over the band index."""
    nodes, keys = node_keys(node, pages.sigs.__getitem__, slots, *lsh_shape(settings))
    return dict(zip(nodes.tolist(), keys, strict=True))


SLOT_COLUMNS = ("member", "mfp", "node")  # the graph's per-slot columns, saved by slot
# the candidate counts and the edges, saved whole and in a save's changes alike
EDGE_ARRAYS = ("pair_keys", "pair_counts", "adj_u", "adj_ptr", "adj_v", "adj_s")
GRAPH_ARRAYS = (  # the files of a saved graph (`ScanGraph.arrays`)
    *SLOT_COLUMNS,
    "cls_fp",
    "cls_slot",
    *EDGE_ARRAYS,
    "band_keys",
    "band_slots",
)


def _empty(tables: int) -> dict[str, np.ndarray]:
    """The arrays of a graph of no page."""
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
