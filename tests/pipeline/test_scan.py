"""The whole scan on a generated crawl whose near-duplicates are known."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest
from warcio.archiveiterator import ArchiveIterator

import neardup
from neardup.config import Settings
from neardup.pipeline.steps.staging_tables import table_files


def warc_record_count(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        with open(path, "rb") as fh:
            total += sum(1 for _ in ArchiveIterator(fh))
    return total


def pages(run) -> dict[str, dict]:
    table = pq.read_table(Path(run.path) / "pages.parquet").to_pylist()
    return {row["url"]: row for row in table if row["skipped_reason"] is None}


def test_every_record_is_accounted_for(demo_crawl, demo_run):
    table = pq.read_table(Path(demo_run.path) / "pages.parquet")
    assert table.num_rows == warc_record_count(demo_crawl.warc_paths)
    assert table.column("doc_id").to_pylist() == list(range(table.num_rows))
    skipped = [r for r in table.to_pylist() if r["cluster_id"] is None]
    assert all(r["skipped_reason"] for r in skipped)
    reasons = {r["skipped_reason"].split(":")[0] for r in skipped}
    assert {"HTTP status 404", "redirect (HTTP 3xx)"} <= reasons
    assert any(r.startswith("revisit") for r in reasons)


def test_copies_cluster_with_their_primary(demo_crawl, demo_run):
    by_url = pages(demo_run)
    truth = [r for r in demo_crawl.truth if r["expected"] == "page" and r["primary_url"]]
    checked = 0
    for row in truth:
        if row["url"] == row["primary_url"] or row["role"] == "excerpt":
            continue
        page, primary = by_url[row["url"]], by_url[row["primary_url"]]
        similar = neardup.resemblance(_text(demo_run, page), _text(demo_run, primary))
        if similar >= 0.9:
            checked += 1
            assert page["cluster_id"] == primary["cluster_id"], (row["url"], similar)
    assert checked > 50


def test_identical_copies_are_collapsed_into_one_class(demo_crawl, demo_run):
    by_url = pages(demo_run)
    for row in demo_crawl.truth:
        if row["edit"] == "identical" and row["expected"] == "page":
            page, primary = by_url[row["url"]], by_url[row["primary_url"]]
            assert page["class_id"] == primary["class_id"]
            assert page["cluster_id"] == primary["cluster_id"]


def test_unrelated_pages_stay_alone(demo_crawl, demo_run):
    by_url = pages(demo_run)
    unrelated = [r["url"] for r in demo_crawl.truth if r["role"] == "unrelated"]
    assert unrelated
    assert all(by_url[u]["cluster_size"] == 1 for u in unrelated)


def test_members_are_verified_against_their_representative(demo_run):
    con = neardup.open_run(demo_run.path)
    low = con.execute(
        "SELECT count(*) FROM pages WHERE cluster_size >= 2 AND NOT is_representative "
        "AND similarity_to_representative < 0.8"
    ).fetchone()[0]
    reps = con.execute(
        "SELECT count(*) FROM clusters c JOIN pages p ON p.doc_id = c.representative_doc_id "
        "WHERE NOT p.is_representative"
    ).fetchone()[0]
    con.close()
    assert low == 0
    assert reps == 0


def test_tables_and_settings_are_stored(demo_run):
    run = Path(demo_run.path)
    for name in ("pages", "pairs", "clusters", "links", "sketches", "page_text"):
        assert (run / f"{name}.parquet").exists()
    assert Settings.from_json((run / "settings.json").read_text()) == Settings()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["clusters"] > 0 and summary["duplicates"] > 0
    con = duckdb.connect(str(run / "neardup.duckdb"), read_only=True)
    n_pairs = con.execute("SELECT count(*) FROM pairs").fetchone()[0]
    con.close()
    assert n_pairs == pq.read_metadata(run / "pairs.parquet").num_rows
    sketch = pq.read_table(run / "sketches.parquet")
    assert sketch.schema.field("minhash").type.list_size == 128
    assert not list(run.parent.glob(".*staging*"))


def test_minhash_column_is_split_by_byte_and_reads_as_the_signatures(demo_run):
    """The min-hash values are written split by byte (`SKETCHES_PARQUET`: a third of the
    CPU of plain zstd) and another reader, DuckDB, gets back the signature matrix."""
    run = Path(demo_run.path)
    meta = pq.read_metadata(table_files(run, "sketches")[0])
    names = [meta.schema.column(i).path for i in range(meta.num_columns)]
    column = meta.row_group(0).column(names.index("minhash.list.element"))
    assert "BYTE_STREAM_SPLIT" in column.encodings
    signatures = np.load(run / "signatures.npy")
    rows = duckdb.sql(
        f"SELECT minhash FROM read_parquet('{run / 'sketches.parquet'}') ORDER BY doc_id"
    ).fetchall()
    got = np.array([r[0] for r in rows], dtype=np.int64)
    assert got.shape == signatures.shape and got.min() >= 0
    assert np.array_equal(got, signatures.astype(np.int64))


def test_same_tables_with_one_worker_or_two(demo_crawl, demo_run, tmp_path):
    single = neardup.scan(demo_crawl.warc_paths, tmp_path / "one", workers=1)
    for name in ("pages", "pairs", "clusters", "links", "sketches", "page_text"):
        a = [Path(f).read_bytes() for f in table_files(Path(single.path), name)]
        b = [Path(f).read_bytes() for f in table_files(Path(demo_run.path), name)]
        assert a == b, name


def test_transitive_view_contains_centre_clusters(demo_run):
    con = neardup.open_run(demo_run.path)
    split = con.execute(
        "SELECT count(*) FROM (SELECT cluster_id FROM pages WHERE cluster_id IS NOT NULL "
        "GROUP BY cluster_id HAVING count(DISTINCT component_id) > 1)"
    ).fetchone()[0]
    con.close()
    assert split == 0  # a centre cluster never spans two components


def test_supershingle_method_finds_the_identical_and_close_copies(demo_crawl, tmp_path):
    run = neardup.scan(
        demo_crawl.warc_paths, tmp_path / "ss", settings=Settings.fetterly(), workers=1
    )
    by_url = pages(run)
    for row in demo_crawl.truth:
        if row["edit"] == "identical" and row["expected"] == "page":
            assert by_url[row["url"]]["cluster_id"] == by_url[row["primary_url"]]["cluster_id"]
    assert run.summary["clusters"] > 0


def test_existing_output_is_kept_unless_forced(demo_crawl, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    with pytest.raises(neardup.OutputExistsError):
        neardup.scan(demo_crawl.warc_paths[:1], out, workers=1)
    assert (out / "precious.txt").read_text() == "keep me"


def test_failed_scan_leaves_previous_run_intact(demo_crawl, tmp_path, monkeypatch):
    out = tmp_path / "run"
    neardup.scan(demo_crawl.warc_paths[:1], out, workers=1)
    before = (out / "pages.parquet").read_bytes()

    def boom(*args, **kwargs):
        raise RuntimeError("killed in the middle")

    monkeypatch.setattr("neardup.pipeline.executors.embedded.run_clusters", boom)
    with pytest.raises(RuntimeError):
        neardup.scan(demo_crawl.warc_paths, out, workers=1, force=True)
    assert (out / "pages.parquet").read_bytes() == before
    assert not list(tmp_path.glob(".*staging*"))


def _text(run, page: dict) -> str:
    con = neardup.open_run(run.path)
    text = con.execute("SELECT text FROM page_text WHERE doc_id = ?", [page["doc_id"]]).fetchone()
    con.close()
    return text[0]


def test_dropping_common_shingles_removes_the_boilerplate(demo_crawl, demo_run, tmp_path):
    # A host with more than 20 pages has its template on more than 20 pages: every one of
    # its pages loses those shingles.
    settings = Settings(max_shingle_df=20, verify="exact")
    run = neardup.scan(demo_crawl.warc_paths, tmp_path / "df", settings=settings, workers=2)
    assert run.summary["common_shingle_filter"] is True
    assert (Path(run.path) / "common_shingles.npy").exists()
    kept, full = pages(run), pages(demo_run)
    per_host = Counter(row["host"] for row in kept.values())
    big_hosts = {host for host, n in per_host.items() if n > 20}
    assert big_hosts
    for url, row in kept.items():
        if row["host"] in big_hosts:
            assert row["n_shingles"] < full[url]["n_shingles"], url
    # exact verification recomputes the same filtered shingle sets: identical copies stay 1.0
    con = neardup.open_run(run.path)
    bad = con.execute(
        "SELECT count(*) FROM pairs WHERE kind = 'near' AND similarity < 0.8"
    ).fetchone()[0]
    con.close()
    assert bad == 0


def test_pages_rows_can_be_fetched_into_python(demo_run):
    # fetched_at is TIMESTAMPTZ: fetching it into Python must work out of the box
    con = neardup.open_run(demo_run.path)
    row = con.execute(
        "SELECT url, fetched_at FROM pages WHERE fetched_at IS NOT NULL AND url IS NOT NULL LIMIT 1"
    ).fetchone()
    con.close()
    assert row[0] and row[1].tzinfo is not None
