"""Ingest on Spark: one task per range of an input (`spark/ingest_ranges.py`, the embedded
engine's splitting rule), the embedded engine's readers, extractors and sketch, each task
writing its range's tables itself.

Document ids must be the embedded engine's (input order, then record order), so a task
numbers its records from 0 and the ids are shifted afterwards by the record counts of the
ranges before it, which are a few numbers to collect; a JSONL range numbers its lines from 0
too, and its `record_offset`s are shifted by the lines of the earlier ranges of its file
where the records are read (`RANGES_SCHEMA`'s `lines_before`). A local path is opened by the
task itself, which seeks to its range (a shared file system on a cluster); a URI (`s3a://`,
`hdfs://`, `file://`) is read whole by Spark's `binaryFile` source, and its bytes are
spilled to a temporary file so the same readers apply. A JSONL file is read in blocks of
lines, parsed in the task, as the embedded engine's workers parse them.

Why a task writes its own Parquet files (`pyarrow`, one file per range and table) instead of
handing rows to Spark's writer: the page text is the bulk of every table, and every hop it
takes costs; through Spark it went Python -> Arrow -> JVM rows -> Parquet, and then had to be
sorted globally (a shuffle of all the text) to be written in document order for the run. A
file per range already holds its rows in record order, so the run's `page_text`,
`sketches` and `pages` are written from them range by range (`spark/run_parts.py`), ids
shifted, part files named in range order: document order without a sort. The sketch is
computed here too, while the text is in memory, instead of reading all the text again in a
separate job; the stage order stays the shared one (ingest, then sketch), Spark simply runs
the two in one task.

A task writes each file under a temporary name and renames it when the range is done, so a
retried or speculative task leaves one whole file per range.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.ingest.eligibility import rule_of
from neardup.ingest.input_ranges import InputRange, iter_range_units
from neardup.ingest.readers import iter_input_units, iter_record_units
from neardup.ingest.tables import LineBlock
from neardup.kernels import SIGNATURE_DTYPE, sketch_arrow
from neardup.pipeline.executors.spark.ingest_ranges import RANGE_IDX, RangeCount
from neardup.pipeline.executors.spark.near_files import NearRows
from neardup.pipeline.steps.ingest import PAGES_RAW_SCHEMA, _BatchTables, _extract_task, _units
from neardup.pipeline.steps.near_pairs import page_keys

# The work folders of the per-range files; each file carries its range's index.
RECORDS = "ingest_records"  # pages_raw rows (task-local ids and line numbers)
TEXTS = "ingest_texts"  # the text rows with their sketch and page key
LINKS = "ingest_links"  # one row per link, in page order
INGEST_TABLES = (RECORDS, TEXTS, LINKS)
RANGE_FILE = "range-{:05d}.parquet"

_RANGE_IDX = pa.field(RANGE_IDX, pa.int32())
RECORDS_SCHEMA = PAGES_RAW_SCHEMA.append(_RANGE_IDX)
SKETCH_FIELDS = [
    pa.field("n_tokens", pa.int32()),
    pa.field("n_shingles", pa.int32()),
    pa.field("lexical_fp", pa.int64()),
    pa.field("shingle_fp", pa.int64()),
    pa.field("minhash", pa.list_(pa.int32())),  # the uint32 values' bits, for Spark's types
    pa.field("supers", pa.list_(pa.int64())),
]
TEXTS_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.int64()),
        pa.field("text", pa.string()),
        *SKETCH_FIELDS,
        pa.field("order_key", pa.int64()),  # the page key (`near_pairs.page_keys`)
        _RANGE_IDX,
    ]
)
LINKS_SCHEMA = pa.schema(
    [
        pa.field("src_doc", pa.int64()),
        pa.field("pos", pa.int32()),
        pa.field("dst_url", pa.string()),
        _RANGE_IDX,
    ]
)
# Per range: its records, its lines (a JSONL range), its pages with text by format (a JSON
# object).
SUMMARY_SCHEMA = pa.schema(
    [
        _RANGE_IDX,
        pa.field("records", pa.int64()),
        pa.field("lines", pa.int64()),
        pa.field("formats", pa.string()),
    ]
)
# One row per range for the per-range tasks after the ingest (`ingest_ranges.RangeShift`):
# its document ids are [shift, end), its line numbers move by `lines_before`.
RANGES_SCHEMA = pa.schema(
    [
        _RANGE_IDX,
        pa.field("shift", pa.int64()),
        pa.field("end", pa.int64()),
        pa.field("lines_before", pa.int64()),
    ]
)

# Rows buffered before a row group is written (and, for texts, sketched in one call): large
# enough that a kernel call or a row group costs nothing per row, small enough that a Spark
# read of the file splits into several tasks.
TEXT_ROWS = 8192
RECORD_ROWS = 65536
COMPRESSION = "zstd"  # measured against snappy and lz4 on web text: as fast, a third smaller
# The work file of the texts is read once, by `run_parts`, and removed with the work
# folder: its text is stored plain (zstd cost 0.21 CPU-s per 85 MB of web text, plain 0.03).
# No dictionary for text, sketches or keys (all distinct values): the attempt, abandoned
# after a page, made the column 5x slower to read (0.43 against 0.08 s for the same 85 MB).
WORK_TEXT_OPTIONS: dict[str, Any] = {
    "compression": {"text": "none"}
    | {f.name: COMPRESSION for f in SKETCH_FIELDS}
    | {"doc_id": COMPRESSION, "order_key": COMPRESSION, RANGE_IDX: COMPRESSION},
    "use_dictionary": [RANGE_IDX],
}


def _records_of(
    rng: InputRange,
    content: bytes | None,
    base_url: str | None,
    max_payload_bytes: int,
    on_lines: Callable[[int], None],
) -> Iterator[Any]:
    """The record units of one range (records, or blocks of JSONL lines), read from its
    file by the splitting rule's reader, or from its bytes (a URI's whole file)."""
    if content is None:

        def whole(path: str, kind: str) -> Iterator[Any]:
            return iter_input_units(path, kind, base_url, max_payload_bytes)

        yield from iter_range_units(rng, whole, max_payload_bytes, on_lines)
        return
    path = rng.path
    name = PurePosixPath(path).name  # keeps the suffix the readers detect formats by
    with tempfile.TemporaryDirectory(prefix="neardup-spark-") as tmp:
        local = os.path.join(tmp, name)
        with open(local, "wb") as handle:
            handle.write(content)
        for unit in iter_record_units([local], base_url, max_payload_bytes):
            if isinstance(unit, LineBlock):  # its records take their source from it
                yield dataclasses.replace(unit, source=path, offset=None)  # not in `path`
            else:
                unit.source = path
                yield unit


@contextlib.contextmanager
def _committed(files: Sequence[_TableFile]) -> Iterator[None]:
    """Commit every file of `files` when the block ends, or abandon them all when it fails:
    a range's files are whole or absent."""
    try:
        yield
    except BaseException:
        for table in files:
            table.abandon()
        raise
    for table in files:
        table.commit()


class _TableFile:
    """One per-range Parquet file, written by row groups under a temporary name and renamed
    into place by `commit`."""

    def __init__(
        self,
        folder: Path,
        range_idx: int,
        schema: pa.Schema,
        rows: int,
        name: str = "",
        **options: Any,
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / (name or RANGE_FILE.format(range_idx))
        self.tmp = folder / f".{self.path.name}.{uuid.uuid4().hex}.tmp"
        self.schema = schema
        self.rows = rows
        self.range_idx = range_idx
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        options.setdefault("compression", COMPRESSION)
        self.writer = pq.ParquetWriter(self.tmp, schema, **options)

    def add(self, batch: pa.RecordBatch) -> bool:
        """Buffer `batch` (without the range index); whether a row group is due."""
        if batch.num_rows:
            self.pending.append(batch)
            self.pending_rows += batch.num_rows
        return self.pending_rows >= self.rows

    def take(self) -> pa.Table | None:
        """The buffered rows as one table, the buffer emptied."""
        if not self.pending:
            return None
        table = pa.Table.from_batches(self.pending)
        self.pending, self.pending_rows = [], 0
        return table

    def write(self, table: pa.Table) -> None:
        """Write `table` with the range's index as its last column."""
        idx = pa.array(np.full(table.num_rows, self.range_idx, dtype=np.int32))
        self.writer.write_table(table.append_column(_RANGE_IDX, idx), row_group_size=self.rows)

    def write_rows(self, columns: list[Any]) -> None:
        """Write one row group of `columns`, the file's whole schema."""
        self.writer.write_table(pa.Table.from_arrays(columns, schema=self.schema))

    def commit(self) -> None:
        self.writer.close()
        os.replace(self.tmp, self.path)

    def abandon(self) -> None:
        self.writer.close()
        self.tmp.unlink(missing_ok=True)


def _lists(matrix: np.ndarray) -> pa.ListArray:
    """An N x W matrix as an Arrow list column of N lists of W values."""
    n, width = matrix.shape
    offsets = pa.array(np.arange(0, n * width + 1, width, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(np.ascontiguousarray(matrix).reshape(-1)))


def sketch_rows(texts: pa.Table, urls: list[str | None], settings: Settings) -> pa.Table:
    """(doc_id, text) rows with their sketch (`sketch_arrow`, as the embedded sketch stage
    computes it) and page key (`page_keys`, as the embedded near stage computes it)."""
    sketch = sketch_arrow(texts.column("text"), settings)
    minhash = np.ascontiguousarray(sketch.minhash, dtype=SIGNATURE_DTYPE).view(np.int32)
    shingle_fp = np.asarray(sketch.shingle_fp, dtype=np.int64)
    columns = [
        texts.column("doc_id"),
        texts.column("text"),
        pa.array(sketch.n_tokens, pa.int32()),
        pa.array(sketch.n_shingles, pa.int32()),
        pa.array(sketch.lexical_fp, pa.int64()),
        pa.array(shingle_fp, pa.int64()),
        _lists(minhash),
        _lists(np.asarray(sketch.supershingles, dtype=np.int64)),
        pa.array(page_keys(urls, shingle_fp), pa.int64()),
    ]
    return pa.Table.from_arrays(columns, schema=TEXTS_SCHEMA.remove(len(TEXTS_SCHEMA) - 1))


def _link_rows(links: pa.RecordBatch) -> pa.RecordBatch:
    """(src_doc, dst_url) rows in page order -> (src_doc, pos, dst_url), `pos` the link's
    place among its page's links."""
    src = np.asarray(links.column(0), dtype=np.int64)
    n = src.size
    starts = np.ones(n, dtype=bool)
    starts[1:] = src[1:] != src[:-1]
    first = np.maximum.accumulate(np.where(starts, np.arange(n), 0)) if n else src
    pos = (np.arange(n) - first).astype(np.int32)
    return pa.RecordBatch.from_arrays(
        [links.column(0), pa.array(pos), links.column(1)], names=["src_doc", "pos", "dst_url"]
    )


def ingest_range(
    range_idx: int,
    rng: InputRange,
    content: bytes | None,
    settings: Settings,
    base_url: str | None,
    work: Path,
) -> tuple[RangeCount, Counter[str]]:
    """Read, extract and sketch one range, writing its three files into `work`, and its
    signatures, bucket keys and class rows for the near stage (`spark/near_files.py`); its
    count (records, lines) and its pages with text by format."""
    records = _TableFile(work / RECORDS, range_idx, RECORDS_SCHEMA, RECORD_ROWS)
    texts = _TableFile(work / TEXTS, range_idx, TEXTS_SCHEMA, TEXT_ROWS, **WORK_TEXT_OPTIONS)
    links = _TableFile(work / LINKS, range_idx, LINKS_SCHEMA, RECORD_ROWS)
    files = (records, texts, links)
    urls: list[str | None] = []  # the URL of each buffered text row
    rule = rule_of(settings)
    first = 0
    lines: list[int] = []  # told by the reader of a JSONL range, once it is read
    formats: Counter[str] = Counter()
    near = NearRows(settings)  # the range's signatures, keys and class rows

    def flush_texts() -> None:
        table = texts.take()
        if table is not None:
            sketched = sketch_rows(table, urls, settings)
            near.add(sketched)
            if not settings.keep_text:  # nothing reads it (`run_parts`): none is staged
                at = sketched.schema.get_field_index("text")
                sketched = sketched.set_column(at, "text", pa.nulls(len(sketched), pa.string()))
            texts.write(sketched)
            urls.clear()

    with _committed(files):
        units = _records_of(rng, content, base_url, settings.max_payload_bytes, lines.append)
        for unit in _units(units, settings):
            batch: _BatchTables = _extract_task(
                (unit, settings.max_payload_bytes, settings.extract_links, rule, None, True)
            ).shifted(first)  # sketched below, with the row groups the work file keeps
            first += batch.pages.num_rows
            formats.update(batch.formats)
            text_pos = np.asarray(batch.texts.column(0)) - (first - batch.pages.num_rows)
            page_urls = batch.pages.column("url").to_pylist()
            urls.extend(page_urls[p] for p in text_pos.tolist())
            for table, rows in ((records, batch.pages), (links, _link_rows(batch.links))):
                if table.add(rows):
                    table.write(table.take())
            if texts.add(batch.texts):
                flush_texts()
        for table in (records, links):
            rest = table.take()
            if rest is not None:
                table.write(rest)
        flush_texts()
        near.write(work, range_idx, first)
    return RangeCount(range_idx, first, sum(lines)), formats


def ingest_partition(
    batches: Iterator[pa.RecordBatch], settings: Settings, base_url: str | None, work: str
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body over `TASKS_SCHEMA` rows: every range of the partition ingested; one
    summary row each."""
    for batch in batches:
        for row in batch.to_pylist():
            rng = InputRange(row["path"], row["kind"], row["start"], row["stop"], row["cut"])
            count, formats = ingest_range(
                row[RANGE_IDX], rng, row["content"], settings, base_url, Path(work)
            )
            summary = {
                RANGE_IDX: count.range_idx,
                "records": count.records,
                "lines": count.lines,
                "formats": json.dumps(dict(formats)),
            }
            yield pa.RecordBatch.from_pylist([summary], schema=SUMMARY_SCHEMA)
