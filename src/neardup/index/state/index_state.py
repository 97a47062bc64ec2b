"""The index's state in memory, as a batch changes it: what `apply_batch.compute_batch` is
given.

Why: the batch's apply (`apply_batch.py`) is the algorithm and `ServiceIndex`
(`service_index.py`) the persistent index around it (files, versions, locks). The apply
used to take the whole index and call six of its private methods, so each module imported
the other. It now takes this record of the state alone, with the few changes that must
keep two structures in step (a page's sketch and tier 2's rows, a redirect and the
redirect graph), and knows nothing of files; the index holds one and writes what the apply
says changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from neardup.config import Settings
from neardup.index.state.found import Found
from neardup.index.state.groups import GroupMembers, Winners
from neardup.index.state.lookups import HERE, BatchLookups
from neardup.index.state.pages import PageRef, PageTable
from neardup.index.state.popularity import RedirectGraph
from neardup.index.state.scangraph import ScanGraph
from neardup.index.state.tier2 import SignatureStore
from neardup.index.state.updates import ServiceOptions
from neardup.store.rows import release_pages

MAX_REDIRECTS = 32  # hops of a redirect chain followed at the most


@dataclass(eq=False)
class IndexState:
    """Pages, groups, winners, the scan graph, tier 2's rows and the redirects of an open
    index. Made empty of pages by the index when it opens a version, then filled
    (`ServiceIndex._load`)."""

    settings: Settings
    options: ServiceOptions
    store_rows: SignatureStore
    next_group: int = 1  # the id the next new group takes
    redirects: RedirectGraph = field(default_factory=RedirectGraph)
    # The slot of each redirecting page, by URL: popularity reads the in-links of a
    # group's pages' redirect sources, which no lookup of the batch's pages found.
    redirect_slot: dict[str, int] = field(default_factory=dict)
    # Set once the version's pages are read (`ServiceIndex._load`).
    pages: PageTable = field(init=False)
    groups: GroupMembers = field(init=False)
    winners: Winners = field(init=False)
    scan_graph: ScanGraph = field(init=False)

    @property
    def threshold(self) -> float:
        return self.settings.threshold

    def release_read(self) -> None:
        """The pages of the saved URLs' maps a batch read, given back (`release_pages`):
        a batch reads the URLs of scattered pages, and each read left 64 KiB of them
        resident, until a removal of 1 % held nearly the whole files."""
        for array in (*self.pages.read_maps, *self.winners.read_maps):
            release_pages(array)

    # ---------------------------------------------------------------- reads

    def resolve(self, url: str, found: Found | None = None) -> tuple[str, list[str]]:
        """Final URL of a redirect chain (and the chain), stopping at cycles or 32 hops;
        `found`: the saved page keys' entries a batch's engine found (its redirects'
        targets among them)."""
        chain = [url]
        seen = {url}
        cur = url
        for _ in range(MAX_REDIRECTS):
            p = self.pages.get(cur, found)
            if p is None or p.removed or not p.redirect_to:
                break
            cur = p.redirect_to
            if cur in seen:
                break
            seen.add(cur)
            chain.append(cur)
        return cur, chain

    def popularity(self, url: str) -> int:
        """In-links of `url` plus those of every page redirecting to it (popularity.py)."""
        return self.redirects.popularity(url, self.links_in)

    def links_in(self, url: str) -> int:
        slot = self.redirect_slot.get(url)
        p = self.pages.get(url) if slot is None else PageRef(self.pages, slot)
        return 0 if p is None or p.removed else p.links_in

    # ---------------------------------------------------------------- changes

    def new_group(self) -> int:
        gid = self.next_group
        self.next_group += 1
        return gid

    def set_signature(
        self,
        p: PageRef,
        sig: np.ndarray | None,
        length: int,
        lens: np.ndarray | None = None,
        lookups: BatchLookups = HERE,
    ) -> None:
        """Set a page's sketch and keep the tier-2 row store in step. A page without
        shingles stays out of the store: its all-empty signature would match every other."""
        self.scan_graph.signature_changing(p.slot, lookups)
        self.pages.set_signature(p.slot, sig, length, lens)
        if self.options.tier2 == "bands":
            return  # checks go through the scan's band index: no second copy of the rows
        if sig is None or length == 0 or lens is None:
            self.store_rows.drop(p.url)
        else:
            self.store_rows.put(p.url, sig, lens)

    def set_redirect(self, p: PageRef, target: str | None) -> None:
        """A page's redirect (None: none), the redirect graph kept in step."""
        self.redirects.set(p.url, p.redirect_to, target)
        if target:
            self.redirect_slot[p.url] = p.slot
        else:
            self.redirect_slot.pop(p.url, None)
        p.redirect_to = target
