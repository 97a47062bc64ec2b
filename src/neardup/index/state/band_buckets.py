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
valid from one version to the next. A node's own band keys (to find its buckets when it
leaves) are those of its sketch, which the graph computes again (`graph_keys.keys_of`):
they are not saved (a (slots, tables) matrix of them was 112 bytes a page). Kept here are
only the keys of the nodes in the delta and, for a node of the base whose sketch is about
to change, its keys from before (`stash`); the base is searched for the rest when the graph
is replayed on opening (`base_keys_of`), where the sketches may have changed since the save.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from neardup.index.state.arrays import BandDelta, BandWriter, FilledInPlace, Linked, RowBlocks
from neardup.index.state.found import Found, hits
from neardup.kernels.lsh import key_hits
from neardup.store.file_vectors import in_blocks, sparse_file, whole

_EMPTY_KEYS = np.empty(0, dtype=np.int64)
_EMPTY_IDS = np.empty(0, dtype=np.int32)
_NODE_BLOCK = 65_536  # nodes of the keys by node written at a time (`changes`)
# A save keeps the base's files and writes the changes since beside them while those hold
# at most 1/2 of the base's entries (`BandBuckets.saved`). The base was 46 % of the bytes
# of a ten-million-page save (2.15 of 4.65 GB), rewritten by every save; kept, a save of
# a growing index writes it about once in four or five saves, and the changes beside it
# (about 1.7 times the base's bytes an entry: their keys by node too) in the others.
BASE_KEPT_SHARE = 2


class BandBuckets:
    """Nodes (page slots) by LSH band key, one table per band."""

    def __init__(
        self,
        tables: int,
        base_keys: np.ndarray | None = None,
        base_slots: np.ndarray | None = None,
        cap: int | None = None,
    ) -> None:
        """`base_keys[t]` ascending with `base_slots[t]` the node of each key (tables x
        entries): a saved graph's arrays; `cap` above every base slot (None: found)."""
        self.tables = tables
        self.base_keys = np.zeros((tables, 0), np.int64) if base_keys is None else base_keys
        self.base_slots = np.zeros((tables, 0), np.int32) if base_slots is None else base_slots
        if cap is None:
            cap = int(self.base_slots.max()) + 1 if self.base_slots.size else 0
        # Per slot: the node left since the base was saved (its base entries no longer hold).
        self.base_dead = np.zeros(max(cap, 1024), bool)
        self.delta_keys = [_EMPTY_KEYS] * tables
        self.delta_slots = [_EMPTY_IDS] * tables
        self.new_keys = NodeKeys(tables)  # keys of the nodes in the delta
        # The delta an opening took in from the changes since the save (`take_changes`), a
        # level of its own between the base and the delta, read where its files lie: put
        # into the delta, it was copied whole by every batch that added a node (`add`),
        # and keyed by a dict of a row a node (0.7 s and 150 MB of opening an index
        # 319,566 nodes behind its save).
        self.taken = TakenRun(tables)
        self.stashed: dict[int, np.ndarray] = {}  # keys of base nodes from before a change
        # Keys asked of the base that no search elsewhere answered (`members`'s
        # `preloaded`), searched in the base here, counted.
        self.base_searches = 0

    def keys_of(self, slot: int) -> np.ndarray | None:
        """The band keys of a node (one per table) when kept here; None for a node of the
        base whose keys are its sketch's."""
        got = self.new_keys.get(slot)
        if got is None:
            got = self.taken.get(slot)
        return self.stashed.get(slot) if got is None else got

    def stash(self, slot: int, keys: np.ndarray) -> None:
        """Keep a base node's keys before its sketch changes (until it leaves)."""
        if slot not in self.new_keys and self.taken.get(slot) is None:
            self.stashed.setdefault(slot, keys)

    def base_keys_of(self, slots: np.ndarray) -> dict[int, np.ndarray]:
        """The keys of base nodes found in the base itself (one pass over each table), for
        nodes whose sketch may have changed since the save."""
        want = np.asarray(slots, np.int64)
        if not want.size or not self.base_slots.shape[1]:
            return {}
        cols = []
        for t in range(self.tables):
            parts = [
                lo + np.flatnonzero(np.isin(block, want) & ~self.base_dead[block])
                for lo, block in in_blocks(self.base_slots[t])
            ]
            at = np.concatenate(parts) if parts else np.empty(0, np.int64)
            slots = np.asarray(self.base_slots[t][at])
            order = np.argsort(slots, kind="stable")
            cols.append((slots[order], np.asarray(self.base_keys[t][at])[order]))
        found = cols[0][0]
        keys = np.stack([k for _, k in cols], axis=1)
        return dict(zip(found.tolist(), keys, strict=True))

    def base_hits(
        self, keys: list[np.ndarray], preloaded: list[Found] | None = None
    ) -> list[tuple[np.ndarray, ...]]:
        """The entries of the base and of the run taken in from the changes for the keys
        `keys[t]` (distinct) of each table t: (query position, node) pairs of each, dead
        and left nodes included (`members` skips them). Neither level changes between saves
        but for those marks, so a batch that asks for the same keys before and after it
        moves nodes searches them once. `preloaded`: as `members`'s."""
        out = []
        for t, wanted in enumerate(keys):
            pre = None if preloaded is None else preloaded[t]
            qb, ib, searched = hits(pre, wanted, self.base_keys[t], self.base_slots[t])
            self.base_searches += searched
            out.append((qb, ib, *self.taken.hits(t, wanted)))
        return out

    def members(
        self,
        keys: list[np.ndarray],
        at_least: int = 2,
        preloaded: list[Found] | None = None,
        base: list[tuple[np.ndarray, ...]] | None = None,
    ) -> dict[tuple[int, int], list[int]]:
        """The nodes of the buckets with keys `keys[t]` (distinct) in table t, for the
        buckets holding `at_least` nodes: {(table, key): slots in any order}. Buckets of
        one node hold no candidate pair, and they are nearly all of them, so they are
        counted in arrays and never listed. `preloaded`: the base's entries for some keys of
        each table found elsewhere (a `Found` a table: Spark's executors searched the saved
        files), read instead of the base for those keys; `base`: `base_hits` of `keys`,
        when the caller has them."""
        if base is None:
            base = self.base_hits(keys, preloaded)
        out: dict[tuple[int, int], list[int]] = {}
        for t, wanted in enumerate(keys):
            if not wanted.size:
                continue
            qb, ib, qt, it = base[t]
            if ib.size:
                live = ~self.base_dead[ib]
                qb, ib = qb[live], ib[live]
            qt, it = self.taken.live_hits(qt, it)
            qd, idl = key_hits(self.delta_keys[t], self.delta_slots[t], wanted)
            qi = np.concatenate([qb, qt, qd])
            ids = np.concatenate([ib.astype(np.int64), it, idl.astype(np.int64)])
            big = np.bincount(qi, minlength=wanted.size) >= at_least
            keep = big[qi]
            for k, i in zip(wanted[qi[keep]].tolist(), ids[keep].tolist(), strict=True):
                out.setdefault((t, k), []).append(i)
        return out

    def remove(self, slots: list[int]) -> None:
        """Take nodes out: out of the delta now, skipped in the base from now on."""
        if not slots:
            return
        self._mark_dead(slots)
        for s in slots:
            self.stashed.pop(s, None)
        gone = [s for s in slots if self.new_keys.pop(s, None) is not None]
        self.taken.drop(slots)
        if gone:
            drop = np.array(gone, np.int64)
            for t in range(self.tables):
                keep = ~np.isin(self.delta_slots[t], drop)
                self.delta_keys[t] = self.delta_keys[t][keep]
                self.delta_slots[t] = self.delta_slots[t][keep]

    def _mark_dead(self, slots: list[int]) -> None:
        """Base entries of `slots` skipped from now on (the mask grown to hold them)."""
        top = max(slots)
        if top >= self.base_dead.size:
            grown = np.zeros(max(top + 1, self.base_dead.size * 3 // 2), bool)
            grown[: self.base_dead.size] = self.base_dead
            self.base_dead = grown
        self.base_dead[slots] = True

    def changes(self) -> list[tuple[str, np.ndarray] | RowBlocks]:
        """What this index holds beyond its base, as files to write (`graph_changes.py`):
        the delta (every node of it is in every table once: (tables, nodes) matrices,
        `delta_keys` and `delta_slots`), the stashed keys and the base nodes that left.
        With them, the delta's nodes' keys by node (`node_slots` ascending, `node_keys`):
        the same entries, written twice so that an opening maps them instead of sorting
        every table by node. The delta is written a table at a time and the keys by node a
        block of nodes at a time: made whole first, they were 260 MB of the peak of a 1 %
        add at ten million pages, 318,942 nodes behind the save."""
        assert len(self.new_keys) == self.delta_slots[0].size, "the delta's nodes are keyed"
        width = self.taken.live + self.delta_slots[0].size

        def tables() -> Iterator[tuple[np.ndarray, np.ndarray]]:
            for t in range(self.tables):
                keys, slots = self._delta(t)
                assert keys.size == width, "every node of the delta is in every table once"
                yield keys.astype(np.int64)[None], slots.astype(np.int32)[None]

        stashed = self.stashed
        return [
            RowBlocks(
                {
                    "delta_keys": ((self.tables, width), np.int64),
                    "delta_slots": ((self.tables, width), np.int32),
                },
                tables(),
            ),
            RowBlocks(
                {"node_slots": ((width,), np.int64), "node_keys": ((width, self.tables), np.int64)},
                self.taken.joined(self.new_keys),
            ),
            ("stash_slots", np.fromiter(stashed, np.int64, len(stashed))),
            (
                "stash_keys",
                (
                    np.stack(list(stashed.values())) if stashed else np.zeros((0, self.tables))
                ).astype(np.int64),
            ),
            ("dead", np.flatnonzero(self.base_dead).astype(np.int64)),
        ]

    def take_changes(self, changes: Mapping[str, Any]) -> None:
        """`changes` (of this index's base, by `changes`) put in, on an index holding its
        base alone. Their arrays are read where they lie (maps): each table's delta is
        replaced, not changed in place, by the batches that move its nodes."""
        keys = [_typed(row, np.int64) for row in changes["delta_keys"]]
        slots = [_typed(row, np.int32) for row in changes["delta_slots"]]
        nodes, node_keys = changes.get("node_slots"), changes.get("node_keys")
        if nodes is None or node_keys is None:  # written before they were kept by node too
            keys, slots = [whole(k) for k in keys], [whole(s) for s in slots]
            by_slot = [np.argsort(row, kind="stable") for row in slots]
            nodes = slots[0][by_slot[0]].astype(np.int64) if slots else _EMPTY_KEYS
            node_keys = np.stack([k[o] for k, o in zip(keys, by_slot, strict=True)], 1)
        self.taken = TakenRun(self.tables, keys, slots, nodes, node_keys)
        self.delta_keys = [_EMPTY_KEYS] * self.tables
        self.delta_slots = [_EMPTY_IDS] * self.tables
        self.new_keys = NodeKeys(self.tables)
        stash = np.array(changes["stash_keys"], np.int64)
        self.stashed = dict(zip(np.asarray(changes["stash_slots"]).tolist(), stash, strict=True))
        dead = np.asarray(changes["dead"]).tolist()
        if dead:
            self._mark_dead(dead)

    def add(self, slots: list[int], keys: np.ndarray) -> None:
        """Put new nodes in (len(slots) x tables keys) into the delta."""
        if not slots:
            return
        ids = np.asarray(slots, np.int32)
        self.new_keys.put(slots, keys)
        for t in range(self.tables):
            k = np.concatenate([self.delta_keys[t], keys[:, t].astype(np.int64)])
            i = np.concatenate([self.delta_slots[t], ids])
            order = np.argsort(k, kind="stable")
            self.delta_keys[t], self.delta_slots[t] = k[order], i[order]

    def entries(self) -> int:
        """Entries of each table once both levels are folded: every node is in every
        table once."""
        base = self.base_slots[0] if self.base_slots.shape[1] else _EMPTY_IDS
        live = sum(int(np.count_nonzero(~self.base_dead[b])) for _, b in in_blocks(base))
        return live + self.taken.live + self.delta_slots[0].size

    def saved(
        self, before: Path | None, writer: BandWriter
    ) -> list[FilledInPlace | Linked | tuple[str, np.ndarray] | RowBlocks]:
        """The band index as a save holds it. While the changes since the base (the run
        taken in and the delta) hold at most 1/`BASE_KEPT_SHARE` of the base's entries,
        the base's files are kept as they are (`Linked`, from the save `before` that the
        base maps) and the changes written beside them, as a writer's close writes them
        (`changes`); an opening or the save's own mapping takes them in again as the run
        (`take_changes`). Past that share, both levels are folded into one base
        (`folded`)."""
        if self.keeps_base(before):
            assert before is not None
            files = [before / "band_keys.npy", before / "band_slots.npy"]
            sparse = sparse_file(files[0])
            if sparse.exists():  # (an older save has none: it is made again beside the link)
                files.append(sparse)
            return [Linked(tuple(files)), *self.changes()]
        return [self.folded(before, writer)]

    def keeps_base(self, before: Path | None) -> bool:
        """Whether a save keeps the base's files (`saved`)."""
        base = int(self.base_slots.shape[1])
        changed = self.taken.live + int(self.delta_slots[0].size)
        return before is not None and base > 0 and changed * BASE_KEPT_SHARE <= base

    def folded(self, before: Path | None, writer: BandWriter) -> FilledInPlace:
        """Both levels folded into one base, as a save holds it: each table's keys ascending
        with their nodes, a (tables, `entries`) matrix of each, a table written by `writer`
        (`band_save.py`) from the save `before` (whose files the base maps) and the delta.
        A base with no save behind it (built in memory from the pages: the first save of
        an index) goes to the writers folded with the delta, as changes."""
        width = self.entries()
        base_width = int(self.base_slots.shape[1])
        left = np.flatnonzero(self.base_dead)
        keys, slots = map(list, zip(*map(self._delta, range(self.tables)), strict=True))
        if before is None and base_width:
            keys, slots = map(list, zip(*map(self._folded, range(self.tables)), strict=True))
            base_width, left = 0, left[:0]

        def fill(folder: Path) -> None:
            writer(folder, before, BandDelta(self.tables, keys, slots, left, base_width, width))

        return FilledInPlace(
            {
                "band_keys": ((self.tables, width), np.int64),
                "band_slots": ((self.tables, width), np.int32),
            },
            fill,
        )

    def _folded(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Table `t` with both levels folded, in memory (keys ascending, old entries first
        at equal keys)."""
        bk, bs = whole(self.base_keys[t]), whole(self.base_slots[t])
        if bs.size:
            live = ~self.base_dead[bs]
            bk, bs = bk[live], bs[live]
        dk, ds = self._delta(t)
        k = np.concatenate([bk, dk])
        order = np.argsort(k, kind="stable")
        return k[order], np.concatenate([bs, ds])[order].astype(np.int32)

    def _delta(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Table `t` of the delta with the run taken in from changes folded in (keys
        ascending, the run's entries first at equal keys: as one delta would hold them)."""
        tk, ts = self.taken.table(t)
        if not tk.size:
            return self.delta_keys[t], self.delta_slots[t]
        k = np.concatenate([tk, self.delta_keys[t]])
        order = np.argsort(k, kind="stable")
        return k[order], np.concatenate([ts, self.delta_slots[t]])[order]


def _typed(row: Any, dtype: type) -> Any:
    """A row of the changes as `dtype`: an array in memory converted, a vector read by
    blocks as written (the changes write these types)."""
    return row.astype(dtype, copy=False) if isinstance(row, np.ndarray) else row


class TakenRun:
    """The delta as an opening took it in from the changes since the save (`take_changes`):
    each table's keys ascending with their nodes, and the same entries by node (nodes
    ascending with a row of keys each), read where they lie (the changes' files, by
    blocks as the base's tables are: `files/saves.CHANGES_BY_BLOCKS`; or arrays).
    Every node of it is in every table once. Nodes that leave are marked (`left`), not
    taken out; the next changes or save write the run without them."""

    def __init__(
        self,
        tables: int,
        keys: list[np.ndarray] | None = None,
        slots: list[np.ndarray] | None = None,
        nodes: np.ndarray | None = None,
        node_keys: np.ndarray | None = None,
    ) -> None:
        self.tables = tables
        self.keys = [_EMPTY_KEYS] * tables if keys is None else keys
        self.slots = [_EMPTY_IDS] * tables if slots is None else slots
        self.nodes = _EMPTY_KEYS if nodes is None else nodes
        # One flat run of keys, a row of `tables` a node: the flat vector a changes
        # folder's are read as (`files/saves.FLAT_VECTORS`), or a matrix's values.
        keys_by_node = np.zeros((0, tables), np.int64) if node_keys is None else node_keys
        if isinstance(keys_by_node, np.ndarray):
            keys_by_node = keys_by_node.reshape(-1)
        self.node_keys = keys_by_node
        self.left = np.zeros(int(self.nodes[-1]) + 1 if self.nodes.size else 0, bool)
        self.live = int(self.nodes.size)  # nodes that have not left

    def _index(self, slot: int) -> int | None:
        """Where node `slot` is among `nodes` when it is one and has not left."""
        if not self.live or slot >= self.left.size or self.left[slot]:
            return None
        i = int(np.searchsorted(self.nodes, slot))
        return i if i < self.nodes.size and int(self.nodes[i]) == slot else None

    def get(self, slot: int) -> np.ndarray | None:
        """The keys of node `slot` when it is one of these and has not left."""
        i = self._index(slot)
        return None if i is None else self._keys_at(np.array([i], np.int64))[0]

    def _keys_at(self, at: np.ndarray) -> np.ndarray:
        """The rows of keys of the nodes at positions `at`."""
        if not at.size:
            return np.empty((0, self.tables), np.int64)
        # The span of rows they fall in, read at once: a writer's close asks for its nodes
        # in order, a block at a time (a gather of each cell held ten times their bytes).
        lo, hi = int(at.min()), int(at.max()) + 1
        if hi - lo <= 4 * at.size:
            span = np.asarray(self.node_keys[lo * self.tables : hi * self.tables])
            return span.reshape(hi - lo, self.tables)[at - lo]
        cells = (at[:, None] * self.tables + np.arange(self.tables)).ravel()
        return np.asarray(self.node_keys[cells]).reshape(at.size, self.tables)

    def drop(self, slots: list[int]) -> None:
        """Mark those of `slots` that are nodes here as left."""
        for slot in slots:
            if self._index(slot) is not None:
                self.left[slot] = True
                self.live -= 1

    def hits(self, t: int, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(query position, node) of table `t`'s entries whose key is one of `wanted`,
        nodes that left included (`live_hits` drops them)."""
        q, ids = key_hits(self.keys[t], self.slots[t], wanted)
        return q, ids.astype(np.int64)

    def live_hits(self, q: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`hits` without the nodes that left since."""
        if ids.size and self.live < self.nodes.size:
            here = ~self.left[ids]
            q, ids = q[here], ids[here]
        return q, ids

    def table(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Table `t`'s entries of nodes that have not left, in its order."""
        keys, slots = whole(self.keys[t]), whole(self.slots[t])
        if self.live < self.nodes.size:
            here = ~self.left[slots]
            return keys[here], slots[here]
        return keys, slots

    def joined(self, added: NodeKeys) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """These nodes that have not left and the `added` ones, ascending, with their keys:
        (nodes, (nodes, tables) keys), a block of nodes at a time."""
        nodes = whole(self.nodes)
        rows = np.flatnonzero(~self.left[nodes]) if self.live < nodes.size else None
        live = nodes if rows is None else nodes[rows]
        new, new_rows = added.live()
        nodes = np.concatenate([live, new])
        order = np.argsort(nodes, kind="stable")
        for lo in range(0, order.size, _NODE_BLOCK):
            pick = order[lo : lo + _NODE_BLOCK]
            keys = np.empty((pick.size, self.tables), np.int64)
            run = pick < live.size
            at = pick[run] if rows is None else rows[pick[run]]
            keys[run] = self._keys_at(at)
            keys[~run] = added.rows_at(new_rows[pick[~run] - live.size])
            yield nodes[pick], keys


class NodeKeys:
    """slot -> its row of band keys, for the nodes of the delta in memory (`BandBuckets.add`):
    the rows in one matrix, grown by half, and a dict slot -> row. A dict of one small array
    a node cost about 400 bytes a node (the array's own header, its data, the entry), a
    tenth of a million-page increment's peak at ten million pages, and its close stacked
    them all again to write them."""

    _FIRST = 1024  # rows of the first matrix

    def __init__(self, tables: int) -> None:
        self.tables = tables
        self._rows = np.zeros((0, tables), np.int64)
        self._used = 0  # rows written (those of nodes that left included)
        self._row: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._row)

    def __contains__(self, slot: object) -> bool:
        return slot in self._row

    def get(self, slot: int) -> np.ndarray | None:
        """The node's keys (a copy), None when it is not one of these."""
        row = self._row.get(slot)
        return None if row is None else self._rows[row].copy()

    def pop(self, slot: int, default: np.ndarray | None = None) -> np.ndarray | None:
        """The node out; its keys, or `default` when it was not one of these."""
        row = self._row.pop(slot, None)
        return default if row is None else self._rows[row].copy()

    def put(self, slots: list[int], keys: np.ndarray) -> None:
        """Nodes `slots` with their keys (a row each; a node put again takes its new row)."""
        need = self._used + len(slots)
        if need > self._rows.shape[0]:
            self._room(need)
            need = self._used + len(slots)
        self._rows[self._used : need] = keys
        self._row.update(zip(slots, range(self._used, need), strict=True))
        self._used = need

    def _room(self, need: int) -> None:
        """A larger matrix holding the live rows only (those of nodes that left dropped)."""
        slots, rows = self.live()
        size = max(need, self._rows.shape[0] * 3 // 2, self._FIRST)
        grown = np.zeros((size, self.tables), np.int64)
        grown[: rows.size] = self._rows[rows]
        self._rows, self._used = grown, int(rows.size)
        self._row = dict(zip(slots.tolist(), range(rows.size), strict=True))

    def live(self) -> tuple[np.ndarray, np.ndarray]:
        """The nodes (in the order they were put) and the row of each."""
        n = len(self._row)
        return np.fromiter(self._row, np.int64, n), np.fromiter(self._row.values(), np.int64, n)

    def rows_at(self, rows: np.ndarray) -> np.ndarray:
        """The keys of rows `rows` (from `live`), (rows, tables)."""
        return self._rows[rows]
