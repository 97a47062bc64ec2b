"""A run whose tables are Parquet datasets (folders of part files, as Spark's executors write
them) is admitted by the store: views over the folders, relative to the run, so it opens
after a move; the summary is computed by DuckDB when no engine left its figures."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.store import build_store, open_run
from neardup.store.run import is_dataset_run, machine_memory_bytes, memory_limit


def _pages(first: int, n: int) -> pa.Table:
    ids = list(range(first, first + n))
    return pa.table(
        {
            "doc_id": pa.array(ids, pa.int64()),
            "url": [f"https://h{i % 3}.example/{i}" for i in ids],
            "skipped_reason": [None if i % 5 else "not a page" for i in ids],
            "cluster_size": [2 if i < 4 else 1 for i in ids],
            "is_representative": [i in (0, 2) for i in ids],
            "cluster_id": [i - i % 2 if i < 4 else i for i in ids],
            "exact_fp": ids,
            "lexical_fp": ids,
            "shingle_fp": ids,
            "component_id": ids,
            "identical_id": ids,
        }
    )


def _dataset_staging(staging):
    for name, parts in {
        "pages": [_pages(0, 6), _pages(6, 4)],
        "clusters": [pa.table({"cluster_id": [0, 2], "size": [2, 2]})],
        "page_text": [pa.table({"doc_id": [1, 2], "text": ["a b c", "d e f"]})],
    }.items():
        folder = staging / f"{name}.parquet"
        folder.mkdir(parents=True)
        for k, part in enumerate(parts):
            pq.write_table(part, folder / f"part-{k:05d}.parquet")
    (staging / "pages.parquet" / "_SUCCESS").write_text("")  # Hadoop's marker is ignored


def test_a_dataset_run_gets_views_and_opens_after_a_move(tmp_path):
    staging = tmp_path / "staging"
    _dataset_staging(staging)
    assert is_dataset_run(staging)
    summary = build_store(staging, Settings(), workers=1)
    assert summary["records"] == 10 and summary["skipped"] == 2
    assert summary["clusters"] == 2 and summary["duplicates"] == 2
    assert summary["skipped_by_reason"] == {"not a page": 2}
    assert not (staging / "duckdb_tmp").exists()
    moved = tmp_path / "elsewhere" / "run"
    shutil.move(staging, moved)
    with open_run(moved) as con:
        tables = "SELECT table_name, table_type FROM information_schema.tables"
        kinds = dict(con.execute(tables).fetchall())
        assert kinds["pages"] == "VIEW" and kinds["settings"] == "BASE TABLE"
        cursor = con.cursor()  # a cursor (the UI opens one per request) resolves them too
        assert cursor.execute("SELECT count(*) FROM pages").fetchone() == (10,)
        assert cursor.execute("SELECT text FROM page_text WHERE doc_id = 2").fetchone() == (
            "d e f",
        )
    # The database holds no rows of its own: it is small whatever the tables' size.
    assert (moved / "neardup.duckdb").stat().st_size < 2 << 20


def test_the_memory_limit_follows_the_machine():
    total_mib = machine_memory_bytes() >> 20
    assert total_mib > 0
    assert memory_limit(0.25) == f"{max(512, total_mib // 4)}MB"
    assert memory_limit(0.0) == "512MB"  # never below the floor
    limit = memory_limit()
    assert limit.endswith("MB") and limit.removesuffix("MB").isdigit()  # DuckDB's syntax
