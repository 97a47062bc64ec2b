"""The web UI on a real uvicorn server: its JSON API over HTTP, and the pages in Chromium.

The server runs in a thread on 127.0.0.1 at a free port, over a copy of the shared demo run
(the UI writes the collections and mirrors Parquet files into a run that lacks them). The
browser test drives Debian's Chromium through Playwright; it is skipped only when
/usr/bin/chromium is absent on a developer machine, never on CI (`CI` set).
"""

from __future__ import annotations

import io
import os
import re
import shutil
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import uvicorn
from door_server import serving

import neardup
from neardup.linkgraph.collections import collections_from_run
from neardup.linkgraph.mirrors import mirrors_from_run
from neardup.ui import create_app
from neardup.ui.diff import word_diff
from neardup.ui.queries import PAGE_SIZE

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",  # only loopback resolves
]


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server, timeout=30) as client:
        yield client


def compared_texts(run: Path) -> dict[int, str]:
    texts = pq.read_table(run / "page_text.parquet")
    return dict(zip(texts["doc_id"].to_pylist(), texts["text"].to_pylist(), strict=True))


def diverse_cluster(run: Path) -> dict:
    """The largest cluster whose members are not all identical (there is a diff to show)."""
    clusters = pq.read_table(run / "clusters.parquet").to_pylist()
    return min(
        (c for c in clusters if c["min_similarity"] < 0.95),
        key=lambda c: (-c["size"], c["min_similarity"], c["cluster_id"]),
    )


def _words(text: str | None) -> list[str]:
    return re.findall(r"[^\W_]+", (text or "").lower())


def test_api_search_by_text_is_paged(http, ui_run):
    texts = compared_texts(ui_run)
    word = "socket"
    pages = pq.read_table(ui_run / "pages.parquet").to_pylist()
    where = {r["doc_id"]: (_words(r["title"]), _words(r["url"])) for r in pages}
    # the word as a word; ranked: in the title first, then in the URL, then crawl order
    # (tests/ui/test_search_index.py checks many more queries against the same definition)
    expected = sorted(
        (d for d, t in texts.items() if word in _words(t)),
        key=lambda d: (word not in where[d][0], word not in where[d][1], d),
    )
    assert len(expected) > PAGE_SIZE  # enough hits for two pages
    assert word in where[expected[0]][0], "some page has the word in its title"
    first = http.get("/api/search", params={"q": word}).json()
    second = http.get("/api/search", params={"q": word, "page": 2}).json()
    assert first["field"] == "text" and first["has_more"]
    got = [r["doc_id"] for r in first["rows"] + second["rows"]]
    assert got == expected[: len(got)] and len(first["rows"]) == PAGE_SIZE
    assert all(word in _words(r["snippet"]) for r in first["rows"])


def test_api_search_by_url(http, ui_run):
    pages = pq.read_table(ui_run / "pages.parquet")
    pages = pages.filter(pc.is_null(pages["skipped_reason"]))
    expected = [
        d
        for d, u, t in zip(*(pages[c].to_pylist() for c in ("doc_id", "url", "title")), strict=True)
        if "old-docs.example/3.11" in u.lower() or "old-docs.example/3.11" in (t or "").lower()
    ]
    body = http.get("/api/search", params={"q": "old-docs.example/3.11"}).json()
    assert body["field"] == "url"
    assert [r["doc_id"] for r in body["rows"]] == expected[:PAGE_SIZE]


def test_api_cluster_members_and_pairs(http, ui_run):
    c = diverse_cluster(ui_run)
    body = http.get(f"/api/cluster/{c['cluster_id']}").json()
    pages = pq.read_table(ui_run / "pages.parquet").to_pylist()
    members = {p["doc_id"] for p in pages if p["cluster_id"] == c["cluster_id"]}
    rows = body["members"]["rows"]
    assert {r["doc_id"] for r in rows} == members and len(rows) == c["size"]
    assert rows[0]["is_representative"] and rows[0]["doc_id"] == c["representative_doc_id"]
    assert body["pairs"] and all(
        p["doc_a"] in members and p["doc_b"] in members for p in body["pairs"]
    )
    assert http.get("/api/cluster/987654321").status_code == 404


def test_api_diff(http, ui_run):
    c = diverse_cluster(ui_run)
    pages = pq.read_table(ui_run / "pages.parquet").to_pylist()
    other = min(
        (p for p in pages if p["cluster_id"] == c["cluster_id"] and not p["is_representative"]),
        key=lambda p: p["similarity_to_representative"],
    )
    a, b = c["representative_doc_id"], other["doc_id"]
    body = http.get("/api/diff", params={"a": a, "b": b}).json()
    texts = compared_texts(ui_run)
    assert body["resemblance"] == pytest.approx(neardup.resemblance(texts[a], texts[b]))
    assert body["changed_words"] > 0
    # the two sides rebuild the two texts word for word
    assert " ".join(t for _, t in body["left"]).split() == texts[a].split()
    assert " ".join(t for _, t in body["right"]).split() == texts[b].split()
    assert {op for op, _ in body["left"]} <= {"equal", "del"}
    assert {op for op, _ in body["right"]} <= {"equal", "ins"}


def test_word_diff_escapes_and_marks():
    d = word_diff("the <b>old</b> text here", "the <b>new</b> text here")
    assert str(d.html("left")) == "the <del>&lt;b&gt;old&lt;/b&gt;</del> text here"
    assert str(d.html("right")) == "the <ins>&lt;b&gt;new&lt;/b&gt;</ins> text here"
    assert d.changed_words == 1


def test_api_mirrors_collections_rollup(http, ui_run):
    mirrors = http.get("/api/mirrors").json()["rows"]
    expected = mirrors_from_run(ui_run).pairs.to_pylist()
    assert [(m["host_a"], m["host_b"]) for m in mirrors] == [
        (m["host_a"], m["host_b"]) for m in expected
    ]
    collections = http.get("/api/collections").json()["rows"]
    clusters = collections_from_run(ui_run).clusters.to_pylist()
    assert [(c["cardinality"], c["size"]) for c in collections] == [
        (c["cardinality"], c["size"]) for c in clusters
    ]
    body = http.get("/api/rollup", params={"q": "socket"}).json()
    assert body["results"] > len(body["entries"]) > 0  # copies fold under their entries
    assert (
        sum(1 + len(e["more_pages"]) + len(e["replicas"]) for e in body["entries"])
        == (body["results"])
    )


def test_html_pages_have_no_external_assets(http, ui_run):
    c = diverse_cluster(ui_run)
    for path in (
        "/",
        "/search?q=socket",
        f"/cluster/{c['cluster_id']}",
        "/mirrors",
        "/collections",
        "/rollup?q=socket",
    ):
        r = http.get(path)
        assert r.status_code == 200, path
        assert "text/html" in r.headers["content-type"]
        assert not re.search(r"<(script|img|iframe)[^>]+src=|<link ", r.text), path
    assert http.get("/page/987654321").status_code == 404


def _is_loopback(url: str) -> bool:
    return urlparse(url).hostname == "127.0.0.1" or url.startswith(("data:", "about:"))


def test_ui_in_chromium(server, ui_run, tmp_path):
    if not CHROMIUM.exists() and not os.environ.get("CI"):
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium); it runs on CI")
    from PIL import Image
    from playwright.sync_api import sync_playwright

    c = diverse_cluster(ui_run)
    query = c["representative_title"].split()[
        0
    ]  # the module name, e.g. "xml.sax.handler.ContentHandler"
    outside: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})

            def guard(route):
                if _is_loopback(route.request.url):
                    route.continue_()
                else:
                    outside.append(route.request.url)
                    route.abort()

            page.route("**/*", guard)
            page.goto(server + "/")
            assert page.locator("table#clusters tbody tr").count() > 0
            page.fill("input[name=q]", query)
            page.press("input[name=q]", "Enter")
            page.wait_for_url(re.compile(r"/search\?"))
            assert page.locator("tr.result").count() >= 1
            page.click(f"a.cluster-link[href='/cluster/{c['cluster_id']}']")
            page.wait_for_url(re.compile(rf"/cluster/{c['cluster_id']}$"))
            assert page.locator("tr.member").count() == c["size"]
            page.locator("a.diff-link").last.click()
            page.wait_for_url(re.compile(r"/diff\?"))
            changes = page.locator("#left del, #right ins")
            assert changes.count() > 0
            page.click("#next-change")
            shot = tmp_path / "diff.png"
            page.screenshot(path=str(shot), full_page=False)
        finally:
            browser.close()
    assert outside == []
    keep = os.environ.get("NEARDUP_UI_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / "diff.png")
    image = Image.open(io.BytesIO(shot.read_bytes())).convert("RGB")
    assert image.size == (1280, 900)
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # text, highlights, header: not blank
    white = sum(n for n, rgb in colours if rgb == (255, 255, 255))
    assert white < 0.95 * image.size[0] * image.size[1]


# ------------------------------------------------------------------ the door (service/door.py)

UI_TOKEN = "ui-door-token"


def test_ui_without_token_is_loopback_only(http):
    assert http.get("/api/summary").status_code == 200
    r = http.get("/api/summary", headers={"Host": "rebind.example"})
    assert r.status_code == 421 and "rebind.example" in r.json()["detail"]
    page = http.get("/api/docs").text  # the docs page's assets are served, not a CDN's
    assert "cdn." not in page and "/api/docs/static/swagger-ui-bundle.js" in page


def test_ui_with_token_asks_every_request_for_it(ui_run):
    from door_server import send_streaming

    app = create_app(ui_run, token=UI_TOKEN, hosts=["dup.internal"])
    with serving(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        r = client.get("/")
        assert r.status_code == 401 and r.headers["www-authenticate"] == 'Basic realm="neardup"'
        assert client.get("/api/summary", auth=("anyone", "wrong")).status_code == 403
        assert client.get("/", auth=("anyone", UI_TOKEN)).status_code == 200  # a browser's way
        bearer = {"Authorization": f"Bearer {UI_TOKEN}"}
        assert client.get("/api/summary", headers=bearer).status_code == 200
        other = {**bearer, "Host": "dup.internal"}
        assert client.get("/api/summary", headers=other).status_code == 200
        # A body sent to the UI without the token is never read.
        ans = send_streaming(base, "POST", "/api/summary", {}, 200 * 1024 * 1024)
        assert (ans.status, ans.sent) == (401, 0)


def test_ui_command_needs_a_token_beyond_loopback(ui_run, monkeypatch):
    from typer.testing import CliRunner

    from neardup.cli.main import app as cli_app

    started = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: started.append(kw))
    monkeypatch.delenv("NEARDUP_TOKEN", raising=False)
    res = CliRunner().invoke(cli_app, ["ui", str(ui_run), "--host", "0.0.0.0"])
    assert res.exit_code != 0 and "--token" in res.output and started == []
    monkeypatch.setenv("NEARDUP_TOKEN", UI_TOKEN)
    res = CliRunner().invoke(cli_app, ["ui", str(ui_run), "--host", "0.0.0.0"])
    assert res.exit_code == 0, res.output
    assert "EVERY interface" in res.output and started[0]["host"] == "0.0.0.0"
