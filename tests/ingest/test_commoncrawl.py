"""Common Crawl WET and WAT files: WET conversions are pages, WAT records are link sources.

The WET text is what neardup's extractor took from the WARC's pages, written as WET
`conversion` records by warcio; the WAT records list the pages' links in Common Crawl's JSON.
The reference for near-duplicates is exact Jaccard of word 5-shingle sets, computed here.
"""

from __future__ import annotations

import itertools
import random
import re
from pathlib import Path

import pytest
from ccwarc import Fetch, write_warc, write_wat, write_wet
from conftest import shared_data

import neardup
from neardup.ingest import extract_page, iter_records
from neardup.ingest.commoncrawl import WAT_REASON
from neardup.store.run import open_run

WORDS = [f"word{i}" for i in range(5000)]


def _corpus() -> list[Fetch]:
    """40 base texts, each with 3 edited copies (0 to 40 of 300 words replaced), on 4 hosts,
    linking to one another."""
    rng = random.Random(11)
    fetches = []
    for b in range(40):
        base = [rng.choice(WORDS) for _ in range(300)]
        for v in range(4):
            words = list(base)
            for i in rng.sample(range(300), rng.choice([0, 1, 2, 3, 5, 10, 40]) if v else 0):
                words[i] = rng.choice(WORDS)
            url = f"http://h{v}.example.com/doc{b}.html"
            hrefs = [f"doc{(b + 1) % 40}.html", f"http://H{(v + 1) % 4}.example.com/doc{b}.html"]
            anchors = "".join(f'<a href="{h}">next</a> ' for h in hrefs)
            html = f"<html><body><p>{' '.join(words)}</p><p>{anchors}</p></body></html>"
            fetches.append(Fetch(url, html))
    return fetches


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i : i + 5]) for i in range(max(len(words) - 4, 1))}


def _query(run: Path, sql: str) -> list[tuple]:
    con = open_run(run)
    try:
        return con.sql(sql).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("cc")
    fetches = _corpus()
    warc = write_warc(tmp / "crawl.warc.gz", fetches, request_first=True)
    texts = []
    for rec in iter_records([str(warc)]):
        page = extract_page(rec)
        if page.text:
            texts.append((rec.url, page.text))
    wet = write_wet(tmp / "crawl.warc.wet.gz", texts)
    wat = write_wat(tmp / "crawl.warc.wat.gz", fetches)
    scan = {
        "warc": [warc],
        "wet": [wet],
        "warc+wat": [warc, wat],
        "wet+wat": [wet, wat],
    }
    return {k: neardup.scan(v, tmp / f"run-{k}", workers=1).path for k, v in scan.items()} | {
        "wet_file": wet
    }


def test_wet_conversion_records_are_pages_with_given_text(crawl):
    rows = _query(crawl["wet"], "SELECT record_type, format, skipped_reason FROM pages")
    pages = [r for r in rows if r[0] == "conversion"]
    assert len(pages) == 160
    assert all(fmt == "given" and reason is None for _, fmt, reason in pages)


def test_wet_clusters_like_the_warc_it_came_from(crawl):
    texts = {
        url: text
        for url, text in _query(
            crawl["wet"], "SELECT p.url, t.text FROM pages p JOIN page_text t USING (doc_id)"
        )
    }
    cluster = dict(_query(crawl["wet"], "SELECT url, cluster_id FROM pages WHERE url IS NOT NULL"))
    sets = {u: _shingles(t) for u, t in texts.items()}
    close = []
    for a, b in itertools.combinations(sorted(sets), 2):
        j = len(sets[a] & sets[b]) / len(sets[a] | sets[b])
        if j >= 0.9:
            close.append((a, b))
    assert len(close) >= 40  # the corpus has plenty of close pairs
    found = sum(1 for a, b in close if cluster[a] is not None and cluster[a] == cluster[b])
    assert found / len(close) >= 0.98

    def groups(run: Path) -> set[frozenset[str]]:
        rows = _query(
            run, "SELECT list(url) FROM pages WHERE cluster_size >= 2 GROUP BY cluster_id"
        )
        return {frozenset(r[0]) for r in rows}

    assert groups(crawl["wet"]) == groups(crawl["warc"])


def test_wat_records_are_link_sources_not_pages(crawl):
    rows = _query(
        crawl["warc+wat"],
        "SELECT record_type, skipped_reason, count(*) FROM pages "
        "WHERE source LIKE '%.wat.gz' GROUP BY ALL ORDER BY ALL",
    )
    assert rows == [("metadata", WAT_REASON, 320), ("warcinfo", "not a page: warcinfo record", 1)]


def _links(run: Path) -> set[tuple[str, str, str | None]]:
    return set(
        _query(
            run,
            "SELECT s.url, l.dst_url, d.url FROM links l JOIN pages s ON s.doc_id = l.src_doc "
            "LEFT JOIN pages d ON d.doc_id = l.dst_doc",
        )
    )


def test_warc_with_wat_has_the_same_links_as_the_warc_alone(crawl):
    alone = _links(crawl["warc"])
    assert len(alone) == 160 * 2
    assert all(dst == page for _, dst, page in alone)  # every target was crawled
    assert _links(crawl["warc+wat"]) == alone
    count = _query(crawl["warc+wat"], "SELECT count(*) FROM links")[0][0]
    assert count == len(alone)  # WAT links repeat the pages' own links: not counted twice


def test_wat_beside_wet_gives_the_link_graph_of_the_warc(crawl):
    links = _links(crawl["wet+wat"])
    assert links == _links(crawl["warc"])
    types = _query(
        crawl["wet+wat"],
        "SELECT DISTINCT s.record_type, d.record_type FROM links l "
        "JOIN pages s ON s.doc_id = l.src_doc JOIN pages d ON d.doc_id = l.dst_doc",
    )
    assert types == [("conversion", "conversion")]


def test_common_crawl_whirlwind_samples(tmp_path: Path):
    wet = shared_data("warc", "cc-whirlwind.warc.wet.gz")
    wat = shared_data("warc", "cc-whirlwind.warc.wat.gz")
    run = neardup.scan([wet, wat], tmp_path / "run", workers=1).path
    rows = _query(run, "SELECT record_type, url, format, skipped_reason FROM pages ORDER BY doc_id")
    url = "https://an.wikipedia.org/wiki/Escopete"
    assert rows == [
        ("warcinfo", None, None, "not a page: warcinfo record"),
        ("conversion", url, "given", None),
        ("warcinfo", None, None, "not a page: warcinfo record"),
        ("metadata", url, None, WAT_REASON),
    ]
    text = _query(run, "SELECT text FROM page_text")[0][0]
    assert "Escopete" in text
