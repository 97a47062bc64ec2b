"""What callers of the service index send, configure and get back.

Kept apart from `service_index.py` so that the HTTP app, the feeder and the batch code can name an
update, an option set or a report without pulling in the index and its database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from neardup.ingest import RawRecord, extract_page

MAX_LINKS = 2**31 - 1  # pages.links_in is a DuckDB INTEGER
PAGE_ONE_OF = "give exactly one of text, html, redirect_to (or links_in alone)"


class ServiceError(ValueError):
    """A request the index cannot honour (bad update, unknown group)."""


class UnknownPage(ServiceError):
    """`links_in` alone for a URL the index does not hold (or holds as removed): there is no
    page to update. Its own class so the HTTP API can answer 404, the status its document
    lists for it: JSON Schema cannot say "a URL the index holds"."""


class SelfRedirect(ServiceError):
    """A page redirecting to itself, which would make it its own target. Its own class so
    the HTTP API can answer 409 (the page as sent conflicts with the redirect it states):
    JSON Schema cannot compare two fields of one object."""


@dataclass(frozen=True)
class ServiceOptions:
    """Choices of the service that do not change sketches.

    `preferred_suffixes`: host suffixes preferred as winners, best first (a market's own
    domains, e.g. (".co.uk", ".uk") for the UK market). `repair_share` and
    `repair_min_losers` are no longer used (groups are the scan's clusters, which need no
    repair); they stay so that the options stored by earlier indexes still load.

    Tier 2, the lookup of a text that is not stored (`check`): `tier2` is "bands" (default:
    the scan's own LSH band index, kept by the graph, so a check finds what a scan would pair
    the text with, at the cost of its buckets), "lengths" (the paper's multidimensional
    length mapping: `dims` sub-dictionaries, `parts` balanced intervals per dimension, and
    `rho` the interval enlarging factor ρ of the window (L·τ/ρ, L·ρ/τ)) or "lsh" (band keys
    over tier 2's own row store). Indexes written before "bands" existed keep the mode they
    stored.
    """

    preferred_suffixes: tuple[str, ...] = ()
    repair_share: float = 0.5
    repair_min_losers: int = 2
    tier2: str = "bands"
    dims: int = 3
    parts: int = 16
    rho: float = 1.3


@dataclass
class PageUpdate:
    """One entry of an update batch: new text (or html), a redirect, or a removal."""

    url: str
    text: str | None = None
    html: str | bytes | None = None
    redirect_to: str | None = None
    links_in: int | None = None
    remove: bool = False


def as_update(item: PageUpdate | Mapping[str, Any] | Sequence[Any]) -> PageUpdate:
    """One page of a batch from what a Python caller holds: a `PageUpdate`, a dict of its
    fields, or a tuple in its field order (`(url, text)` is the common case). Checked by
    the rule the HTTP API's schema states (`api_models.PagesIn`), so that Python callers
    get a `ServiceError` for what the API answers 422, not a silent pick of one field."""
    if isinstance(item, PageUpdate):
        u = item
    elif isinstance(item, Mapping):
        unknown = set(item) - {f.name for f in fields(PageUpdate)}
        if unknown:
            raise ServiceError(f"unknown page fields: {', '.join(sorted(unknown))}")
        u = PageUpdate(**item)
    elif isinstance(item, Sequence) and not isinstance(item, str | bytes):
        if not 1 <= len(item) <= len(fields(PageUpdate)):
            raise ServiceError(
                f"a page tuple is (url, text, html, redirect_to, links_in): {item!r}"
            )
        u = PageUpdate(*item)
    else:
        raise ServiceError(f"a page is a PageUpdate, a dict or a tuple, not {type(item).__name__}")
    if not isinstance(u.url, str) or not u.url:
        raise ServiceError("an update needs a url")
    given = sum(x is not None for x in (u.text, u.html, u.redirect_to))
    if u.remove:
        if given or u.links_in is not None:
            raise ServiceError(f"{u.url}: a removal carries nothing else")
    elif given > 1 or (given == 0 and u.links_in is None):
        raise ServiceError(f"{u.url}: {PAGE_ONE_OF}")
    if u.links_in is not None and (
        isinstance(u.links_in, bool)
        or not isinstance(u.links_in, int)
        or not 0 <= u.links_in <= MAX_LINKS
    ):
        raise ServiceError(f"{u.url}: links_in must be an integer in [0, {MAX_LINKS}]")
    return u


@dataclass
class BatchReport:
    """What one batch did (counts) and how long it took."""

    pages: int = 0
    skipped: int = 0  # pages the eligibility rule left out by their URL (robots.txt, patterns)
    new: int = 0
    changed: int = 0
    tier1: int = 0
    tier2: int = 0
    redirects: int = 0
    removed: int = 0
    comparisons: int = 0
    tier2_comparisons: int = 0  # candidate pairs the scan's graph verified (in `comparisons`)
    tier2_all_pairs: int = 0  # unused since groups come from the scan's graph
    groups_touched: int = 0
    repaired: int = 0  # always 0 now: kept for the report's readers
    recomputed: int = 0  # components of the scan's graph clustered again
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def html_to_text(html: str | bytes, url: str = "http://localhost/") -> str:
    """Visible text of an HTML document, through the same extractor as scans."""
    payload = html.encode("utf-8") if isinstance(html, str) else html
    rec = RawRecord(
        source="api",
        offset=0,
        record_type="resource",
        url=url,
        content_type="text/html",
        payload=payload,
    )
    return extract_page(rec, links=False).text or ""
