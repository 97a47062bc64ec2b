"""The index's pages as typed columns indexed by a slot, not one Python object per page.

Why (issue 26): a page object per stored page (its URL, its fields, views of its sketch)
cost about 700 bytes a page after opening and most of the opening time, while a page's own
data is its 512-byte sketch and a few numbers. Here every field is a numpy column indexed
by an integer *slot*; the sketches are rows of one matrix (the one copy of each signature);
the URLs opened from the files stay one Arrow string array; a URL finds its slot through
the sorted 64-bit page keys (`near_pairs.url_key`, kept in the files), with an exact URL
check since two URLs may normalise to one key. Pages added since opening sit in a small
dict until they are folded into the sorted keys (when they outgrow an eighth of them).

A `PageRef` is a page's fields as attributes, read from and written to the columns; a batch
makes one for each page it touches and drops it after (Python objects only for what a batch
touches). Removed pages keep their slot (and their row in the files), as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from neardup.index.state.arrays import PatchedRows, RowBlocks, Stacked, mapped_strings, rows_read
from neardup.index.state.found import Found, PairsToScore
from neardup.index.state.lookups import ScorePairs
from neardup.index.state.overlay import FoldRule
from neardup.index.state.page_ref import NO_GROUP, PageRef
from neardup.index.state.page_rows import (
    COLUMN_DTYPES,
    COLUMNS,
    one_array,
    redirects_by_slot,
    rewrite_redirects,
    row_columns,
    slot_order,
)
from neardup.index.state.page_saves import PAGE_ARRAYS, page_arrays
from neardup.index.state.page_urls import PageUrls
from neardup.index.state.slot_rows import SlotRows, adopt
from neardup.kernels import SIGNATURE_DTYPE, estimate_resemblance
from neardup.kernels.sorting import sorted_distinct
from neardup.pipeline.steps.near_pairs import url_key

# Names other modules import from here.
__all__ = ["PAGE_ARRAYS", "PageRef", "PageTable", "SlotRows", "one_array", "slot_order"]

FOLD_AT_LEAST = 8192  # added pages folded into the sorted keys at a time, at the least


class PageTable:
    """url -> slot, and each page's fields in columns; a mapping of URL -> `PageRef`."""

    _COLUMNS = COLUMNS

    def __init__(self, num_perm: int, dims: int) -> None:
        self.num_perm, self.dims = num_perm, dims
        self.n = 0  # slots in use
        self.urls = PageUrls()  # url <-> slot
        self.redirect: dict[int, str] = {}  # slot -> target, for the few redirecting pages
        # The save this table was opened from (its folder, its pages), whose files the next
        # save copies the unchanged sketches from; None: not opened from one.
        self.saved_from: tuple[Path, int] | None = None
        # The saved rows compared here (`resemblance`), counted. `sig_changed` (by slot,
        # `_alloc`): whether a slot's sketch row is no longer the save's (`set_signature`,
        # `apply_rows`).
        self.saved_rows_compared = 0
        # The maps under the saved URLs, never written (`IndexState.release_read`).
        self.read_maps: tuple[np.ndarray, ...] = ()
        self._alloc(0)

    @property
    def key_searches(self) -> int:
        """The saved page keys searched here (not found elsewhere: `BatchLookups`)."""
        return self.urls.key_searches

    @property
    def _added(self) -> dict[str, int]:
        """url -> slot of the pages added since the last fold."""
        return self.urls.added

    # ------------------------------------------------------------ columns

    def _alloc(self, cap: int) -> None:
        self.cap = cap
        for name, dtype in COLUMN_DTYPES.items():
            setattr(self, name, np.zeros(cap, dtype))
        self.group[:] = NO_GROUP
        self.sig_changed = np.zeros(cap, bool)  # not saved: a save makes every row its own
        self.sigs = SlotRows(self.num_perm, SIGNATURE_DTYPE)
        self.lens = SlotRows(self.dims, np.int32)
        self.sigs.reserve(cap)
        self.lens.reserve(cap)

    def _grow(self, need: int) -> None:
        """Room for `need` slots: the columns grow by half (amortised O(1) a page), the
        sketches and length vectors by a block of their own (never copied)."""
        self.sigs.reserve(need)
        self.lens.reserve(need)
        if need <= self.cap:
            return
        cap = max(need, self.cap + self.cap // 2, 1024)
        for name in (*COLUMNS, "sig_changed"):
            old = getattr(self, name)
            new = np.zeros((cap, *old.shape[1:]), old.dtype)
            if name == "group":
                new[:] = NO_GROUP
            new[: self.n] = old[: self.n]
            setattr(self, name, new)
        self.cap = cap

    @classmethod
    def from_rows(
        cls,
        rows: pa.Table,
        sigs: np.ndarray | Stacked,
        lens: np.ndarray | Stacked,
        num_perm: int,
        dims: int,
    ) -> PageTable:
        """The pages of a committed state (`store.read_state`): whole columns, no loop over
        pages except to hash the URLs of rows stored without a page key (older files)."""
        t = cls(num_perm, dims)
        n = rows.num_rows
        # Rows as read need not be in slot order (a merge keeps the segments' order): each
        # column is read into numpy and put at its slots there, not the Arrow table taken in
        # slot order first (0.2 to 0.4 s a million pages, strings and all). The URLs stay
        # in the rows' order, with the row of each slot (their take was 0.18 s a million).
        order = slot_order(rows)
        if order is not None:
            sigs, lens = rows_read(sigs, order), rows_read(lens, order)
        t._alloc(n + n // 16 + 1024)  # room for the next batches before the first copy
        t.n = n
        for name, value in row_columns(rows).items():
            getattr(t, name)[:n] = value if order is None else value[order]
        # The sketches (and length vectors) as read are the segments' own rows, not copied:
        # copy-on-write maps of their files (`store.read_segment`), resident only once
        # read, each slot reading its row (`store.Stacked`) where they are not in slot
        # order. Pages added past them get a block of their own (`SlotRows`), never a copy.
        t.sigs = SlotRows(num_perm, SIGNATURE_DTYPE, adopt(sigs, n, (num_perm,), SIGNATURE_DTYPE))
        if lens.shape[1:] == (dims,):
            t.lens = SlotRows(dims, np.int32, adopt(lens, n, (dims,), np.int32))
        else:
            t.lens = SlotRows(dims, np.int32)
            t.lens.reserve(n)
        t.urls = PageUrls(one_array(rows.column("url")), order)
        t.redirect = redirects_by_slot(rows, order)
        t.fold()
        return t

    # ------------------------------------------------------------ saved with the graph

    def saved_arrays(self, room: int, changed: np.ndarray) -> Iterator[RowBlocks | PatchedRows]:
        """The table as the files `from_saved` maps (`page_saves.page_arrays`)."""
        return page_arrays(self, room, changed)

    @classmethod
    def from_saved(
        cls, a: dict[str, np.ndarray], n: int, num_perm: int, dims: int, folder: Path
    ) -> PageTable:
        """The table `saved_arrays` wrote for `n` pages, over its files' copy-on-write maps
        (`store.read_arrays`): nothing is read until a page is, and what a batch changes
        goes to private pages, so an open index holds what its batches touch, not all of
        its pages."""
        t = cls(num_perm, dims)
        for name in COLUMNS:
            setattr(t, name, a[f"page_{name}"])
        t.cap, t.n = int(a["page_key"].size), n
        t.sig_changed = np.zeros(t.cap, bool)
        t.saved_from = (folder, n)
        t.sigs = SlotRows(num_perm, SIGNATURE_DTYPE, a["page_sigs"])
        t.lens = SlotRows(dims, np.int32, a["page_lens"])
        urls = mapped_strings(a["page_url_offsets"], a["page_url_bytes"])
        t.urls = PageUrls(urls, None, a["page_skeys"], a["page_sslots"])
        t.read_maps = (a["page_url_offsets"], a["page_url_bytes"])
        targets = mapped_strings(a["page_redirect_offsets"], a["page_redirect_bytes"])
        slots = a["page_redirect_slots"].tolist()
        t.redirect = dict(zip(slots, targets.to_pylist(), strict=True))
        return t

    def apply_rows(
        self, rows: pa.Table, sigs: np.ndarray | Stacked, lens: np.ndarray | Stacked
    ) -> np.ndarray:
        """Put page rows written after the saved table (`store.read_state` with `after`:
        each page once, a slot each) at their slots, the new pages' after the last one;
        returns the group each row's slot had before (-1: none, or a new page)."""
        # Everything in the rows' own order (each page once: the order of the writes does
        # not matter), not taken into slot order first: that copied every row written
        # since the save, URLs included (50 MB of opening four million pages).
        written = rows.column("slot").to_numpy()  # the slot of each row, in the rows' order
        fresh = np.flatnonzero(written >= self.n)  # rows of new pages
        by_slot = fresh[np.argsort(written[fresh], kind="stable")]
        if by_slot.size and not np.array_equal(
            written[by_slot], np.arange(self.n, self.n + by_slot.size)
        ):
            raise ValueError("the index's page slots are not 0 .. n-1: its files are damaged")
        before = np.full(written.size, NO_GROUP, np.int64)
        known = written < self.n
        before[known] = self.group[written[known]]
        columns = row_columns(rows)
        if by_slot.size:  # the new pages: a level of the URLs, no string each
            self._grow(self.n + by_slot.size)
            urls = one_array(rows.column("url").take(pa.array(by_slot)))
            self.urls.extend(urls, columns["key"][by_slot])
            self.n += int(by_slot.size)
        for name, value in columns.items():
            getattr(self, name)[written] = value
        self.sig_changed[written] = True
        # The rows read where the segments hold them (`SlotRows.redirect`), not copied into
        # the save's maps; the redirects by their few rows.
        self.sigs.redirect(written, sigs)
        if lens.shape[1:] == (self.dims,):
            self.lens.redirect(written, lens)
        else:  # lengths of another shape (other dims): none
            self.lens.put(written, np.zeros((written.size, self.dims), np.int32))
        rewrite_redirects(self.redirect, written, rows.column("redirect_to"))
        return before

    # ------------------------------------------------------------ url <-> slot

    def fold(self) -> None:
        """Fold the pages added since the last fold into the sorted keys (and their URLs
        into the Arrow array): then they cost no Python object either."""
        self.urls.fold(self.key[: self.n])

    def fold_if_due(self) -> None:
        """After a batch: fold the added pages in once they outgrow an eighth of the rest."""
        if FoldRule(FOLD_AT_LEAST).due(len(self.urls.added), self.urls.folded):
            self.fold()

    def url_array(self, slots: np.ndarray) -> pa.Array:
        """The URLs of slots as one Arrow array. Reads only (a save reads the table
        meanwhile): the URLs of slots added since the fold are made Python strings."""
        if slots.size and int(slots.max()) >= self.urls.folded:
            return pa.array(self.urls.urls_at(slots), pa.large_string())
        return self.urls.base_array(slots)

    def urls_at(self, slots: np.ndarray) -> list[str]:
        """The URLs of many slots at once (`PageUrls.urls_at`)."""
        return self.urls.urls_at(slots)

    def url_at(self, slot: int) -> str:
        """The URL of a slot (`PageUrls.url_at`)."""
        return self.urls.url_at(slot)

    def slot(self, url: str, found: Found | None = None) -> int | None:
        """The slot of `url`, None when it was never stored (`PageUrls.slot`)."""
        return self.urls.slot(url, found)

    def lookup(
        self, urls: list[str], keys: list[int | None], found: Found | None = None
    ) -> list[int | None]:
        """The slots of many URLs (`PageUrls.lookup`)."""
        return self.urls.lookup(urls, keys, found)

    def add(self, url: str, key: int | None = None) -> PageRef:
        """A new page (no group, no sketch): its slot is the next one. `key`: its page key
        (`url_key`), when the caller has it."""
        slot = self.n
        if slot >= self.cap or slot >= self.sigs.rows or slot >= self.lens.rows:
            self._grow(slot + 1)
        self.n += 1
        self.key[slot] = url_key(url) if key is None else key
        self.urls.append(url, slot)
        return PageRef(self, slot)

    # ------------------------------------------------------------ mapping

    def get(self, url: object, found: Found | None = None) -> PageRef | None:
        """The page of `url`, None when it was never stored (`found`: as `lookup`'s)."""
        if not isinstance(url, str):
            return None
        slot = self.slot(url, found)
        return None if slot is None else PageRef(self, slot)

    def __getitem__(self, url: str) -> PageRef:
        p = self.get(url)
        if p is None:
            raise KeyError(url)
        return p

    def __contains__(self, url: object) -> bool:
        return isinstance(url, str) and self.slot(url) is not None

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[str]:
        """Every stored URL (removed pages included), in slot order."""
        nb = self.urls.folded
        yield from self.url_array(np.arange(nb, dtype=np.int64)).to_pylist()
        yield from list(self.urls.new)

    def values(self) -> Iterator[PageRef]:
        return (PageRef(self, s) for s in range(self.n))

    def signature(self, slot: int) -> np.ndarray | None:
        return self.sigs[slot] if self.has_sig[slot] else None

    def resemblance(
        self, a: np.ndarray, b: np.ndarray, score: ScorePairs | None = None
    ) -> np.ndarray:
        """The estimated resemblance (`estimate_resemblance`: the share of equal min-hash
        values, float64) of the sketches of slots `a[i]` and `b[i]`: what verification and
        each loser's check against its winner test. With `score` (a Spark add's engine),
        the pairs go where the saved sketches are, with the rows changed since the save:
        this process then reads none of the saved ones."""
        saved = self.saved_from[1] if self.saved_from is not None else 0
        ends = sorted_distinct(np.concatenate([a, b]))
        fresh = (ends >= saved) | self.sig_changed[ends]
        if score is not None and not fresh.all():
            assert self.saved_from is not None
            pairs = PairsToScore(a, b, ends[fresh], self.sigs[ends[fresh]])
            return score(self.saved_from[0], pairs)
        self.saved_rows_compared += int(fresh.size - np.count_nonzero(fresh))
        return np.asarray(estimate_resemblance(self.sigs[a], self.sigs[b]), np.float64).reshape(-1)

    def set_signature(
        self, slot: int, sig: np.ndarray | None, length: int, lens: np.ndarray | None
    ) -> None:
        """A page's sketch, word length and tier-2 lengths (None: it has none)."""
        self.sig_changed[slot] = True
        self.length[slot] = length
        if sig is None:
            self.has_sig[slot] = False
            self.sigs[slot] = 0
        else:
            self.has_sig[slot] = True
            self.sigs[slot] = sig
        if lens is not None and lens.size == self.dims:
            self.lens[slot] = lens
        else:
            self.lens[slot] = 0

    def counts(self) -> tuple[int, int]:
        """Live pages, and live pages that redirect."""
        removed = self.removed
        redirects = sum(1 for s in self.redirect if not removed[s])
        return self.n - int(np.count_nonzero(removed[: self.n])), redirects
