"""Ingest: input records -> `pages_raw`, `page_text` and `links` tables.

Readers frame records sequentially in this process, so document ids follow input order;
extraction (HTML/PDF to text and links) runs in worker batches. Every record becomes a row
of `pages_raw`, sketchable or skipped with a reason: nothing is dropped silently.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.ingest import extract_page, iter_records
from neardup.ingest.commoncrawl import WAT_REASON
from neardup.ingest.record import RawRecord
from neardup.ingest.urls import host_of, normalize_url
from neardup.pipeline.executors.local import LocalEngine

PAGES_RAW_SCHEMA = pa.schema(
    [
        ("doc_id", pa.int64()),
        ("source", pa.string()),
        ("offset", pa.int64()),
        ("length", pa.int64()),
        ("record_type", pa.string()),
        ("url", pa.string()),
        ("url_key", pa.string()),  # the URL's identity (`normalize_url`), for link targets
        ("host", pa.string()),
        ("status", pa.int32()),
        ("content_type", pa.string()),
        ("fetched_at", pa.string()),
        ("payload_digest", pa.string()),
        ("redirect_to", pa.string()),
        ("ip", pa.string()),
        ("record_id", pa.string()),
        ("concurrent_to", pa.string()),
        ("format", pa.string()),
        ("title", pa.string()),
        ("payload_bytes", pa.int64()),
        ("n_links", pa.int32()),
        ("exact_fp", pa.int64()),
        ("skipped_reason", pa.string()),
    ]
)
PAGE_TEXT_SCHEMA = pa.schema([("doc_id", pa.int64()), ("text", pa.string())])
LINKS_SCHEMA = pa.schema([("src_doc", pa.int64()), ("dst_url", pa.string())])

BATCH_RECORDS = 128
BATCH_BYTES = 16 << 20
TEXT_ROW_GROUP = 2048


@dataclass
class IngestResult:
    records: int = 0
    with_text: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    formats: Counter[str] = field(default_factory=Counter)


def _status_skip(rec: RawRecord, settings: Settings) -> str | None:
    """Pages that are not successful fetches carry no content worth comparing."""
    if rec.skipped_reason or rec.status is None or 200 <= rec.status < 300:
        return None
    if 300 <= rec.status < 400:
        return "redirect (HTTP 3xx)"
    if settings.include_error_pages:
        return None
    return f"HTTP status {rec.status}"


@dataclass
class _BatchTables:
    """One batch of records as ready-made Arrow tables, built in the worker so that the main
    process only frames records and writes batches (it is the bottleneck with many workers)."""

    pages: pa.RecordBatch
    texts: pa.RecordBatch
    links: pa.RecordBatch
    with_text: int
    skipped: Counter[str]
    formats: Counter[str]


def _extract_batch(task: tuple[list[RawRecord], int, int, bool]) -> _BatchTables:
    records, first_doc_id, max_bytes, want_links = task
    rows: dict[str, list] = {name: [] for name in PAGES_RAW_SCHEMA.names}
    text_ids: list[int] = []
    texts: list[str] = []
    link_src: list[int] = []
    link_dst: list[str] = []
    skipped: Counter[str] = Counter()
    formats: Counter[str] = Counter()
    for i, rec in enumerate(records):
        doc_id = first_doc_id + i
        page = extract_page(rec, max_payload_bytes=max_bytes, links=want_links)
        reason = page.skipped_reason
        if reason is None and not (page.text and page.text.strip()):
            reason = "empty text"
        if reason is None:
            formats[page.format or "unknown"] += 1
            text_ids.append(doc_id)
            texts.append(page.text or "")
        else:
            skipped[reason.split(":")[0]] += 1
        if reason is None or reason == WAT_REASON:
            # A WAT record's links belong to the page of its URL; the store credits them.
            link_src.extend([doc_id] * len(page.links))
            link_dst.extend(page.links)
        values = {
            "doc_id": doc_id,
            "url_key": normalize_url(rec.url) if rec.url else None,
            "host": host_of(rec.url) if rec.url else None,
            "format": page.format if reason is None else None,
            "title": page.title,
            "payload_bytes": page.payload_bytes,
            "n_links": len(page.links),
            "exact_fp": page.exact_fp,
            "skipped_reason": reason,
        }
        for name, column in rows.items():
            column.append(values[name] if name in values else getattr(rec, name))
    return _BatchTables(
        pages=pa.RecordBatch.from_pydict(rows, schema=PAGES_RAW_SCHEMA),
        texts=pa.RecordBatch.from_pydict(
            {"doc_id": text_ids, "text": texts}, schema=PAGE_TEXT_SCHEMA
        ),
        links=pa.RecordBatch.from_pydict(
            {"src_doc": link_src, "dst_url": link_dst}, schema=LINKS_SCHEMA
        ),
        with_text=len(text_ids),
        skipped=skipped,
        formats=formats,
    )


def _batches(records: Iterable[RawRecord], settings: Settings) -> Iterator[list[RawRecord]]:
    batch: list[RawRecord] = []
    size = 0
    for rec in records:
        reason = _status_skip(rec, settings)
        if reason:
            rec.skipped_reason = reason
        if rec.skipped_reason:
            rec.payload = None  # nothing to parse: do not ship the bytes to a worker
        batch.append(rec)
        size += len(rec.payload or b"") + len(rec.text or "")
        if len(batch) >= BATCH_RECORDS or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


class _Tally:
    """A running count of the input bytes the readers report (`iter_records`'s on_bytes)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, n: int) -> None:
        self.count += n


class _TableSink:
    """Streams record batches into one Parquet file, in row groups of about `rows` rows
    (the sketch stage parallelises over row groups)."""

    def __init__(self, path: Path, schema: pa.Schema, rows: int) -> None:
        self.writer = pq.ParquetWriter(path, schema, compression="zstd")
        self.rows = rows
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self.pending.append(batch)
            self.pending_rows += batch.num_rows
        if self.pending_rows >= self.rows:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.writer.write_table(pa.Table.from_batches(self.pending), row_group_size=1 << 30)
            self.pending, self.pending_rows = [], 0

    def close(self) -> None:
        self.flush()
        self.writer.close()


def run_ingest(
    inputs: list[str],
    staging: Path,
    settings: Settings,
    engine: LocalEngine,
    base_url: str | None = None,
    advance: Callable[[int], None] | None = None,
) -> IngestResult:
    """Read every input record and write the three ingest tables into `staging`.

    `advance(n)` hears progress in bytes of input (`input_bytes(inputs)` in all): a batch's
    bytes count once its pages are extracted and written, not when they are read, so the
    bar follows the slower of the two."""
    result = IngestResult()
    pages = _TableSink(staging / "pages_raw.parquet", PAGES_RAW_SCHEMA, 8192)
    texts = _TableSink(staging / "page_text.parquet", PAGE_TEXT_SCHEMA, TEXT_ROW_GROUP)
    links = _TableSink(staging / "links.parquet", LINKS_SCHEMA, 65536)
    read = _Tally()  # input bytes the readers have consumed so far
    records = iter_records(inputs, base_url, settings.max_payload_bytes, on_bytes=read)
    record_batches = _batches(records, settings)
    read_at: deque[int] = deque()  # bytes read when each batch in flight was framed

    def tasks() -> Iterator[tuple[list[RawRecord], int, int, bool]]:
        first = 0
        for batch in record_batches:
            read_at.append(read.count)
            yield batch, first, settings.max_payload_bytes, settings.extract_links
            first += len(batch)

    shown = 0  # bytes passed to `advance`
    try:
        for tables in engine.map(_extract_batch, tasks()):
            pages.write(tables.pages)
            texts.write(tables.texts)
            links.write(tables.links)
            result.records += tables.pages.num_rows
            result.with_text += tables.with_text
            result.skipped.update(tables.skipped)
            result.formats.update(tables.formats)
            done = read_at.popleft()
            if advance and done > shown:
                advance(done - shown)
                shown = done
        if advance and read.count > shown:  # the ends of inputs read after the last batch
            advance(read.count - shown)
    finally:
        pages.close()
        texts.close()
        links.close()
    return result
