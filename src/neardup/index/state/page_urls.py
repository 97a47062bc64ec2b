"""The page table's URLs: the URL of each slot, and the slot of each URL.

Why a class of its own: the table's columns are numbers by slot, and the URLs are the one
part kept otherwise. The URLs opened from the files stay one Arrow string array (a Python
string a page cost most of an index's opening); a URL finds its slot through the sorted
64-bit page keys (`near_pairs.url_key`, kept in the files), with an exact URL check since
two URLs may normalise to one key. The pages an opening finds written since the save (up to
an eighth of the index) are a level of their own (`extend`): their URLs one Arrow array
beside `base` and their keys a small sorted array, no Python object a page (as strings in
a dict they were about 170 bytes a page, the largest part of opening an index far behind
its save). Pages added since opening sit in a small dict until the writer's next save
merges both into the saved keys (`page_saves.page_arrays`), or, in a copy that never
saves, until they are folded into the sorted keys (`fold`, which the table calls when they
outgrow an eighth of them). Nothing here reads the table's other columns: the table hands
its page keys to `fold` and `extend`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from neardup.index.state.arrays import in_mask_order
from neardup.index.state.found import Found, hits
from neardup.kernels.lsh import key_hits
from neardup.kernels.sorting import sorted_distinct
from neardup.pipeline.steps.near_pairs import url_key

_SEEN_MAX = 65_536  # slots remembered from lookups, at the most


class PageUrls:
    """URL <-> slot for slots 0 .. n-1: the folded slots' URLs in `base` (with their sorted
    page keys, and those of the level an opening took in, `extend`), the slots added since
    in `new` and `added`."""

    def __init__(
        self,
        base: pa.Array | pa.ChunkedArray | None = None,
        row: np.ndarray | None = None,
        skeys: np.ndarray | None = None,
        sslots: np.ndarray | None = None,
    ) -> None:
        """`base`: the URLs of slots 0 .. len(base)-1 (chunks once pages are folded in:
        never copied). `row`: the row of `base` of each slot opened out of slot order
        (`PageTable.from_rows`: the URLs stay in the rows' order; slots past it, and all
        when None, are their row). `skeys`, `sslots`: the saved sorted page keys and the
        slot of each (a saved table's maps); None: the table folds to make them."""
        # An empty table's URLs made without `pa.array`, whose first call imports pandas
        # (half a second) for a table that may never hold a URL.
        self.base: pa.Array | pa.ChunkedArray = pa.nulls(0, pa.string()) if base is None else base
        self.row = row
        self.new: list[str] = []  # the URLs of slots len(base) .. n-1
        self.added: dict[str, int] = {}  # url -> slot of the pages added since the fold
        self.skeys = np.empty(0, np.int64) if skeys is None else skeys
        self.sslots = np.empty(0, np.int64) if sslots is None else sslots
        # Whether `skeys` is the saved array (what entries found elsewhere were found in).
        self.skeys_saved = skeys is not None
        # The level an opening took in (`extend`): the URLs of the slots after `base`'s (an
        # array of their own: a take across chunks would copy the saved URLs whole), and
        # their page keys, which `skeys` lacks, sorted, with the slot of each.
        self.level_urls: pa.Array = pa.nulls(0, pa.string())
        self.level_keys = np.empty(0, np.int64)
        self.level_slots = np.empty(0, np.int64)
        # Slots found lately (at most `_SEEN_MAX`): a batch looks its pages and their
        # neighbours up several times (the update, the graph's signatures, the clusters, the
        # rows it writes), and the next batches of a crawl touch many of them again.
        self.seen: dict[str, int] = {}
        self.key_searches = 0  # the saved keys searched here (not found elsewhere)

    @property
    def folded(self) -> int:
        """Slots whose URL is an Arrow string: in `base` (whose key is in the sorted keys)
        or in the level an opening took in."""
        return len(self.base) + len(self.level_urls)

    def append(self, url: str, slot: int) -> None:
        """The URL of a new slot (the next one)."""
        self.new.append(url)
        self.added[url] = slot

    def extend(self, urls: pa.Array, keys: np.ndarray) -> None:
        """The URLs of the next slots (`len(urls)` of them from `n`), as an opening takes in
        the pages written since the save: an Arrow array after `base`'s, their page `keys`
        a sorted level of their own. Only before any page is `append`ed, and on a table
        whose URLs are in slot order (`row` None)."""
        if self.new or self.row is not None:
            raise ValueError("a level of URLs goes after the folded ones, before any added")
        if len(urls) != keys.size:
            raise ValueError(f"{len(urls)} URLs for {keys.size} keys")
        if not keys.size:
            return
        first = self.folded
        level = self.level_urls
        self.level_urls = pa.concat_arrays([level.cast(urls.type), urls]) if len(level) else urls
        slots = np.arange(first, first + keys.size, dtype=np.int64)
        all_keys = np.concatenate([self.level_keys, np.asarray(keys, np.int64)])
        all_slots = np.concatenate([self.level_slots, slots])
        order = np.argsort(all_keys, kind="stable")
        self.level_keys, self.level_slots = all_keys[order], all_slots[order]

    def fold(self, keys: np.ndarray) -> None:
        """Fold the URLs added since the last fold into the Arrow array, and sort `keys`
        (the page key of every slot, 0 .. n-1): then the added pages cost no Python object
        either."""
        if self.new or len(self.level_urls):
            # Chunks more, not one array: the URLs as opened (a saved table's map) are
            # not copied.
            base = self.base
            chunks = base.chunks if isinstance(base, pa.ChunkedArray) else [base]
            added = pa.array(self.new, pa.string()).cast(base.type)
            level = self.level_urls.cast(base.type)
            self.base = pa.chunked_array([*chunks, level, added], base.type)
            self.level_urls = pa.nulls(0, pa.string())
            self.new = []
            self.added = {}
        # Not a stable sort: keys are equal only for URLs whose hashes collide, and a
        # lookup checks each of those (numpy's sorting network, 0.02 s a million, not 0.09).
        order = np.argsort(keys, kind="quicksort")
        self.skeys = keys[order]
        self.sslots = order.astype(np.int64)
        self.skeys_saved = False
        self.level_keys = np.empty(0, np.int64)  # (in the sorted keys now)
        self.level_slots = np.empty(0, np.int64)
        assert len(self.base) == keys.size, (len(self.base), keys.size)

    def base_array(self, slots: np.ndarray) -> pa.Array:
        """The URLs of folded slots (below `folded`) as one Arrow array."""
        nb = len(self.base)
        inside = slots < nb
        got = self.base.take(pa.array(self._rows_of(slots[inside])))
        got = got.combine_chunks() if isinstance(got, pa.ChunkedArray) else got
        if inside.all():
            return got
        return in_mask_order(inside, got, self.level_urls.take(pa.array(slots[~inside] - nb)))

    def _rows_of(self, slots: np.ndarray) -> np.ndarray:
        """The rows of `base` that hold the URLs of `slots` (all below its length)."""
        by_row = self.row
        if by_row is None or not slots.size:
            return slots
        opened = slots < by_row.size
        return np.where(opened, by_row[np.where(opened, slots, 0)], slots)

    def urls_at(self, slots: np.ndarray) -> list[str]:
        """The URLs of many slots at once, in their order (none of them remembered, as
        `url_at` remembers one)."""
        if not slots.size:
            return []
        nb, folded = len(self.base), self.folded
        base = slots < nb
        got = self.base.take(pa.array(self._rows_of(slots[base]))).to_pylist()
        if base.all():
            return got
        out: list[str] = [""] * slots.size
        for i, url in zip(np.flatnonzero(base).tolist(), got, strict=True):
            out[i] = url
        level = ~base & (slots < folded)
        at = np.flatnonzero(level).tolist()
        urls = self.level_urls.take(pa.array(slots[level] - nb)).to_pylist()
        for i, url in zip(at, urls, strict=True):
            out[i] = url
        for i in np.flatnonzero(slots >= folded).tolist():
            out[i] = self.new[int(slots[i]) - folded]
        return out

    def url_at(self, slot: int) -> str:
        """The URL of a slot, remembered with it (`seen`): a batch reads the URLs of its
        clusters' and groups' pages by slot and looks them up by URL right after."""
        nb, folded = len(self.base), self.folded
        if slot >= folded:
            return self.new[slot - folded]
        if slot >= nb:
            url = self.level_urls[slot - nb].as_py()
        else:
            by_row = self.row
            row = slot if by_row is None or slot >= by_row.size else int(by_row[slot])
            url = self.base[row].as_py()
        if len(self.seen) >= _SEEN_MAX:  # bounded: forgotten all at once
            self.seen = {}
        self.seen[url] = slot
        return url

    def slot(self, url: str, found: Found | None = None) -> int | None:
        """The slot of `url`, None when it was never stored (`lookup` of one URL, kept in
        `seen` by the URL check's `url_at`; `found`: as `lookup`'s)."""
        got = self.added.get(url)
        if got is None:
            got = self.seen.get(url)
        if got is not None:
            return got
        return self.lookup([url], [None], found)[0]

    def lookup(
        self, urls: list[str], keys: list[int | None], found: Found | None = None
    ) -> list[int | None]:
        """`slot` of many URLs (a batch's), the sorted keys searched once for all of them;
        `keys` their page keys where the caller has them already (None: hashed here);
        `found`: the saved keys' entries for them, searched elsewhere."""
        out: list[int | None] = [self.added.get(u) for u in urls]
        todo = [i for i, s in enumerate(out) if s is None]
        if not todo or not (self.skeys.size or self.level_keys.size):
            return out
        keys = np.array(
            [url_key(urls[i]) if keys[i] is None else keys[i] for i in todo], dtype=np.int64
        )
        distinct = sorted_distinct(keys)
        # The saved keys' entries searched elsewhere (`found`), while the sorted keys are
        # the saved ones (a fold makes its own).
        found = found if self.skeys_saved else None
        at, slots, searched = hits(found, distinct, self.skeys, self.sslots)
        self.key_searches += searched
        if self.level_keys.size:  # the level an opening took in: small, searched here
            at_level, in_level = key_hits(self.level_keys, self.level_slots, distinct)
            at, slots = np.concatenate([at, at_level]), np.concatenate([slots, in_level])
        candidates: dict[int, list[int]] = {}
        for q, s in zip(at.tolist(), slots.tolist(), strict=True):
            candidates.setdefault(int(distinct[q]), []).append(int(s))
        for i, k in zip(todo, keys.tolist(), strict=True):
            for s in candidates.get(k, ()):  # nearly always one: keys may collide
                if self.url_at(s) == urls[i]:
                    out[i] = s
                    break
        return out
