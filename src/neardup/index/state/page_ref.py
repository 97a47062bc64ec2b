"""One page's fields as attributes (`PageRef`), read from and written to the page table's
columns (`pages.PageTable`).

Why a module of its own: the table holds no Python object a page; a batch makes a
`PageRef` for each page it touches and drops it after, and these accessors are all it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from neardup.index.state.pages import PageTable

NO_GROUP = -1  # the group column's value for a page without a group


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
        return None if g == NO_GROUP else g

    @group_id.setter
    def group_id(self, gid: int | None) -> None:
        self.t.group[self.slot] = NO_GROUP if gid is None else gid

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
