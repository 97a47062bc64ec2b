"""Which records are compared: the one rule behind the scan (both engines), `neardup add`
and the service's `POST /pages` and `/check`, so that an index fed a crawl holds the pages
a scan of that crawl compares, and its groups are the scan's clusters.

A record is compared when every step below lets it through; the first that refuses gives
its skip reason (a row of `pages`, counted in the summary by the reason's first words):

1. its reader framed a page: a response, resource or conversion record, whole and readable
   (not a request, metadata, warcinfo or revisit record; the reader's own reason);
2. its URL is no crawler file (`CRAWLER_FILES`: robots.txt, sitemaps, ...), unless
   `include_crawler_files`: "crawler file (robots.txt)";
3. its URL passes the URL patterns: with `include_url`, one of them is found in it ("URL
   matches no include pattern"); none of `exclude_url` is ("excluded by URL pattern");
4. its HTTP status is 2xx: a 3xx is a redirect, not a page; 4xx and 5xx are compared only
   with `include_error_pages`;
5. its payload is of a supported content type and gives text (extraction's reason,
   `extract_page`; text that is only space is "empty text");
6. once sketched, its text has at least `min_tokens` words and one shingle (`enough_words`;
   the scan's `pages` says "too few words").

The URL steps come before the status so that a crawler file or a pattern counts every
record it matched, whatever its status (a robots.txt answered 404 is a crawler file).
Steps 1-4 read only the framed record, so the scan applies them in the reading process and
ships no bytes of a skipped record to a worker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import urlsplit

import numpy as np

from neardup.config import Settings
from neardup.ingest.record import ExtractedPage, RawRecord

REDIRECT_REASON = "redirect (HTTP 3xx)"
EMPTY_TEXT_REASON = "empty text"
EXCLUDED_REASON = "excluded by URL pattern"
NOT_INCLUDED_REASON = "URL matches no include pattern"

# Files a crawler fetches for itself or that sites publish for machines, never pages a
# reader sees: at the root of a host, by name (lower case). Their texts are alike across
# hosts (every robots.txt allows or disallows the same few paths), so compared, they fill
# the largest clusters of a real crawl.
ROOT_CRAWLER_FILES = frozenset(
    {
        "robots.txt",  # robots exclusion (RFC 9309)
        "ads.txt",  # IAB authorized sellers
        "app-ads.txt",
        "sellers.json",
        "humans.txt",
        "security.txt",  # RFC 9116 (also under /.well-known/)
        "llms.txt",
        "favicon.ico",
        "crossdomain.xml",  # Flash / Silverlight cross-domain policies
        "clientaccesspolicy.xml",
        "browserconfig.xml",
    }
)
# Anywhere on a host: sitemaps (sitemap.xml, sitemap_index.xml, wp-sitemap-posts-1.xml,
# sitemaps/sitemap-2.xml.gz, sitemap.txt), and everything under /.well-known/ (RFC 8615).
_SITEMAP = re.compile(r"[^/]*sitemap[^/]*\.(?:xml|txt)(?:\.gz)?", re.IGNORECASE)
WELL_KNOWN = "/.well-known/"
CRAWLER_FILES = (*sorted(ROOT_CRAWLER_FILES), "sitemaps (*sitemap*.xml/.txt)", WELL_KNOWN)


def crawler_file(url: str) -> str | None:
    """The name of the crawler file `url` addresses ("robots.txt", "sitemap",
    ".well-known"), or None for any other URL (and for one that cannot be split).

    Most URLs are told apart without splitting them (`urlsplit` was the eligibility rule's
    largest cost on a million text rows): the last segment before any query or fragment is
    the path's last segment, so when it names no crawler file and holds no "sitemap", and
    the URL has no ".well-known" anywhere, the split could not find one either. A tab or
    line break, which `urlsplit` deletes wherever it is, sends the URL the long way."""
    lower = url.lower()
    if ".well-known" not in lower and "\t" not in url and "\r" not in url and "\n" not in url:
        name = lower.split("?", 1)[0].split("#", 1)[0].rsplit("/", 1)[-1]
        if name not in ROOT_CRAWLER_FILES and "sitemap" not in name:
            return None
    return _split_crawler_file(url)


def _split_crawler_file(url: str) -> str | None:
    """`crawler_file` by the URL's path as `urlsplit` finds it."""
    try:
        path = urlsplit(url).path
    except ValueError:
        return None
    lower = path.lower()
    if lower.startswith(WELL_KNOWN):
        return ".well-known"
    name = lower.rsplit("/", 1)[-1]
    if lower == "/" + name and name in ROOT_CRAWLER_FILES:
        return name
    if "sitemap" in name and _SITEMAP.fullmatch(name):
        return "sitemap"
    return None


@dataclass(frozen=True)
class Eligibility:
    """Steps 2-4 of the rule with their settings, patterns compiled once (`rule_of`).
    Picklable: the scan's workers apply it to the rows of JSONL blocks they parse."""

    include_error_pages: bool = False
    include_crawler_files: bool = False
    include_url: tuple[str, ...] = ()
    exclude_url: tuple[str, ...] = ()
    _include: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _exclude: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_include", tuple(re.compile(p) for p in self.include_url))
        object.__setattr__(self, "_exclude", tuple(re.compile(p) for p in self.exclude_url))

    def url_reason(self, url: str) -> str | None:
        """Why a page at `url` is not compared, by its URL alone (steps 2 and 3)."""
        if not self.include_crawler_files:
            name = crawler_file(url)
            if name is not None:
                return f"crawler file ({name})"
        if self._include and not any(p.search(url) for p in self._include):
            return NOT_INCLUDED_REASON
        if any(p.search(url) for p in self._exclude):
            return EXCLUDED_REASON
        return None

    def status_reason(self, status: int | None) -> str | None:
        """Why a fetch answered `status` is not compared (step 4); None for a page."""
        if status is None or 200 <= status < 300:
            return None
        if 300 <= status < 400:
            return REDIRECT_REASON
        if self.include_error_pages:
            return None
        return f"HTTP status {status}"

    def record_reason(self, rec: RawRecord) -> str | None:
        """Why `rec` is not compared, from the framed record alone (steps 1-4)."""
        if rec.skipped_reason:
            return rec.skipped_reason
        if rec.url:
            reason = self.url_reason(rec.url)
            if reason:
                return reason
        return self.status_reason(rec.status)

    def mark(self, rec: RawRecord) -> None:
        """Give `rec` its skip reason when it is not compared, and drop a skipped record's
        bytes (nothing will parse them; the scan does not ship them to a worker)."""
        reason = self.record_reason(rec)
        if reason:
            rec.skipped_reason = reason
            rec.payload = None


@lru_cache(maxsize=16)
def rule_of(settings: Settings) -> Eligibility:
    """The rule `settings` make (compiled once per settings)."""
    return Eligibility(
        include_error_pages=settings.include_error_pages,
        include_crawler_files=settings.include_crawler_files,
        include_url=settings.include_url,
        exclude_url=settings.exclude_url,
    )


def page_reason(page: ExtractedPage) -> str | None:
    """Why an extracted page is not compared (step 5): its extraction's reason, or text
    that is only space."""
    if page.skipped_reason is None and not (page.text and page.text.strip()):
        return EMPTY_TEXT_REASON
    return page.skipped_reason


def enough_words(
    n_tokens: int | np.ndarray, n_shingles: int | np.ndarray, min_tokens: int
) -> bool | np.ndarray:
    """Whether sketched pages are compared (step 6): at least `min_tokens` words and one
    shingle. Takes numbers or arrays (a bool array back)."""
    return (n_tokens >= min_tokens) & (n_shingles > 0)


def enough_words_sql(min_tokens: int) -> str:
    """Step 6 as a SQL condition over a table with `n_tokens` and `n_shingles` (Spark)."""
    return f"n_tokens >= {int(min_tokens)} AND n_shingles > 0"
