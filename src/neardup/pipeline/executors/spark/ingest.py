"""Ingest on Spark: one task per input file, the embedded engine's readers and extractors.

Document ids must be the embedded engine's (input order, then record order), so a task
numbers its records from 0 and the ids are shifted afterwards by the record counts of the
inputs before it, which are a few numbers to collect. A local path is opened by the task
itself (a shared file system on a cluster); a URI (`s3a://`, `hdfs://`, `file://`) is read by
Spark's `binaryFile` source, and its bytes are spilled to a temporary file so the same
readers apply.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

import numpy as np
import pyarrow as pa

from neardup.config import Settings
from neardup.ingest import iter_records
from neardup.pipeline.steps.ingest import PAGES_RAW_SCHEMA, _batches, _extract_batch

# One row per record: the `pages_raw` columns with task-local ids, plus the input's index,
# the extracted text (null when skipped) and the links in page order.
INGEST_SCHEMA = (
    PAGES_RAW_SCHEMA.append(pa.field("input_idx", pa.int32()))
    .append(pa.field("text", pa.string()))
    .append(pa.field("links", pa.list_(pa.string())))
)
INPUTS_SCHEMA = "input_idx int, path string, content binary"


def _records_of(
    path: str, content: bytes | None, base_url: str | None, max_payload_bytes: int
) -> Iterator[Any]:
    """The records of one input, from its path or from its bytes."""
    if content is None:
        yield from iter_records([path], base_url, max_payload_bytes)
        return
    name = PurePosixPath(path).name  # keeps the suffix the readers detect formats by
    with tempfile.TemporaryDirectory(prefix="neardup-spark-") as tmp:
        local = os.path.join(tmp, name)
        with open(local, "wb") as handle:
            handle.write(content)
        for rec in iter_records([local], base_url, max_payload_bytes):
            rec.source = path
            yield rec


def _combined(tables: Any, input_idx: int) -> pa.RecordBatch:
    """One batch of `_extract_batch` output as rows of INGEST_SCHEMA."""
    pages = tables.pages
    n = pages.num_rows
    first = pages.column(0)[0].as_py() if n else 0
    text_pos = np.asarray(tables.texts.column(0)) - first
    texts: list[str | None] = [None] * n
    for pos, text in zip(text_pos.tolist(), tables.texts.column(1).to_pylist(), strict=True):
        texts[pos] = text
    src = np.asarray(tables.links.column(0)) - first
    offsets = np.searchsorted(src, np.arange(n + 1)).astype(np.int32)
    links = pa.ListArray.from_arrays(pa.array(offsets), tables.links.column(1))
    columns = [
        *pages.columns,
        pa.array(np.full(n, input_idx, dtype=np.int32)),
        pa.array(texts, pa.string()),
        links,
    ]
    return pa.RecordBatch.from_arrays(columns, schema=INGEST_SCHEMA)


def ingest_partition(
    batches: Iterator[pa.RecordBatch], settings: Settings, base_url: str | None
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: every record of every input row in the partition."""
    for batch in batches:
        for row in batch.to_pylist():
            records = _records_of(row["path"], row["content"], base_url, settings.max_payload_bytes)
            first = 0
            for group in _batches(records, settings):
                tables = _extract_batch(
                    (group, first, settings.max_payload_bytes, settings.extract_links)
                )
                first += len(group)
                yield _combined(tables, row["input_idx"])


def inputs_frame(spark: Any, inputs: list[str]) -> Any:
    """(input_idx, path, content) rows, one partition per local input; URIs and their globs
    expand through Spark's file listing (sorted), local inputs through `expand_inputs`."""
    from neardup.ingest.readers import expand_inputs

    rows: list[tuple[str, bool]] = []  # (path, is_uri) in input order
    for path in inputs:
        if "://" in path:
            listed = spark.read.format("binaryFile").load(path).select("path").collect()
            rows.extend((r["path"], True) for r in sorted(listed, key=lambda r: r["path"]))
        else:
            rows.extend((p, False) for p, _ in expand_inputs([path]))
    if not rows:
        raise ValueError("no input files found")
    local = [(i, p, None) for i, (p, uri) in enumerate(rows) if not uri]
    frames = []
    if local:
        rdd = spark.sparkContext.parallelize(local, len(local))
        frames.append(spark.createDataFrame(rdd, INPUTS_SCHEMA))
    uris = {p: i for i, (p, uri) in enumerate(rows) if uri}
    if uris:
        from pyspark.sql import functions as F

        index = spark.createDataFrame(list(uris.items()), "path string, input_idx int")
        content = spark.read.format("binaryFile").load(sorted({p for p in inputs if "://" in p}))
        frames.append(
            content.join(F.broadcast(index), "path").select("input_idx", "path", "content")
        )
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    return frame
