"""Write synthetic crawl records in every input format neardup reads.

The same records can be written as WARC (what crawlers produce), as JSONL or Parquet tables
with url+text or url+html columns, and as a directory of HTML files, so one ground truth
covers every reader. WARC output is byte-for-byte reproducible: record ids are derived from
the record's content and position, dates come from the records, and gzip members carry no
timestamp.
"""

from __future__ import annotations

import base64
import gzip as gzip_module
import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import format_datetime
from io import BytesIO
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from neardup.synth.html import visible_text

USER_AGENT = "neardup-synth/0.1 (+https://crawler.example/bot)"
_ID_NAMESPACE = uuid.UUID("7f0c5d2e-4a8e-4f1e-9a51-3b1f6f0e2c11")


@dataclass
class CrawlRecord:
    """One fetched URL, with what a crawler stored and what the test truth says about it.

    `body` is the payload exactly as sent on the wire (gzip-compressed when `gzip_body`).
    A `revisit` record has no body; it refers to an earlier capture with the same payload.
    """

    url: str
    fetched_at: datetime
    body: bytes = b""
    status: int = 200
    reason: str = "OK"
    content_type: str | None = "text/html; charset=utf-8"
    ip: str = "192.0.2.1"
    server: str = "nginx"
    location: str | None = None
    gzip_body: bool = False
    record_type: str = "response"  # response | revisit
    refers_to_url: str | None = None  # revisit: the earlier capture
    refers_to_date: datetime | None = None
    payload_digest: str | None = None  # revisit: digest of the earlier payload
    refers_to_length: int = 0  # revisit: Content-Length of the earlier payload
    # Ground truth, never written into the WARC.
    role: str = ""
    original: str | None = None  # id of the corpus document whose text the page carries
    edit: str = "none"
    skip_reason: str | None = None  # why a reader should not turn this into a page
    collection: str | None = None
    primary_url: str | None = None  # URL of the same document on the primary site
    warc_file: int = 0

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def payload(self) -> bytes:
        """The body with the content encoding removed."""
        return gzip_module.decompress(self.body) if self.gzip_body else self.body

    @property
    def is_page(self) -> bool:
        """True for records that should become pages (HTML, status 200, not a revisit)."""
        return self.skip_reason is None

    @property
    def charset(self) -> str:
        ct = (self.content_type or "").lower()
        return ct.split("charset=", 1)[1].strip() if "charset=" in ct else "utf-8"

    def html(self) -> str:
        return self.payload.decode(self.charset, errors="replace")

    def truth_row(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "host": self.host,
            "role": self.role,
            "original": self.original,
            "edit": self.edit,
            "expected": "page" if self.is_page else "skip",
            "skip_reason": self.skip_reason,
            "status": self.status,
            "content_type": self.content_type,
            "record_type": self.record_type,
            "collection": self.collection,
            "primary_url": self.primary_url,
            "warc_file": self.warc_file,
        }


def warc_date(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def payload_digest(payload: bytes) -> str:
    """The WARC-Payload-Digest of a body (SHA-1, base32), as crawlers write it."""
    return "sha1:" + base64.b32encode(hashlib.sha1(payload).digest()).decode("ascii")


def _record_id(*parts: object) -> str:
    return f"<urn:uuid:{uuid.uuid5(_ID_NAMESPACE, '|'.join(map(str, parts)))}>"


def _http_response_headers(rec: CrawlRecord, body_length: int) -> StatusAndHeaders:
    headers = [
        ("Date", format_datetime(rec.fetched_at.astimezone(timezone.utc), usegmt=True)),
        ("Server", rec.server),
    ]
    if rec.content_type:
        headers.append(("Content-Type", rec.content_type))
    if rec.location:
        headers.append(("Location", rec.location))
    if rec.gzip_body:
        headers.append(("Content-Encoding", "gzip"))
    headers += [("Content-Length", str(body_length)), ("Connection", "close")]
    return StatusAndHeaders(f"{rec.status} {rec.reason}", headers, protocol="HTTP/1.1")


def _http_request_headers(url: str) -> StatusAndHeaders:
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = [
        ("Host", parts.netloc),
        ("User-Agent", USER_AGENT),
        ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
        ("Accept-Encoding", "gzip"),
        ("Connection", "close"),
    ]
    return StatusAndHeaders(f"GET {target} HTTP/1.1", headers, is_http_request=True)


def write_warc(
    path: str | Path,
    pages: Iterable[CrawlRecord],
    gzip: bool = True,
    info: dict[str, str] | None = None,
    layout: str = "response-first",
) -> int:
    """Write records as a WARC/1.0 file: a warcinfo, then per record a response (or revisit)
    and its request, linked by WARC-Concurrent-To. With `layout="commoncrawl"`, Common
    Crawl's order and fields instead: the request first, then the response (pointing at the
    request, with WARC-Warcinfo-ID and WARC-Identified-Payload-Type), then a `metadata`
    record of `application/warc-fields` (fetch time, detected charset) pointing at the
    response. Returns the number of WARC records."""
    if layout not in ("response-first", "commoncrawl"):
        raise ValueError(f"unknown WARC layout {layout!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    records = list(pages)
    count = 0
    with path.open("wb") as fh:
        writer = WARCWriter(fh, gzip=gzip)
        info_id = _record_id(path.name, "warcinfo")
        first = records[0].fetched_at if records else datetime(2024, 1, 1, tzinfo=timezone.utc)
        fields = {"software": "neardup.synth", "format": "WARC File Format 1.0"}
        fields.update(info or {})
        payload = "".join(f"{k}: {v}\r\n" for k, v in fields.items()).encode()
        warcinfo = writer.create_warc_record(
            "",
            "warcinfo",
            payload=BytesIO(payload),
            length=len(payload),
            warc_content_type="application/warc-fields",
            warc_headers_dict={
                "WARC-Record-ID": info_id,
                "WARC-Date": warc_date(first),
                "WARC-Filename": path.name,
            },
        )
        writer.write_record(warcinfo)
        count += 1
        cc = layout == "commoncrawl"
        for i, rec in enumerate(records):
            date = warc_date(rec.fetched_at)
            resp_id = _record_id(path.name, i, rec.url, date, rec.record_type)
            req_id = _record_id(path.name, i, rec.url, date, "request")
            common = {"WARC-Date": date, "WARC-IP-Address": rec.ip}
            cc_fields = {}  # Common Crawl's: the response points at its request
            if cc:
                common["WARC-Warcinfo-ID"] = info_id
                cc_fields["WARC-Concurrent-To"] = req_id
                if rec.content_type:
                    cc_fields["WARC-Identified-Payload-Type"] = rec.content_type.split(";")[0]
            if rec.record_type == "revisit":
                if not (rec.refers_to_url and rec.refers_to_date and rec.payload_digest):
                    raise ValueError(f"revisit of {rec.url} needs refers_to_* and payload_digest")
                http = _http_response_headers(rec, rec.refers_to_length)
                resp = writer.create_revisit_record(
                    rec.url,
                    rec.payload_digest,
                    rec.refers_to_url,
                    warc_date(rec.refers_to_date),
                    http_headers=http,
                    warc_headers_dict={"WARC-Record-ID": resp_id, **common},
                )
            elif rec.record_type == "response":
                resp = writer.create_warc_record(
                    rec.url,
                    "response",
                    payload=BytesIO(rec.body),
                    length=len(rec.body),
                    http_headers=_http_response_headers(rec, len(rec.body)),
                    warc_headers_dict={"WARC-Record-ID": resp_id, **common, **cc_fields},
                )
            else:
                raise ValueError(f"cannot write record type {rec.record_type!r}")
            req = writer.create_warc_record(
                rec.url,
                "request",
                http_headers=_http_request_headers(rec.url),
                warc_headers_dict={
                    "WARC-Record-ID": req_id,
                    **({} if cc else {"WARC-Concurrent-To": resp_id}),
                    **common,
                },
            )
            if not cc:
                writer.write_record(resp)
                writer.write_record(req)
                count += 2
                continue
            fields = f"fetchTimeMs: {100 + i % 400}\r\ncharset-detected: UTF-8\r\n".encode()
            meta = writer.create_warc_record(
                rec.url,
                "metadata",
                payload=BytesIO(fields),
                length=len(fields),
                warc_content_type="application/warc-fields",
                warc_headers_dict={
                    "WARC-Record-ID": _record_id(path.name, i, rec.url, date, "metadata"),
                    "WARC-Concurrent-To": resp_id,
                    "WARC-Date": date,
                    "WARC-Warcinfo-ID": info_id,
                },
            )
            for record in (req, resp, meta):
                writer.write_record(record)
            count += 3
    return count


def page_rows(records: Iterable[CrawlRecord], field: str = "text") -> list[dict[str, str]]:
    """Rows {url, text} (visible text) or {url, html} for the records that are pages.

    Tables hold only what a user would export as documents: no error pages, redirects,
    images or revisits.
    """
    if field not in ("text", "html"):
        raise ValueError("field must be 'text' or 'html'")
    rows = []
    for rec in records:
        if rec.is_page:
            page = rec.html()
            rows.append({"url": rec.url, field: visible_text(page) if field == "text" else page})
    return rows


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """One JSON object per line (UTF-8, keys in the given order). Returns the row count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def write_parquet(path: str | Path, rows: Sequence[dict[str, Any]]) -> int:
    """A Parquet file with one row per dict (columns from the first row's keys)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = list(rows)
    if not rows:
        raise ValueError("no rows to write")
    pq.write_table(pa.Table.from_pylist(rows), path)
    return len(rows)


def write_html_dir(directory: str | Path, pages: Iterable[CrawlRecord]) -> list[Path]:
    """Save each page as <directory>/<host>/<path>, the layout of `wget --mirror -E`.

    A path ending in "/" is saved as index.html and ".html" is added to paths without it;
    bodies are written without their content encoding, as on disk.
    """
    root = Path(directory)
    written = []
    for rec in pages:
        if not rec.is_page:
            continue
        parts = urlsplit(rec.url)
        rel = parts.path.lstrip("/")
        if not rel or rel.endswith("/"):
            rel += "index.html"
        elif not rel.endswith((".html", ".htm")):
            rel += ".html"  # as `wget --adjust-extension` saves extension-less pages
        target = root / (parts.hostname or "unknown") / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(rec.payload)
        written.append(target)
    return written
