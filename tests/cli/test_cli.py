"""The command line, as a user runs it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from neardup.cli.main import app

runner = CliRunner()


def test_scan_then_clusters_then_summary(demo_crawl, tmp_path):
    out = tmp_path / "run"
    args = ["scan", *map(str, demo_crawl.warc_paths), "--out", str(out), "--workers", "1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    # not a terminal: one `key<TAB>value` line per figure
    figures = dict(line.split("\t", 1) for line in result.output.splitlines())
    assert int(figures["clusters"]) > 0
    assert int(figures["skipped_by_reason.HTTP status 404"]) > 0

    result = runner.invoke(app, ["clusters", str(out), "--top", "3"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].startswith("cluster\tpages")
    assert len(result.output.splitlines()) == 4

    result = runner.invoke(app, ["summary", str(out)])
    assert result.exit_code == 0 and "\nrecords\t" in result.output


def test_scan_json_summary_and_one_cluster(demo_crawl, tmp_path):
    out = tmp_path / "run"
    args = ["scan", str(demo_crawl.warc_paths[0]), "-o", str(out), "--json", "--workers", "1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["records"] > 0
    from neardup import open_run

    con = open_run(out)
    cid = con.execute("SELECT cluster_id FROM clusters LIMIT 1").fetchone()[0]
    con.close()
    result = runner.invoke(app, ["clusters", str(out), "--cluster", str(cid)])
    assert result.exit_code == 0 and "representative" in result.output


def test_missing_input_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["scan", str(tmp_path / "nope.warc.gz"), "-o", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "no such file" in result.output
    assert not (tmp_path / "r").exists()


def test_unknown_format_is_a_clear_error(tmp_path):
    bogus = tmp_path / "notes.docx"
    bogus.write_bytes(b"PK\x03\x04 not a crawl")
    result = runner.invoke(app, ["scan", str(bogus), "-o", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "notes.docx" in result.output


def test_nothing_usable_exits_non_zero_but_accounts_for_records(tmp_path):
    table = tmp_path / "empty.jsonl"
    table.write_text('{"url": "http://a.example/", "text": "   "}\n{"oops": 1}\n')
    result = runner.invoke(app, ["scan", str(table), "-o", str(tmp_path / "r"), "--workers", "1"])
    assert result.exit_code == 1
    assert "no usable page" in result.output
    from neardup import open_run

    con = open_run(tmp_path / "r")
    reasons = [
        r[0] for r in con.execute("SELECT skipped_reason FROM pages ORDER BY doc_id").fetchall()
    ]
    con.close()
    assert len(reasons) == 2 and all(reasons)


def test_bad_settings_are_refused(demo_crawl, tmp_path):
    args = ["scan", str(demo_crawl.warc_paths[0]), "-o", str(tmp_path / "r"), "--bands", "3"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "bands" in result.output


def test_dedup_runs_the_scan_itself(demo_crawl, tmp_path):
    out = tmp_path / "clean"
    result = runner.invoke(app, ["dedup", *map(str, demo_crawl.warc_paths), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert (out / "scan" / "pages.parquet").exists()
    assert (out / "remove_urls.txt").read_text().strip()
    assert len(list(out.glob("*.warc.gz"))) == len(demo_crawl.warc_paths)


def test_demo_crawl_command(tmp_path):
    result = runner.invoke(app, ["demo-crawl", str(tmp_path / "c"), "--pages", "10"])
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "c" / "warc").glob("*.warc.gz"))


def test_scan_crawl_adds_to_a_store_of_crawls(demo_crawl, tmp_path):
    store = tmp_path / "store"
    for label, paths in (("w1", demo_crawl.warc_paths[:2]), ("w2", demo_crawl.warc_paths[1:])):
        args = ["scan", *map(str, paths), "--out", str(store), "--crawl", label, "--workers", "1"]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert (store / "crawls" / label / "pages.parquet").exists()
    listed = json.loads((store / "crawls.json").read_text())
    labels = [c["label"] for c in (listed["crawls"] if isinstance(listed, dict) else listed)]
    assert labels == ["w1", "w2"]
    result = runner.invoke(app, ["evolution", str(store)])
    assert result.exit_code == 0, result.output
