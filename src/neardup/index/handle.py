"""The incremental duplicate index from Python: `neardup.open_index(path)`.

`neardup add` and `neardup serve` reach the index through the command line and HTTP; a
script or a notebook wants it in hand: add a page, ask about a text, remove a URL, without a
server or a token. This handle is a thin shell over `ServiceIndex`: every method calls the
function the HTTP endpoint calls (`apply` for `POST`/`DELETE /pages`, `check` for
`POST /check`, `status` for `GET /status`, `group` for `GET /groups/{id}`), so the two
answer alike by construction, and the store is the same one `serve` opens.

Names follow datasketch's `MinHashLSH` where they fit (`insert`, `query`, `remove`,
`url in ix`); `add` is the documented way and `insert` its alias.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from neardup.config import Settings
from neardup.index.service_index import ServiceIndex
from neardup.index.state.read_records import CheckResult, GroupView, IndexCounts, UrlStatus
from neardup.index.state.updates import (
    BatchReport,
    PageUpdate,
    ServiceError,
    ServiceOptions,
    as_update,
)

PageLike = PageUpdate | Mapping[str, Any] | Sequence[Any]


class DuplicateIndex:
    """An open incremental duplicate index (a store folder of versioned files).

    Each `add`, `add_many` or `remove` is one batch, one transaction: on any error nothing
    of it remains. Calls hold the index's lock, so threads may share a handle. One process
    at a time writes a store (a second writer is refused naming the holder, or waits with
    `wait`); any number open it `read_only` meanwhile and see its last committed version
    (`refresh` reads a newer one).
    """

    def __init__(
        self,
        path: str | Path,
        settings: Settings | None = None,
        options: ServiceOptions | None = None,
        *,
        read_only: bool = False,
        wait: bool = False,
    ) -> None:
        self.index = ServiceIndex(path, settings, options, read_only=read_only, wait=wait)

    @property
    def path(self) -> Path:
        return self.index.store

    @property
    def settings(self) -> Settings:
        return self.index.settings

    # ---------------------------------------------------------------- updates

    def add(
        self,
        url: str,
        text: str | None = None,
        html: str | bytes | None = None,
        redirect_to: str | None = None,
        links_in: int | None = None,
    ) -> BatchReport:
        """Add or update one page: exactly one of `text`, `html` or `redirect_to`, or only
        `links_in` for a page the index holds."""
        return self.add_many([PageUpdate(url, text, html, redirect_to, links_in)])

    insert = add  # datasketch's name

    def add_many(self, pages: Iterable[PageLike]) -> BatchReport:
        """Add or update a batch of pages in one transaction. Each is a `PageUpdate`, a
        dict of its fields or a tuple in its field order, e.g. `(url, text)`; the last
        entry for a URL wins, as in `POST /pages`."""
        updates = [as_update(p) for p in pages]
        return self.index.apply(updates)

    def remove(self, urls: str | Iterable[str]) -> BatchReport:
        """Mark one URL or many gone (one transaction); a removed winner's group elects a
        new one. Unknown URLs are recorded as removed, as `DELETE /pages` does."""
        batch = [urls] if isinstance(urls, str) else list(urls)
        return self.index.apply([as_update(PageUpdate(u, remove=True)) for u in batch])

    # ---------------------------------------------------------------- reads

    def query(
        self, text: str | None = None, html: str | bytes | None = None, url: str | None = None
    ) -> UrlStatus | CheckResult | None:
        """The group a page is in, its winner and the resemblance to it.

        With `url`: the stored page's status (`GET /status`), None for a URL the index has
        never seen. With `text` or `html`: the group the document would join, without
        adding it, and its resemblance to that group's winner (`POST /check`)."""
        if sum(x is not None for x in (text, html, url)) != 1:
            raise ServiceError("give exactly one of text, html or url")
        if url is None:  # `check` sketches before it takes the lock
            return self.index.check(text=text, html=html)
        with self.index.lock:
            return self.index.status(url)

    def group(self, group_id: int) -> GroupView | None:
        """A group's winner, members (resemblance to the winner, popularity) and the
        redirects into it (`GET /groups/{id}`); None for an unknown id."""
        with self.index.lock:
            return self.index.group(group_id)

    def groups(self) -> dict[int, frozenset[str]]:
        """Every group's member URLs by group id: the index's partition of its pages."""
        with self.index.lock:
            return {g: frozenset(m) for g, m in self.index.groups.items() if m}

    def counts(self) -> IndexCounts:
        """Live pages, redirects, groups and groups of more than one page."""
        with self.index.lock:
            return self.index.counts()

    def __contains__(self, url: object) -> bool:
        """Whether `url` is a live page (content or redirect) of the index."""
        with self.index.lock:
            p = self.index.pages.get(url) if isinstance(url, str) else None
            return p is not None and not p.removed

    # ---------------------------------------------------------------- lifetime

    def refresh(self) -> bool:
        """Read the store's newest committed version (a read-only handle beside a writer);
        True when there was a newer one."""
        return self.index.refresh()

    def close(self) -> None:
        """Release the store (its writer lock); committed batches stay."""
        self.index.close()

    def __enter__(self) -> DuplicateIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"DuplicateIndex({str(self.path)!r})"


def open_index(
    path: str | Path,
    settings: Settings | None = None,
    options: ServiceOptions | None = None,
    *,
    read_only: bool = False,
    wait: bool = False,
) -> DuplicateIndex:
    """Open (or create) the duplicate index in the store folder `path`, the folder
    `neardup add` and `neardup serve` use. `settings` apply to a new store: an existing
    one keeps its own, and different sketch settings raise `SettingsError`. `options`
    (winner rule, tier 2) default to the stored ones. `read_only` opens the last committed
    version beside a process that writes; `wait` waits for such a writer instead of
    refusing with `IndexBusy`."""
    return DuplicateIndex(path, settings, options, read_only=read_only, wait=wait)
