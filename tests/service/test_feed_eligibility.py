"""`neardup add` (`add_files`) indexes the pages a scan of the same files compares, so the
index's groups are the scan's clusters: on a generated crawl with error pages, revisits,
redirects, non-HTML records and a crawler's own files, with the default rule, with crawler
files and error pages included, and with URL patterns; and the service's `/pages` and
`check` follow the same rule.

The index holds one page per URL, the scan one per record: the scan's clusters are compared
as sets of URLs (the demo crawl fetches each page URL once, so here they are the same).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eligibility_crawl import write_artefact_warc
from run_groups import scan_groups
from typer.testing import CliRunner

import neardup
from neardup.cli.main import app
from neardup.config import Settings, SettingsError
from neardup.index.feed import add_files
from neardup.service import PageUpdate, ServiceIndex
from neardup.synth import generate_demo_crawl

runner = CliRunner()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A demo crawl (error pages, revisits, redirects, images, CSS) and the crawl file of
    crawler files, error pages and printable copies."""
    base = tmp_path_factory.mktemp("eligibility")
    demo = generate_demo_crawl(base / "demo", n_docs=60, seed=7, n_unrelated=10)
    extra = base / "extra"
    extra.mkdir()
    return [*map(str, demo.warc_paths), str(write_artefact_warc(extra))]


def index_groups(store: Path) -> set[frozenset[str]]:
    with ServiceIndex(store) as ix:
        return {frozenset(m) for m in ix.groups.values() if len(m) >= 2}


def agree(inputs: list[str], base: Path, settings: Settings) -> tuple[dict, dict]:
    """Scan and index `inputs` with `settings`; assert the two give the same groups and
    return the scan's summary and add's totals."""
    run = neardup.scan(inputs, base / "run", settings=settings, workers=1)
    ServiceIndex(base / "store", settings).close()  # a new index with these settings
    totals = add_files(base / "store", inputs, workers=1)
    want = scan_groups(run.path)
    assert want, "the crawl has clusters: the comparison is not vacuous"
    assert index_groups(base / "store") == want
    assert totals["duplicate_groups"] == len(want)
    return run.summary, totals


def test_index_and_scan_agree_and_leave_out_the_same_records(inputs, tmp_path):
    summary, totals = agree(inputs, tmp_path, Settings())
    skipped = summary["skipped_by_reason"]
    # The crawl holds every kind of record the rule is about.
    for reason in (
        "crawler file (robots.txt)",
        "crawler file (sitemap)",
        "crawler file (.well-known)",
        "HTTP status 404",
        "redirect (HTTP 3xx)",
        "revisit (duplicate marked by the crawler)",
        "unsupported content type",
        "not a page",
    ):
        assert skipped.get(reason, 0) > 0, reason
    # add counts what it leaves out by the scan's reasons (redirects it sends as redirects).
    for reason, count in skipped.items():
        if reason != "redirect (HTTP 3xx)":
            assert totals[f"skipped: {reason}"] == count, reason
    with ServiceIndex(tmp_path / "store") as ix:
        stored = set(ix.pages)
        assert not [u for u in stored if u.endswith(("robots.txt", "security.txt", ".xml"))]
        assert not [u for u in stored if "/no/such/page" in u or "missing-page" in u]
        assert ix.pages["http://www.site0.example/"].redirect_to == "https://www.site0.example/"


def test_crawler_files_and_error_pages_included_on_both_sides(inputs, tmp_path):
    settings = Settings(include_crawler_files=True, include_error_pages=True)
    summary, _ = agree(inputs, tmp_path, settings)
    assert "crawler file (robots.txt)" not in summary["skipped_by_reason"]
    groups = index_groups(tmp_path / "store")
    robots = {u for g in groups for u in g if u.endswith("/robots.txt")}
    assert len(robots) >= 6  # the six hosts' robots.txt, one text: one group


def test_url_patterns_on_scan_and_add(inputs, tmp_path):
    settings = Settings(exclude_url=("/print/",))
    summary, totals = agree(inputs, tmp_path, settings)
    assert summary["skipped_by_reason"]["excluded by URL pattern"] == 2
    assert totals["skipped: excluded by URL pattern"] == 2
    assert not [u for g in index_groups(tmp_path / "store") for u in g if "/print/" in u]
    # The store keeps its patterns: add again without any applies them; others are refused.
    again = add_files(tmp_path / "store", inputs[-1:], workers=1)
    assert again["skipped: excluded by URL pattern"] == 2
    with pytest.raises(SettingsError, match="exclude_url"):
        add_files(tmp_path / "store", inputs[-1:], workers=1, exclude_url=["/news/"])

    only = Settings(include_url=(r"^https://www\.site[0-5]\.example/",))
    run = neardup.scan(inputs, tmp_path / "only", settings=only, workers=1)
    hosts = {u.split("/")[2] for g in scan_groups(run.path) for u in g}
    assert hosts and hosts <= {f"www.site{i}.example" for i in range(6)}
    assert run.summary["skipped_by_reason"]["URL matches no include pattern"] > 0


def test_pages_and_check_follow_the_rule(tmp_path):
    text = " ".join(f"word{i}" for i in range(20))
    with ServiceIndex(tmp_path / "store", Settings(exclude_url=("/tmp/",), min_tokens=30)) as ix:
        report = ix.apply(
            [
                PageUpdate("https://a.example/robots.txt", text=text),
                PageUpdate("https://a.example/tmp/x", text=text),
                PageUpdate("https://a.example/x", text=text),
                PageUpdate("https://b.example/x", text=text),
            ]
        )
        assert report.skipped == 2 and report.pages == 2
        assert set(ix.pages) == {"https://a.example/x", "https://b.example/x"}
        # 20 words are fewer than min_tokens: the scan compares neither page, nor does check.
        assert not [m for m in ix.groups.values() if len(m) > 1]
        assert ix.check(text=text).is_duplicate is False


def test_cli_patterns_and_one_line_refusals(inputs, tmp_path):
    result = runner.invoke(
        app, ["scan", *inputs, "-o", str(tmp_path / "bad"), "--exclude-url", "(unclosed"]
    )
    assert result.exit_code == 2
    assert "--exclude-url: '(unclosed' is not a regular expression" in result.output
    assert "Traceback" not in result.output

    store = str(tmp_path / "store")
    args = ["add", store, inputs[-1], "--exclude-url", "/print/", "--json", "--workers", "1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)  # the report, whole, for scripts
    with ServiceIndex(store) as ix:
        assert ix.settings.exclude_url == ("/print/",)
        assert ix.pages and not [u for u in ix.pages if "/print/" in u]
    result = runner.invoke(app, ["add", store, inputs[-1], "--include-url", "site1"])
    assert result.exit_code == 2
    assert "include_url" in result.output and len(result.output.strip().splitlines()) == 1


def test_check_looks_a_text_up_whatever_the_url_patterns(tmp_path):
    # A looked-up text has no URL: the patterns, which choose stored pages, do not apply.
    text = " ".join(f"word{i}" for i in range(60))
    with ServiceIndex(tmp_path / "store", Settings(include_url=("^https://a\\.example/",))) as ix:
        report = ix.apply(
            [
                PageUpdate("https://a.example/1", text=text),
                PageUpdate("https://b.example/1", text=text),
            ]
        )
        assert report.skipped == 1 and set(ix.pages) == {"https://a.example/1"}
        found = ix.check(text=text)
        assert found.is_duplicate and found.matches[0].url == "https://a.example/1"


def test_cli_add_chooses_crawler_files_for_a_new_store_only(inputs, tmp_path):
    store = str(tmp_path / "store")
    args = ["add", store, inputs[-1], "--include-crawler-files", "--workers", "1"]
    assert runner.invoke(app, args).exit_code == 0
    with ServiceIndex(store) as ix:
        assert "https://www.site0.example/robots.txt" in ix.pages
    result = runner.invoke(app, ["add", store, inputs[-1], "--no-include-crawler-files"])
    assert result.exit_code == 2 and "include_crawler_files" in result.output
    assert runner.invoke(app, ["add", store, inputs[-1], "--workers", "1"]).exit_code == 0
