"""On the real WARC samples, `neardup add` and the scan agree, and crawler files no longer
lead the results (the largest cluster was 54 robots.txt files from 27 hosts)."""

from __future__ import annotations

import duckdb
import pytest
from conftest import shared_data

import neardup
from neardup.index.feed import add_files
from neardup.service import ServiceIndex


@pytest.mark.realdata
def test_index_agrees_with_the_scan_on_the_real_samples(tmp_path):
    folder = shared_data("warc")
    run = neardup.scan([str(folder)], tmp_path / "run", workers=2)
    totals = add_files(tmp_path / "store", [str(folder)], workers=2)
    con = duckdb.connect(str(run.path / "neardup.duckdb"), read_only=True)
    try:
        largest = con.execute(
            "SELECT representative_url, size FROM clusters ORDER BY size DESC LIMIT 1"
        ).fetchone()
        robots = con.execute(
            "SELECT count(*) FROM pages WHERE cluster_size >= 2 AND url LIKE '%/robots.txt'"
        ).fetchone()[0]
        rows = con.execute(
            "SELECT list(DISTINCT url) FROM pages WHERE cluster_size >= 2 GROUP BY cluster_id"
        ).fetchall()
    finally:
        con.close()
    assert not largest[0].endswith("/robots.txt") and robots == 0
    assert run.summary["skipped_by_reason"]["crawler file (robots.txt)"] > 50
    assert (
        totals["skipped: crawler file (robots.txt)"]
        == (run.summary["skipped_by_reason"]["crawler file (robots.txt)"])
    )
    # The samples fetch many URLs several times (revisits of a site, two crawls of one
    # page); the index holds one page per URL, so the scan's clusters meet it as URL sets.
    want = {frozenset(urls) for (urls,) in rows if len(urls) >= 2}
    with ServiceIndex(tmp_path / "store") as ix:
        got = {frozenset(m) for m in ix.groups.values() if len(m) >= 2}
    assert want and got == want
