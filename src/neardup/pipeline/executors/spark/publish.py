"""The run's tables, written by the executors as Parquet datasets.

Where the embedded engine's store build reads its staging files into DuckDB on one machine,
the Spark engine writes the same tables from the executors, each as a folder of part files
in the run's staging folder: `pages.parquet/`, `page_text.parquet/`, `links.parquet/`,
`pairs.parquet/`, `clusters.parquet/`, `containment.parquet/` and `sketches.parquet/`. The
run directory admits such datasets (`neardup.store.run`: DuckDB views over the folders), so
every command reads them where they lie. No wide row passes through the driver: it sums
the skipped records by reason each range's task counted (`skipped.sql`), and, once the
`pages` parts are written, runs the embedded build's `clusters_of_pages.sql` and
`summary.sql` in DuckDB over them where they lie, writing `clusters` (a row per cluster of
two pages or more) and returning the summary's figures (`clusters_and_figures`).

The tables in document order (`pages`, `page_text`, `sketches`) are written by one task per
range, in DuckDB with the embedded build's SQL for the pages (`spark/run_parts.py`);
`pairs` and `links` are Spark jobs (the SQL of `store/sql/build.sql`, ported where Spark
SQL differs), range-partitioned and sorted on the embedded export's order. Either way the
part files, read in name order, hold the rows in the order the embedded engine writes
them, and a `doc_id` lookup is pruned by the row groups' statistics as in an embedded run.

The links are resolved as `build.sql` does (the latest fetch of a URL, redirects followed up
to 10 hops, a WAT record's links credited to its page), with the recursive walk unrolled
into at most 10 joins, since Spark SQL has no recursive CTE; it stops at the first hop where
no chain moves.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from neardup.ingest.commoncrawl import WAT_REASON
from neardup.pipeline.steps.near import CONTAINMENT_SCHEMA
from neardup.store.run import (
    FIGURES_NAME,
    ORDER_BY,
    PARQUET_OPTIONS,
    read_sql,
    sql_over,
    sql_path,
)

# The record types a link target can resolve to (never a request or metadata record).
_NOT_TARGETS = "'request', 'metadata', 'warcinfo', 'revisit', 'unknown', 'continuation'"
MAX_HOPS = 10
RUN_LINKS_SCHEMA = pa.schema(
    [("src_doc", pa.int64()), ("dst_url", pa.string()), ("dst_doc", pa.int64())]
)

LATEST_SQL = f"""
SELECT url_key, doc_id, next_key FROM (
    SELECT doc_id, url_key,
        CASE WHEN status BETWEEN 300 AND 399 THEN redirect_to END AS next_key,
        row_number() OVER (
            PARTITION BY url_key
            ORDER BY try_cast(fetched_at AS TIMESTAMP) DESC NULLS LAST, doc_id DESC
        ) AS recency
    FROM pages_raw
    WHERE url_key IS NOT NULL AND record_type NOT IN ({_NOT_TARGETS})
) WHERE recency = 1
"""

# One hop of every chain: a chain whose next key is a fetched URL moves to that page.
HOP_SQL = """
SELECT w.url_key, coalesce(l.doc_id, w.doc_id) AS doc_id, l.next_key
FROM walk AS w LEFT JOIN latest AS l ON l.url_key = w.next_key
"""

LINKS_SQL = f"""
WITH raw_links AS (
    SELECT
        coalesce(s.doc_id, l.src_doc) AS src_doc,
        l.dst_url,
        r.skipped_reason <=> '{WAT_REASON}' AS from_wat,
        l.src_doc AS row_doc,
        l.pos
    FROM links AS l
    JOIN pages_raw AS r ON r.doc_id = l.src_doc
    LEFT JOIN target AS s ON (r.skipped_reason <=> '{WAT_REASON}') AND s.url_key = r.url_key
),
kept AS (
    SELECT * FROM (
        SELECT *, row_number() OVER (
            PARTITION BY src_doc, dst_url ORDER BY from_wat, row_doc, pos
        ) AS nth
        FROM raw_links
    ) WHERE nth = 1
)
SELECT k.src_doc, k.dst_url, t.doc_id AS dst_doc, k.from_wat, k.row_doc, k.pos
FROM kept AS k
LEFT JOIN target AS t ON t.url_key = k.dst_url
"""


@contextlib.contextmanager
def named_jobs(spark: Any, name: str) -> Iterator[None]:
    """The Spark jobs started in the block carry `name` as their description: the name a
    job has in the UI and the event log."""
    context = spark.sparkContext
    context.setJobDescription(name)
    try:
        yield
    finally:
        context.setJobDescription(None)


def _sorted_write(df: Any, path: Path, order: list[Any], columns: list[str]) -> None:
    """Write `df` sorted on `order` (a global sort: range partitions, each sorted), keeping
    `columns`; the part files in name order then hold the rows in that order."""
    with named_jobs(df.sparkSession, f"write {path.name}"):
        df.orderBy(*order).select(*columns).write.mode("overwrite").option(
            "compression", "zstd"
        ).parquet(str(path))
    for stray in (*path.glob("_SUCCESS"), *path.glob(".*.crc")):
        stray.unlink()  # Hadoop's bookkeeping: not part of the table


def _order(table: str) -> list[Any]:
    """The embedded export's ORDER BY of `table` as Spark columns."""
    from pyspark.sql import functions as F

    columns = []
    for term in ORDER_BY[table].split(","):
        name, _, direction = term.strip().partition(" ")
        columns.append(F.col(name).desc() if direction.upper() == "DESC" else F.col(name))
    return columns


def resolve_targets(spark: Any, save: Any) -> Any:
    """`target` (url_key, doc_id): the page a URL resolves to, redirects followed."""
    latest = save(spark.sql(LATEST_SQL), "latest")
    latest.createOrReplaceTempView("latest")
    walk = latest
    for hop in range(MAX_HOPS):
        walk.createOrReplaceTempView("walk")
        moving = spark.sql(
            "SELECT 1 FROM walk AS w JOIN latest AS l ON l.url_key = w.next_key LIMIT 1"
        )
        if moving.isEmpty():
            break
        # A table per hop: Spark cannot overwrite the folder the hop reads from.
        walk = save(spark.sql(HOP_SQL), f"walk{hop}")
    target = walk.select("url_key", "doc_id")
    target.createOrReplaceTempView("target")
    return target


def publish_tables(
    spark: Any,
    table: Any,
    save: Any,
    staging: Path,
    run_parts: Callable[[], list[Any]],
    link_rows: int,
) -> dict[str, Any]:
    """Write the run's tables into `staging` as datasets and the summary's figures as
    `FIGURES_NAME`; return the figures. `table(name)` reads a work table, `save(df, name)`
    checkpoints one; `run_parts()` runs the job that writes each input's `pages`,
    `page_text` and `sketches` (`spark/run_parts.py`) and returns its rows, one an input
    with its skipped records by reason; `link_rows` is the number of links the ingest
    found (none: the links table is empty, and nothing is resolved)."""
    from pyspark.sql import functions as F

    for name in ("pages_raw", "links"):
        table(name).createOrReplaceTempView(name)

    def write_pairs() -> None:
        pairs = table("pairs")
        _sorted_write(pairs, staging / "pairs.parquet", _order("pairs"), pairs.columns)

    def write_links() -> None:
        if not link_rows:  # a crawl without links (JSONL, WET): no URL to resolve
            folder = staging / "links.parquet"
            folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(RUN_LINKS_SCHEMA.empty_table(), folder / "part-00000.parquet")
            return
        resolve_targets(spark, save)
        links = spark.sql(LINKS_SQL)
        order = [F.col("src_doc"), F.col("from_wat"), F.col("row_doc"), F.col("pos")]
        _sorted_write(links, staging / "links.parquet", order, ["src_doc", "dst_url", "dst_doc"])

    # `pairs` and `links` do not depend on the pages: their jobs run beside them (driver
    # threads), filling the gaps the driver leaves between jobs.
    group = spark.sparkContext.getLocalProperty("spark.jobGroup.id")
    skipped: Counter[str] = Counter()
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="neardup-tables") as pool:

        def beside(write: Any) -> Future[None]:
            def run() -> None:
                if group:
                    spark.sparkContext.setJobGroup(group, "neardup stage tables")
                write()

            return pool.submit(run)

        beside_done = [beside(write_pairs), beside(write_links)]
        with named_jobs(spark, "write pages, page_text, sketches"):
            for row in run_parts():
                skipped.update(json.loads(row["skipped"]))
        figures = clusters_and_figures(staging)
        for done in beside_done:
            done.result()

    folder = staging / "containment.parquet"
    folder.mkdir(exist_ok=True)  # the Spark engine computes no containment: an empty table
    pq.write_table(CONTAINMENT_SCHEMA.empty_table(), folder / "part-00000.parquet")

    # skipped.sql's order: most records first, then the reason
    ordered = sorted(skipped.items(), key=lambda item: (-item[1], item[0]))
    figures["skipped_by_reason"] = dict(ordered)
    (staging / FIGURES_NAME).write_text(json.dumps(figures) + "\n", encoding="utf-8")
    return figures


def clusters_and_figures(staging: Path) -> dict[str, Any]:
    """Write the run's `clusters` (`clusters_of_pages.sql`, in the embedded export's order)
    and return the summary's figures (`summary.sql`), both by DuckDB in the driver over the
    `pages` part files the tasks wrote, as the embedded build computes them.

    Why not Spark: at a million pages its aggregate of five distinct counts took 178
    task-seconds and the clusters 65 (issue 47, under load), where DuckDB reads the pages'
    few columns where they lie in under a second; the driver already opens the staging
    folder, where the store's views will read the same files."""
    import duckdb

    folder = staging / "clusters.parquet"
    folder.mkdir(parents=True, exist_ok=True)
    target = sql_path(folder / "part-00000.parquet")
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        pages = sql_path(staging / "pages.parquet")
        con.execute(f"CREATE VIEW run_pages AS SELECT * FROM read_parquet('{pages}/*.parquet')")
        clusters = read_sql("clusters_of_pages.sql").format(pages="run_pages")
        order = ORDER_BY["clusters"]
        con.execute(f"COPY ({clusters} ORDER BY {order}) TO '{target}' ({PARQUET_OPTIONS})")
        con.execute(f"CREATE VIEW run_clusters AS SELECT * FROM read_parquet('{target}')")
        summary = con.execute(sql_over("summary.sql", pages="run_pages", clusters="run_clusters"))
        names = [d[0] for d in summary.description]
        row = summary.fetchone() or ()
    finally:
        con.close()
    return {k: (int(v) if v is not None else 0) for k, v in zip(names, row, strict=True)}
