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

from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from neardup.index.state.arrays import (
    PatchedRows,
    RowBlocks,
    Stacked,
    gather_rows,
    mapped_strings,
    rows_read,
    string_blocks,
)
from neardup.index.state.found import Found, PairsToScore, hits
from neardup.index.state.lookups import ScorePairs
from neardup.index.state.overlay import FoldRule
from neardup.kernels import SIGNATURE_DTYPE, estimate_resemblance
from neardup.kernels.sorting import sorted_distinct
from neardup.pipeline.steps.near_pairs import url_key

_NONE = -1  # group id of a page without a group
_SEEN_MAX = 65_536  # slots remembered from lookups, at the most
FOLD_AT_LEAST = 8192  # added pages folded into the sorted keys at a time, at the least


class PageTable:
    """url -> slot, and each page's fields in columns; a mapping of URL -> `PageRef`."""

    def __init__(self, num_perm: int, dims: int) -> None:
        self.num_perm, self.dims = num_perm, dims
        self.n = 0  # slots in use
        # Slots 0 .. nb-1 (chunks once pages are folded in: never copied).
        self._urls_base: pa.Array | pa.ChunkedArray = pa.array([], pa.string())
        # The row of `_urls_base` of each slot opened out of slot order (`from_rows`): the
        # URLs stay in the rows' order. Slots past it (and all, when None) are their row.
        self._url_row: np.ndarray | None = None
        self._urls_new: list[str] = []  # slots nb .. n-1
        self._skeys = np.empty(0, np.int64)  # sorted page keys of the base slots
        self._sslots = np.empty(0, np.int64)  # the slot of each sorted key
        self._added: dict[str, int] = {}  # url -> slot of the pages added since the fold
        # Slots found lately (at most `_SEEN_MAX`): a batch looks its pages and their
        # neighbours up several times (the update, the graph's signatures, the clusters, the
        # rows it writes), and the next batches of a crawl touch many of them again.
        self._seen: dict[str, int] = {}
        self.redirect: dict[int, str] = {}  # slot -> target, for the few redirecting pages
        # The save this table was opened from (its folder, its pages), whose files the next
        # save copies the unchanged sketches from; None: not opened from one.
        self.saved_from: tuple[Path, int] | None = None
        # Whether `_skeys` is the saved array (what entries found elsewhere were found in);
        # the keys searched here, counted.
        self._skeys_saved = False
        self.key_searches = 0
        # The saved rows compared here (`resemblance`), counted. `sig_changed` (by slot,
        # `_alloc`): whether a slot's sketch row is no longer the save's (`set_signature`,
        # `apply_rows`).
        self.saved_rows_compared = 0
        self._alloc(0)

    # ------------------------------------------------------------ columns

    def _alloc(self, cap: int) -> None:
        self.cap = cap
        self.group = np.full(cap, _NONE, np.int64)
        self.length = np.zeros(cap, np.int32)
        self.has_sig = np.zeros(cap, bool)
        self.exact_fp = np.zeros(cap, np.int64)
        self.has_fp = np.zeros(cap, bool)
        self.links_in = np.zeros(cap, np.int32)
        self.verified = np.zeros(cap, bool)
        self.removed = np.zeros(cap, bool)
        self.shingle_fp = np.zeros(cap, np.int64)
        self.has_sfp = np.zeros(cap, bool)
        self.n_tokens = np.zeros(cap, np.int32)
        self.key = np.zeros(cap, np.int64)
        self.sig_changed = np.zeros(cap, bool)  # not saved: a save makes every row its own
        self.sigs = SlotRows(self.num_perm, SIGNATURE_DTYPE)
        self.lens = SlotRows(self.dims, np.int32)
        self.sigs.reserve(cap)
        self.lens.reserve(cap)

    _COLUMNS = (
        "group",
        "length",
        "has_sig",
        "exact_fp",
        "has_fp",
        "links_in",
        "verified",
        "removed",
        "shingle_fp",
        "has_sfp",
        "n_tokens",
        "key",
    )

    def _grow(self, need: int) -> None:
        """Room for `need` slots: the columns grow by half (amortised O(1) a page), the
        sketches and length vectors by a block of their own (never copied)."""
        self.sigs.reserve(need)
        self.lens.reserve(need)
        if need <= self.cap:
            return
        cap = max(need, self.cap + self.cap // 2, 1024)
        for name in (*self._COLUMNS, "sig_changed"):
            old = getattr(self, name)
            new = np.zeros((cap, *old.shape[1:]), old.dtype)
            if name == "group":
                new[:] = _NONE
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

        for name, value in _row_columns(rows).items():
            getattr(t, name)[:n] = value if order is None else value[order]
        # The sketches (and length vectors) as read are the segments' own rows, not copied:
        # copy-on-write maps of their files (`store.read_segment`), resident only once
        # read, each slot reading its row (`store.Stacked`) where they are not in slot
        # order. Pages added past them get a block of their own (`SlotRows`), never a copy.
        t.sigs = SlotRows(num_perm, SIGNATURE_DTYPE, _adopt(sigs, n, (num_perm,), SIGNATURE_DTYPE))
        if lens.shape[1:] == (dims,):
            t.lens = SlotRows(dims, np.int32, _adopt(lens, n, (dims,), np.int32))
        else:
            t.lens = SlotRows(dims, np.int32)
            t.lens.reserve(n)
        t._urls_base = one_array(rows.column("url"))
        t._url_row = order
        redirect = rows.column("redirect_to")
        if redirect.null_count < n:  # by the row's slot (`slot`; no slots: the row's place)
            has = np.flatnonzero(redirect.is_valid().to_numpy(zero_copy_only=False))
            slots = has if order is None else rows.column("slot").to_numpy()[has]
            for slot, target in zip(
                slots.tolist(), redirect.take(pa.array(has)).to_pylist(), strict=True
            ):
                if target:
                    t.redirect[slot] = target
        t.fold()
        return t

    # ------------------------------------------------------------ saved with the graph

    def saved_arrays(self, room: int, changed: np.ndarray) -> Iterator[RowBlocks | PatchedRows]:
        """The table as the files `from_saved` maps (issue 27: an index opens without
        reading its pages): every column and matrix by slot with `room` empty slots after
        the pages (the next batches' pages fill them without a copy), the page keys
        sorted, the URLs and the redirects' targets. Written a block at a time: a save
        holds no second copy of the table. The sketches and length vectors of a table
        opened from a save are that save's files with the rows of the `changed` slots (the
        slots written since, ascending) and the new ones put in, the rest copied file to
        file. Reads only: the caller folds first (`fold`)."""
        assert not self._urls_new and self._skeys.size == self.n, "fold before saving"
        n = self.n
        for name in self._COLUMNS:
            col = getattr(self, name)
            pad = np.full(room, _NONE if name == "group" else 0, col.dtype)
            yield RowBlocks({f"page_{name}": ((n + room,), col.dtype)}, [(col[:n],), (pad,)])
        for name, m in (("sigs", self.sigs), ("lens", self.lens)):
            source, source_rows = None, 0
            if self.saved_from is not None:
                source, source_rows = self.saved_from
            yield PatchedRows(
                f"page_{name}",
                n + room,
                m.width,
                m.dtype,
                n,
                m.__getitem__,
                source,
                source_rows,
                changed,
            )
        yield RowBlocks({"page_skeys": ((n,), np.int64)}, [(self._skeys,)])
        yield RowBlocks({"page_sslots": ((n,), np.int64)}, [(self._sslots,)])
        base = self._urls_base if self._url_row is None else self.url_array(np.arange(n))
        yield string_blocks("page_url", base)
        targets = sorted(self.redirect.items())
        slots = np.array([s for s, _ in targets], np.int64)
        yield RowBlocks({"page_redirect_slots": ((slots.size,), np.int64)}, [(slots,)])
        yield string_blocks("page_redirect", pa.array([u for _, u in targets], pa.string()))

    @classmethod
    def from_saved(
        cls, a: dict[str, np.ndarray], n: int, num_perm: int, dims: int, folder: Path
    ) -> PageTable:
        """The table `saved_arrays` wrote for `n` pages, over its files' copy-on-write maps
        (`store.read_arrays`): nothing is read until a page is, and what a batch changes
        goes to private pages, so an open index holds what its batches touch, not all of
        its pages."""
        t = cls(num_perm, dims)
        for name in cls._COLUMNS:
            setattr(t, name, a[f"page_{name}"])
        t.cap, t.n = int(a["page_key"].size), n
        t.sig_changed = np.zeros(t.cap, bool)
        t.saved_from = (folder, n)
        t.sigs = SlotRows(num_perm, SIGNATURE_DTYPE, a["page_sigs"])
        t.lens = SlotRows(dims, np.int32, a["page_lens"])
        t._urls_base = mapped_strings(a["page_url_offsets"], a["page_url_bytes"])
        t._skeys, t._sslots = a["page_skeys"], a["page_sslots"]
        t._skeys_saved = True
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
        slots = rows.column("slot").to_numpy()
        order = np.argsort(slots, kind="stable")
        slots = slots[order]
        new = slots[slots >= self.n]
        if new.size and not np.array_equal(new, np.arange(self.n, self.n + new.size)):
            raise ValueError("the index's page slots are not 0 .. n-1: its files are damaged")
        before = np.full(slots.size, _NONE, np.int64)
        known = slots < self.n
        before[known] = self.group[slots[known]]
        picked = rows.take(pa.array(order))
        if new.size:  # the new pages' URLs alone become Python strings (they are last)
            urls = picked.column("url").slice(slots.size - new.size).to_pylist()
            self._grow(self.n + new.size)
            self._urls_new.extend(urls)
            self._added.update(zip(urls, new.tolist(), strict=True))
            self.n += int(new.size)
        for name, value in _row_columns(picked).items():
            getattr(self, name)[slots] = value
        m_sigs, m_lens = np.asarray(sigs)[order], np.asarray(lens)[order]
        lens_fit = m_lens.shape[1:] == (self.dims,)
        self.sig_changed[slots] = True
        # The rows written at once, not a slot at a time (0.3 s of opening an index 30,000
        # rows behind its save); the redirects by their few rows.
        self.sigs.put(slots, m_sigs)
        self.lens.put(slots, m_lens if lens_fit else np.zeros((slots.size, self.dims), np.int32))
        targets = picked.column("redirect_to")
        given = np.flatnonzero(targets.is_valid().to_numpy(zero_copy_only=False))
        chosen = dict(zip(slots[given].tolist(), targets.take(given).to_pylist(), strict=True))
        if self.redirect:  # the rows that no longer redirect
            for slot in slots.tolist():
                if not chosen.get(slot):
                    self.redirect.pop(slot, None)
        self.redirect.update((slot, target) for slot, target in chosen.items() if target)
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
        return before[inverse]

    # ------------------------------------------------------------ url <-> slot

    def fold(self) -> None:
        """Fold the pages added since the last fold into the sorted keys (and their URLs
        into the Arrow array): then they cost no Python object either."""
        nb = len(self._urls_base)
        if self._urls_new:
            # A chunk more, not one array: the URLs as opened (a saved table's map) are
            # not copied.
            base = self._urls_base
            chunks = base.chunks if isinstance(base, pa.ChunkedArray) else [base]
            added = pa.array(self._urls_new, pa.string()).cast(base.type)
            self._urls_base = pa.chunked_array([*chunks, added], base.type)
            self._urls_new = []
            self._added = {}
        # Not a stable sort: keys are equal only for URLs whose hashes collide, and a
        # lookup checks each of those (numpy's sorting network, 0.02 s a million, not 0.09).
        order = np.argsort(self.key[: self.n], kind="quicksort")
        self._skeys = self.key[: self.n][order]
        self._sslots = order.astype(np.int64)
        self._skeys_saved = False
        assert len(self._urls_base) == self.n, (nb, self.n)

    def url_array(self, slots: np.ndarray) -> pa.Array:
        """The URLs of slots as one Arrow array (slots opened from the files or folded)."""
        if slots.size and int(slots.max()) >= len(self._urls_base):
            self.fold()
        got = self._urls_base.take(pa.array(self._rows_of(slots)))
        return got.combine_chunks() if isinstance(got, pa.ChunkedArray) else got

    def _rows_of(self, slots: np.ndarray) -> np.ndarray:
        """The rows of `_urls_base` that hold the URLs of `slots` (all below its length)."""
        by_row = self._url_row
        if by_row is None or not slots.size:
            return slots
        opened = slots < by_row.size
        return np.where(opened, by_row[np.where(opened, slots, 0)], slots)

    def urls_at(self, slots: np.ndarray) -> list[str]:
        """The URLs of many slots at once, in their order (none of them remembered, as
        `url_at` remembers one)."""
        if not slots.size:
            return []
        nb = len(self._urls_base)
        base = slots < nb
        got = self._urls_base.take(pa.array(self._rows_of(slots[base]))).to_pylist()
        if base.all():
            return got
        out: list[str] = [""] * slots.size
        for i, url in zip(np.flatnonzero(base).tolist(), got, strict=True):
            out[i] = url
        for i, slot in zip(np.flatnonzero(~base).tolist(), slots[~base].tolist(), strict=True):
            out[i] = self._urls_new[slot - nb]
        return out

    def url_at(self, slot: int) -> str:
        """The URL of a slot, remembered with it (`_seen`): a batch reads the URLs of its
        clusters' and groups' pages by slot and looks them up by URL right after."""
        nb = len(self._urls_base)
        if slot >= nb:
            return self._urls_new[slot - nb]
        by_row = self._url_row
        row = slot if by_row is None or slot >= by_row.size else int(by_row[slot])
        url = self._urls_base[row].as_py()
        if len(self._seen) >= _SEEN_MAX:  # bounded: forgotten all at once
            self._seen = {}
        self._seen[url] = slot
        return url

    def slot(self, url: str, found: Found | None = None) -> int | None:
        """The slot of `url`, None when it was never stored (`lookup` of one URL, kept in
        `_seen` by the URL check's `url_at`; `found`: as `lookup`'s)."""
        got = self._added.get(url)
        if got is None:
            got = self._seen.get(url)
        if got is not None:
            return got
        return self.lookup([url], [None], found)[0]

    def lookup(
        self, urls: list[str], keys: list[int | None], found: Found | None = None
    ) -> list[int | None]:
        """`slot` of many URLs (a batch's), the sorted keys searched once for all of them;
        `keys` their page keys where the caller has them already (None: hashed here);
        `found`: the saved keys' entries for them, searched elsewhere."""
        out: list[int | None] = [self._added.get(u) for u in urls]
        todo = [i for i, s in enumerate(out) if s is None]
        if not todo or not self._skeys.size:
            return out
        keys = np.array(
            [url_key(urls[i]) if keys[i] is None else keys[i] for i in todo], dtype=np.int64
        )
        distinct = sorted_distinct(keys)
        # The saved keys' entries searched elsewhere (`found`), while the sorted keys are
        # the saved ones (a fold makes its own).
        found = found if self._skeys_saved else None
        at, slots, searched = hits(found, distinct, self._skeys, self._sslots)
        self.key_searches += searched
        candidates: dict[int, list[int]] = {}
        for q, s in zip(at.tolist(), slots.tolist(), strict=True):
            candidates.setdefault(int(distinct[q]), []).append(int(s))
        for i, k in zip(todo, keys.tolist(), strict=True):
            for s in candidates.get(k, ()):  # nearly always one: keys may collide
                if self.url_at(s) == urls[i]:
                    out[i] = s
                    break
        return out

    def add(self, url: str, key: int | None = None) -> PageRef:
        """A new page (no group, no sketch): its slot is the next one. `key`: its page key
        (`url_key`), when the caller has it."""
        slot = self.n
        if slot >= self.cap or slot >= self.sigs.rows or slot >= self.lens.rows:
            self._grow(slot + 1)
        self.n += 1
        self.key[slot] = url_key(url) if key is None else key
        self._urls_new.append(url)
        self._added[url] = slot
        return PageRef(self, slot)

    def fold_if_due(self) -> None:
        """After a batch: fold the added pages in once they outgrow an eighth of the rest."""
        if FoldRule(FOLD_AT_LEAST).due(len(self._added), len(self._urls_base)):
            self.fold()

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
        nb = len(self._urls_base)
        yield from self.url_array(np.arange(nb, dtype=np.int64)).to_pylist()
        yield from list(self._urls_new)

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


# The files of a saved page table (`PageTable.saved_arrays`), beside the saved graph's.
PAGE_ARRAYS = (
    *(f"page_{name}" for name in PageTable._COLUMNS),
    "page_sigs",
    "page_lens",
    "page_skeys",
    "page_sslots",
    "page_url_offsets",
    "page_url_bytes",
    "page_redirect_slots",
    "page_redirect_offsets",
    "page_redirect_bytes",
)


class SlotRows:
    """A matrix of rows by slot (the sketches, the length vectors) in blocks that are never
    copied: the rows as opened (a copy-on-write map of a segment's file, one array, or
    several segments' maps read through the row of each slot, `store.Stacked`), then
    blocks added as slots are, each as large as half the rows before it (so a few dozen
    blocks at the most). Growing one matrix by half copied it, and held the old and the new
    copy at once: the first page added to an index of a million pages copied its half a
    gigabyte of sketches (0.47 s); gathering the rows of several segments into one matrix
    at opening copied them twice (2.1 s). Reads take a slot (a row, a view), a slice or
    many slots (a new array); writes take a slot."""

    _FIRST = 65_536  # rows of the first block added

    def __init__(
        self, width: int, dtype: type, base: np.ndarray | Stacked | list[np.ndarray] | None = None
    ) -> None:
        self.width, self.dtype = width, np.dtype(dtype)
        self.blocks: list[np.ndarray] = []
        self.starts: list[int] = []  # each block's first row (`bisect`: 10x numpy's search)
        self.rows = 0  # slots with a row (written or not)
        self._end = 0  # rows across the blocks
        # Slots opened through `Stacked` (0 .. `_opened` - 1) read row `_where[slot]`; the
        # slots after them row `slot + _shift` (the blocks added since).
        self._where: np.ndarray | None = None
        self._opened = 0
        self._shift = 0
        if isinstance(base, Stacked):
            for part in base.parts:
                self._append(part.view(np.ndarray) if isinstance(part, np.memmap) else part)
            self._where = base.rows
            self._opened = self.rows = int(base.rows.size)
            self._shift = self._end - self._opened
        elif isinstance(base, list):  # a saved matrix's partitions, in order
            for part in base:
                self._append(part)
            self.rows = self._end
        elif base is not None and base.shape[0]:
            self._append(base)
            self.rows = self._end

    def _append(self, block: np.ndarray) -> None:
        self.blocks.append(block)
        self.starts.append(self._end)
        self._end += block.shape[0]

    def reserve(self, need: int) -> None:
        """Rows for slots up to `need` (zeros, resident only once written)."""
        while self.rows < need:
            size = max(self._FIRST, self.rows // 2, need - self.rows)
            self._append(np.zeros((size, self.width), self.dtype))
            self.rows += size

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.width)

    def _at(self, slot: int) -> tuple[np.ndarray, int]:
        if not 0 <= slot < self.rows:
            raise IndexError(f"slot {slot} of {self.rows}")
        row = int(self._where[slot]) if slot < self._opened else slot + self._shift  # type: ignore[index]
        b = bisect_right(self.starts, row) - 1
        return self.blocks[b], row - self.starts[b]

    def _row_of(self, idx: np.ndarray) -> np.ndarray:
        """The rows of slots `idx` (in range)."""
        if self._where is None:
            return idx
        rows = idx + self._shift
        opened = idx < self._opened
        rows[opened] = self._where[idx[opened]]
        return rows

    def __getitem__(self, key: int | slice | np.ndarray | list[int]) -> np.ndarray:
        if isinstance(key, (int, np.integer)):
            if len(self.blocks) == 1 and self._where is None and key >= 0:
                return self.blocks[0][key]
            block, i = self._at(int(key))
            return block[i]
        if isinstance(key, slice):
            key = np.arange(*key.indices(self.rows))
        idx = np.asarray(key, np.int64).reshape(-1)
        if len(self.blocks) == 1 and self._where is None:
            return self.blocks[0][idx]
        out = np.empty((idx.size, self.width), self.dtype)
        if not idx.size:
            return out
        if idx.min() < 0 or idx.max() >= self.rows:
            raise IndexError(f"slots outside 0 .. {self.rows - 1}")
        return gather_rows(self.blocks, np.array(self.starts, np.int64), self._row_of(idx))

    def put(self, slots: np.ndarray, values: np.ndarray) -> None:
        """Write the rows of many slots (distinct, in range) at once: a block's rows in
        one assignment."""
        idx = np.asarray(slots, np.int64).reshape(-1)
        if not idx.size:
            return
        if idx.min() < 0 or idx.max() >= self.rows:
            raise IndexError(f"slots outside 0 .. {self.rows - 1}")
        rows = self._row_of(idx.copy())
        starts = np.array(self.starts, np.int64)
        block = np.searchsorted(starts, rows, "right") - 1
        values = np.asarray(values)
        for b in sorted_distinct(block).tolist():
            here = block == b
            self.blocks[b][rows[here] - starts[b]] = values[here]

    def __setitem__(self, slot: int, value: np.ndarray | int) -> None:
        if len(self.blocks) == 1 and self._where is None and slot >= 0:
            self.blocks[0][slot] = value
            return
        block, i = self._at(int(slot))
        block[i] = value


def _row_columns(rows: pa.Table) -> dict[str, np.ndarray]:
    """The page table's columns (`PageTable._COLUMNS`) of page rows (`store.PAGE_SCHEMA`),
    in the rows' order; the page key of a row stored without one (older files) hashed from
    its URL."""

    def col(name: str, fill: int) -> np.ndarray:
        c = rows.column(name)
        return c.fill_null(fill).to_numpy() if c.null_count else c.to_numpy()

    def valid(name: str) -> np.ndarray:
        c = rows.column(name)
        return c.is_valid().to_numpy() if c.null_count else np.ones(rows.num_rows, bool)

    key = col("page_key", 0).copy()
    missing = np.flatnonzero(~valid("page_key"))
    if missing.size:
        got = rows.column("url").take(pa.array(missing)).to_pylist()
        key[missing] = [url_key(u) for u in got]
    return {
        "group": col("group_id", _NONE),
        "length": col("length", 0),
        "has_sig": col("has_signature", False),
        "exact_fp": col("exact_fp", 0),
        "has_fp": valid("exact_fp"),
        "links_in": col("links_in", 0),
        "verified": col("verified", False),
        "removed": col("removed", False),
        "shingle_fp": col("shingle_fp", 0),
        "has_sfp": valid("shingle_fp"),
        "n_tokens": col("n_tokens", 0),
        "key": key,
    }


def one_array(column: pa.ChunkedArray) -> pa.Array:
    """A column's chunks as one Arrow array (an empty one for a column of no chunk, which
    some pyarrow releases leave chunked)."""
    got = column.combine_chunks()
    return pa.array([], column.type) if isinstance(got, pa.ChunkedArray) else got


def _adopt(
    rows: np.ndarray | Stacked, n: int, shape: tuple[int, ...], dtype: type
) -> np.ndarray | Stacked:
    """`rows` as a column of the table when it already has the column's shape and layout
    (writable: a copy-on-write map or an array of its own; the parts of `Stacked` rows are
    a segment's maps), else a copy that has. A map is taken as a plain array view: slicing
    a `np.memmap` makes a memmap each time, slower."""
    if isinstance(rows, Stacked):
        if all(p.shape[1:] == shape and p.dtype == dtype and p.flags.writeable for p in rows.parts):
            return rows
        return _adopt(np.asarray(rows), n, shape, dtype)
    if isinstance(rows, np.memmap):
        rows = rows.view(np.ndarray)
    if (
        rows.shape == (n, *shape)
        and rows.dtype == dtype
        and rows.flags.c_contiguous
        and rows.flags.writeable
    ):
        return rows
    out = np.zeros((n, *shape), dtype)
    out[:] = rows
    return out


def slot_order(rows: pa.Table) -> np.ndarray | None:
    """The order that puts page rows at their slots (the `slot` column), None when they are
    already there; rows of an older neardup have no slot and take their row's place (the
    writer then saves them once with slots, `ServiceIndex._give_slots`)."""
    col = rows.column("slot")
    if col.null_count or not rows.num_rows:
        return None
    slots = col.to_numpy()
    if (np.diff(slots) > 0).all() and slots[0] == 0 and slots[-1] == slots.size - 1:
        return None
    order = np.argsort(slots, kind="stable")
    if not np.array_equal(slots[order], np.arange(slots.size)):
        raise ValueError("the index's page slots are not 0 .. n-1: its files are damaged")
    return order


class PageRef:
    """One page's fields, read from and written to its table's columns (what a batch and a
    lookup touch); made on demand and dropped after, so it holds no state of its own."""

    __slots__ = ("slot", "t")

    def __init__(self, table: PageTable, slot: int) -> None:
        self.t, self.slot = table, slot

    @property
    def url(self) -> str:
        return self.t.url_at(self.slot)

    @property
    def group_id(self) -> int | None:
        g = int(self.t.group[self.slot])
        return None if g == _NONE else g

    @group_id.setter
    def group_id(self, gid: int | None) -> None:
        self.t.group[self.slot] = _NONE if gid is None else gid

    @property
    def length(self) -> int:
        return int(self.t.length[self.slot])

    @property
    def signature(self) -> np.ndarray | None:
        return self.t.signature(self.slot)

    @property
    def lengths(self) -> np.ndarray | None:
        return self.t.lens[self.slot] if self.t.has_sig[self.slot] else None

    @property
    def exact_fp(self) -> int | None:
        return int(self.t.exact_fp[self.slot]) if self.t.has_fp[self.slot] else None

    @exact_fp.setter
    def exact_fp(self, fp: int | None) -> None:
        self.t.has_fp[self.slot] = fp is not None
        self.t.exact_fp[self.slot] = 0 if fp is None else fp

    @property
    def redirect_to(self) -> str | None:
        return self.t.redirect.get(self.slot)

    @redirect_to.setter
    def redirect_to(self, target: str | None) -> None:
        if target:
            self.t.redirect[self.slot] = target
        else:
            self.t.redirect.pop(self.slot, None)

    @property
    def links_in(self) -> int:
        return int(self.t.links_in[self.slot])

    @links_in.setter
    def links_in(self, n: int) -> None:
        self.t.links_in[self.slot] = n

    @property
    def verified(self) -> bool:
        return bool(self.t.verified[self.slot])

    @verified.setter
    def verified(self, v: bool) -> None:
        self.t.verified[self.slot] = v

    @property
    def removed(self) -> bool:
        return bool(self.t.removed[self.slot])

    @removed.setter
    def removed(self, v: bool) -> None:
        self.t.removed[self.slot] = v

    @property
    def shingle_fp(self) -> int | None:
        return int(self.t.shingle_fp[self.slot]) if self.t.has_sfp[self.slot] else None

    @shingle_fp.setter
    def shingle_fp(self, fp: int | None) -> None:
        self.t.has_sfp[self.slot] = fp is not None
        self.t.shingle_fp[self.slot] = 0 if fp is None else fp

    @property
    def n_tokens(self) -> int:
        return int(self.t.n_tokens[self.slot])

    @n_tokens.setter
    def n_tokens(self, n: int) -> None:
        self.t.n_tokens[self.slot] = n
