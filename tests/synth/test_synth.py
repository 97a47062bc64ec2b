"""The synthetic data generators: deterministic, readable, and true to their stated truth.

Also checks the brute-force Jaccard of bench/accuracy.py against a naive computation, and
(realdata) the docs-crawl builder of bench/docs_crawl.py.
"""

from __future__ import annotations

import collections
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from warcio.archiveiterator import ArchiveIterator

from neardup.synth import (
    SyntheticCrawl,
    expected_jaccard,
    generate_demo_crawl,
    jaccard,
    mutate,
    page_rows,
    stdlib_documents,
    swap_boilerplate,
    truncate,
    visible_text,
    write_html_dir,
    write_jsonl,
    write_parquet,
)

ROOT = Path(__file__).resolve().parents[2]
DOCS_DIR = ROOT.parent / "shared" / "data" / "docs"


def _load_bench(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return generate_demo_crawl(tmp_path_factory.mktemp("demo"), seed=0)


@pytest.fixture(scope="module")
def records():
    return SyntheticCrawl(seed=0).build()


def _digest(paths: list[Path]) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


# -- corpus --------------------------------------------------------------------------------


def test_corpus_is_real_text_and_stable():
    docs = stdlib_documents(min_words=80)
    assert len(docs) >= 300
    assert len({d.doc_id for d in docs}) == len(docs)
    assert all(len(d.words) >= 80 for d in docs)
    assert np.median([len(d.words) for d in docs]) >= 200
    assert [d.doc_id for d in stdlib_documents(min_words=80, limit=5)] == [
        d.doc_id for d in docs[:5]
    ]
    assert all(len(d.words) >= 200 for d in stdlib_documents(min_words=200))


def test_corpus_documents_are_not_near_duplicates_of_each_other():
    docs = stdlib_documents(min_words=150)
    seen: dict[tuple[str, ...], int] = {}
    worst = 0.0
    for k, doc in enumerate(docs):
        words = [w.lower() for w in doc.words]
        shingles = {tuple(words[i : i + 5]) for i in range(len(words) - 4)}
        shared = collections.Counter(seen[s] for s in shingles if s in seen)
        if shared:
            worst = max(worst, max(shared.values()) / len(shingles))
        for s in shingles:
            seen.setdefault(s, k)
    assert worst <= 0.2


# -- edits -----------------------------------------------------------------------------------


WORDS = " ".join(d.paragraphs[0] for d in stdlib_documents()[:200]).split()


@pytest.mark.parametrize(
    ("insert", "delete", "substitute"),
    [(0.05, 0, 0), (0, 0.05, 0), (0, 0, 0.05), (0.02, 0.02, 0.02)],
)
def test_mutate_edits_at_the_stated_rates(insert, delete, substitute):
    rng = np.random.default_rng(7)
    out = mutate(WORDS, rng, insert, delete, substitute)
    n = len(WORDS)
    assert len(out) - n == pytest.approx((insert - delete) * n, abs=0.01 * n)
    if insert == delete == 0:
        changed = sum(a != b for a, b in zip(WORDS, out, strict=True)) / n
        assert changed == pytest.approx(substitute, abs=0.01)
    measured = jaccard(WORDS, out)
    assert measured == pytest.approx(expected_jaccard(n, 5, insert, delete, substitute), abs=0.04)


def test_mutate_is_deterministic_per_seed():
    a = mutate(WORDS, np.random.default_rng(1), 0.02, 0.02, 0.02)
    b = mutate(WORDS, np.random.default_rng(1), 0.02, 0.02, 0.02)
    c = mutate(WORDS, np.random.default_rng(2), 0.02, 0.02, 0.02)
    assert a == b != c
    assert mutate(WORDS, np.random.default_rng(1)) == list(WORDS)


def test_boilerplate_and_truncation():
    body = WORDS[:300]
    page = swap_boilerplate(body, ["site", "a", "menu"], ["footer", "a"])
    assert page[3:-2] == body
    other = swap_boilerplate(
        page, ["mirror", "b"], ["copyright", "b", "2024"], strip_header=3, strip_footer=2
    )
    assert other == ["mirror", "b", *body, "copyright", "b", "2024"]
    assert 0.9 < jaccard(page, other) < 1.0
    half = truncate(body, 0.5)
    assert half == body[:150]
    assert jaccard(body, half) == pytest.approx(146 / 296, abs=0.02)


# -- crawl and its truth ------------------------------------------------------------------------


def test_demo_crawl_is_written_quickly_as_readable_warc(demo):
    assert 2 <= len(demo.warc_paths) <= 3
    types: collections.Counter[str] = collections.Counter()
    responses: dict[str, str] = {}
    concurrent: list[str] = []
    for path in demo.warc_paths:
        with path.open("rb") as fh:
            for rec in ArchiveIterator(fh):
                types[rec.rec_type] += 1
                h = rec.rec_headers
                assert h.get_header("WARC-Date")
                if rec.rec_type in ("response", "revisit"):
                    assert h.get_header("WARC-IP-Address")
                    responses[h.get_header("WARC-Record-ID")] = h.get_header("WARC-Target-URI")
                    assert rec.http_headers.get_header("Content-Type")
                if rec.rec_type == "response":
                    raw = rec.raw_stream.read()
                    assert int(rec.http_headers.get_header("Content-Length")) == len(raw)
                if rec.rec_type == "revisit":
                    assert h.get_header("WARC-Refers-To-Target-URI")
                    assert h.get_header("WARC-Refers-To-Date")
                if rec.rec_type == "request":
                    concurrent.append(h.get_header("WARC-Concurrent-To"))
    assert sum(types.values()) == demo.warc_records >= 2000
    assert types["warcinfo"] == len(demo.warc_paths)
    assert types["response"] + types["revisit"] == len(demo.truth)
    # One request per response or revisit, pointing at it.
    assert types["request"] == len(responses) == len(set(concurrent))
    assert set(concurrent) == set(responses)


def test_generation_is_deterministic_across_processes(demo, tmp_path):
    code = (
        "import sys; from neardup.synth import generate_demo_crawl; "
        "generate_demo_crawl(sys.argv[1], seed=0)"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, env=env)
    again = sorted((tmp_path / "warc").glob("*.warc.gz"))
    assert [p.name for p in again] == [p.name for p in demo.warc_paths]
    assert _digest(again) == _digest(demo.warc_paths)
    assert (tmp_path / "truth.csv").read_bytes() == (demo.out_dir / "truth.csv").read_bytes()


def test_other_seed_gives_other_crawl():
    a = SyntheticCrawl(n_docs=40, n_unrelated=10, seed=1).truth()
    b = SyntheticCrawl(n_docs=40, n_unrelated=10, seed=2).truth()
    assert {r["original"] for r in a} != {r["original"] for r in b}


def test_truth_is_consistent(demo):
    truth = demo.truth
    roles = collections.Counter(r["role"] for r in truth)
    n = demo.topology["documents"]
    assert roles["primary"] == roles["mirror"] == roles["stale"] == n
    missing = set(demo.topology["partial_missing_pages"])
    assert roles["partial"] == n - len(missing)
    primary = {r["url"]: r["original"] for r in truth if r["role"] in ("primary", "primary-index")}
    for r in truth:
        if r["expected"] == "skip":
            assert r["skip_reason"]
            continue
        if r["role"] == "unrelated":
            assert r["primary_url"] is None
        else:  # every copy has an original served by the primary
            assert primary[r["primary_url"]] == r["original"]
    unrelated = [r["original"] for r in truth if r["role"] == "unrelated"]
    assert len(set(unrelated)) == len(unrelated)
    assert not set(unrelated) & set(primary.values())
    skips = collections.Counter(r["skip_reason"] for r in truth if r["expected"] == "skip")
    assert set(skips) == {"http-status", "redirect", "not-html", "revisit"}
    hosts = demo.topology["hosts"]
    partial_urls = {r["url"] for r in truth if r["role"] == "partial"}
    for name in missing:
        assert hosts["partial"]["prefix"] + name not in {u.split("/", 3)[3] for u in partial_urls}
    groups = demo.groups()
    assert all(len(urls) >= 3 for key, urls in groups.items() if key in primary.values())


def test_edits_reach_the_stated_share(records):
    stale = [r for r in records if r.role == "stale"]
    edited = [r for r in stale if "mutate" in r.edit]
    assert len(edited) / len(stale) == pytest.approx(0.3, abs=0.08)


def test_pages_resemble_their_original_as_stated(records):
    text = {r.url: visible_text(r.html()).split() for r in records if r.is_page}
    by_role = collections.defaultdict(list)
    for r in records:
        if r.is_page and r.primary_url and r.role != "primary":
            by_role[r.role].append(jaccard(text[r.primary_url], text[r.url]))
    assert min(by_role["alias"]) == min(by_role["exact"]) == 1.0
    for role in ("mirror", "partial", "stale"):
        assert np.median(by_role[role]) >= 0.8, role
        assert min(by_role[role]) >= 0.5, role
    assert max(by_role["excerpt"]) < 0.7
    # Unrelated pages share no more than boilerplate-sized runs with the collection.
    collection = set()
    for r in records:
        if r.role == "primary":
            words = [w.lower() for w in text[r.url]]
            collection |= {tuple(words[i : i + 5]) for i in range(len(words) - 4)}
    for r in records:
        if r.role == "unrelated":
            words = [w.lower() for w in text[r.url]]
            sh = {tuple(words[i : i + 5]) for i in range(len(words) - 4)}
            assert len(sh & collection) / len(sh) < 0.35


def test_identical_copies_are_byte_identical(records):
    body = {r.url: r.body for r in records if r.role == "primary"}
    for r in records:
        if r.role in ("alias", "exact"):
            assert r.body == body[r.primary_url]
            assert r.url != r.primary_url


def test_pages_are_realistic_html(records):
    page = next(r for r in records if r.role == "primary").html()
    for tag in ("<title>", "<h1>", "<h2", "<p>", 'rel="next"', "<script>", "Last updated"):
        assert tag in page
    mirror = next(r for r in records if r.role == "mirror").html()
    assert "<header" in mirror and "<footer>" in mirror
    text = visible_text(page)
    assert "window.SITE" not in text and "Version 3.11.7" in text
    # Partial mirror: links to the pages it lacks go to the primary host.
    partial = [r.html() for r in records if r.role == "partial"]
    primary_host = SyntheticCrawl().topology()["hosts"]["primary"]["host"]
    assert any(f'href="https://{primary_host}/' in p for p in partial)


def test_encodings_are_declared_and_decodable(records):
    latin = [r for r in records if "iso-8859-1" in (r.content_type or "")]
    gz = [r for r in records if r.gzip_body]
    assert latin and gz
    assert all(r.body[:2] == b"\x1f\x8b" for r in gz)
    assert all("<html" in r.html() for r in latin + gz)
    # The © of the footer is one byte in ISO-8859-1: a reader that ignores the charset fails.
    assert all(b"\xa9" in r.body and "©" in r.html() for r in latin)
    assert "©" not in latin[0].body.decode("utf-8", errors="replace")


def test_table_and_directory_writers(records, tmp_path):
    pages = [r for r in records if r.is_page]
    rows = page_rows(records, "text")
    assert len(rows) == len(pages) and all(row["text"] for row in rows)
    assert write_jsonl(tmp_path / "pages.jsonl", rows) == len(rows)
    first = json.loads((tmp_path / "pages.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert set(first) == {"url", "text"}
    html_rows = page_rows(records, "html")
    write_parquet(tmp_path / "pages.parquet", html_rows)
    table = pq.read_table(tmp_path / "pages.parquet")
    assert table.column_names == ["url", "html"] and table.num_rows == len(pages)
    files = write_html_dir(tmp_path / "site", records)
    assert len(files) == len(pages)
    assert all(f.read_bytes().lstrip().startswith(b"<!DOCTYPE html>") for f in files)


# -- bench/accuracy.py ------------------------------------------------------------------------


def _naive_pairs(sets: list[set], low: float) -> dict[tuple[int, int], float]:
    out = {}
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            sim = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
            if sim >= low:
                out[(i, j)] = sim
    return out


def test_accuracy_brute_force_matches_naive_jaccard(records):
    acc = _load_bench("accuracy")
    originals = sorted({r.original for r in records if r.role == "primary"})[:50]
    pages = [r for r in records if r.is_page and r.original in originals]
    pages += [r for r in records if r.role == "unrelated"][:30]
    texts = [visible_text(r.html()) for r in pages]
    backend = (acc._fallback_canonicalize, acc._fallback_shingle_hashes, "fallback")
    sets = acc.shingle_sets(texts, 5, 1, backend)
    i, j, sim = acc.exact_pairs(acc.incidence_matrix(sets), 0.3, block_rows=37)
    got = {(int(a), int(b)): float(s) for a, b, s in zip(i, j, sim, strict=True)}
    want = _naive_pairs([set(s.tolist()) for s in sets], 0.3)
    assert got.keys() == want.keys() and len(want) > 50
    assert all(abs(got[k] - want[k]) < 1e-12 for k in want)
    # Fallback shingles agree with the plain word-shingle definition, pair by pair.
    words = [acc._fallback_canonicalize(t).split() for t in texts[:12]]
    hashed = [set(s.tolist()) for s in sets[:12]]
    for a in range(12):
        for b in range(a + 1, 12):
            by_hash = len(hashed[a] & hashed[b]) / len(hashed[a] | hashed[b])
            assert by_hash == pytest.approx(jaccard(words[a], words[b]), abs=1e-12)


def test_accuracy_metrics_count_pairs_inside_clusters():
    acc = _load_bench("accuracy")
    # Pages 0,1,2 are one near-duplicate group, 3 is alone; the clustering merged 2 with 3.
    pairs = (np.array([0, 0, 1]), np.array([1, 2, 2]), np.array([0.95, 0.92, 0.97]))
    labels = np.array([0, 0, 3, 3])
    r = acc.evaluate("cluster_id", labels, pairs)
    assert r.high_pairs == 3 and r.high_pairs_together == 1
    assert r.recall == pytest.approx(1 / 3)
    assert r.same_cluster_pairs == 2 and r.wrong_merges == 1
    assert r.wrong_merge_share == pytest.approx(0.5)
    assert r.low_pairs == 3 and r.wrong_merge_share_of_low == pytest.approx(1 / 3)
    assert r.wrong_merge_examples == [{"a": 2, "b": 3}]
    assert not r.passed


def test_accuracy_cli_on_a_tiny_run(tmp_path, records):
    import pyarrow as pa

    acc = _load_bench("accuracy")
    pages = [r for r in records if r.is_page][:120]
    cluster = {}
    rows, texts = [], []
    for k, r in enumerate(pages):
        cid = cluster.setdefault(r.original, k)
        rows.append(
            {
                "doc_id": k,
                "url": r.url,
                "host": r.host,
                "cluster_id": cid,
                "component_id": cid,
                "is_representative": cid == k,
                "skipped_reason": None,
            }
        )
        texts.append({"doc_id": k, "text": visible_text(r.html())})
    rows.append({**rows[0], "doc_id": 999, "cluster_id": None, "skipped_reason": "http-status"})
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "pages.parquet")
    pq.write_table(pa.Table.from_pylist(texts), tmp_path / "page_text.parquet")
    code = acc.main([str(tmp_path), "--json", str(tmp_path / "acc.json")])
    result = json.loads((tmp_path / "acc.json").read_text())
    assert [v["view"] for v in result["views"]] == ["cluster_id", "component_id"]
    assert result["views"][0]["pages"] == 120
    # the exit status is the verdict on the targets: 0 exactly when every view met them
    views = result["views"]
    assert code == (0 if all(v["passed"] for v in views) else 1)
    # and the verdict follows the figures, against the stated targets
    targets = result["targets"]
    for v in views:
        recall, merges = v["recall"], v["wrong_merge_share"]
        met = (recall is None or recall >= targets["recall"]) and (
            merges is None or merges <= targets["wrong_merge_share"]
        )
        assert v["passed"] == met


# -- bench/docs_crawl.py (real data) -----------------------------------------------------------


@pytest.mark.realdata
@pytest.mark.skipif(not DOCS_DIR.is_dir(), reason="../shared/data/docs is absent")
def test_docs_crawl_pages_and_links(tmp_path):
    dc = _load_bench("docs_crawl")
    old, _new = dc.manual_releases("python")
    pages = dc.docs_pages(old)
    assert len(pages) == 530
    assert [p for p, _ in pages] == sorted(p for p, _ in pages)
    rel, html = next((p, h) for p, h in pages if p == "library/json.html")
    url = "https://py.docs.example/3.11/" + rel
    out = dc.absolutize_links(html, url, site_base="https://py.docs.example/3.11/")
    hrefs = re.findall(rb'href="([^"]*)"', out)
    assert b"https://py.docs.example/3.11/library/stdtypes.html#str" in hrefs
    # Debian's file:///usr/share/doc/... links now point into the hosted copy.
    assert url.encode() in hrefs
    assert all(h.startswith((b"https://", b"http://", b"#", b"mailto:")) for h in hrefs if h)
    plans = {p.role: p for p in dc.plan_mirrors("python", 0.3, np.random.default_rng(0))}
    assert set(plans) == {"primary", "full", "stale", "partial", "rerooted"}
    partial = plans["partial"]
    assert 0.2 < len(partial.dropped) / 530 < 0.4
    recs = dc.host_records(partial, "198.51.100.7")
    assert len(recs) == 530 - len(partial.dropped)
    lacking = [plans["primary"].base + p for p in partial.dropped]
    linked = b"".join(r.body for r in recs[:50])
    assert any(u.encode() in linked for u in lacking)
    assert not any((partial.base + p).encode() in linked for p in partial.dropped)
    n = dc.write_warc(tmp_path / "part.warc.gz", recs[:20])
    with (tmp_path / "part.warc.gz").open("rb") as fh:
        assert sum(1 for _ in ArchiveIterator(fh)) == n == 41


def test_common_crawl_layout_reads_as_the_same_crawl(records, tmp_path):
    """`write_warc(layout="commoncrawl")`: request, response, metadata per fetch, each
    pointing at the one before, and a scan of it finds what it finds in the plain layout."""
    import duckdb

    import neardup
    from neardup.synth.writers import write_warc

    pages = [r for r in records if r.record_type == "response"][:120]
    counts = {}
    for layout in ("response-first", "commoncrawl"):
        counts[layout] = write_warc(tmp_path / f"{layout}.warc.gz", pages, layout=layout)
    assert counts == {"response-first": 1 + 2 * len(pages), "commoncrawl": 1 + 3 * len(pages)}
    with (tmp_path / "commoncrawl.warc.gz").open("rb") as fh:
        recs = [(r.rec_type, r.rec_headers) for r in ArchiveIterator(fh)]
    assert [t for t, _ in recs[:7]] == ["warcinfo"] + ["request", "response", "metadata"] * 2
    request, response, metadata = (h for _, h in recs[1:4])
    assert response.get_header("WARC-Concurrent-To") == request.get_header("WARC-Record-ID")
    assert metadata.get_header("WARC-Concurrent-To") == response.get_header("WARC-Record-ID")
    assert metadata.get_header("Content-Type") == "application/warc-fields"

    def clusters(layout: str) -> set[tuple[str, ...]]:
        run = neardup.scan([tmp_path / f"{layout}.warc.gz"], tmp_path / layout, workers=1).path
        rows = duckdb.execute(
            f"SELECT list(url ORDER BY url) FROM read_parquet('{run}/pages.parquet') "
            "WHERE cluster_id IS NOT NULL GROUP BY cluster_id"
        ).fetchall()
        return {tuple(r[0]) for r in rows}

    found = clusters("response-first")
    assert any(len(c) > 1 for c in found)
    assert clusters("commoncrawl") == found
