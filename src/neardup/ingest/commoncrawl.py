"""Common Crawl's derived files: WET (text) and WAT (metadata, links).

Common Crawl publishes each crawl three times: the WARC files, WET files holding the text it
extracted from each HTML page (WARC `conversion` records, `text/plain`), and WAT files holding
a JSON description of each WARC record (WARC `metadata` records, `application/json`). A scan
of WET files alone must still find near-duplicates, so a conversion record is a page whose
text is given, as a table's `text` column is: there is no HTML left to extract from.

A WAT record is not a page; it is a link source. Its JSON (Envelope → Payload-Metadata →
HTTP-Response-Metadata → HTML-Metadata → Links) lists the links of the page at its
WARC-Target-URI, so WAT files given beside the WET (or WARC) files of the same crawl feed
the link graph: the store credits the links to the page of that URL (`store/sql/build.sql`).
Only the link kinds neardup itself extracts from HTML (`a`/`area` href, `frame`/`iframe` src)
are kept, so a WARC scanned with its WAT has the same links as the WARC alone.

The reader (`warc_reader.py`) only calls `claims` and `finish_record`; the JSON is parsed
in the worker processes (`wat_page`), like HTML.
"""

from __future__ import annotations

import json
from typing import Any

from neardup.ingest.record import ExtractedPage, RawRecord
from neardup.ingest.urls import resolve, resolver

WAT_REASON = "link source (WAT metadata)"
CONVERSION = "conversion"
_WAT_TYPES = frozenset({"application/json"})
# WAT link paths ("TAG@/attribute") matching what extract.py takes from HTML.
_LINK_PATHS = frozenset({"A@/href", "AREA@/href", "FRAME@/src", "IFRAME@/src"})


def claims(record_type: str, content_type: str | None) -> bool:
    """True for the records this module reads: WET conversions and WAT JSON metadata."""
    if record_type == CONVERSION:
        return True
    return record_type == "metadata" and (content_type or "") in _WAT_TYPES


def finish_record(raw: RawRecord) -> None:
    """Turn a claimed record's block (read into `payload`) into a conversion's given text;
    a WAT record keeps its JSON payload for `wat_page`."""
    if raw.record_type == CONVERSION and raw.payload is not None and not raw.skipped_reason:
        raw.text = _decode(raw.payload, raw.charset)
        raw.payload = None


def is_wat(rec: RawRecord) -> bool:
    """A WAT record framed by `fill_record` (its payload is the JSON to parse)."""
    return rec.record_type == "metadata" and (rec.content_type or "") in _WAT_TYPES


def wat_page(rec: RawRecord, links: bool = True) -> ExtractedPage:
    """The row of a WAT record: never a page, but carrying the links of its target's page."""
    page = ExtractedPage(skipped_reason=WAT_REASON, payload_bytes=len(rec.payload or b""))
    if links and rec.payload:
        page.links = wat_links(rec.payload, rec.url)
    return page


def wat_links(payload: bytes, url: str | None) -> list[str]:
    """Absolute targets of the page's links listed in a WAT record, first-occurrence order.

    Relative targets resolve against the page's <base href> (which the WAT keeps under
    Head → Base) or its URL. Unreadable JSON, or a record without HTML links (requests,
    metadata, non-HTML responses), gives no links.
    """
    try:
        doc = json.loads(payload)
    except ValueError:
        return []
    html = _path(doc, "Envelope", "Payload-Metadata", "HTTP-Response-Metadata", "HTML-Metadata")
    if not isinstance(html, dict):
        return []
    entries = html.get("Links")
    if not isinstance(entries, list):
        return []
    base = _path(html, "Head", "Base")
    page_base = (resolve(url, base) or url) if isinstance(base, str) and base else url
    resolve_href = resolver(page_base)
    found: dict[str, None] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("path") not in _LINK_PATHS:
            continue
        href = entry.get("url")
        if not isinstance(href, str) or not href or href.startswith("#"):
            continue
        target = resolve_href(href)
        if target is not None:
            found.setdefault(target)
    return list(found)


def _decode(body: bytes, charset: str | None) -> str:
    """WET text is UTF-8 (Common Crawl writes nothing else); a declared charset is honoured."""
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


def _path(doc: Any, *keys: str) -> Any:
    """doc[k1][k2]... or None where a level is missing or not an object."""
    for key in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc
