"""The run's pages table, written a range of doc ids at a time, so that the store's memory does
not grow with the corpus.

The pages table is the staged records joined with their sketch figures and cluster assignments
(`pages_of_run.sql`), in doc_id order. Written by one `COPY (... ORDER BY doc_id)`, DuckDB sorts
every page's wide row at once: at four million pages its buffer held about 1 GB more than the
rest of the scan (issue 50), or, held to 512 MB, the sort spilled and took 2.3-2.8 times as
long. The three inputs are already in doc_id order (the ingest stage writes the records, the
sketch stage the figures and the cluster stage the assignments in that order), so a range of
doc ids meets only a range of each, found through the files' row-group statistics: each range
is one query whose sort holds `PAGES_PER_RANGE` rows, and the ranges are appended to one
Parquet file in order. The rows are those of the single query, row for row.

A cluster's size is the one figure that needs every assignment: the clusters of two pages or
more are counted once, before the ranges, from the pages that are not their cluster's
representative (a small table; a page of no such cluster is alone, size 1), instead of a
window over every assignment.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from neardup.store.sql_files import package_sql, sql_path
from neardup.store.writer_thread import WriterThread

# Pages joined, sorted and written by one query: about 60 MB of DuckDB's buffer at the
# web-like pages of bench/scale_bench.py, whatever the corpus.
PAGES_PER_RANGE = 1 << 18
# Rows handed from DuckDB to the Parquet writer at a time (DuckDB's own row-group size).
_BATCH_ROWS = 122_880

# A cluster's representative is its own cluster (cluster_id = doc_id): counting the other
# members only groups the pages that have a near-duplicate, not every page.
_MULTI_PAGE_CLUSTERS = """
CREATE TEMP TABLE multi_page_clusters AS
SELECT cluster_id, count(*) + 1 AS cluster_size FROM assignments
WHERE cluster_id <> doc_id GROUP BY cluster_id
"""

# The assignments of one range with their cluster's size: the columns of sized_assignments.sql.
_SIZED_RANGE = """(
    SELECT a.*, coalesce(z.cluster_size, 1) AS cluster_size
    FROM assignments AS a LEFT JOIN multi_page_clusters AS z ON z.cluster_id = a.cluster_id
    WHERE a.doc_id >= {lo} AND a.doc_id < {hi}
)"""


def pages_sql(pages_raw: str, sized: str, min_tokens: int) -> str:
    """The query of the run's pages table (pages_of_run.sql) over the staged records
    `pages_raw` and the sized assignments `sized` (table expressions, in DuckDB): one query
    for the embedded build and the Spark engine's per-input tasks."""
    return package_sql("store/sql", "pages_of_run.sql").format(
        pages_raw=pages_raw, sized=sized, min_tokens=int(min_tokens)
    )


def sized_sql(assignments: str) -> str:
    """Each row of the table expression `assignments` with its cluster's size."""
    return package_sql("store/sql", "sized_assignments.sql").format(assignments=assignments).strip()


def write_pages_table(con: duckdb.DuckDBPyConnection, staging: Path, min_tokens: int) -> int:
    """Write `staging/pages.parquet` from the staged records, the `sketches` view and the
    `assignments` view on `con`; return its number of rows."""
    raw = f"read_parquet('{sql_path(staging)}/pages_raw.parquet')"
    bounds = con.execute(f"SELECT min(doc_id), max(doc_id) FROM {raw}").fetchone()
    con.execute(_MULTI_PAGE_CLUSTERS)
    first, last = (0, -1) if bounds is None or bounds[0] is None else bounds
    target = staging / "pages.parquet"
    writer: pq.ParquetWriter | None = None
    thread = WriterThread(depth=1)  # compresses one range while DuckDB joins the next
    rows = 0
    try:
        for lo in range(first, max(last + 1, first + 1), PAGES_PER_RANGE):
            hi = lo + PAGES_PER_RANGE
            in_range = f"doc_id >= {lo} AND doc_id < {hi}"
            query = (
                f"WITH sketches AS (SELECT * FROM main.sketches WHERE {in_range}) "
                + pages_sql(
                    f"(SELECT * FROM {raw} WHERE {in_range})",
                    _SIZED_RANGE.format(lo=lo, hi=hi),
                    min_tokens,
                )
                + " ORDER BY p.doc_id"
            )
            table = con.sql(query).to_arrow_table(_BATCH_ROWS)
            if writer is None:
                writer = pq.ParquetWriter(target, table.schema, compression="zstd")
            thread.submit(writer.write_table, table, _BATCH_ROWS)
            rows += table.num_rows
    finally:
        thread.close()
        if writer is not None:
            writer.close()
        con.execute("DROP TABLE IF EXISTS multi_page_clusters")
    return rows
