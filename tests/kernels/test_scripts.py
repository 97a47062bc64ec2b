"""Near-duplicates in scripts written without spaces, on real text, through the whole scan.

Chinese, Japanese and Thai paragraphs (Django's translations, see tests/script_texts.py)
with planted copies, 3 to 8 characters changed, scanned from a JSONL file as a crawl would
be. The truth is exact character 5-gram Jaccard computed in plain Python: the scan must put
at least 95% of the pairs at J >= 0.9 in one cluster, and no cluster may hold two pages
below J = 0.5. Before one token per character a Chinese paragraph was one token, and
one changed character changed every shingle of the page.
"""

from __future__ import annotations

import itertools
import json

import pyarrow.parquet as pq
import pytest
from script_texts import LANGUAGES, Page, char_grams, jaccard, planted_pages

import neardup


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Page], dict[str, int]]:
    pages = [p for lang in LANGUAGES for p in planted_pages(lang)]
    folder = tmp_path_factory.mktemp("scripts")
    path = folder / "pages.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for p in pages:
            fh.write(json.dumps({"url": p.url, "text": p.text}, ensure_ascii=False) + "\n")
    run = neardup.scan([path], folder / "run", workers=1)
    rows = pq.read_table(run.path / "pages.parquet", columns=["url", "cluster_id"]).to_pylist()
    assert len(rows) == len(pages)  # every record accounted for
    return pages, {r["url"]: r["cluster_id"] for r in rows}


def test_planted_set_has_pairs_on_both_sides_of_the_line() -> None:
    """The fixture itself: pairs at J >= 0.9 and copies below it, for every language."""
    for lang in LANGUAGES:
        pages = planted_pages(lang)
        grams = [char_grams(p.text) for p in pages]
        sims = [jaccard(a, b) for a, b in itertools.combinations(grams, 2)]
        assert sum(s >= 0.9 for s in sims) >= 8
        assert sum(0.5 <= s < 0.9 for s in sims) >= 8


def test_recall_on_high_jaccard_pairs(scanned: tuple[list[Page], dict[str, int]]) -> None:
    pages, cluster = scanned
    grams = {p.url: char_grams(p.text) for p in pages}
    for lang in LANGUAGES:
        mine = [p for p in pages if p.url.startswith(f"https://{lang}")]
        high = [
            (a.url, b.url)
            for a, b in itertools.combinations(mine, 2)
            if jaccard(grams[a.url], grams[b.url]) >= 0.9
        ]
        found = [cluster[a] is not None and cluster[a] == cluster[b] for a, b in high]
        assert len(high) >= 8
        assert sum(found) / len(high) >= 0.95, (lang, sum(found), len(high))


def test_no_cluster_joins_dissimilar_pages(scanned: tuple[list[Page], dict[str, int]]) -> None:
    pages, cluster = scanned
    members: dict[int, list[Page]] = {}
    for p in pages:
        if cluster[p.url] is not None:
            members.setdefault(cluster[p.url], []).append(p)
    assert any(len(m) > 1 for m in members.values())
    for group in members.values():
        for a, b in itertools.combinations(group, 2):
            assert jaccard(char_grams(a.text), char_grams(b.text)) >= 0.5, (a.url, b.url)
