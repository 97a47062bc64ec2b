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

from neardup.engine import LocalEngine
from neardup.ingest import extract_page, iter_records
from neardup.ingest.record import ExtractedPage, RawRecord
from neardup.ingest.urls import host_of
from neardup.settings import Settings

PAGES_RAW_SCHEMA = pa.schema(
    [
        ("doc_id", pa.int64()),
        ("source", pa.string()),
        ("offset", pa.int64()),
        ("length", pa.int64()),
        ("record_type", pa.string()),
        ("url", pa.string()),
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


def _extract_batch(task: tuple[list[RawRecord], int, bool]) -> list[ExtractedPage]:
    records, max_bytes, links = task
    return [extract_page(rec, max_payload_bytes=max_bytes, links=links) for rec in records]


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


class _TableSink:
    """Buffers rows and streams them into one Parquet file."""

    def __init__(self, path: Path, schema: pa.Schema, rows_per_flush: int) -> None:
        self.schema = schema
        self.rows_per_flush = rows_per_flush
        self.writer = pq.ParquetWriter(path, schema, compression="zstd")
        self.columns: dict[str, list] = {name: [] for name in schema.names}
        self.pending = 0

    def add(self, **row: object) -> None:
        for name in self.schema.names:
            self.columns[name].append(row.get(name))
        self.pending += 1
        if self.pending >= self.rows_per_flush:
            self.flush()

    def extend(self, **columns: list) -> None:
        """Append many rows at once, given column by column."""
        n = 0
        for name in self.schema.names:
            values = columns[name]
            self.columns[name].extend(values)
            n = len(values)
        self.pending += n
        if self.pending >= self.rows_per_flush:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.writer.write_table(pa.table(self.columns, schema=self.schema))
            self.columns = {name: [] for name in self.schema.names}
            self.pending = 0

    def close(self) -> None:
        self.flush()
        self.writer.close()


def run_ingest(
    inputs: list[str],
    staging: Path,
    settings: Settings,
    engine: LocalEngine,
    base_url: str | None = None,
    on_record: Callable[[int], None] | None = None,
) -> IngestResult:
    """Read every input record and write the three ingest tables into `staging`."""
    result = IngestResult()
    pages = _TableSink(staging / "pages_raw.parquet", PAGES_RAW_SCHEMA, 8192)
    texts = _TableSink(staging / "page_text.parquet", PAGE_TEXT_SCHEMA, TEXT_ROW_GROUP)
    links = _TableSink(staging / "links.parquet", LINKS_SCHEMA, 65536)
    record_batches = _batches(iter_records(inputs, base_url=base_url), settings)
    # Batches handed to the engine, oldest first; results come back in the same order.
    in_flight: deque[list[RawRecord]] = deque()

    def tasks() -> Iterator[tuple[list[RawRecord], int, bool]]:
        for batch in record_batches:
            in_flight.append(batch)
            yield batch, settings.max_payload_bytes, settings.extract_links

    try:
        for extracted in engine.map(_extract_batch, tasks()):
            batch = in_flight.popleft()
            for rec, page in zip(batch, extracted, strict=True):
                doc_id = result.records
                result.records += 1
                reason = page.skipped_reason
                if reason is None and not (page.text and page.text.strip()):
                    reason = "empty text"
                if reason is None:
                    result.with_text += 1
                    result.formats[page.format or "unknown"] += 1
                    texts.add(doc_id=doc_id, text=page.text)
                    if page.links:
                        links.extend(src_doc=[doc_id] * len(page.links), dst_url=page.links)
                else:
                    result.skipped[reason.split(":")[0]] += 1
                pages.add(
                    doc_id=doc_id,
                    source=rec.source,
                    offset=rec.offset,
                    length=rec.length,
                    record_type=rec.record_type,
                    url=rec.url,
                    host=host_of(rec.url) if rec.url else None,
                    status=rec.status,
                    content_type=rec.content_type,
                    fetched_at=rec.fetched_at,
                    payload_digest=rec.payload_digest,
                    redirect_to=rec.redirect_to,
                    ip=rec.ip,
                    record_id=rec.record_id,
                    concurrent_to=rec.concurrent_to,
                    format=page.format if reason is None else None,
                    title=page.title,
                    payload_bytes=page.payload_bytes,
                    n_links=len(page.links),
                    exact_fp=page.exact_fp,
                    skipped_reason=reason,
                )
            if on_record:
                on_record(len(batch))
    finally:
        pages.close()
        texts.close()
        links.close()
    return result
