"""A run stores each row once, in Parquet; `neardup.duckdb` holds views over the files that
any DuckDB client can open from any directory, and a moved run is re-pointed on open."""

from __future__ import annotations

import json
import shutil

import duckdb
import pyarrow.parquet as pq

import neardup
from neardup.pipeline.steps.staging_tables import table_files
from neardup.store import open_run

TABLES = ("pages", "pairs", "clusters", "links", "containment", "sketches", "page_text")


def _scan(tmp_path):
    texts = tmp_path / "in.jsonl"
    base = " ".join(f"word{i} of page" for i in range(80))
    with texts.open("w", encoding="utf-8") as f:
        for i in range(30):
            text = base if i % 3 == 0 else f"{base} {i} " + " ".join(f"w{i}x{j}" for j in range(90))
            f.write(json.dumps({"url": f"https://h.example/{i}", "text": text}) + "\n")
    return neardup.scan([texts], tmp_path / "run", workers=1).path


def _counts(con) -> dict[str, int]:
    return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def test_tables_are_views_over_parquet_and_open_from_anywhere(tmp_path, monkeypatch):
    run = _scan(tmp_path)
    expected = {t: sum(pq.read_metadata(f).num_rows for f in table_files(run, t)) for t in TABLES}
    assert expected["pages"] == 30 and expected["pairs"] > 0
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # a plain DuckDB client, started in another directory
    con = duckdb.connect(str(run / "neardup.duckdb"), read_only=True)
    try:
        assert _counts(con) == expected
        views = {v for (v,) in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
        tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    finally:
        con.close()
    assert set(TABLES) <= views
    assert tables.isdisjoint(TABLES)  # no row stored twice
    # the min-hash column is there for SQL, as in a Spark run
    assert pq.read_schema(table_files(run, "sketches")[0]).field("minhash").type.list_size == 128


def test_a_moved_run_is_repointed_when_opened(tmp_path):
    run = _scan(tmp_path)
    with open_run(run) as con:
        before = _counts(con)
    moved = tmp_path / "moved" / "run"
    shutil.move(run, moved)
    with open_run(moved) as con:
        assert _counts(con) == before
    # re-pointed for good: a plain client finds the files at the new place
    con = duckdb.connect(str(moved / "neardup.duckdb"), read_only=True)
    try:
        assert _counts(con) == before
        paths = " ".join(sql for (sql,) in con.execute("SELECT sql FROM duckdb_views()").fetchall())
    finally:
        con.close()
    assert str(run) not in paths and str(moved.resolve()) in paths
