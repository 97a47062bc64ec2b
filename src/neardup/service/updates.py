"""What callers of the service index send, configure and get back.

Kept apart from `index.py` so that the HTTP app, the feeder and the batch code can name an
update, an option set or a report without pulling in the index and its database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neardup.ingest import RawRecord, extract_page


class ServiceError(ValueError):
    """A request the index cannot honour (bad update, unknown group)."""


@dataclass(frozen=True)
class ServiceOptions:
    """Choices of the service that do not change sketches.

    `preferred_suffixes`: host suffixes preferred as winners, best first (a market's own
    domains, e.g. (".co.uk", ".uk") for the UK market). `repair_share` and
    `repair_min_losers` are no longer used (groups are the scan's clusters, which need no
    repair); they stay so that the options stored by earlier indexes still load.

    Tier 2: `tier2` is "lengths" (the paper's multidimensional length mapping, default) or
    "lsh" (LSH band keys); `dims` sub-dictionaries, `parts` balanced intervals per
    dimension, and `rho` the interval enlarging factor ρ of the window (L·τ/ρ, L·ρ/τ).
    """

    preferred_suffixes: tuple[str, ...] = ()
    repair_share: float = 0.5
    repair_min_losers: int = 2
    tier2: str = "lengths"
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


@dataclass
class BatchReport:
    """What one batch did (counts) and how long it took."""

    pages: int = 0
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
