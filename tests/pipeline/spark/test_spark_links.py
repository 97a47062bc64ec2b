"""The Spark engine resolves links as the store build does (`store/sql/build.sql`): the latest
fetch of a URL, redirect chains of several hops and cycles (at most 10 hops), request records
never a target, and a WAT record's links credited to its page after the page's own."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from spark_session import spark  # noqa: F401 - the fixture

from neardup.ingest.commoncrawl import WAT_REASON
from neardup.pipeline.executors.spark.publish import LINKS_SQL, resolve_targets
from neardup.store.run import read_sql, sql_path

# doc_id, url_key, status, redirect_to, fetched_at, record_type, skipped_reason
PAGES = [
    (0, "a", 301, "b", "2024-01-01T00:00:00Z", "response", None),  # a -> b -> c: two hops
    (1, "b", 302, "c", "2024-01-01T00:00:00Z", "response", None),
    (2, "c", 200, None, "2024-01-01T00:00:00Z", "response", None),
    (3, "d", 301, "e", "2024-01-01T00:00:00Z", "response", None),  # d -> e -> d: a cycle
    (4, "e", 301, "d", "2024-01-01T00:00:00Z", "response", None),
    (5, "f", 200, None, "2024-01-02T00:00:00Z", "response", None),  # the later fetch of f
    (6, "f", 200, None, "2024-01-01T00:00:00Z", "response", None),
    (7, "c", None, None, None, "metadata", WAT_REASON),  # WAT links of c
    (8, "g", None, None, None, "request", None),  # a request is never a target
    (9, "h", 200, None, None, "response", None),
]
LINKS = [  # src_doc, pos, dst_url
    (2, 0, "a"),
    (2, 1, "x"),
    (2, 2, "a"),
    (7, 0, "a"),
    (7, 1, "d"),
    (7, 2, "f"),
    (7, 3, "g"),
    (9, 0, "c"),
    (9, 1, "e"),
]


def _pages() -> pa.Table:
    names = ["doc_id", "url_key", "status", "redirect_to", "fetched_at", "record_type"]
    columns = list(zip(*PAGES, strict=True))
    arrays = {
        name: list(col) for name, col in zip([*names, "skipped_reason"], columns, strict=True)
    }
    return pa.table(
        arrays,
        schema=pa.schema(
            [
                ("doc_id", pa.int64()),
                ("url_key", pa.string()),
                ("status", pa.int32()),
                ("redirect_to", pa.string()),
                ("fetched_at", pa.string()),
                ("record_type", pa.string()),
                ("skipped_reason", pa.string()),
            ]
        ),
    )


def _embedded_links(staging: Path) -> list[tuple]:
    """The `links` statement of build.sql, run by DuckDB on the same staging files."""
    build = read_sql("build.sql")
    start = build.index("WITH RECURSIVE fetches AS")
    query = build[start : build.index(") TO '{staging}/links.parquet'", start)]
    sql = query.replace("{staging}", sql_path(staging)).replace("{wat_reason}", WAT_REASON)
    con = duckdb.connect()
    con.execute(f"CREATE TABLE links AS {sql}")
    return con.execute("SELECT * FROM links").fetchall()


def test_links_resolve_as_the_store_build_does(spark, tmp_path):  # noqa: F811
    pages = _pages()
    pq.write_table(pages, tmp_path / "pages_raw.parquet")
    src, pos, dst = (list(c) for c in zip(*LINKS, strict=True))
    links = pa.table({"src_doc": src, "dst_url": dst})
    pq.write_table(links, tmp_path / "links.staged.parquet")  # as build_store renames it
    expected = _embedded_links(tmp_path)

    schema = (
        "doc_id bigint, url_key string, status int, redirect_to string, fetched_at string, "
        "record_type string, skipped_reason string"
    )
    spark.createDataFrame(PAGES, schema).createOrReplaceTempView("pages_raw")
    spark.createDataFrame(
        list(zip(src, pos, dst, strict=True)), "src_doc bigint, pos int, dst_url string"
    ).createOrReplaceTempView("links")

    def save(df, name):
        path = str(tmp_path / "work" / name)
        df.write.mode("overwrite").parquet(path)
        return spark.read.parquet(path)

    resolve_targets(spark, save)
    rows = spark.sql(LINKS_SQL).orderBy("src_doc", "from_wat", "row_doc", "pos").collect()
    got = [(r["src_doc"], r["dst_url"], r["dst_doc"]) for r in rows]
    assert got == expected
    # The cases the table was built for are there: two hops, the later fetch, the WAT
    # links credited to page 2 without repeating its own, a request never a target.
    assert (9, "c", 2) in got and (2, "a", 2) in got and (2, "f", 5) in got
    assert (2, "g", None) in got and sum(1 for r in got if r[:2] == (2, "a")) == 1
