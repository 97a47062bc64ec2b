"""Ingest: input records -> `pages_raw`, `page_text` and `links` tables.

Readers frame records sequentially in this process, so document ids follow input order;
extraction (HTML/PDF to text and links) runs in worker batches. A JSONL file is only cut into
blocks of lines here, and its lines are parsed in the workers too: for a table, parsing is
the work. Workers number a batch's rows from 0 and this process shifts them to their place.
Every record becomes a row of `pages_raw`, sketchable or skipped with a reason: nothing is
dropped silently. When a page's sketch needs nothing but its text (`sketches_in_ingest`),
the workers sketch each batch's texts too, and this process writes the sketch stage's files
as the batches come (`SketchSink`).

Parquet writing is chosen by measurement (web-like pages, pyarrow's defaults against
these): no dictionary for the columns whose values are all distinct (text, URLs, ids), where
pyarrow attempts one and abandons it after a page: on 113 k pages' text it read back 2.4
times slower (writing 1.06 against 0.81 s there, the same over a million pages), for the
same size. zstd stays for the text (lz4 wrote the million 16 % faster, a 47 % larger file).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.ingest import extract_page
from neardup.ingest.commoncrawl import WAT_REASON
from neardup.ingest.eligibility import Eligibility, page_reason, rule_of
from neardup.ingest.readers import iter_record_units
from neardup.ingest.record import ExtractedPage, RawRecord
from neardup.ingest.tables import LineBlock, LineSpan, block_records
from neardup.ingest.urls import identity_and_host
from neardup.kernels import SketchBatch, sketch_arrow
from neardup.pipeline.executors.local import LocalEngine
from neardup.pipeline.steps.features import FEATURE_METHODS
from neardup.pipeline.steps.sketch import SketchResult, SketchSink, sketches_in_ingest
from neardup.store.writer_thread import WriterThread

PAGES_RAW_SCHEMA = pa.schema(
    [
        ("doc_id", pa.int64()),
        ("source", pa.string()),
        ("record_offset", pa.int64()),
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
# `pages_raw` columns whose values repeat from row to row: the only ones given a dictionary.
REPEATING_COLUMNS = (
    "source",
    "record_type",
    "host",
    "status",
    "content_type",
    "format",
    "skipped_reason",
)


@dataclass
class IngestResult:
    records: int = 0
    with_text: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    formats: Counter[str] = field(default_factory=Counter)
    sketched: SketchResult | None = None  # when the ingest sketched the pages too


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
    sketch: SketchBatch | None = None  # of the texts, row for row, when the task sketched

    def shifted(self, first_doc_id: int) -> _BatchTables:
        """The same tables with document ids counted from `first_doc_id` instead of 0."""
        if first_doc_id == 0:
            return self
        return _BatchTables(
            pages=_add_to_column(self.pages, first_doc_id),
            texts=_add_to_column(self.texts, first_doc_id),
            links=_add_to_column(self.links, first_doc_id),
            with_text=self.with_text,
            skipped=self.skipped,
            formats=self.formats,
            sketch=self.sketch,
        )


def _add_to_column(batch: pa.RecordBatch, delta: int) -> pa.RecordBatch:
    """`batch` with `delta` added to its first column (the document id)."""
    if not batch.num_rows:
        return batch
    # numpy's add, not pyarrow.compute's: importing that module costs a small scan 0.05 s
    column = pa.array(batch.column(0).to_numpy() + np.int64(delta), pa.int64())
    return batch.set_column(0, batch.schema.field(0), column)


def _extract_batch(task: tuple[list[RawRecord], int, int, bool]) -> _BatchTables:
    """The tables of a batch of records whose document ids start at the task's second item."""
    records, first_doc_id, max_bytes, want_links = task
    return _tables_of(records, first_doc_id, max_bytes, want_links)


# A task for `_extract_task`: a batch of framed records, or a block of JSONL lines; then the
# payload cap, whether links are wanted, the eligibility rule (`ingest/eligibility.py`), the
# settings to sketch the texts with (None: the sketch stage will) and whether the texts come
# back (False: sketched here and dropped, `text_read_back`).
_Task = tuple[
    "list[RawRecord] | LineBlock | LineSpan", int, bool, Eligibility, "Settings | None", bool
]


def text_read_back(settings: Settings) -> bool:
    """Whether the scan writes `page_text` into its staging folder: when the run keeps it,
    or when a stage after the ingest reads it (the sketch pass behind the common-shingle
    filter, the feature methods, exact verification; the text is then dropped at the end,
    `drop_text`). Otherwise the workers sketch each text and send back none of it."""
    return (
        settings.keep_text
        or not sketches_in_ingest(settings)
        or settings.method in FEATURE_METHODS
        or settings.verify == "exact"
    )


def drop_text(staging: Path) -> None:
    """`page_text` with no rows, in place of the one the stages read (`--no-text`); a
    folder of parts (the Spark engine's, written without rows) is left as it is."""
    path = staging / "page_text.parquet"
    if path.is_file() and pq.ParquetFile(path).metadata.num_rows:
        tmp = path.with_name(f".{path.name}.empty")
        pq.write_table(PAGE_TEXT_SCHEMA.empty_table(), tmp)
        tmp.replace(path)


def _extract_task(task: _Task) -> _BatchTables:
    """The tables of one task, document ids counted from 0 (`_BatchTables.shifted`).

    A block's lines are parsed here, and its records get the eligibility rule `_units`
    gives framed records in the reading process."""
    unit, max_bytes, want_links, rule, sketch, texts_back = task
    if isinstance(unit, LineSpan):
        unit = unit.block()
    if isinstance(unit, LineBlock):
        records = block_records(unit, max_bytes)
        for rec in records:
            rule.mark(rec)
    else:
        records = unit
    tables = _tables_of(records, 0, max_bytes, want_links)
    if sketch is not None and tables.with_text:
        tables.sketch = sketch_arrow(tables.texts.column(1), sketch)
    if not texts_back:  # the document ids stay: the sketches are filed under them
        tables.texts = tables.texts.select([0])
    return tables


# pages_raw columns copied from the record as they are.
_RECORD_COLUMNS = (
    "source",
    "length",
    "record_type",
    "url",
    "status",
    "content_type",
    "fetched_at",
    "payload_digest",
    "redirect_to",
    "ip",
    "record_id",
    "concurrent_to",
)


def _tables_of(
    records: list[RawRecord], first_doc_id: int, max_bytes: int, want_links: bool
) -> _BatchTables:
    """Extract every record and build the batch's three tables column by column (a row at
    a time, through dicts, cost as much as a table's whole parse)."""
    pages = [extract_page(rec, max_payload_bytes=max_bytes, links=want_links) for rec in records]
    reasons = [page_reason(page) for page in pages]
    text_ids: list[int] = []
    texts: list[str] = []
    link_src: list[int] = []
    link_dst: list[str] = []
    skipped: Counter[str] = Counter()
    formats: Counter[str] = Counter()
    for doc_id, page, reason in zip(
        range(first_doc_id, first_doc_id + len(records)), pages, reasons, strict=True
    ):
        if reason is None:
            formats[page.format or "unknown"] += 1
            text_ids.append(doc_id)
            texts.append(page.text or "")
        else:
            skipped[reason.split(":")[0]] += 1
        if page.links and (reason is None or reason == WAT_REASON):
            # A WAT record's links belong to the page of its URL; the store credits them.
            link_src.extend([doc_id] * len(page.links))
            link_dst.extend(page.links)
    return _BatchTables(
        pages=_pages_batch(records, pages, reasons, first_doc_id),
        texts=pa.RecordBatch.from_arrays(
            [pa.array(text_ids, pa.int64()), pa.array(texts, pa.string())], schema=PAGE_TEXT_SCHEMA
        ),
        links=pa.RecordBatch.from_arrays(
            [pa.array(link_src, pa.int64()), pa.array(link_dst, pa.string())], schema=LINKS_SCHEMA
        ),
        with_text=len(text_ids),
        skipped=skipped,
        formats=formats,
    )


def _pages_batch(
    records: list[RawRecord], pages: list[ExtractedPage], reasons: list[str | None], first: int
) -> pa.RecordBatch:
    """The `pages_raw` rows of a batch, one column at a time."""
    urls = [identity_and_host(rec.url) if rec.url else (None, None) for rec in records]
    columns = {name: [getattr(rec, name) for rec in records] for name in _RECORD_COLUMNS}
    columns.update(
        doc_id=range(first, first + len(records)),
        record_offset=[rec.offset for rec in records],
        url_key=[identity for identity, _ in urls],
        host=[host for _, host in urls],
        format=[p.format if r is None else None for p, r in zip(pages, reasons, strict=True)],
        title=[p.title for p in pages],
        payload_bytes=[p.payload_bytes for p in pages],
        n_links=[len(p.links) for p in pages],
        exact_fp=[p.exact_fp for p in pages],
        skipped_reason=reasons,
    )
    arrays = [pa.array(columns[f.name], f.type) for f in PAGES_RAW_SCHEMA]
    return pa.RecordBatch.from_arrays(arrays, schema=PAGES_RAW_SCHEMA)


def _batches(records: Iterable[RawRecord], settings: Settings) -> Iterator[list[RawRecord]]:
    """Framed records in batches of `BATCH_RECORDS` records or `BATCH_BYTES` bytes."""
    for unit in _units(records, settings):
        if not isinstance(unit, LineBlock):
            yield unit


def _units(
    units: Iterable[RawRecord | LineBlock], settings: Settings
) -> Iterator[list[RawRecord] | LineBlock]:
    """Framed records in batches (`_batches`), and each block of JSONL lines on its own, in
    input order. A record the eligibility rule skips (`Eligibility.mark`) leaves its bytes
    here."""
    rule = rule_of(settings)
    batch: list[RawRecord] = []
    size = 0
    for unit in units:
        if isinstance(unit, LineBlock):
            if batch:
                yield batch
                batch, size = [], 0
            yield unit
            continue
        rule.mark(unit)
        batch.append(unit)
        size += len(unit.payload or b"") + len(unit.text or "")
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
    (the sketch stage parallelises over row groups), written by `thread`."""

    def __init__(
        self,
        path: Path,
        schema: pa.Schema,
        rows: int,
        thread: WriterThread,
        dictionary: tuple[str, ...] | bool = True,
    ) -> None:
        """`dictionary`: the columns to give a dictionary (True: every column)."""
        use = dictionary if isinstance(dictionary, bool) else list(dictionary)
        self.writer = pq.ParquetWriter(path, schema, compression="zstd", use_dictionary=use)
        self.rows = rows
        self.thread = thread
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
            table = pa.Table.from_batches(self.pending)
            self.thread.submit(self.writer.write_table, table, 1 << 30)
            self.pending, self.pending_rows = [], 0

    def close(self) -> None:
        """Write what is pending and close the file (both in the writer thread)."""
        self.flush()
        self.thread.submit(self.writer.close)


def run_ingest(
    inputs: list[str],
    staging: Path,
    settings: Settings,
    engine: LocalEngine,
    base_url: str | None = None,
    advance: Callable[[int], None] | None = None,
    sketch: bool = False,
) -> IngestResult:
    """Read every input record and write the three ingest tables into `staging`; with
    `sketch`, the sketch stage's files too (`SketchSink`), their arrays in the result.

    `advance(n)` hears progress in bytes of input (`input_bytes(inputs)` in all): a batch's
    bytes count once its pages are extracted and handed to the writer thread, not when they
    are read, so the bar follows the slower of the two."""
    result = IngestResult()
    thread = WriterThread()
    pages = _TableSink(
        staging / "pages_raw.parquet", PAGES_RAW_SCHEMA, 8192, thread, REPEATING_COLUMNS
    )
    texts = _TableSink(
        staging / "page_text.parquet", PAGE_TEXT_SCHEMA, TEXT_ROW_GROUP, thread, False
    )
    links = _TableSink(staging / "links.parquet", LINKS_SCHEMA, 65536, thread)
    sketches = SketchSink(staging, settings, thread.submit) if sketch else None
    sketched: SketchResult | None = None
    read = _Tally()  # input bytes the readers have consumed so far
    units = iter_record_units(inputs, base_url, settings.max_payload_bytes, on_bytes=read)
    read_at: deque[int] = deque()  # bytes read when each batch in flight was framed
    rule = rule_of(settings)
    texts_back = not sketch or text_read_back(settings)

    def tasks() -> Iterator[_Task]:
        for unit in _units(units, settings):
            read_at.append(read.count)
            yield (
                unit.span() if isinstance(unit, LineBlock) else unit,  # its place, not bytes
                settings.max_payload_bytes,
                settings.extract_links,
                rule,
                settings if sketch else None,
                texts_back,
            )

    shown = 0  # bytes passed to `advance`
    try:
        first = 0  # the document id of the next batch's first row
        for numbered in engine.map(_extract_task, tasks()):
            tables = numbered.shifted(first)
            first += tables.pages.num_rows
            pages.write(tables.pages)
            if texts_back:
                texts.write(tables.texts)
            links.write(tables.links)
            if sketches is not None and tables.sketch is not None:
                sketches.add(tables.texts.column(0).to_numpy(), tables.sketch)
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
        try:
            pages.close()
            texts.close()
            links.close()
            if sketches is not None:
                sketched = sketches.close()
        finally:
            thread.close()
    result.sketched = sketched
    return result
