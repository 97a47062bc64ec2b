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
    domains, e.g. (".co.uk", ".uk") for the UK market). `repair_share`: a group of at least
    `repair_min_losers` losers is repaired when more than this share of them fail
    verification against the winner (a transitive chain that drifted).

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
    tier2_comparisons: int = 0  # signature comparisons made by tier 2 (in `comparisons` too)
    tier2_all_pairs: int = 0  # comparisons an unpartitioned many-to-all would have made
    groups_touched: int = 0
    repaired: int = 0
    recomputed: int = 0  # groups whose whole component was re-clustered
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
