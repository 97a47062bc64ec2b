"""Crawl files as real crawlers publish them, written with warcio (an independent writer).

`write_warc` writes Common Crawl/Heritrix layout when `request_first` is set: a warcinfo
record, then per fetch a `request`, the `response` and a `metadata` record (application/
warc-fields, Heritrix's outlinks), each pointing at the response with WARC-Concurrent-To.
`write_wet` writes WET `conversion` records and `write_wat` WAT JSON `metadata` records with
Common Crawl's field names (Envelope → Payload-Metadata → HTTP-Response-Metadata → ...).
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from html.parser import HTMLParser
from io import BytesIO
from pathlib import Path
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter


@dataclass
class Fetch:
    """One fetch: a 200 page with `html`, or a redirect (status 3xx, `location`)."""

    url: str
    html: str = ""
    status: int = 200
    location: str | None = None
    date: str = "2024-05-18T01:58:10Z"


def write_warc(path: Path, fetches: list[Fetch], request_first: bool) -> Path:
    """A WARC of `fetches`; Common Crawl's record layout when `request_first`."""
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        if request_first:
            writer.write_record(
                writer.create_warcinfo_record(
                    path.name,
                    {
                        "software": "Apache Nutch 1.19 (modified, https://commoncrawl.org/)",
                        "format": "WARC File Format 1.1",
                    },
                )
            )
        for f in fetches:
            response = _response(writer, f)
            rid = response.rec_headers.get_header("WARC-Record-ID")
            if request_first:
                parts = urlsplit(f.url)
                req_http = StatusAndHeaders(
                    f"GET {parts.path or '/'} HTTP/1.1",
                    [("Host", parts.netloc), ("User-Agent", "CCBot/2.0")],
                    is_http_request=True,
                )
                request = writer.create_warc_record(
                    f.url,
                    "request",
                    payload=BytesIO(b""),
                    http_headers=req_http,
                    warc_headers_dict={"WARC-Date": f.date, "WARC-Concurrent-To": rid},
                )
                writer.write_record(request)
            writer.write_record(response)
            if request_first:
                outlinks = "".join(f"outlink: {h} L a/@href\r\n" for h in html_links(f.html))
                meta = writer.create_warc_record(
                    f.url,
                    "metadata",
                    payload=BytesIO(f"fetchTimeMs: 120\r\n{outlinks}".encode()),
                    warc_content_type="application/warc-fields",
                    warc_headers_dict={"WARC-Date": f.date, "WARC-Concurrent-To": rid},
                )
                writer.write_record(meta)
    return path


def _response(writer: WARCWriter, f: Fetch):
    reason = "OK" if f.status == 200 else "Moved"
    headers = [("Content-Type", "text/html; charset=utf-8")]
    if f.location:
        headers.append(("Location", f.location))
    http = StatusAndHeaders(f"{f.status} {reason}", headers, protocol="HTTP/1.1")
    return writer.create_warc_record(
        f.url,
        "response",
        payload=BytesIO(f.html.encode()),
        http_headers=http,
        warc_headers_dict={"WARC-Date": f.date},
    )


def write_wet(path: Path, texts: list[tuple[str, str]]) -> Path:
    """A WET file: warcinfo, then one `conversion` record (text/plain) per (url, text)."""
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        writer.write_record(writer.create_warcinfo_record(path.name, {"format": "WET"}))
        for url, text in texts:
            writer.write_record(
                writer.create_warc_record(
                    url,
                    "conversion",
                    payload=BytesIO(text.encode()),
                    warc_content_type="text/plain",
                    warc_headers_dict={
                        "WARC-Date": "2024-05-18T01:58:10Z",
                        "WARC-Identified-Content-Language": "eng",
                    },
                )
            )
    return path


def write_wat(path: Path, fetches: list[Fetch]) -> Path:
    """A WAT file: per fetch, the JSON of its request record (no links) and of its response
    record, whose HTML-Metadata lists links as Common Crawl does (A@/href, IMG@/src, ...)."""
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        writer.write_record(writer.create_warcinfo_record(path.name, {"format": "WAT"}))
        for f in fetches:
            request = {
                "Envelope": {
                    "WARC-Header-Metadata": {"WARC-Type": "request"},
                    "Payload-Metadata": {"HTTP-Request-Metadata": {}},
                }
            }
            links = [{"path": "A@/href", "url": h} for h in html_links(f.html)]
            links += [
                {"path": "IMG@/src", "url": "/logo.png"},
                {"path": "LINK@/href", "url": "/style.css", "rel": "stylesheet"},
            ]
            response = {
                "Envelope": {
                    "WARC-Header-Metadata": {"WARC-Type": "response", "WARC-Target-URI": f.url},
                    "Payload-Metadata": {
                        "HTTP-Response-Metadata": {
                            "Response-Message": {"Status": str(f.status)},
                            "HTML-Metadata": {"Head": {"Title": "t"}, "Links": links},
                        }
                    },
                }
            }
            for doc in (request, response):
                writer.write_record(
                    writer.create_warc_record(
                        f.url,
                        "metadata",
                        payload=BytesIO(json.dumps(doc).encode()),
                        warc_content_type="application/json",
                        warc_headers_dict={"WARC-Date": "2024-05-31T01:17:49Z"},
                    )
                )
    return path


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href" and v]


def html_links(html: str) -> list[str]:
    """Raw href values of <a> tags, by the standard library's HTML parser."""
    parser = _Anchors()
    parser.feed(html)
    return parser.hrefs


def gzip_members(path: Path) -> list[bytes]:
    """The decompressed gzip members of a file, in order: a WARC as crawlers write it has
    one member per record, which tools rely on to seek to a record."""
    rest, members = path.read_bytes(), []
    while rest:
        dec = zlib.decompressobj(31)
        members.append(dec.decompress(rest))
        rest = dec.unused_data
    return members
