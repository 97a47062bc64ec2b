"""Link targets resolve to pages: request-first WARCs, URL identity, redirects, refetches.

Crawlers (Common Crawl, Heritrix) write a request record before each response and a
metadata record after it, all with the same target URL. A link must resolve to the response
(the page), so the link graph, and with it replicated collections, must not depend on the
record layout. The WARCs are written with warcio, not with neardup's own writer.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from ccwarc import Fetch, write_warc

import neardup
from neardup.linkgraph.collections import collections_from_run
from neardup.linkgraph.mirrors import mirrors_from_run
from neardup.store.run import open_run

WORDS = [f"w{i}" for i in range(3000)]
# A tree of 12 pages: index -> sections -> leaves.
TREE = {
    "index": ["s1", "s2", "s3"],
    "s1": ["a1", "a2", "a3"],
    "s2": ["b1", "b2"],
    "s3": ["c1", "c2", "c3"],
}


def _text(rng: random.Random, n: int = 160) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _html(title: str, body: str, hrefs: list[str]) -> str:
    anchors = "".join(f'<li><a href="{h}">{h}</a></li>' for h in hrefs)
    head = f"<html><head><title>{title}</title></head>"
    return f"{head}<body><p>{body}</p><ul>{anchors}</ul></body></html>"


def _collection_fetches() -> list[Fetch]:
    """The same hyperlinked collection on two hosts, plus unrelated pages on a third.

    Links are written as crawled HTML writes them: relative, with dot segments, with upper
    case hosts, default ports and fragments, so only normalised URLs meet their pages."""
    rng = random.Random(7)
    names = list(dict.fromkeys([*TREE, *(c for cs in TREE.values() for c in cs)]))
    texts = {n: _text(rng) for n in names}
    fetches = []
    for host in ("docs.example.org", "mirror.example.net"):
        for n in names:
            hrefs = []
            for i, child in enumerate(TREE.get(n, [])):
                if i == 0:
                    hrefs.append(f"{child}.html")
                elif i == 1:
                    hrefs.append(f"http://{host.upper()}:80/manual/x/../{child}.html#top")
                else:
                    hrefs.append(f"./{child}.html")
            fetches.append(Fetch(f"http://{host}/manual/{n}.html", _html(n, texts[n], hrefs)))
    for i in range(6):
        fetches.append(Fetch(f"http://other.example.com/p{i}.html", _html("o", _text(rng), [])))
    return fetches


def _clusters(run: Path) -> set[frozenset[str]]:
    con = open_run(run)
    try:
        rows = con.sql(
            "SELECT cluster_id, list(url ORDER BY url) FROM pages "
            "WHERE cluster_size >= 2 GROUP BY cluster_id"
        ).fetchall()
    finally:
        con.close()
    return {frozenset(urls) for _, urls in rows}


def _url_links(run: Path) -> set[tuple[str, str, str | None]]:
    """(source URL, target URL, URL of the resolved target page and its record type)."""
    con = open_run(run)
    try:
        rows = con.sql(
            "SELECT s.url, l.dst_url, d.url, d.record_type FROM links AS l "
            "JOIN pages AS s ON s.doc_id = l.src_doc LEFT JOIN pages AS d ON d.doc_id = l.dst_doc"
        ).fetchall()
    finally:
        con.close()
    return {tuple(r) for r in rows}


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("layouts")
    fetches = _collection_fetches()
    runs = []
    for name, first in (("response-only", False), ("request-first", True)):
        warc = write_warc(tmp / f"{name}.warc.gz", fetches, request_first=first)
        runs.append(neardup.scan([warc], tmp / f"run-{name}", workers=1).path)
    return runs[0], runs[1]


def test_request_first_warc_gives_the_same_clusters_mirrors_and_collections(layouts):
    plain, request_first = layouts
    clusters = _clusters(plain)
    assert len(clusters) == 12 and all(len(c) == 2 for c in clusters)
    assert _clusters(request_first) == clusters

    def mirror_pairs(run: Path) -> set[tuple[str, str, str]]:
        pairs = mirrors_from_run(run).pairs.select(["host_a", "host_b", "kind"]).to_pylist()
        return {(p["host_a"], p["host_b"], p["kind"]) for p in pairs}

    assert {frozenset(p[:2]) for p in mirror_pairs(plain)} == {
        frozenset({"docs.example.org", "mirror.example.net"})
    }
    assert mirror_pairs(request_first) == mirror_pairs(plain)

    def copies(run: Path) -> set[tuple[str, int]]:
        found = collections_from_run(run)
        return {(c["host"], c["pages"]) for c in found.copies.to_pylist()}

    expected = {("docs.example.org", 12), ("mirror.example.net", 12)}
    assert copies(plain) == expected
    assert copies(request_first) == expected


def test_links_resolve_to_the_response_not_the_request(layouts):
    _, request_first = layouts
    links = _url_links(request_first)
    assert len(links) == 2 * 11  # every tree edge on both hosts
    for _src, dst, page_url, record_type in links:
        assert page_url == dst
        assert record_type == "response"
    # http://DOCS.EXAMPLE.ORG:80/manual/x/../s2.html#top is the page http://docs.example.org/...
    assert (
        "http://docs.example.org/manual/index.html",
        "http://docs.example.org/manual/s2.html",
        "http://docs.example.org/manual/s2.html",
        "response",
    ) in links


def test_redirect_chains_and_refetches_resolve_to_the_final_latest_page(tmp_path: Path):
    rng = random.Random(3)
    hub = _html(
        "hub",
        _text(rng),
        [
            "http://Site.example:80/a/../old#x",  # -> 301 /mid -> 302 /new (200)
            "/twice",  # fetched twice, the later fetch written first
            "/loop1",  # 301 -> /loop2 -> 301 -> /loop1: bounded, no hang
        ],
    )
    fetches = [
        Fetch("http://site.example/", hub, date="2024-01-01T00:00:00Z"),
        Fetch("http://site.example/old", status=301, location="/mid"),
        Fetch("http://site.example/mid", status=302, location="http://SITE.example/new#frag"),
        Fetch("http://site.example/new", _html("new", _text(rng), [])),
        Fetch(
            "http://site.example/twice", _html("v2", _text(rng), []), date="2024-03-01T00:00:00Z"
        ),
        Fetch(
            "http://site.example/twice", _html("v1", _text(rng), []), date="2024-02-01T00:00:00Z"
        ),
        Fetch("http://site.example/loop1", status=301, location="/loop2"),
        Fetch("http://site.example/loop2", status=301, location="/loop1"),
    ]
    warc = write_warc(tmp_path / "redirects.warc.gz", fetches, request_first=True)
    run = neardup.scan([warc], tmp_path / "run", workers=1).path
    con = open_run(run)
    try:
        rows = con.sql(
            "SELECT l.dst_url, d.url, d.title, d.status, d.record_type FROM links AS l "
            "LEFT JOIN pages AS d ON d.doc_id = l.dst_doc ORDER BY l.dst_url"
        ).fetchall()
    finally:
        con.close()
    got = {r[0]: r[1:] for r in rows}
    assert got["http://site.example/old"] == ("http://site.example/new", "new", 200, "response")
    assert got["http://site.example/twice"] == ("http://site.example/twice", "v2", 200, "response")
    loop = got["http://site.example/loop1"]
    assert loop[0] in {"http://site.example/loop1", "http://site.example/loop2"}
    assert loop[3] == "response"
