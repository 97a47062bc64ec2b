"""The service's LSH band index: which nodes share a band key, in sorted arrays.

Why: the first version kept a Python set per (table, key) (about 5.7 KB a page), the second
sorted arrays rebuilt on every opening (half of the opening time). Here each table is a
sorted array of (key, node slot) pairs in two levels, as a log-structured merge tree keeps
them: a *base*, the arrays saved with the index's graph files and memory-mapped on opening
(read, never written: nothing is built or copied to open), and a small in-memory *delta*
that takes the nodes that entered since, re-sorted per batch. A node that leaves is removed
from the delta at once and marked dead for the base (its base entries are skipped on
lookup); the next saved graph (`ScanGraph.arrays`) folds both levels into one base again.

A node is a page slot, which never changes (`pages.PageTable`), so the saved arrays stay
valid from one version to the next. A node's own band keys (to find its entries when it
leaves) are a (slots, tables) matrix saved likewise, with the keys of nodes that entered
since in a dict.
"""

from __future__ import annotations

import numpy as np

from neardup.kernels.lsh import key_hits

_EMPTY_KEYS = np.empty(0, dtype=np.int64)
_EMPTY_IDS = np.empty(0, dtype=np.int32)


class BandBuckets:
    """Nodes (page slots) by LSH band key, one table per band."""

    def __init__(
        self,
        tables: int,
        base_keys: np.ndarray | None = None,
        base_slots: np.ndarray | None = None,
        node_keys: np.ndarray | None = None,
    ) -> None:
        """`base_keys[t]` ascending with `base_slots[t]` the node of each key (tables x
        entries), `node_keys[slot]` each base node's keys: a saved graph's arrays."""
        self.tables = tables
        self.base_keys = np.zeros((tables, 0), np.int64) if base_keys is None else base_keys
        self.base_slots = np.zeros((tables, 0), np.int32) if base_slots is None else base_slots
        self.base_node_keys = np.zeros((0, tables), np.int64) if node_keys is None else node_keys
        # Per slot: the node left since the base was saved (its base entries no longer hold).
        self.base_dead = np.zeros(max(self.base_node_keys.shape[0], 1024), bool)
        self.delta_keys = [_EMPTY_KEYS] * tables
        self.delta_slots = [_EMPTY_IDS] * tables
        self.new_keys: dict[int, np.ndarray] = {}  # keys of the nodes in the delta

    def keys_of(self, slot: int) -> np.ndarray:
        """The band keys of a node (one per table)."""
        got = self.new_keys.get(slot)
        return self.base_node_keys[slot] if got is None else got

    def members(
        self, keys: list[np.ndarray], at_least: int = 2
    ) -> dict[tuple[int, int], list[int]]:
        """The nodes of the buckets with keys `keys[t]` (distinct) in table t, for the
        buckets holding `at_least` nodes: {(table, key): slots in any order}. Buckets of
        one node hold no candidate pair, and they are nearly all of them, so they are
        counted in arrays and never listed."""
        out: dict[tuple[int, int], list[int]] = {}
        for t, wanted in enumerate(keys):
            if not wanted.size:
                continue
            qb, ib = key_hits(self.base_keys[t], self.base_slots[t], wanted)
            if ib.size:
                live = ~self.base_dead[ib]
                qb, ib = qb[live], ib[live]
            qd, idl = key_hits(self.delta_keys[t], self.delta_slots[t], wanted)
            qi = np.concatenate([qb, qd])
            ids = np.concatenate([ib.astype(np.int64), idl.astype(np.int64)])
            big = np.bincount(qi, minlength=wanted.size) >= at_least
            keep = big[qi]
            for k, i in zip(wanted[qi[keep]].tolist(), ids[keep].tolist(), strict=True):
                out.setdefault((t, k), []).append(i)
        return out

    def remove(self, slots: list[int]) -> None:
        """Take nodes out: out of the delta now, skipped in the base from now on."""
        if not slots:
            return
        top = max(slots)
        if top >= self.base_dead.size:
            grown = np.zeros(max(top + 1, self.base_dead.size * 3 // 2), bool)
            grown[: self.base_dead.size] = self.base_dead
            self.base_dead = grown
        self.base_dead[slots] = True
        gone = [s for s in slots if self.new_keys.pop(s, None) is not None]
        if gone:
            drop = np.array(gone, np.int64)
            for t in range(self.tables):
                keep = ~np.isin(self.delta_slots[t], drop)
                self.delta_keys[t] = self.delta_keys[t][keep]
                self.delta_slots[t] = self.delta_slots[t][keep]

    def add(self, slots: list[int], keys: np.ndarray) -> None:
        """Put new nodes in (len(slots) x tables keys) into the delta."""
        if not slots:
            return
        ids = np.asarray(slots, np.int32)
        for s, k in zip(slots, keys, strict=True):
            self.new_keys[s] = k
        for t in range(self.tables):
            k = np.concatenate([self.delta_keys[t], keys[:, t].astype(np.int64)])
            i = np.concatenate([self.delta_slots[t], ids])
            order = np.argsort(k, kind="stable")
            self.delta_keys[t], self.delta_slots[t] = k[order], i[order]

    def arrays(self, cap: int) -> dict[str, np.ndarray]:
        """Both levels folded into one base (what a saved graph holds): per table the keys
        ascending with their nodes, and each node's keys at its slot (`cap` rows). Each
        table is sorted into its row of the result: a list of tables stacked afterwards,
        slots widened then narrowed, held about twice the result at the peak of a save."""
        keys = np.zeros((self.tables, 0), np.int64)
        slots = np.zeros((self.tables, 0), np.int32)
        for t in range(self.tables):
            bk, bs = self.base_keys[t], self.base_slots[t]
            if bs.size:
                live = ~self.base_dead[bs]
                bk, bs = bk[live], bs[live]
            k = np.concatenate([bk, self.delta_keys[t]])
            order = np.argsort(k, kind="stable")
            if t == 0:  # every table holds each node once: one width for all
                keys = np.empty((self.tables, k.size), np.int64)
                slots = np.empty((self.tables, k.size), np.int32)
            keys[t] = k[order]
            del k
            slots[t] = np.concatenate([bs, self.delta_slots[t]])[order]
        node_keys = np.zeros((cap, self.tables), np.int64)
        m = min(cap, self.base_node_keys.shape[0])
        node_keys[:m] = self.base_node_keys[:m]
        for s, k in self.new_keys.items():
            node_keys[s] = k
        return {"band_keys": keys, "band_slots": slots, "node_keys": node_keys}
