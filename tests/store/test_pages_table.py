"""The pages table written a range of doc ids at a time (store/pages_table.py) is the table
one query over every page gives: the same rows in doc_id order, each page's cluster size the
number of pages of its cluster, on text and on a crawl laid out as Common Crawl publishes it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from ccwarc import Fetch, write_warc

import neardup
from neardup.store import pages_table, run
from neardup.synth.webtext import write_webtext

TABLES = ("pages", "pairs", "clusters", "links")


def _inputs(folder: Path) -> list[Path]:
    texts = folder / "web.jsonl"
    write_webtext(texts, 600, copies=0.3, seed=5)
    body = " ".join(f"shared{k}" for k in range(150))
    fetches = [
        Fetch(
            f"https://mirror{i % 4}.example/doc/{i // 4}",
            f"<html><body><p>{body} {i // 4}</p><a href='/doc/{i // 4 + 1}'>next</a></body></html>",
        )
        for i in range(40)
    ]
    fetches.append(Fetch("https://mirror0.example/old", status=301, location="/doc/2"))
    crawl = write_warc(folder / "crawl.warc.gz", fetches, request_first=True)
    return [texts, crawl]


def _tables(run: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect()
    try:
        return {
            t: con.execute(f"SELECT * FROM read_parquet('{run}/{t}.parquet')").fetchall()
            for t in TABLES
        }
    finally:
        con.close()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same inputs scanned with every page in one range, then in ranges of 37 pages."""
    folder = tmp_path_factory.mktemp("pages_table")
    inputs = _inputs(folder)
    whole = neardup.scan(inputs, folder / "whole", workers=1).path
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pages_table, "PAGES_PER_RANGE", 37)
        ranged = neardup.scan(inputs, folder / "ranged", workers=1).path
    return whole, ranged


def test_ranges_of_doc_ids_give_the_one_query_table(runs: tuple[Path, Path]) -> None:
    whole, ranged = (_tables(run) for run in runs)
    assert len(whole["pages"]) == 600 + 1 + 41 * 3  # texts; warcinfo; request, response, metadata
    assert len(whole["pairs"]) > 0 and len(whole["links"]) > 0
    for table in TABLES:
        assert ranged[table] == whole[table], table  # the same rows in the same order


def test_pages_are_in_doc_id_order_with_their_clusters_sizes(runs: tuple[Path, Path]) -> None:
    columns = ["doc_id", "cluster_id", "cluster_size"]
    pages = pq.read_table(runs[1] / "pages.parquet", columns=columns)
    doc_ids = pages.column("doc_id").to_pylist()
    assert doc_ids == list(range(len(doc_ids)))
    clusters = pages.column("cluster_id").to_pylist()
    members = Counter(c for c in clusters if c is not None)  # counted here, from the rows
    assert max(members.values()) >= 2
    for cluster, size in zip(clusters, pages.column("cluster_size").to_pylist(), strict=True):
        assert size == (None if cluster is None else members[cluster])


def test_the_stores_memory_limit_grows_with_threads_not_with_the_corpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run, "machine_memory_bytes", lambda: 64 << 30)
    assert run.store_memory_limit(1) == run.store_memory_limit(2) == "512MB"
    assert run.store_memory_limit(16) == "2048MB"
    assert run.store_memory_limit(256) == "16384MB"  # never above a quarter of the machine
    monkeypatch.setattr(run, "machine_memory_bytes", lambda: 1 << 30)
    assert run.store_memory_limit(16) == "512MB"  # the floor of `memory_limit`
