"""The service's LSH band index: which nodes share a band key, in arrays, not one set each.

Why: the first version kept a Python set per (table, key). Nearly every bucket holds one
page, so a million pages cost 18 million sets (about 5.7 KB a page, 1.5 GB at 100,000 pages
measured). Here each table is a sorted array of (key, node id) pairs, the layout of a
log-structured merge tree with two levels: a large *base* and a small *delta* that takes each
batch's new nodes, re-sorted per batch and merged into the base once it outgrows an eighth of
it, so inserting costs amortised O(log n) array work per key and no Python object. A node that
leaves is only marked dead (its entries are skipped on lookup and dropped at the next merge),
and an id is never given twice while an entry may hold it, so an entry can never point at the
wrong page; once most ids belong to nodes that left, the live ones are numbered again.

Per page this holds, for each of the T tables, an 8-byte key and a 4-byte id (about 216
bytes at T = 18), plus the node's own keys (8 T bytes) to find its entries when it leaves.
"""

from __future__ import annotations

import numpy as np

from neardup.kernels.lsh import key_hits

_EMPTY_KEYS = np.empty(0, dtype=np.int64)
_EMPTY_IDS = np.empty(0, dtype=np.int32)


class _Level:
    """One sorted run per table: keys[t] ascending, ids[t] the node of each key."""

    def __init__(self, tables: int) -> None:
        self.keys = [_EMPTY_KEYS] * tables
        self.ids = [_EMPTY_IDS] * tables

    @property
    def size(self) -> int:
        return int(self.keys[0].size) if self.keys else 0

    def merge(self, keys: list[np.ndarray], ids: list[np.ndarray], alive: np.ndarray) -> None:
        """Merge sorted runs in (per table: `keys[t]` with `ids[t]`), dropping dead nodes.
        Both sides are sorted, so the stable sort (a merge sort that finds runs) is linear."""
        for t in range(len(self.keys)):
            k = np.concatenate([self.keys[t], keys[t]])
            i = np.concatenate([self.ids[t], ids[t]])
            keep = alive[i]
            k, i = k[keep], i[keep]
            order = np.argsort(k, kind="stable")
            self.keys[t], self.ids[t] = k[order], i[order]

    def lookup(self, t: int, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(query index, node id) of every entry of table `t` whose key is one of `keys`."""
        return key_hits(self.keys[t], self.ids[t], keys)


class BandBuckets:
    """Nodes (page URLs) by LSH band key, one table per band."""

    def __init__(self, tables: int) -> None:
        self.tables = tables
        self.base = _Level(tables)
        self.delta = _Level(tables)
        self.id_of: dict[str, int] = {}
        self.url_of: list[str | None] = []  # None once the node left
        self.alive = np.zeros(1024, dtype=bool)  # capacity grows by a quarter over the need
        self.node_keys = np.zeros((1024, tables), dtype=np.int64)
        self.dead = 0  # entries of dead nodes still in the levels

    def __contains__(self, url: object) -> bool:
        return url in self.id_of

    def __len__(self) -> int:
        return len(self.id_of)

    def keys_of(self, url: str) -> np.ndarray:
        """The band keys of a node (one per table)."""
        return self.node_keys[self.id_of[url]]

    def members(
        self, keys: list[np.ndarray], at_least: int = 2
    ) -> dict[tuple[int, int], list[str]]:
        """The live nodes of the buckets with keys `keys[t]` (distinct) in table t, for the
        buckets holding `at_least` nodes: {(table, key): nodes in any order}. Buckets of
        one node hold no candidate pair, and they are nearly all of them, so they are
        counted in arrays and never listed."""
        out: dict[tuple[int, int], list[str]] = {}
        if not self.id_of:
            return out
        for t, wanted in enumerate(keys):
            if not wanted.size:
                continue
            found = [level.lookup(t, wanted) for level in (self.base, self.delta)]
            qi = np.concatenate([q for q, _ in found])
            ids = np.concatenate([i for _, i in found])
            live = self.alive[ids]
            qi, ids = qi[live], ids[live]
            big = np.bincount(qi, minlength=wanted.size) >= at_least
            keep = big[qi]
            for k, i in zip(wanted[qi[keep]].tolist(), ids[keep].tolist(), strict=True):
                url = self.url_of[i]
                assert url is not None
                out.setdefault((t, k), []).append(url)
        return out

    def remove(self, urls: list[str]) -> None:
        """Take nodes out (their entries are skipped from now on)."""
        for url in urls:
            i = self.id_of.pop(url)
            self.alive[i] = False
            self.url_of[i] = None
            self.dead += 1

    def add(self, urls: list[str], keys: np.ndarray) -> None:
        """Put new nodes in with their band keys (len(urls) x tables)."""
        if not urls:
            return
        first, n = len(self.url_of), len(urls)
        if first + n > self.alive.size:  # a quarter more than needed: amortised O(1) a node
            cap = first + n + (first + n) // 4
            alive = np.zeros(cap, dtype=bool)
            alive[:first] = self.alive[:first]
            node_keys = np.zeros((cap, self.tables), dtype=np.int64)
            node_keys[:first] = self.node_keys[:first]
            self.alive, self.node_keys = alive, node_keys
        ids = np.arange(first, first + n, dtype=np.int32)
        for url, i in zip(urls, ids.tolist(), strict=True):
            self.id_of[url] = i
        self.url_of.extend(urls)
        self.alive[first : first + n] = True
        self.node_keys[first : first + n] = keys
        runs_k, runs_i = [], []
        for t in range(self.tables):
            order = np.argsort(keys[:, t], kind="stable")
            runs_k.append(np.ascontiguousarray(keys[order, t], dtype=np.int64))
            runs_i.append(ids[order])
        self.delta.merge(runs_k, runs_i, self.alive)
        if self.delta.size * 8 > max(self.base.size, 65536) or self.dead * 4 > len(self.id_of):
            self.base.merge(self.delta.keys, self.delta.ids, self.alive)
            self.delta = _Level(self.tables)
            self.dead = 0
            if len(self.url_of) > 2 * max(len(self.id_of), 1024):
                self._renumber()

    def _renumber(self) -> None:
        """Give the live nodes ids 0..n-1 again, once most ids belong to nodes that left:
        a service that updates its pages for months would otherwise keep a slot (and its
        keys) for every version a page ever had. Called right after a merge, when the delta is
        empty and the base holds live nodes only; the order of ids is kept, so the levels
        stay sorted as they are."""
        n = len(self.url_of)
        live = np.flatnonzero(self.alive[:n])
        new_id = np.full(n, -1, dtype=np.int64)
        new_id[live] = np.arange(live.size)
        for t in range(self.tables):
            self.base.ids[t] = new_id[self.base.ids[t]].astype(np.int32)
        self.url_of = [self.url_of[i] for i in live.tolist()]
        self.id_of = {u: i for i, u in enumerate(self.url_of)}
        cap = max(1024, 2 * live.size)
        self.alive = np.zeros(cap, dtype=bool)
        self.alive[: live.size] = True
        keys = np.zeros((cap, self.tables), dtype=np.int64)
        keys[: live.size] = self.node_keys[live]
        self.node_keys = keys
