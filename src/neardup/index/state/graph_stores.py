"""The scan graph's three stores, each a sorted base plus an overlay (`overlay.py`): the
shingle-set classes, the candidate pairs' counts and the verified edges.

Why apart from the graph (`scangraph.ScanGraph`): each store answers one question (which
pages share a shingle set; how many band tables emit a pair; which nodes an edge joins) from
arrays saved with a committed version and mapped when the index opens, plus what the
batches changed since; folding the overlay back into sorted arrays for a save is each
store's own (`arrays`). The graph's rules (the bucket rule, verification, clustering) read
and change them through these few methods, and never see which part is the base.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

import numpy as np

from neardup.index.state.arrays import FilledInPlace, RowBlocks
from neardup.index.state.found import Found, hits
from neardup.index.state.merged_runs import BLOCK, merged_rows
from neardup.index.state.overlay import Overlay
from neardup.index.state.taken_entries import TakenEntries, packed, union
from neardup.kernels.sorting import found_in_sorted, run_in_sorted, sorted_distinct


class ShingleClasses:
    """Shingle fingerprint -> the pages (slots) with that shingle set: the saved classes
    (`fp` sorted, with each entry's `slot`), those changed since as the changes written
    before hold them (`taken`), and those changed since they were (`over`)."""

    def __init__(self, fp: np.ndarray, slot: np.ndarray) -> None:
        self.fp, self.slot = fp, slot
        self.taken = TakenEntries.empty(1)
        self.over: Overlay[int, int] = Overlay()
        self.searches = 0  # saved fingerprints searched here (not found elsewhere)

    def members(self, fp: int) -> Collection[int]:
        """The pages of a class (empty for an unknown one)."""
        got = self.over.get(fp)
        if got is not None:
            return got
        run = self.taken.run(fp)
        if run is not None:
            return tuple(run[0].tolist())
        lo, hi = run_in_sorted(self.fp, fp)
        return self.slot[lo:hi].tolist()

    def take(self, fp: np.ndarray, ptr: np.ndarray, slots: np.ndarray) -> None:
        """The classes changed since the save, as changes written before hold them
        (`changes`), read where they lie; the overlay starts empty."""
        self.taken = TakenEntries(fp, ptr, [slots])
        self.over = Overlay()

    def changes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The classes changed since the save: fingerprints ascending, pointers, pages."""
        keys, ptr, (slots,) = union(self.taken, *packed(self.over))
        return keys, ptr, slots

    def mutable(self, fp: int) -> set[int]:
        """A class's pages as a set the batch changes in place."""
        return self.over.mutable(fp, lambda: self.members(fp))

    def load(self, fps: Collection[int], found: Found | None = None) -> None:
        """`mutable` of many classes, their saved members found with one search for all (a
        batch's classes: nearly all new, or of one page); `found`: the saved entries
        searched elsewhere (`BatchLookups.classes`)."""
        self.over.thaw(fps)
        todo = sorted_distinct(np.fromiter((fp for fp in fps if fp not in self.over), np.int64))
        if len(self.taken) and todo.size:  # those changed before: from there
            there = self.taken.holds(todo)
            for fp in todo[there].tolist():
                self.over.set_members(fp, self.members(fp))
            todo = todo[~there]
        if not todo.size:
            return
        at, slots, searched = hits(found, todo, self.fp, self.slot)
        self.searches += searched
        members: list[set[int]] = [set() for _ in range(todo.size)]
        for q, s in zip(at.tolist(), slots.tolist(), strict=True):
            members[q].add(int(s))
        for fp, got in zip(todo.tolist(), members, strict=True):
            self.over.set_members(fp, got)

    def arrays(self) -> RowBlocks:
        """The classes as sorted base arrays, the overlay merged in block by block
        (`cls_fp`, `cls_slot`; a class's pages ascending)."""
        fps, slots = _changed_rows(self.taken, self.over)
        specs = {"cls_fp": np.int64, "cls_slot": np.int64}
        return merged_rows(
            specs, [self.fp, self.slot], [fps, slots], _changed(self.taken, self.over)
        )


class CandidateCounts:
    """Candidate pair (packed `a << 32 | b`, a < b) -> the band tables that emit it: the
    saved pairs (`keys` sorted, their `counts`) and the counts changed since (`over`; 0:
    no longer a candidate)."""

    def __init__(self, keys: np.ndarray, counts: np.ndarray) -> None:
        self.keys, self.counts = keys, counts
        # The counts changed since the save as changes written before hold them (a pair
        # a run of one count), then those changed since they were.
        self.taken = TakenEntries.empty(1)
        self.over: dict[int, int] = {}

    def base_counts(self, packed: np.ndarray) -> np.ndarray:
        """The count of each packed pair below the overlay (0 where it is no candidate):
        as the changes written before hold it, else as saved."""
        out = np.zeros(packed.size, np.int64)
        if not packed.size:
            return out
        rest = np.ones(packed.size, bool)
        taken = (self.taken.keys, self.taken.columns[0])
        for keys, counts in (taken, (self.keys, self.counts)):
            if not rest.any():
                break
            i, ok = found_in_sorted(keys, packed[rest])
            at = np.flatnonzero(rest)[ok]
            out[at] = counts[i[ok]]
            rest[at] = False
        return out

    def take(self, keys: np.ndarray, counts: np.ndarray) -> None:
        """The counts changed since the save, as changes written before hold them
        (`changes`), read where they lie; the overlay starts empty."""
        self.taken = TakenEntries(keys, np.arange(np.asarray(keys).size + 1), [counts])
        self.over = {}

    def changes(self) -> tuple[np.ndarray, np.ndarray]:
        """Every pair whose count changed since the save, ascending, with its count (0: no
        longer a candidate): the overlay's, else the changes' written before."""
        keys = np.fromiter(self.over, np.int64, len(self.over))
        order = np.argsort(keys)
        counts = np.fromiter(self.over.values(), np.int64, len(self.over))[order]
        ptr = np.arange(keys.size + 1, dtype=np.int64)
        pairs, _, (got,) = union(self.taken, keys[order], ptr, [counts])
        return pairs, np.asarray(got, np.int64)

    def live(self) -> dict[int, int]:
        """Every candidate with its count (a test's view of all of them)."""
        changed, counts = self.changes()
        gone = set(changed.tolist())
        out = {
            p: c
            for p, c in zip(
                np.asarray(self.keys).tolist(), np.asarray(self.counts).tolist(), strict=True
            )
            if p not in gone
        }
        out.update({p: c for p, c in zip(changed.tolist(), counts.tolist(), strict=True) if c > 0})
        return out

    def arrays(self) -> RowBlocks:
        """The candidates as sorted base arrays (`pair_keys`, `pair_counts`), the counts
        changed since merged in block by block (a count of 0 leaves)."""
        changed, counts = self.changes()
        live = counts > 0
        specs = {"pair_keys": np.int64, "pair_counts": np.int16}
        new = [changed[live], counts[live].astype(np.int16)]
        return merged_rows(specs, [self.keys, self.counts], new, changed)


class VerifiedEdges:
    """The verified edges, both directions: the saved ones sorted by (node, other) with the
    node's run found by pointers (`u`, `v`, `s`, `ptr`: CSR), and the edges of the nodes
    changed since (`over`: node -> {other: similarity}, all of that node's edges)."""

    def __init__(self, u: np.ndarray, v: np.ndarray, s: np.ndarray, ptr: np.ndarray) -> None:
        self.u, self.v, self.s = u, v, s
        self.ptr = ptr  # node u's edges: v[ptr[u] : ptr[u + 1]]
        # The nodes whose edges changed since the save, as changes written before hold
        # them (other nodes and similarities), then those changed since they were.
        self.taken = TakenEntries.empty(2)
        self.over: dict[int, dict[int, float]] = {}

    def take(self, u: np.ndarray, ptr: np.ndarray, v: np.ndarray, s: np.ndarray) -> None:
        """The edges changed since the save, as changes written before hold them
        (`changes`), read where they lie; the overlay starts empty."""
        self.taken = TakenEntries(u, ptr, [v, s])
        self.over = {}

    def changes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The nodes whose edges changed since the save, ascending, with pointers, the
        other nodes and the similarities (float64, as held in memory)."""
        keys, ptr, (v, s) = union(self.taken, *packed(self.over, with_values=True))
        return keys, ptr, v, s

    def set_base(self, u: np.ndarray, v: np.ndarray, s: np.ndarray, n: int) -> None:
        """The base edges of `n` slots from each edge once (`u[i]`, `v[i]`, similarity
        `s[i]`): both directions, sorted by (node, other)."""
        uu, vv, ss = np.concatenate([u, v]), np.concatenate([v, u]), np.concatenate([s, s])
        o = np.lexsort((vv, uu))
        self.u, self.v, self.s = uu[o], vv[o].astype(np.int32), ss[o]
        self.ptr = pointers(self.u, n)

    def neighbours(self, u: int) -> dict[int, float]:
        """The verified edges of a node: {other node: similarity}."""
        got = self.over.get(u)
        if got is not None:
            return got
        run = self.taken.run(u)
        if run is not None:
            return dict(zip(run[0].tolist(), run[1].tolist(), strict=True))
        if u + 1 >= self.ptr.size:
            return {}
        lo, hi = int(self.ptr[u]), int(self.ptr[u + 1])
        return dict(zip(self.v[lo:hi].tolist(), self.s[lo:hi].tolist(), strict=True))

    def mutable(self, u: int) -> dict[int, float]:
        """A node's edges as a dict the batch changes in place."""
        got = self.over.get(u)
        if got is None:
            got = self.over[u] = self.neighbours(u)
        return got

    def count(self) -> int:
        """Verified edges (each once)."""
        over = sum(len(v) for v in self.over.values())
        changed = _changed(self.taken, self.over)
        taken = self.taken.sizes()[~np.isin(np.asarray(self.taken.keys), changed_over(self.over))]
        keep = self.u.size
        if changed.size:
            keep -= int(np.isin(self.u, changed).sum())
        return (keep + int(taken.sum()) + over) // 2

    def arrays(self, n: int) -> tuple[RowBlocks, FilledInPlace]:
        """The edges of `n` slots as base arrays (`adj_u`, `adj_v`, `adj_s`, sorted by
        (node, other), the changed nodes' edges merged in block by block; then `adj_ptr`,
        filled from the `adj_u` just written, a block of slots at a time)."""
        eu, ev, es = _changed_rows(self.taken, self.over, with_values=True)
        specs = {"adj_u": np.int64, "adj_v": np.int32, "adj_s": np.float32}
        changed = _changed(self.taken, self.over)
        edges = merged_rows(specs, [self.u, self.v, self.s], [eu, ev, es], changed)

        def fill(folder: Path) -> None:
            u = np.load(folder / "adj_u.npy", mmap_mode="r")
            ptr = np.load(folder / "adj_ptr.npy", mmap_mode="r+")
            for lo in range(0, n + 1, BLOCK):
                hi = min(lo + BLOCK, n + 1)
                ptr[lo:hi] = np.searchsorted(u, np.arange(lo, hi, dtype=np.int64), "left")
            ptr.flush()

        return edges, FilledInPlace({"adj_ptr": ((n + 1,), np.int64)}, fill)


def changed_over(over: Mapping[int, object]) -> np.ndarray:
    """An overlay's keys, ascending."""
    return sorted_distinct(np.fromiter(over, np.int64, len(over)))


def _changed(taken: TakenEntries, over: Mapping[int, object]) -> np.ndarray:
    """The keys changed since the save (ascending): an entry emptied too, which leaves."""
    return np.union1d(np.asarray(taken.keys, np.int64), changed_over(over))


def _changed_rows(
    taken: TakenEntries, over: Mapping[int, Collection[int]], with_values: bool = False
) -> tuple[np.ndarray, ...]:
    """The (key, member[, value]) rows of the entries changed since the save, sorted by
    key then member: the overlay's, and the taken level's that the overlay does not hold."""
    old = taken.rows(changed_over(over))
    keys, members, order = _expanded(over)
    columns = [keys[order], members[order]]
    if with_values:
        values = (s for nb in over.values() for s in nb.values())  # type: ignore[attr-defined]
        columns.append(np.fromiter(values, np.float64, keys.size)[order])
    if not old[0].size:
        return tuple(columns)
    joined = [np.concatenate([a, b]) for a, b in zip(old, columns, strict=True)]
    both = np.lexsort((joined[1], joined[0]))
    return tuple(c[both] for c in joined)


def _expanded(over: Mapping[int, Collection[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An overlay's entries (key -> members) as (key, member) rows, with the order that
    sorts them by key, then member: the rows a save merges in (`merged_runs`), made
    without a loop of arrays (a class or a node at a time was 1.8 s of a million-page
    save)."""
    sizes = np.fromiter((len(m) for m in over.values()), np.int64, len(over))
    keys = np.repeat(np.fromiter(over, np.int64, len(over)), sizes)
    members = np.fromiter((v for m in over.values() for v in m), np.int64, int(sizes.sum()))
    return keys, members, np.lexsort((members, keys))


def pointers(sorted_nodes: np.ndarray, n: int) -> np.ndarray:
    """Where each node's run starts in a node-sorted edge array (n + 1 offsets, CSR): a
    node's edges are found without a search."""
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(sorted_nodes, minlength=n)[:n], out=ptr[1:])
    return ptr


def joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    """Arrays concatenated as `dtype` (an empty one for no part)."""
    return np.concatenate(parts).astype(dtype) if parts else np.empty(0, dtype)
