"""The index's groups: the pages of each group and each group's winner, in arrays.

Why (issue 26): the groups were a Python set (or a bare URL) per group and a dict of
winners, built from every stored row on opening: about 300 bytes a page and a third of the
opening time at 200,000 pages. Now the groups as opened are arrays: the pages of a group are
a run of a (group id, slot) array sorted by group, made with one sort of the page table's
`group` column, and the winners are the group rows' own columns (group ids sorted, winner
URLs in one Arrow array). A batch changes a few groups; those, and only those, become Python
sets of URLs (an overlay that says "this group is now ..."). The writer's next save merges
the overlay into the saved arrays a block at a time (`saved_arrays`); a copy that never
saves folds it back into the arrays (`fold_if_due`) once it holds more than an eighth as
many groups as they do: adding a million pages to an empty index would otherwise leave every
group in the overlay, about 450 bytes a page with the winners'.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from neardup.index.state.arrays import (
    RowBlocks,
    in_mask_order,
    mapped_strings,
    strings_in_blocks,
)
from neardup.index.state.merged_runs import (
    BLOCK,
    dropped_count,
    merged_blocks,
    merged_rows,
)
from neardup.index.state.overlay import FOLD_SHARE, FoldRule, Overlay
from neardup.index.state.page_rows import one_array
from neardup.index.state.pages import PageTable
from neardup.index.state.taken_entries import TakenEntries
from neardup.kernels.sorting import (
    found_in_sorted,
    last_of,
    run_in_sorted,
    runs_in_sorted,
    sorted_distinct,
)
from neardup.store.file_vectors import in_blocks, whole

FOLD_AT_LEAST = 65_536  # an overlay of more groups than this is folded (small ones never)


# The files of saved groups and winners (`saved_arrays` of each), beside the saved graph's.
GROUP_ARRAYS = (
    "group_gid",
    "group_slot",
    "group_ids",
    "group_sizes",
    "winner_gid",
    "winner_row",
    "winner_url_offsets",
    "winner_url_bytes",
)


def _fold_due(overlay: int, base: int) -> bool:
    # The module's constants read at each call: tests set them.
    return FoldRule(FOLD_AT_LEAST, FOLD_SHARE).due(overlay, base)


class GroupMembers:
    """group id -> its pages (URLs), a mapping of the live groups; what `get`, `[]`,
    `values` and `items` return is read-only: change a group through `add`, `discard`,
    `pop` and assignment. A group with no page left is no group."""

    def __init__(
        self,
        pages: PageTable,
        saved: dict[str, np.ndarray] | None = None,
        counts: Sequence[int] | None = None,
    ) -> None:
        """The groups of the page table's `group` column (the committed state), or the
        arrays `saved_arrays` wrote of it (maps: not read until a group is), with the
        groups of one page or more and of two or more among them (`counts`, as the save
        counted them; None: counted from the arrays when asked)."""
        self._pages = pages
        # The groups an opening found changed since the save (`move`): a level of their own
        # between the arrays and the overlay, group ids sorted with their pages' slots (a
        # tuple of URLs a group cost about 100 bytes a page written since the save).
        self._level = TakenEntries.empty(1)
        # Groups of >= 1 and >= 2 pages that the arrays hold, and those the last
        # `saved_arrays` wrote (None: not known without reading every group's size).
        self._counts: tuple[int, int] | None = None
        self.written_counts: tuple[int, int] | None = None
        if saved is None:
            self._build()
            return
        self._gid, self._slot = saved["group_gid"], saved["group_slot"]
        self._runs: dict[int, tuple[int, int]] = {}  # saved runs found ahead (`preload`)
        self._ids, self._sizes = saved["group_ids"], saved["group_sizes"]
        self._over: Overlay[int, str] = Overlay()
        self._counts = None if counts is None else (int(counts[0]), int(counts[1]))

    def saved_arrays(self) -> Iterator[RowBlocks]:
        """The arrays of the groups, for the files `GroupMembers(pages, saved)` maps: the
        saved ones with the groups changed since merged in block by block (`merged_runs`),
        nothing folded in memory. A changed group's pages are those the page table's
        `group` column names (what `_build` sorts whole), read a block of slots at a time."""
        changed = self._changed()
        gid, slot = self._column_members(changed)
        specs = {"group_gid": np.int64, "group_slot": np.int64}
        yield merged_rows(specs, [self._gid, self._slot], [gid, slot], changed)
        ids, sizes = np.unique(gid, return_counts=True)
        specs = {"group_ids": np.int64, "group_sizes": np.int64}
        rows = merged_rows(specs, [self._ids, self._sizes], [ids, sizes], changed)
        counted = [0, 0]

        def counting() -> Iterator[tuple[np.ndarray, ...]]:
            # The groups of >= 1 and >= 2 pages, counted as the save writes them, so
            # that `count` need not read every size again (80 MB at ten million pages).
            for block in rows.blocks:
                counted[0] += int(np.count_nonzero(block[1] >= 1))
                counted[1] += int(np.count_nonzero(block[1] >= 2))
                yield block
            self.written_counts = (counted[0], counted[1])

        yield RowBlocks(rows.specs, counting())

    def _column_members(self, gids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(group, slot) of the pages of groups `gids` (sorted) by the page table's `group`
        column, sorted by group then slot."""
        group, n = self._pages.group, self._pages.n
        found_gid, found_slot = [], []
        for lo in range(0, n if gids.size else 0, BLOCK):
            g = np.asarray(group[lo : min(lo + BLOCK, n)])
            at = np.flatnonzero(found_in_sorted(gids, g)[1])
            found_gid.append(g[at].astype(np.int64))
            found_slot.append(at + lo)
        gid = np.concatenate(found_gid) if found_gid else np.empty(0, np.int64)
        slot = np.concatenate(found_slot) if found_slot else np.empty(0, np.int64)
        order = np.argsort(gid, kind="stable")  # the slots ascending within a group
        return gid[order], slot[order].astype(np.int64)

    def move(self, slots: np.ndarray, before: np.ndarray) -> None:
        """Pages whose group changed since the arrays were saved (`PageTable.apply_rows`:
        `before`, -1 for none) out of the old group and into the page table's.

        On opening (no overlay yet) the groups these pages left or joined are made at once,
        from their saved runs and the moves, in arrays: a page at a time (a search and a
        set per group) took 0.9 s of opening a million-page index 30,000 rows behind its
        save, as a `neardup add` of it leaves it."""
        now = self._pages.group[slots]
        moved = before != now
        if self._over or len(self._level):  # groups changed since: each page by itself
            self._move_each(slots[moved], before[moved], now[moved])
            return
        if not moved.any():
            return
        slot, old, new = slots[moved], before[moved], now[moved]
        gids = sorted_distinct(np.concatenate([old[old >= 0], new[new >= 0]]))
        # Each touched group's saved pages, (group, slot), but the pages that left it ...
        lo = np.searchsorted(self._gid, gids, "left")
        sizes = np.searchsorted(self._gid, gids, "right") - lo
        at = np.arange(int(sizes.sum()), dtype=np.int64)
        at += np.repeat(lo - (np.cumsum(sizes) - sizes), sizes)
        kept_slot, kept_gid = np.asarray(self._slot[at], np.int64), np.repeat(gids, sizes)
        by_slot = np.argsort(slot, kind="stable")
        left_slot, left_gid = slot[by_slot], old[by_slot]
        i = np.minimum(np.searchsorted(left_slot, kept_slot), max(left_slot.size - 1, 0))
        left = (left_slot[i] == kept_slot) & (left_gid[i] == kept_gid)
        # ... and the pages that joined it.
        joined = new >= 0
        gid = np.concatenate([kept_gid[~left], new[joined]])
        member = np.concatenate([kept_slot[~left], slot[joined]])
        order = np.lexsort((member, gid))
        gid, member = gid[order], member[order]
        if gid.size:  # a page once (a set's rule)
            first = np.ones(gid.size, bool)
            first[1:] = (gid[1:] != gid[:-1]) | (member[1:] != member[:-1])
            gid, member = gid[first], member[first]
        # A group's run of slots (an empty one: the group lost its last page).
        ptr = np.zeros(gids.size + 1, np.int64)
        ptr[1:] = np.searchsorted(gid, gids, "right")
        self._level = TakenEntries(gids, ptr, [member])

    def _move_each(self, slots: np.ndarray, old: np.ndarray, new: np.ndarray) -> None:
        for slot, was, now in zip(slots.tolist(), old.tolist(), new.tolist(), strict=True):
            url = self._pages.url_at(slot)
            if was >= 0:
                self.discard(was, url)
            if now >= 0:
                self.add(now, url)

    def _build(self) -> None:
        """The arrays made from the page table's `group` column, the overlay emptied."""
        pages = self._pages
        n = pages.n
        g = pages.group[:n]
        slots = np.flatnonzero(g >= 0)
        order = np.argsort(g[slots], kind="stable")
        self._gid = g[slots][order]
        self._runs = {}
        self._slot = slots[order]
        self._ids, self._sizes = np.unique(self._gid, return_counts=True)
        self._counts = None  # (counted from the arrays in memory when asked)
        # Groups changed since the arrays were made (empty: gone).
        self._over = Overlay()
        self._level = TakenEntries.empty(1)

    def fold_if_due(self) -> None:
        """Between batches: fold the overlay into the arrays once it is large. The page
        table's `group` column is kept in step with every change (`apply_batch.py`), so the
        arrays are made again from it, as on opening."""
        if _fold_due(len(self._over) + len(self._level), self._ids.size):
            self._build()
            return
        self._over.freeze()

    def freeze(self) -> None:
        """The batch is done: the groups it changed become tuples (`Overlay.freeze`)."""
        self._over.freeze()
        self._runs = {}

    def _run(self, gid: int) -> tuple[int, int]:
        got = self._runs.get(gid)
        if got is not None:
            return got
        return run_in_sorted(self._gid, gid)

    def preload(self, gids: Iterable[int]) -> None:
        """Find the saved runs of groups `gids` at once (one search of the saved groups for
        all), for the batch about to read them one group at a time; forgotten when the
        batch is done (`freeze`). A search a group was two thirds of removing 1 % of a
        million-page index."""
        want = sorted_distinct(np.fromiter(gids, np.int64))
        if not want.size:
            return
        lo, hi = runs_in_sorted(self._gid, want)
        self._runs.update(
            zip(want.tolist(), zip(lo.tolist(), hi.tolist(), strict=True), strict=True)
        )

    def members(self, gid: int) -> Collection[str]:
        """The group's pages (empty for an unknown group)."""
        got = self._over.get(gid)
        if got is not None:
            return frozenset(got)
        run = self._level.run(gid)
        if run is not None:
            return tuple(self._pages.urls_at(run[0]))
        lo, hi = self._run(gid)
        return tuple(self._pages.url_at(s) for s in self._slot[lo:hi].tolist())

    def size(self, gid: int) -> int:
        got = self._over.get(gid)
        if got is not None:
            return len(got)
        run = self._level.run(gid)
        if run is not None:
            return int(run[0].size)
        lo, hi = self._run(gid)
        return hi - lo

    def _mut(self, gid: int) -> set[str]:
        return self._over.mutable(gid, lambda: self.members(gid))

    def get(self, gid: int) -> Collection[str] | None:
        got = self.members(gid)
        return got if got else None

    def __getitem__(self, gid: int) -> Collection[str]:
        got = self.members(gid)
        if not got:
            raise KeyError(gid)
        return got

    def __setitem__(self, gid: int, pages: Iterable[str]) -> None:
        self._over[gid] = tuple(set(pages))

    def __contains__(self, gid: object) -> bool:
        return isinstance(gid, int) and self.size(gid) > 0

    def add(self, gid: int, url: str) -> None:
        self._mut(gid).add(url)

    def discard(self, gid: int, url: str) -> None:
        self._mut(gid).discard(url)

    def pop(self, gid: int, default: Collection[str] | None = None) -> Collection[str] | None:
        got = self.members(gid)
        self._over[gid] = ()
        return got if got else default

    def _changed(self) -> np.ndarray:
        """The groups changed since the arrays were saved (the level's and the overlay's),
        sorted."""
        return sorted_distinct(np.concatenate([self._over.keys_array(), self._level.keys]))

    def _level_only(self) -> tuple[np.ndarray, np.ndarray]:
        """The level's groups that the overlay does not hide, and the size of each."""
        keys, sizes = np.asarray(self._level.keys), self._level.sizes()
        if not self._over or not keys.size:
            return keys, sizes
        kept = ~found_in_sorted(sorted_distinct(self._over.keys_array()), keys)[1]
        return keys[kept], sizes[kept]

    def _base_ids(self) -> np.ndarray:
        """The group ids as opened that nothing changed since."""
        ids = whole(self._ids)  # (every group listed: read whole)
        changed = self._changed()
        if not changed.size:
            return ids
        return ids[~found_in_sorted(changed, ids)[1]]

    def count(self, at_least: int = 1) -> int:
        """Groups of at least `at_least` pages, counted without listing them (nor
        copying the arrays: one flag a group)."""
        changed = self._changed()
        if self._counts is not None and at_least in (1, 2):
            # As saved, less the changed groups' saved sizes (searched), plus the overlay.
            at, there = found_in_sorted(self._ids, changed)
            sizes = np.asarray(self._sizes[at[there]]) if there.any() else np.empty(0)
            base = self._counts[at_least - 1] - int(np.count_nonzero(sizes >= at_least))
        else:  # every size read, a block at a time
            base = 0
            for lo, sizes in in_blocks(self._sizes):
                enough = sizes >= at_least
                if changed.size:  # the groups changed since: counted from the overlay instead
                    ids = np.asarray(self._ids[lo : lo + sizes.size])
                    enough &= ~found_in_sorted(changed, ids)[1]
                base += int(np.count_nonzero(enough))
        _, level_sizes = self._level_only()
        level = int(np.count_nonzero(level_sizes >= max(at_least, 1)))
        return base + level + sum(1 for m in self._over.values() if len(m) >= max(at_least, 1))

    def __len__(self) -> int:
        return self.count(1)

    def keys(self) -> Iterator[int]:
        yield from self._base_ids().tolist()
        level, sizes = self._level_only()
        yield from level[sizes > 0].tolist()
        yield from (g for g, m in self._over.items() if m)

    def values(self) -> Iterator[Collection[str]]:
        return (self.members(g) for g in self.keys())

    def items(self) -> Iterator[tuple[int, Collection[str]]]:
        return ((g, self.members(g)) for g in self.keys())


class Winners:
    """group id -> its winner's URL: the group rows as opened (ids sorted, each with the
    row of its winner URL in one Arrow string array, kept in the rows' own order) and the
    winners elected since in a dict. The URLs are never put in id order: a take of strings
    in another order, across the chunks of several segments, was most of opening a
    million-page index (0.2 to 1 s)."""

    def __init__(self, groups: pa.Table, saved: dict[str, np.ndarray] | None = None) -> None:
        """`groups`: the committed group rows (`store.GROUP_SCHEMA`, deleted ones out); or,
        with `saved` (the arrays `saved_arrays` wrote, mapped), the group rows written
        since (a null winner: a deleted group), kept as a level of their own: their ids
        sorted and their URLs one Arrow array (`_level_gid`, `_level_url`), not a string in
        a dict each (about 130 bytes a group, a fifth of opening an index far behind its
        save)."""
        self._over: dict[int, str | None] = {}  # None: the group was deleted
        self._rows: dict[int, int] = {}  # saved rows found ahead (`preload`; -1: none)
        # The maps under the saved winners' URLs, never written (`IndexState.release_read`).
        self.read_maps: tuple[np.ndarray, ...] = ()
        self._level_gid = np.empty(0, np.int64)
        self._level_url: pa.Array = pa.nulls(0, pa.large_string())
        if saved is not None:
            self._gid, self._row = saved["winner_gid"], saved["winner_row"]
            self._url = mapped_strings(saved["winner_url_offsets"], saved["winner_url_bytes"])
            self.read_maps = (saved["winner_url_offsets"], saved["winner_url_bytes"])
            gid = groups.column("group_id").to_numpy().astype(np.int64, copy=False)
            keep = last_of(gid)  # a group's last row holds (as a dict's would)
            self._level_gid = gid[keep]
            urls = groups.column("winner_url").take(pa.array(keep))
            self._level_url = one_array(urls).cast(pa.large_string())
            return
        gid = groups.column("group_id").to_numpy()
        order = np.argsort(gid, kind="stable")
        self._gid = gid[order]
        self._row = order.astype(np.int64)
        self._url = one_array(groups.column("winner_url"))

    def saved_arrays(self) -> Iterator[RowBlocks]:
        """The winners, for the files `Winners(groups, saved)` maps: the saved ones with
        those elected since merged in block by block (`merged_runs`), nothing folded in
        memory; the URLs written in group order (each group's row its own place)."""
        over = sorted_distinct(np.fromiter(self._over, np.int64, len(self._over)))
        changed = sorted_distinct(np.concatenate([over, self._level_gid]))
        # The winners elected since: the overlay's, and the level's that it does not hide.
        live = [g for g in over.tolist() if self._over[g] is not None]
        in_level = self._level_url.is_valid().to_numpy(zero_copy_only=False)
        if over.size:
            in_level &= ~found_in_sorted(over, self._level_gid)[1]
        gids = np.concatenate([np.array(live, np.int64), self._level_gid[in_level]])
        order = np.argsort(gids, kind="stable")
        new_urls = pa.concat_arrays(
            [
                pa.array([self._over[g] for g in live], pa.large_string()),
                self._level_url.filter(pa.array(in_level)),
            ]
        ).take(pa.array(order))
        # A new winner's row: -1 - its place among `new_urls` (a saved one's is >= 0).
        new = [gids[order], -1 - np.arange(gids.size, dtype=np.int64)]
        base = [self._gid, self._row]
        count = int(self._gid.size) - dropped_count(self._gid, changed) + int(gids.size)

        def gids() -> Iterator[tuple[np.ndarray, np.ndarray]]:
            at = 0
            for gid, _ in merged_blocks(base, new, changed):
                yield gid, np.arange(at, at + gid.size, dtype=np.int64)
                at += gid.size

        def urls() -> Iterator[pa.Array]:
            for _, rows in merged_blocks(base, new, changed):
                saved = rows >= 0
                got = self._url.take(pa.array(rows[saved]))
                yield in_mask_order(saved, got, new_urls.take(pa.array(-1 - rows[~saved])))

        shapes = {"winner_gid": ((count,), np.int64), "winner_row": ((count,), np.int64)}
        yield RowBlocks(shapes, gids())
        yield strings_in_blocks("winner_url", count, urls)

    def get(self, gid: int, default: str | None = None) -> str | None:
        if gid in self._over:
            got = self._over[gid]
            return default if got is None else got
        if self._level_gid.size:
            i = int(np.searchsorted(self._level_gid, gid))
            if i < self._level_gid.size and int(self._level_gid[i]) == gid:
                got = self._level_url[i].as_py()
                return default if got is None else got
        row = self._rows.get(gid)
        if row is None:
            lo, hi = run_in_sorted(self._gid, gid)
            row = int(self._row[lo]) if hi > lo else -1
        return default if row < 0 else self._url[row].as_py()

    def preload(self, gids: Iterable[int]) -> None:
        """Find the saved winners' rows of groups `gids` at once, for the batch about to
        read them a group at a time (those of the batch before forgotten): a search and
        two reads a group were a tenth of removing 1 % of a four-million-page index."""
        want = sorted_distinct(np.fromiter(gids, np.int64))
        self._rows = {}
        if not want.size or not self._gid.size:
            return
        at, there = found_in_sorted(self._gid, want)
        rows = np.full(want.size, -1, np.int64)
        if there.any():
            rows[there] = np.asarray(self._row[at[there]], np.int64)
        self._rows = dict(zip(want.tolist(), rows.tolist(), strict=True))

    def __getitem__(self, gid: int) -> str:
        got = self.get(gid)
        if got is None:
            raise KeyError(gid)
        return got

    def __setitem__(self, gid: int, url: str) -> None:
        self._over[gid] = url

    def fold_if_due(self) -> None:
        """Between batches: fold the winners elected since into the arrays once they are
        many (`_fold_due`): the URLs kept filtered in their order, the new ones after
        them, one sort of the group ids."""
        if _fold_due(len(self._over) + self._level_gid.size, self._gid.size):
            self.fold()

    def fold(self) -> None:
        """The winners elected since put into the arrays now (`fold_if_due`)."""
        # The level an opening took in goes through the overlay (a fold is rare: a copy
        # that follows a writer's batches folds; the writer merges at its save instead).
        urls = self._level_url.to_pylist()
        for gid, url in zip(self._level_gid.tolist(), urls, strict=True):
            self._over.setdefault(gid, url)
        self._level_gid = np.empty(0, np.int64)
        self._level_url = pa.nulls(0, pa.large_string())
        if not self._over:
            return
        changed = np.fromiter(self._over, np.int64, len(self._over))
        # A fold makes whole arrays in memory (a copy that follows a writer's batches
        # folds; the writer merges at its save instead): the saved ones read whole.
        self._gid, self._row = whole(self._gid), whole(self._row)
        keep = ~np.isin(self._gid, changed)
        live = [(g, u) for g, u in self._over.items() if u is not None]
        rows_kept = np.zeros(len(self._url), bool)
        rows_kept[self._row[keep]] = True
        moved = np.cumsum(rows_kept) - 1  # a kept row's place among the kept rows
        urls = pa.concat_arrays(
            [
                self._url.filter(pa.array(rows_kept)),
                pa.array([u for _, u in live], pa.string()).cast(self._url.type),
            ]
        )
        first_new = int(rows_kept.sum())
        gid = np.concatenate([self._gid[keep], np.array([g for g, _ in live], np.int64)])
        row = np.concatenate(
            [moved[self._row[keep]], np.arange(first_new, first_new + len(live), dtype=np.int64)]
        )
        order = np.argsort(gid, kind="stable")
        self._gid, self._row, self._url = gid[order], row[order], urls
        self._over = {}
        self._rows = {}

    def pop(self, gid: int, default: str | None = None) -> str | None:
        got = self.get(gid)
        self._over[gid] = None
        return default if got is None else got
