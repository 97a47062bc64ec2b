"""Collections and mirrors on Spark SQL give the DuckDB tables, row for row (Spark local mode).

The Spark runs are few on purpose (each analysis is some twenty Spark jobs): one run of the
collections through the Python API and one of the mirrors through the CLI, each compared with
the embedded engine on the generated crawl, which has a mirror, a partial mirror and an alias.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_session import spark  # noqa: F401 - the fixture
from typer.testing import CliRunner

from neardup.cli.main import app
from neardup.linkgraph.collections import collections_from_run
from neardup.linkgraph.mirrors import mirrors_from_run
from neardup.linkgraph.relational import read_sql, statements
from neardup.pipeline.executors.spark.sql_connection import _CTAS, _clean, bind, sql_literal


def assert_same_table(expected: pa.Table, got: pa.Table, name: str) -> None:
    """Same column names and types, same rows in the same order."""
    assert got.schema.names == expected.schema.names, name
    for field in expected.schema:
        assert got.schema.field(field.name).type == field.type, f"{name}.{field.name}"
    assert got.num_rows == expected.num_rows, name
    for column in expected.column_names:
        assert got.column(column).to_pylist() == expected.column(column).to_pylist(), (
            f"{name}.{column}"
        )


def test_parameters_become_literals_of_duckdb_types():
    text = "SELECT * FROM t WHERE NOT $single_site AND n >= $min_size AND x < $share -- $"
    bound = bind(text, {"single_site": False, "min_size": 10, "share": 0.5})
    assert bound == ("SELECT * FROM t WHERE NOT FALSE AND n >= 10 AND x < CAST(0.5 AS DOUBLE) -- $")
    assert sql_literal("it's a\\b") == "'it\\'s a\\\\b'"
    assert sql_literal(None) == "NULL"
    with pytest.raises(KeyError, match=r"\$min_pages"):
        bind("HAVING sum(n) >= $min_pages", {})
    with pytest.raises(TypeError):
        sql_literal([1, 2])


def test_every_statement_is_a_temp_table_spark_can_materialise():
    """The SQL files' statements all match the adapter's CREATE OR REPLACE TEMP TABLE form
    (anything else would run on Spark without being materialised), and the one Spark variant
    is picked by dialect only."""
    for name in ("copy_stats.sql", "fold_edges.sql", "mirror_hosts.sql", "suffix_keys.sql"):
        for statement in statements(read_sql(name, "spark")):
            assert _CTAS.fullmatch(_clean(statement)), (name, statement[:80])
    assert "xxhash64" in read_sql("suffix_keys.sql", "spark")
    assert "xxhash64" not in read_sql("suffix_keys.sql")
    assert read_sql("trivial.sql", "spark") == read_sql("trivial.sql")


def test_collections_on_spark_match_duckdb(spark, demo_run, demo_crawl):  # noqa: F811
    expected = collections_from_run(demo_run.path)
    # the comparison is only worth something on real collections
    assert expected.clusters.num_rows >= 1 and expected.copies.num_rows >= 2
    assert expected.merge_edges > 0
    got = collections_from_run(demo_run.path, engine="spark")
    assert_same_table(expected.clusters, got.clusters, "clusters")
    assert_same_table(expected.copies, got.copies, "copies")
    assert_same_table(expected.pages, got.pages, "pages")
    assert (got.trivial_clusters, got.merge_edges, got.similar_edges) == (
        expected.trivial_clusters,
        expected.merge_edges,
        expected.similar_edges,
    )
    primary = demo_crawl.topology["hosts"]["primary"]["host"]
    assert got.clusters.column("principal_host").to_pylist()[0] == primary


def test_mirrors_command_on_spark_matches_duckdb(spark, demo_run, demo_crawl, tmp_path):  # noqa: F811
    expected = mirrors_from_run(demo_run.path)
    kinds = set(expected.pairs.column("kind").to_pylist())
    assert {"mirror", "alias"} <= kinds and expected.confirmed().num_rows >= 1
    assert expected.suffix_pairs.num_rows >= 1
    runner = CliRunner()
    res = runner.invoke(
        app, ["mirrors", str(demo_run.path), "--engine", "spark", "--out", str(tmp_path), "--json"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["auto_mirrors"] == expected.auto_mirrors
    assert data["confirmed_by_content_method"] == expected.confirmed().num_rows
    assert_same_table(expected.pairs, pq.read_table(tmp_path / "mirrors.parquet"), "pairs")
    assert_same_table(
        expected.suffix_pairs,
        pq.read_table(tmp_path / "mirrors_suffix_method.parquet"),
        "suffix_pairs",
    )
    bad = runner.invoke(app, ["mirrors", str(demo_run.path), "--engine", "presto"])
    assert bad.exit_code == 2
    missing = runner.invoke(app, ["collections", str(tmp_path / "nope"), "--engine", "spark"])
    assert missing.exit_code == 2
