"""Deduplicated output in the input's own format, with keep/remove lists."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from warcio.archiveiterator import ArchiveIterator

import neardup
from neardup.synth import SyntheticCrawl, page_rows, write_jsonl, write_parquet


def test_warc_output_drops_exactly_the_removed_records(demo_run, tmp_path):
    result = neardup.write_deduplicated(demo_run.path, tmp_path / "clean")
    assert not result.not_written
    con = neardup.open_run(demo_run.path)
    removed_urls = {
        r[0]
        for r in con.execute(
            "SELECT url FROM pages WHERE cluster_size >= 2 AND NOT is_representative"
        ).fetchall()
    }
    kept_pages = con.execute(
        "SELECT count(*) FROM pages WHERE record_type = 'response' AND "
        "(cluster_id IS NULL OR is_representative)"
    ).fetchone()[0]
    total_records = con.execute("SELECT count(*) FROM pages").fetchone()[0]
    con.close()
    assert result.removed == len(removed_urls) > 0

    out_responses, out_records, out_urls = 0, 0, set()
    for src in result.files.values():
        with open(src, "rb") as fh:
            for rec in ArchiveIterator(fh):
                out_records += 1
                if rec.rec_type == "response":
                    out_responses += 1
                    out_urls.add(rec.rec_headers.get_header("WARC-Target-URI"))
    assert out_urls.isdisjoint(removed_urls)
    assert out_responses == kept_pages
    # each removed response takes its request record along
    assert result.companions_removed == result.removed
    assert out_records == total_records - result.removed - result.companions_removed
    remove_list = (tmp_path / "clean" / "remove_urls.txt").read_text().split()
    assert set(remove_list) == removed_urls
    kept = pq.read_table(tmp_path / "clean" / "kept.parquet")
    assert kept.num_rows == result.kept


def test_jsonl_and_parquet_rows_are_filtered(tmp_path):
    records = SyntheticCrawl(n_docs=15, seed=5, n_unrelated=5).build()
    rows = page_rows(records, "text")
    write_jsonl(tmp_path / "pages.jsonl", rows)
    write_parquet(tmp_path / "pages.parquet", rows)
    for name in ("pages.jsonl", "pages.parquet"):
        run = neardup.scan([tmp_path / name], tmp_path / f"run-{name}", workers=1)
        result = neardup.write_deduplicated(run.path, tmp_path / f"clean-{name}")
        assert result.removed > 0
        out = Path(result.files[str(tmp_path / name)])
        if name.endswith(".jsonl"):
            n_out = len(out.read_text().splitlines())
        else:
            n_out = pq.read_metadata(out).num_rows
        assert n_out == len(rows) - result.removed
