"""Payload to text: HTML (resiliparse), PDF (pypdf), plain text, or text given by a table.

Runs in worker processes, one call per record, so it keeps no state of its own and parses each
HTML document exactly once (the same tree gives title, text and links).

Text is *all visible text* of the page body, navigation and footers included: near-duplicate
detection in the Broder/Fetterly sense compares whole pages, and mirror detection depends on
the boilerplate that main-content extraction would strip. So resiliparse runs with
`main_content=False`, without alt texts, form field values or <noscript> content (none of which
a reader sees), and without list bullets (formatting, not text).
"""

from __future__ import annotations

import html
import io
import logging
import re
from functools import lru_cache

import xxhash
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import detect_encoding, detect_mime, map_encoding_to_html5
from resiliparse.parse.html import HTMLTree

from neardup.ingest import commoncrawl
from neardup.ingest.common import sniff_kind
from neardup.ingest.record import ExtractedPage, RawRecord
from neardup.ingest.urls import resolve, resolver
from neardup.kernels.tags import link_targets

# pypdf reports every repairable flaw of a PDF as a logged warning; in a crawl that is noise
# on stderr for thousands of files. Real failures still raise and become skip reasons.
logging.getLogger("pypdf").setLevel(logging.ERROR)

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "application/xhtml", "text/xhtml"})
PDF_TYPES = frozenset({"application/pdf", "application/x-pdf", "application/acrobat", "text/pdf"})
TEXT_TYPES = frozenset({"text/plain"})
XML_TYPES = frozenset({"text/xml", "application/xml"})
# Types that say nothing about the content: look at the bytes instead.
GENERIC_TYPES = frozenset(
    {
        "",
        "application/octet-stream",
        "binary/octet-stream",
        "application/binary",
        "application/unknown",
        "application/x-unknown",
        "unknown/unknown",
        "www/unknown",
        "no-type",
        "application/download",
        "application/force-download",
        "application/x-download",
        "text/x-unknown-content-type",
    }
)
TEXT_OPTIONS = {
    "preserve_formatting": True,
    "main_content": False,
    "list_bullets": False,
    "alt_texts": False,
    "links": False,
    "form_fields": False,
    "noscript": False,
}
_BOMS = (
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
_ABSOLUTE_WEB = ("http://", "https://")
_SURROGATE = re.compile("[\ud800-\udfff]")
_MASK64 = (1 << 64) - 1


def extract_page(
    rec: RawRecord, max_payload_bytes: int = 20_000_000, links: bool = True
) -> ExtractedPage:
    """Title, visible text and outgoing links of a record, or the reason there are none.

    Never raises for bad content: every failure of a parser becomes a `skipped_reason`.
    `links=False` skips link extraction, for scans that need no link graph.
    """
    if rec.skipped_reason:
        return ExtractedPage(skipped_reason=rec.skipped_reason)
    if rec.text is not None:
        return _given_text(rec.text, max_payload_bytes)  # tables, and WET conversion records
    if commoncrawl.is_wat(rec):
        return commoncrawl.wat_page(rec, links)
    payload = rec.payload or b""
    page = ExtractedPage(exact_fp=fingerprint(payload), payload_bytes=len(payload))
    if len(payload) > max_payload_bytes:
        page.skipped_reason = f"payload too large ({len(payload)} bytes)"
        return page
    empty = not payload or payload.isspace()  # isspace: no copy of a big payload, unlike strip
    kind = payload_kind(rec.content_type, payload)
    if kind is None and not (empty and (rec.content_type or "") in GENERIC_TYPES):
        page.skipped_reason = f"unsupported content type: {rec.content_type or 'unknown'}"
        return page
    if empty:
        page.skipped_reason = "empty text"  # e.g. a redirect without a body
        return page
    page.format = kind
    try:
        if kind == "html":
            _extract_html(page, payload, rec.charset, rec.url, links)
        elif kind == "pdf":
            _extract_pdf(page, payload)
        else:
            page.text = decode_text(payload, rec.charset)
    except Exception as exc:  # pypdf and friends raise anything on hostile input
        page.skipped_reason = f"unreadable {kind}: {_short(exc)}"
        return page
    if not page.text or not page.text.strip():
        page.skipped_reason = "empty text"
    return page


def fingerprint(data: bytes) -> int:
    """xxh3-64 of `data` as a signed int64, so that DuckDB/Spark BIGINT columns can hold it."""
    value = xxhash.xxh3_64_intdigest(data) & _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


def _given_text(text: str, max_payload_bytes: int) -> ExtractedPage:
    """Text from a table row: used as is, except that lone surrogates (which JSON allows and
    Parquet/DuckDB reject) become U+FFFD. The size limit applies as to payloads.

    Surrogates are exactly what strict UTF-8 encoding refuses, so the encoding the
    fingerprint needs anyway is the test; a search of every text cost more than the rest."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", text)
        data = text.encode("utf-8")
    page = ExtractedPage(format="given", exact_fp=fingerprint(data), payload_bytes=len(data))
    if len(data) > max_payload_bytes:
        page.skipped_reason = f"payload too large ({len(data)} bytes)"
    elif not text.strip():
        page.skipped_reason = "empty text"
    else:
        page.text = text
    return page


def payload_kind(content_type: str | None, payload: bytes) -> str | None:
    """The extractor for a payload ("html", "pdf", "text"; None: unsupported).

    A PDF signature wins over any declared type (servers label PDFs text/html or
    octet-stream); missing or generic types are sniffed.
    """
    head = payload[:1024].lstrip()
    if head.startswith(b"%PDF-"):
        return "pdf"
    ctype = (content_type or "").lower()
    if ctype in HTML_TYPES:
        return "html"
    if ctype in PDF_TYPES:
        return "pdf"
    if ctype in TEXT_TYPES:
        return "text"
    if ctype in XML_TYPES:
        return "html" if b"<html" in payload[:4096].lower() else None
    if ctype in GENERIC_TYPES:
        if sniff_kind(head) == "html":
            return "html"
        return "text" if detect_mime(payload[:4096]) == "text/plain" else None
    return None


def decode_text(payload: bytes, charset: str | None) -> str:
    """Plain text in its declared charset (WHATWG label rules), else UTF-8, bad bytes replaced."""
    encoding = _bom_encoding(payload) or _known_encoding(charset) or "utf-8"
    return payload.decode(encoding, errors="replace")


def _bom_encoding(payload: bytes) -> str | None:
    """Encoding named by a byte order mark; it overrides any declaration, as in browsers."""
    for bom, name in _BOMS:
        if payload.startswith(bom):
            return name
    return None


def _known_encoding(charset: str | None) -> str | None:
    """Python codec for a declared charset label, or None for an unknown label."""
    if not charset:
        return None
    return map_encoding_to_html5(charset, fallback_utf8=False)


def _extract_html(
    page: ExtractedPage, payload: bytes, charset: str | None, url: str | None, links: bool
) -> None:
    """Parse once; take title, visible text and links from the same tree."""
    encoding = (
        _bom_encoding(payload)
        or _known_encoding(charset)
        or detect_encoding(payload, from_html_meta=True)
        or "utf-8"
    )
    tree = HTMLTree.parse_from_bytes(payload, encoding)
    title = " ".join((tree.title or "").split())
    page.title = title or None
    page.text = extract_plain_text(tree, **TEXT_OPTIONS)
    if links:
        page.links = _links(payload, encoding, url)


def _raw_links(payload: bytes, encoding: str) -> tuple[str | None, list[str]]:
    """(<base href>, distinct raw link targets in document order) of an HTML payload: the
    values of `a`/`area` `href`, then of `frame`/`iframe` `src`, outside comments, read by
    one compiled pass over the bytes (`kernels.tags`; the text comes from the parsed tree)."""
    found, base = link_targets(payload)
    hrefs: list[str] = []
    for raw in dict.fromkeys(found):  # distinct, in order, before any decoding
        if not raw or raw.startswith(b"#"):
            continue
        value = raw.decode(encoding, errors="replace")
        hrefs.append(html.unescape(value) if "&" in value else value)
    base_href = base.decode(encoding, errors="replace") if base is not None else None
    return (html.unescape(base_href) if base_href and "&" in base_href else base_href), hrefs


def _links(payload: bytes, encoding: str, url: str | None) -> list[str]:
    """Absolute http(s) targets of a/area[href] and (i)frame[src], first occurrence order.

    Resolved against <base href> when the page has one. Pure fragment links ("#top") point
    into the page itself and are left out.
    """
    base_href, hrefs = _raw_links(payload, encoding)
    base = url
    if base_href:
        base = resolve(url, base_href) or url
    resolve_href = resolver(base)
    seen = dict.fromkeys(
        _absolute_link(href) if href.startswith(_ABSOLUTE_WEB) else resolve_href(href)
        for href in hrefs
    )
    seen.pop(None, None)
    return list(seen)


@lru_cache(maxsize=1 << 16)
def _absolute_link(href: str) -> str | None:
    """`resolve` of an href that starts "http://" or "https://": no base changes what it
    resolves to, so it is cached by the href alone. `resolver` caches by page directory,
    and sites repeat their absolute links (navigation, footers) in every directory."""
    return resolve(None, href)


def _extract_pdf(page: ExtractedPage, payload: bytes) -> None:
    """Text of all pages; the document title from its metadata, if any.

    pypdf is imported here, on the first PDF: its import costs every process (the scan and
    each worker) about 0.1 s, and most crawls and every table have no PDF at all."""
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(payload))
    if reader.is_encrypted:
        reader.decrypt("")  # most "encrypted" web PDFs only restrict printing/copying
    page.text = "\n".join(p.extract_text() or "" for p in reader.pages)
    meta = reader.metadata
    title = meta.title if meta is not None else None
    if isinstance(title, str) and title.strip():
        page.title = " ".join(title.split())


def _short(exc: BaseException) -> str:
    """Exception type and first line of its message, bounded for a skip reason."""
    message = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {message}"[:160] if message else type(exc).__name__
