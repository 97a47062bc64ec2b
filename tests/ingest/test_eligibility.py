"""The one eligibility rule (`ingest/eligibility.py`): its steps, their order, their
settings, and the folder walk that passes over neardup's own outputs."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import neardup
from neardup.cli.main import app
from neardup.config import Settings, SettingsError
from neardup.ingest.eligibility import (
    EXCLUDED_REASON,
    NOT_INCLUDED_REASON,
    REDIRECT_REASON,
    _split_crawler_file,
    crawler_file,
    enough_words,
    rule_of,
)
from neardup.ingest.readers import OUTPUT_MARKER, InputError, expand_inputs, neardup_outputs
from neardup.ingest.record import RawRecord
from neardup.pipeline.dedup import scan_and_deduplicate
from neardup.store.outputs import MARKER


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://example.org/robots.txt", "robots.txt"),
        ("http://EXAMPLE.org:8080/ROBOTS.TXT", "robots.txt"),
        ("https://example.org/favicon.ico", "favicon.ico"),
        ("https://example.org/ads.txt", "ads.txt"),
        ("https://example.org/humans.txt", "humans.txt"),
        ("https://example.org/sitemap.xml", "sitemap"),
        ("https://example.org/sitemap_index.xml", "sitemap"),
        ("https://example.org/sitemaps/sitemap-posts-2.xml.gz", "sitemap"),
        ("https://example.org/wp-sitemap-posts-post-1.xml", "sitemap"),
        ("https://example.org/.well-known/security.txt", ".well-known"),
        ("https://example.org/.well-known/openid-configuration", ".well-known"),
        # Pages, whatever their names suggest:
        ("https://example.org/docs/robots.txt", None),  # only the root's is the crawler's
        ("https://example.org/sitemap.html", None),  # a site map for people
        ("https://example.org/?file=robots.txt", None),
        ("https://example.org/robots.txt.html", None),
        ("https://example.org/", None),
        ("https://[::1", None),  # cannot be split: no crawler file, no crash
    ],
)
def test_crawler_files(url, name):
    assert crawler_file(url) == name


def rec(url: str, status: int | None = 200, reason: str | None = None) -> RawRecord:
    return RawRecord(
        "x.warc", 0, "response", url=url, status=status, skipped_reason=reason, payload=b"<p>x"
    )


def test_the_steps_in_order():
    rule = rule_of(Settings(exclude_url=(r"\?sessionid=",)))
    # The reader's reason comes first, then crawler files and patterns, then the status.
    assert rule.record_reason(rec("https://a.org/robots.txt", reason="revisit")) == "revisit"
    assert rule.record_reason(rec("https://a.org/robots.txt", 404)) == "crawler file (robots.txt)"
    assert rule.record_reason(rec("https://a.org/p?sessionid=1", 301)) == EXCLUDED_REASON
    assert rule.record_reason(rec("https://a.org/p", 301)) == REDIRECT_REASON
    assert rule.record_reason(rec("https://a.org/p", 404)) == "HTTP status 404"
    assert rule.record_reason(rec("https://a.org/p", 503)) == "HTTP status 503"
    assert rule.record_reason(rec("https://a.org/p", 200)) is None
    assert rule.record_reason(rec("https://a.org/p", None)) is None  # a table row, an HTML file
    skipped = rec("https://a.org/robots.txt")
    rule.mark(skipped)
    assert skipped.skipped_reason == "crawler file (robots.txt)" and skipped.payload is None


def test_settings_turn_steps_off():
    rule = rule_of(Settings(include_crawler_files=True, include_error_pages=True))
    assert rule.record_reason(rec("https://a.org/robots.txt")) is None
    assert rule.record_reason(rec("https://a.org/p", 404)) is None
    assert rule.record_reason(rec("https://a.org/p", 302)) == REDIRECT_REASON  # never a page


def test_include_patterns_any_one_suffices_and_exclude_wins():
    rule = rule_of(Settings(include_url=("^https://a\\.org/", "/docs/"), exclude_url=("draft",)))
    assert rule.url_reason("https://a.org/x") is None
    assert rule.url_reason("https://b.org/docs/x") is None
    assert rule.url_reason("https://b.org/x") == NOT_INCLUDED_REASON
    assert rule.url_reason("https://a.org/draft/x") == EXCLUDED_REASON
    # Searched anywhere, case-sensitive unless the pattern says (?i), as wget's regexes.
    assert rule_of(Settings(exclude_url=("PDF$",))).url_reason("https://a.org/x.pdf") is None
    assert rule_of(Settings(exclude_url=("(?i)PDF$",))).url_reason("https://a.org/x.pdf")


def test_enough_words_on_numbers_and_arrays():
    assert enough_words(5, 1, 5) and not enough_words(4, 1, 5) and not enough_words(9, 0, 1)
    got = enough_words(np.array([0, 3, 9]), np.array([0, 1, 5]), 3)
    assert got.tolist() == [False, True, True]


def test_settings_store_patterns_and_refuse_bad_ones():
    s = Settings(include_url=["a"], exclude_url=("b", "c"))  # a list, as JSON holds it
    assert s.include_url == ("a",) and Settings.from_json(s.to_json()) == s
    with pytest.raises(SettingsError, match=r"exclude_url: '\[' is not a regular expression"):
        Settings(exclude_url=("[",))
    # Settings stored before crawler files were a rule of their own compared them.
    old = {k: v for k, v in Settings().to_dict().items() if k != "include_crawler_files"}
    assert Settings.from_dict(old).include_crawler_files is True
    with pytest.raises(SettingsError, match="exclude_url: \\['b'\\] asked, none in the index"):
        Settings().check_same_pages(Settings(exclude_url=("b",)))


def test_the_marker_is_the_output_rule_s():
    assert OUTPUT_MARKER == MARKER


def test_folder_scan_passes_over_a_run_stored_inside(demo_crawl, tmp_path):
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    warc = crawl / demo_crawl.warc_paths[0].name
    shutil.copy(demo_crawl.warc_paths[0], warc)
    alone = neardup.scan([str(warc)], tmp_path / "alone", workers=1)
    neardup.scan([str(warc)], crawl / "runs" / "first", workers=1)  # a run kept beside it
    assert list((crawl / "runs" / "first").glob("*.parquet"))  # tables a walk would read

    assert expand_inputs([str(crawl)]) == [(str(warc), "warc")]
    assert neardup_outputs([str(crawl)]) == [(str(crawl / "runs" / "first"), "run")]
    again = neardup.scan([str(crawl)], tmp_path / "again", workers=1)
    assert again.summary["records"] == alone.summary["records"]
    assert again.summary["clusters"] == alone.summary["clusters"]
    sources = set(pq.read_table(again.path / "pages.parquet").column("source").to_pylist())
    assert sources == {str(warc)}
    # A run given as the input itself is refused, in one line.
    with pytest.raises(InputError, match="a neardup output \\(run\\), not crawl files"):
        expand_inputs([str(crawl / "runs" / "first")])
    # The command line says what it passed over.
    result = CliRunner().invoke(app, ["scan", str(crawl), "-o", str(tmp_path / "cli")])
    assert result.exit_code == 0, result.output
    assert f"not read: {crawl / 'runs' / 'first'} (a neardup run" in result.output


def test_a_dedup_output_s_archives_are_read_not_its_lists(demo_crawl, tmp_path):
    clean = tmp_path / "clean"
    scan_and_deduplicate([str(demo_crawl.warc_paths[0])], clean, workers=1)
    got = expand_inputs([str(clean)])
    assert [p for p, _ in got] == [str(clean / demo_crawl.warc_paths[0].name)]


def test_jsonl_rows_parsed_in_the_workers_get_the_rule(tmp_path):
    text = "a page of text long enough to be compared with another page of the same text"
    rows = [
        {"url": "https://a.example/robots.txt", "text": text},
        {"url": "https://b.example/robots.txt", "text": text},
        {"url": "https://a.example/print/1", "text": text},
        {"url": "https://a.example/1", "text": text},
        {"url": "https://b.example/1", "text": text},
    ]
    path = tmp_path / "pages.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    settings = Settings(exclude_url=("/print/",))
    run = neardup.scan([str(path)], tmp_path / "run", settings=settings, workers=2)
    reasons = pq.read_table(run.path / "pages.parquet").column("skipped_reason").to_pylist()
    assert reasons == ["crawler file (robots.txt)"] * 2 + [EXCLUDED_REASON, None, None]
    assert run.summary["clusters"] == 1


_URL_PIECES = st.sampled_from(
    [
        "http://",
        "HTTPS://",
        "h.example",
        "/",
        "//",
        "?",
        "#",
        "robots.txt",
        "ROBOTS.TXT",
        "Sitemap",
        "_index.xml",
        ".txt.gz",
        ".well-known",
        ".WELL-KNOWN/",
        "ads.txt",
        "favicon.ico",
        "page",
        "\t",
        "\n",
        " ",
        "[",
        ":80",
    ]
)


@given(st.lists(_URL_PIECES, max_size=10).map("".join))
def test_crawler_file_without_splitting_agrees_with_the_split(url):
    """The quick test that skips `urlsplit` decides exactly as the split path does, on URLs
    made of the pieces where the two could part: names, case, queries and fragments before
    and after the path, tabs and line breaks that the split deletes."""
    assert crawler_file(url) == _split_crawler_file(url)
