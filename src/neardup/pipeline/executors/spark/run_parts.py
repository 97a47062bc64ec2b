"""The run's per-range tables on Spark: each ingest range's `pages`, `page_text` and
`sketches` part files written by one task from the ingest tasks' files.

Why per range: the three tables are in document order, and a range's documents are one
span of ids ([shift, end)), so a task per range writes its part of each, named by the
range's index (`RUN_PART`), and the part files in name order hold the rows in document
order: no global sort, and the wide rows (the page text, the records) never cross Spark's
rows or a shuffle. The pages are the embedded build's own query (`store.pages_table.pages_sql`,
in DuckDB inside the task) over the range's records (their JSONL line numbers moved by the
lines of the earlier ranges of the file), its sketch figures and its sized assignments,
which the cluster stage wrote partitioned by range (`SIZED`); so both engines write the
pages table with one SQL.

A task writes each file under a temporary name and renames it when the range is done, so a
retried or speculative task leaves one whole file per range and table.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.ingest.eligibility import enough_words_sql
from neardup.pipeline.executors.spark.ingest import (
    RANGE_FILE,
    RECORDS,
    SKETCH_FIELDS,
    TEXT_ROWS,
    TEXTS,
    _committed,
    _TableFile,
)
from neardup.pipeline.executors.spark.ingest_ranges import RANGE_IDX, RangeShift
from neardup.pipeline.steps.clusters import ASSIGN_SCHEMA
from neardup.pipeline.steps.ingest import PAGE_TEXT_SCHEMA
from neardup.pipeline.steps.sketch import SKETCHES_PARQUET, minhash_column, sketches_schema
from neardup.store.pages_table import pages_sql
from neardup.store.run import PARQUET_OPTIONS, sql_over, sql_path

RUN_PART = "part-{:05d}.parquet"  # the run's part files: name order is range order
# The sized assignments (sized_assignments.sql) of the pages whose row is not their own
# (`own_rows`), one folder per range: `range_idx=K/`.
SIZED = "sized_assignments"
SIZED_SCHEMA = ASSIGN_SCHEMA.append(pa.field("cluster_size", pa.int64()))
# What a task returns: its range, and its pages' skipped records by reason (skipped.sql).
PARTS_SCHEMA = pa.schema([pa.field(RANGE_IDX, pa.int32()), pa.field("skipped", pa.string())])


def run_schemas(num_perm: int) -> tuple[pa.Schema, pa.Schema]:
    """The schemas of the run's `page_text` and `sketches` part files: the embedded
    engine's (`steps/ingest.py`, `steps/sketch.py`: the min-hash values widened to int64,
    a fixed-size list)."""
    return PAGE_TEXT_SCHEMA, sketches_schema(num_perm)


def write_text_parts(
    range_idx: int, shift: int, work: Path, staging: Path, num_perm: int, keep_text: bool = True
) -> None:
    """The run's `page_text` and `sketches` rows of one range, ids shifted by `shift`, as
    that range's part files, streamed row group by row group (a range without text gets
    empty files: a run's table is never a folder without a file; so does every range when
    the run keeps no text, `Settings.keep_text`)."""
    source = pq.ParquetFile(work / TEXTS / RANGE_FILE.format(range_idx))
    name = RUN_PART.format(range_idx)
    outputs = []
    options = ({"use_dictionary": False}, SKETCHES_PARQUET)
    for table, schema, how in zip(
        ("page_text", "sketches"), run_schemas(num_perm), options, strict=True
    ):
        folder = staging / f"{table}.parquet"
        folder.mkdir(parents=True, exist_ok=True)
        outputs.append(_TableFile(folder, range_idx, schema, TEXT_ROWS, name=name, **how))
    text_out, sketch_out = outputs
    # without the text kept, its column is not read back either
    columns = None if keep_text else [n for n in source.schema_arrow.names if n != "text"]
    with _committed(outputs):
        for batch in source.iter_batches(batch_size=TEXT_ROWS, columns=columns):
            doc_id = pa.array(np.asarray(batch.column("doc_id"), dtype=np.int64) + shift)
            values = np.asarray(batch.column("minhash").values, dtype=np.int32)
            minhash = minhash_column(values.view(np.uint32), num_perm)
            if keep_text:
                text_out.write_rows([doc_id, batch.column("text")])
            sketch_out.write_rows(
                [doc_id, *(batch.column(f.name) for f in SKETCH_FIELDS[:4]), minhash]
            )


def own_rows(min_tokens: int) -> str:
    """The sized assignment rows of a range's task (DuckDB): the rows the cluster stage
    wrote (`sized`), and for every other eligible page (the scan's rule,
    `enough_words_sql`) its own row: alone in its cluster, component, identical group and
    class, resemblance 1, as the embedded clustering writes it."""
    return f"""
        SELECT * FROM sized
        UNION ALL
        SELECT doc_id, doc_id, doc_id, doc_id, doc_id, CAST(1.0 AS FLOAT), CAST(1 AS BIGINT)
        FROM sketches
        WHERE {enough_words_sql(min_tokens)} AND doc_id NOT IN (SELECT doc_id FROM sized)
    """


def write_pages_part(
    place: RangeShift, work: Path, staging: Path, min_tokens: int
) -> dict[str, int]:
    """The run's `pages` rows of one range (pages_of_run.sql in DuckDB over the range's
    records, sketch figures and sized assignments, `own_rows`, ids shifted by
    `place.shift`, JSONL line numbers by `place.lines_before`) as its part file; its
    skipped records by reason (skipped.sql over the part)."""
    import duckdb

    range_idx, shift = place.range_idx, place.shift
    records = sql_path(work / RECORDS / RANGE_FILE.format(range_idx))
    texts = sql_path(work / TEXTS / RANGE_FILE.format(range_idx))
    folder = staging / "pages.parquet"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / RUN_PART.format(range_idx)
    tmp = folder / f".{path.name}.{uuid.uuid4().hex}.tmp"
    con = duckdb.connect()
    try:
        con.execute("SET threads = 1")  # one task per core: Spark runs them side by side
        sized_files = sorted((work / SIZED / f"{RANGE_IDX}={range_idx}").glob("*.parquet"))
        sized = SIZED_SCHEMA.empty_table()
        if sized_files:
            sized = pq.read_table(sized_files, schema=SIZED_SCHEMA)
        con.register("sized", sized)
        con.execute(
            f"CREATE VIEW sketches AS SELECT doc_id + {int(shift)} AS doc_id, lexical_fp, "
            f"shingle_fp, n_tokens, n_shingles FROM read_parquet('{texts}')"
        )
        moved = f"doc_id + {int(shift)} AS doc_id"
        if place.lines_before:
            moved += f", record_offset + {int(place.lines_before)} AS record_offset"
        pages_raw = (
            f"(SELECT * EXCLUDE ({RANGE_IDX}) REPLACE ({moved}) FROM read_parquet('{records}'))"
        )
        query = pages_sql(pages_raw, f"({own_rows(min_tokens)})", min_tokens)
        con.execute(f"COPY ({query} ORDER BY p.doc_id) TO '{sql_path(tmp)}' ({PARQUET_OPTIONS})")
        skipped = sql_over("skipped.sql", pages=f"read_parquet('{sql_path(tmp)}')")
        counts = {str(r): int(n) for r, n in con.execute(skipped).fetchall()}
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        con.close()
    return counts


def run_parts_partition(
    batches: Iterator[pa.RecordBatch],
    work: str,
    staging: str,
    num_perm: int,
    min_tokens: int,
    keep_text: bool = True,
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body over RANGES_SCHEMA rows: each range's text, sketch and page part
    files; a row each with its skipped records by reason (a JSON object)."""
    for batch in batches:
        for row in batch.to_pylist():
            place = RangeShift(**row)
            idx, shift = place.range_idx, place.shift
            write_text_parts(idx, shift, Path(work), Path(staging), num_perm, keep_text)
            skipped = write_pages_part(place, Path(work), Path(staging), min_tokens)
            yield pa.RecordBatch.from_pylist(
                [{RANGE_IDX: idx, "skipped": json.dumps(skipped)}], schema=PARTS_SCHEMA
            )
