"""The page table's URLs: the URL of each slot, and the slot of each URL.

Why a class of its own: the table's columns are numbers by slot, and the URLs are the one
part kept otherwise. The URLs opened from the files stay one Arrow string array (a Python
string a page cost most of an index's opening); a URL finds its slot through the sorted
64-bit page keys (`near_pairs.url_key`, kept in the files), with an exact URL check since
two URLs may normalise to one key. Pages added since opening sit in a small dict until the
writer's next save merges their keys into the saved ones (`page_saves.page_arrays`), or, in
a copy that never saves, until they are folded into the sorted keys (`fold`, which the
table calls when they outgrow an eighth of them). Nothing here reads the table's other
columns: the table hands its page keys to `fold`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from neardup.index.state.found import Found, hits
from neardup.kernels.sorting import sorted_distinct
from neardup.pipeline.steps.near_pairs import url_key

_SEEN_MAX = 65_536  # slots remembered from lookups, at the most


class PageUrls:
    """URL <-> slot for slots 0 .. n-1: the folded slots' URLs in `base` (with their sorted
    page keys), the slots added since in `new` and `added`."""

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
        # Slots found lately (at most `_SEEN_MAX`): a batch looks its pages and their
        # neighbours up several times (the update, the graph's signatures, the clusters, the
        # rows it writes), and the next batches of a crawl touch many of them again.
        self.seen: dict[str, int] = {}
        self.key_searches = 0  # the saved keys searched here (not found elsewhere)

    @property
    def folded(self) -> int:
        """Slots whose URL is in `base` (and whose key is in the sorted keys)."""
        return len(self.base)

    def append(self, url: str, slot: int) -> None:
        """The URL of a new slot (the next one)."""
        self.new.append(url)
        self.added[url] = slot

    def fold(self, keys: np.ndarray) -> None:
        """Fold the URLs added since the last fold into the Arrow array, and sort `keys`
        (the page key of every slot, 0 .. n-1): then the added pages cost no Python object
        either."""
        if self.new:
            # A chunk more, not one array: the URLs as opened (a saved table's map) are
            # not copied.
            base = self.base
            chunks = base.chunks if isinstance(base, pa.ChunkedArray) else [base]
            added = pa.array(self.new, pa.string()).cast(base.type)
            self.base = pa.chunked_array([*chunks, added], base.type)
            self.new = []
            self.added = {}
        # Not a stable sort: keys are equal only for URLs whose hashes collide, and a
        # lookup checks each of those (numpy's sorting network, 0.02 s a million, not 0.09).
        order = np.argsort(keys, kind="quicksort")
        self.skeys = keys[order]
        self.sslots = order.astype(np.int64)
        self.skeys_saved = False
        assert len(self.base) == keys.size, (len(self.base), keys.size)

    def base_array(self, slots: np.ndarray) -> pa.Array:
        """The URLs of folded slots as one Arrow array."""
        got = self.base.take(pa.array(self._rows_of(slots)))
        return got.combine_chunks() if isinstance(got, pa.ChunkedArray) else got

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
        nb = len(self.base)
        base = slots < nb
        got = self.base.take(pa.array(self._rows_of(slots[base]))).to_pylist()
        if base.all():
            return got
        out: list[str] = [""] * slots.size
        for i, url in zip(np.flatnonzero(base).tolist(), got, strict=True):
            out[i] = url
        for i, slot in zip(np.flatnonzero(~base).tolist(), slots[~base].tolist(), strict=True):
            out[i] = self.new[slot - nb]
        return out

    def url_at(self, slot: int) -> str:
        """The URL of a slot, remembered with it (`seen`): a batch reads the URLs of its
        clusters' and groups' pages by slot and looks them up by URL right after."""
        nb = len(self.base)
        if slot >= nb:
            return self.new[slot - nb]
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
        if not todo or not self.skeys.size:
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
        candidates: dict[int, list[int]] = {}
        for q, s in zip(at.tolist(), slots.tolist(), strict=True):
            candidates.setdefault(int(distinct[q]), []).append(int(s))
        for i, k in zip(todo, keys.tolist(), strict=True):
            for s in candidates.get(k, ()):  # nearly always one: keys may collide
                if self.url_at(s) == urls[i]:
                    out[i] = s
                    break
        return out
