"""Ingest's tables of a batch of records: `pages_raw`, `page_text` and `links` rows.

A batch is framed records or a block of JSONL lines (parsed here: for a table, parsing is
the work); its rows are numbered from 0 and shifted to their place by whoever writes them
(`steps/ingest_ranges.py` on the embedded engine, `executors/spark/ingest.py` on Spark).
Every record becomes a row of `pages_raw`, sketchable or skipped with a reason: nothing is
dropped silently. When a page's sketch needs nothing but its text (`sketches_in_ingest`),
the batch's texts are sketched here too.

Parquet writing is chosen by measurement (web-like pages, pyarrow's defaults against
these): no dictionary for the columns whose values are all distinct (text, URLs, ids), where
pyarrow attempts one and abandons it after a page: on 113 k pages' text it read back 2.4
times slower (writing 1.06 against 0.81 s there, the same over a million pages), for the
same size. zstd stays for the text (lz4 wrote the million 16 % faster, a 47 % larger file).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.ingest import extract_page
from neardup.ingest.commoncrawl import WAT_REASON
from neardup.ingest.eligibility import Eligibility, page_reason, rule_of
from neardup.ingest.record import ExtractedPage, RawRecord
from neardup.ingest.tables import LineBlock, LineSpan, block_records
from neardup.ingest.urls import identity_and_host
from neardup.kernels import SketchBatch, sketch_arrow
from neardup.pipeline.steps.features import FEATURE_METHODS
from neardup.pipeline.steps.sketch import sketches_in_ingest

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
            pages=add_to_column(self.pages, first_doc_id),
            texts=add_to_column(self.texts, first_doc_id),
            links=add_to_column(self.links, first_doc_id),
            with_text=self.with_text,
            skipped=self.skipped,
            formats=self.formats,
            sketch=self.sketch,
        )


def add_to_column(batch: pa.RecordBatch, delta: int) -> pa.RecordBatch:
    """`batch` with `delta` added to its first column (the document id)."""
    if not batch.num_rows:
        return batch
    # numpy's add, not pyarrow.compute's: importing that module costs a small scan 0.05 s
    column = pa.array(batch.column(0).to_numpy() + np.int64(delta), pa.int64())
    return batch.set_column(0, batch.schema.field(0), column)


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
    """`page_text` with no rows, in place of the one the stages read (`--no-text`): a
    folder of parts becomes a folder of one empty part (one the Spark engine wrote without
    rows is left as it is)."""
    path = staging / "page_text.parquet"
    if path.is_file() and pq.ParquetFile(path).metadata.num_rows:
        tmp = path.with_name(f".{path.name}.empty")
        pq.write_table(PAGE_TEXT_SCHEMA.empty_table(), tmp)
        tmp.replace(path)
    elif path.is_dir() and any(pq.read_metadata(p).num_rows for p in path.glob("*.parquet")):
        for part in sorted(path.glob("*.parquet"))[1:]:
            part.unlink()
        first = next(path.glob("*.parquet"))
        tmp = first.with_name(f".{first.name}.empty")
        pq.write_table(PAGE_TEXT_SCHEMA.empty_table(), tmp)
        tmp.replace(first)


def batch_task(
    unit: list[RawRecord] | LineBlock,
    settings: Settings,
    rule: Eligibility,
    sketch: bool,
    texts: bool,
) -> _BatchTables:
    """The tables of one batch (`_units`), ids from 0, sketched with `sketch`, its texts
    kept with `texts` (else only their ids, under which the sketches are filed)."""
    cap, links = settings.max_payload_bytes, settings.extract_links
    return _extract_task((unit, cap, links, rule, settings if sketch else None, texts))


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
