"""The two records that cross the ingest boundary.

Readers run in the main process and only frame records (cheap, sequential, so document ids
follow input order). Extraction (HTML/PDF to text and links) is the expensive part and runs
in worker processes, so a `RawRecord` must stay picklable and self-contained.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class RawRecord:
    """One input record as framed by a reader, before any parsing of its payload.

    `skipped_reason` is set by the reader when the record cannot become a page at all
    (a request or warcinfo record, a revisit, a truncated or unreadable record); such records
    still become rows of `pages` so that every input record is accounted for.
    """

    source: str  # input file path
    offset: int  # byte offset of the record in `source` (row number for tables)
    record_type: str  # response, resource, revisit, request, metadata, warcinfo, arc, file, row
    length: int | None = None  # bytes of the record in `source`, when known
    url: str | None = None
    status: int | None = None  # HTTP status, when the record carries an HTTP response
    content_type: str | None = None  # media type without parameters, lower case
    charset: str | None = None  # declared charset (HTTP header), if any
    fetched_at: str | None = None  # ISO 8601 UTC
    payload_digest: str | None = None  # WARC-Payload-Digest as written by the crawler
    redirect_to: str | None = None  # absolute URL from the Location header of a 3xx
    ip: str | None = None
    record_id: str | None = None  # WARC-Record-ID
    concurrent_to: str | None = None  # WARC-Concurrent-To
    refers_to: str | None = None  # WARC-Refers-To(-Target-URI) of a revisit
    payload: bytes | None = None  # HTTP body with transfer/content encodings removed
    text: str | None = None  # given text (tables with a `text` column)
    skipped_reason: str | None = None


@dataclass(slots=True)
class ExtractedPage:
    """What extraction makes of a `RawRecord`: text, title and outgoing links, or a skip reason."""

    format: str | None = None  # html, pdf, text (plain text payload), given (table text)
    title: str | None = None
    text: str | None = None
    links: list[str] = field(default_factory=list)  # absolute URLs, in document order
    exact_fp: int | None = None  # 64-bit hash of the raw payload (or given text), signed int64
    payload_bytes: int = 0
    skipped_reason: str | None = None
