"""What the commands that show a page's text say of a run scanned with `--no-text`: the
web UI finds its pages by URL and says that it keeps no text (page, text search,
diff), the report leaves out its snippets and says why, `neardup query` keeps candidates by
their resemblance (no containment to give), and `dedup --run` refuses `--no-text`."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from crawl_texts import random_text
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from neardup.cli.main import app
from neardup.config import Settings
from neardup.crawls.lost_found import query
from neardup.crawls.store import add_crawl
from neardup.report import render_report
from neardup.ui import create_app
from neardup.ui.app import NO_TEXT


def _rows(path: Path) -> Path:
    """Pages under their own titled URLs: three copies of one text, and six others."""
    copy = random_text(5, 300)
    pages = {f"https://copies.example/c{i}": copy for i in range(3)}
    pages |= {f"https://other.example/o{i}": random_text(20 + i, 300) for i in range(6)}
    path.write_text(
        "".join(
            json.dumps({"url": u, "text": t, "title": u[-2:]}) + "\n" for u, t in pages.items()
        ),
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same input scanned with and without its text, from the command line."""
    tmp = tmp_path_factory.mktemp("no-text")
    rows = _rows(tmp / "rows.jsonl")
    runner = CliRunner()
    for name, extra in (("kept", []), ("dropped", ["--no-text"])):
        result = runner.invoke(app, ["scan", str(rows), "-o", str(tmp / name), "-q", *extra])
        assert result.exit_code == 0, result.output
    return tmp / "kept", tmp / "dropped"


def test_the_command_line_records_the_choice(runs: tuple[Path, Path]) -> None:
    kept, dropped = runs
    for run, keep in ((kept, True), (dropped, False)):
        recorded = json.loads((run / "settings.json").read_text(encoding="utf-8"))
        assert recorded["keep_text"] is keep
    assert pq.read_table(dropped / "page_text.parquet").num_rows == 0
    assert pq.read_table(kept / "page_text.parquet").num_rows == 9


def test_dedup_keeps_no_text_unless_asked(runs: tuple[Path, Path], tmp_path: Path) -> None:
    """dedup's own scan keeps no text by default (the copy is made from the inputs), and
    `--text` keeps it; with a finished scan (`--run`) either is refused."""
    rows = _rows(tmp_path / "rows.jsonl")
    runner = CliRunner()
    for name, extra, keep in (("plain", [], False), ("kept", ["--text"], True)):
        out = tmp_path / name
        result = runner.invoke(app, ["dedup", str(rows), "-o", str(out), "-q", *extra])
        assert result.exit_code == 0, result.output
        recorded = json.loads((out / "scan" / "settings.json").read_text(encoding="utf-8"))
        assert recorded["keep_text"] is keep
        assert (pq.read_table(out / "scan" / "page_text.parquet").num_rows > 0) is keep
    plain = (tmp_path / "plain" / "rows.jsonl").read_text(encoding="utf-8")
    assert plain == (tmp_path / "kept" / "rows.jsonl").read_text(encoding="utf-8")
    assert plain.count("\n") == 7  # the three copies are one
    kept, _ = runs
    for flag in ("--text", "--no-text"):
        result = runner.invoke(
            app, ["dedup", "--run", str(kept), "-o", str(tmp_path / "again"), flag]
        )
        assert result.exit_code == 2
        assert "--text/--no-text" in result.output and "scan's settings" in result.output


def test_the_ui_finds_pages_by_url_and_says_it_has_no_text(
    runs: tuple[Path, Path],
) -> None:
    kept, dropped = runs
    with_text = TestClient(create_app(kept), base_url="http://127.0.0.1")
    without = TestClient(create_app(dropped), base_url="http://127.0.0.1")
    # a word of the texts: found with the text, not without (and the search says why)
    word = random_text(5, 300).split()[0]
    want = with_text.get("/api/search", params={"q": word, "field": "text"}).json()
    got = without.get("/api/search", params={"q": word, "field": "text"}).json()
    assert want["rows"] and not got["rows"]
    assert NO_TEXT in got["notes"] and NO_TEXT not in want["notes"]
    for client in (with_text, without):  # by URL, as with the text
        by_url = client.get("/api/search", params={"q": "other.example/o2"}).json()
        assert [r["url"] for r in by_url["rows"]] == ["https://other.example/o2"]
    page = without.get("/page/0")
    assert page.status_code == 200 and NO_TEXT in page.text
    assert NO_TEXT not in with_text.get("/page/0").text
    # no link to a side-by-side view that has no text to show (a member of the copies' cluster)
    cluster = with_text.get("/api/clusters").json()["rows"][0]["cluster_id"]
    for client, links in ((with_text, True), (without, False)):
        members = client.get(f"/api/cluster/{cluster}").json()["members"]["rows"]
        member = next(m["doc_id"] for m in members if not m["is_representative"])
        assert ('class="diff-link"' in client.get(f"/page/{member}").text) is links
        assert ("/diff?" in client.get(f"/cluster/{cluster}").text) is links
    diff = without.get("/api/diff", params={"a": 0, "b": 1})
    assert diff.status_code == 404 and diff.json()["detail"] == NO_TEXT
    assert with_text.get("/api/diff", params={"a": 0, "b": 1}).status_code == 200


def test_the_report_leaves_out_the_snippets(runs: tuple[Path, Path], tmp_path: Path) -> None:
    kept, dropped = runs
    note = "No text snippets: the run keeps no page text"
    html = render_report(dropped)
    assert note in html and 'class="snippet"' not in html
    assert note not in render_report(kept)


def test_crawl_query_keeps_candidates_by_resemblance(tmp_path: Path) -> None:
    rows = _rows(tmp_path / "rows.jsonl")
    settings = Settings(num_perm=84)
    add_crawl([rows], tmp_path / "with", "a", settings, workers=1)
    args = ["crawl", str(rows), "--label", "a", "--store", str(tmp_path / "without")]
    result = CliRunner().invoke(app, [*args, "--num-perm", "84", "--workers", "1", "--no-text"])
    assert result.exit_code == 0, result.output
    document = tmp_path / "copy.txt"
    document.write_text(random_text(5, 300), encoding="utf-8")
    want = query(tmp_path / "with", document)
    got = query(tmp_path / "without", document)
    assert [h["url"] for h in got] == [h["url"] for h in want]
    assert len(got) == 3 and all(h["containment"] is None for h in got)
    assert all(h["containment"] == pytest.approx(1.0) for h in want)
    with pytest.raises(Exception, match="scanned with --no-text"):
        query(tmp_path / "without", "https://copies.example/c0")
