"""The report's evolution section: present with the right numbers for a store of several
crawls, absent for a run or a store of one crawl.

The expected figures are recomputed here from each crawl's `pages.parquet` and signatures
with Python sets and numpy, not with `neardup.crawls.evolution`'s SQL.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from crawls.test_evolution_cumulative import THREE_CRAWLS, size_bucket, write_store
from report.test_report import Rows
from typer.testing import CliRunner

from neardup.cli.main import app
from neardup.crawls.store import CRAWLS_FILE, add_crawl
from neardup.report import render_report, report_context

CHANGES = ["complete", "large", "medium", "small", "no text change", "no change"]
CHROMIUM = Path("/usr/bin/chromium")


def parse(html: str) -> tuple[Rows, dict]:
    parser = Rows()
    parser.feed(html)
    blob = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    return parser, json.loads(blob.group(1))


def crawl_urls(run: Path) -> dict[str, dict]:
    """URL -> its first compared fetch in a crawl (doc_id, host, cluster, exact_fp)."""
    out: dict[str, dict] = {}
    for p in sorted(pq.read_table(run / "pages.parquet").to_pylist(), key=lambda p: p["doc_id"]):
        if p["skipped_reason"] is None and p["url"] is not None and p["url"] not in out:
            cluster = p["cluster_id"] if p["cluster_id"] is not None else -1 - p["doc_id"]
            out[p["url"]] = {**p, "cluster": cluster}
    return out


def clusters(pages: dict[str, dict]) -> dict[str, frozenset[str]]:
    groups: dict[int, set[str]] = defaultdict(set)
    for url, p in pages.items():
        groups[p["cluster"]].add(url)
    return {u: frozenset(groups[p["cluster"]]) for u, p in pages.items()}


def change_name(agree: int, k: int) -> str:
    """Fetterly's buckets scaled to K, written out independently of the SQL macro."""
    if agree == k + 1:
        return "no change"
    if agree == k:
        return "no text change"
    if agree == 0:
        return "complete"
    if agree <= k // 3:
        return "large"
    return "medium" if agree <= 2 * k // 3 else "small"


def expected(run_m: Path, run_n: Path) -> dict:
    """Φ/Ψ averages by bucket, change counts by bucket (and 'all'), and host figures."""
    pm, pn = crawl_urls(run_m), crawl_urls(run_n)
    cm, cn = clusters(pm), clusters(pn)
    both = sorted(pm.keys() & pn.keys())
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for u in both:
        common = len(cm[u] & cn[u])
        row = sums[size_bucket(len(cm[u]))]
        row[0] += 1
        row[1] += common / len(cn[u])
        row[2] += common / len(cm[u] | cn[u])
    phi_psi = {b: (n, phi / n, psi / n) for b, (n, phi, psi) in sums.items()}
    sig_m, sig_n = np.load(run_m / "signatures.npy"), np.load(run_n / "signatures.npy")
    row_m = {int(d): i for i, d in enumerate(np.load(run_m / "signature_docs.npy"))}
    row_n = {int(d): i for i, d in enumerate(np.load(run_n / "signature_docs.npy"))}
    k = sig_m.shape[1]
    changes: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(CHANGES, 0))
    for u in both:
        a, b = pm[u], pn[u]
        agree = int((sig_m[row_m[a["doc_id"]]] == sig_n[row_n[b["doc_id"]]]).sum())
        if a["exact_fp"] == b["exact_fp"]:
            agree = k + 1
        name = change_name(agree, k)
        changes["all"][name] += 1
        changes[size_bucket(len(cm[u]))][name] += 1

    def per_host(pages: dict[str, dict]) -> dict[str, int]:
        seen: dict[str, set[int]] = defaultdict(set)
        for p in pages.values():
            seen[p["host"]].add(p["cluster"])
        return {h: len(s) for h, s in seen.items()}

    hm, hn = per_host(pm), per_host(pn)
    hosts = hm.keys() & hn.keys()
    return {
        "phi_psi": phi_psi,
        "changes": dict(changes),
        "hosts": (len(hosts), sum(hm[h] == hn[h] for h in hosts)),
    }


@pytest.fixture(scope="module")
def two_crawls(demo_crawl, tmp_path_factory) -> Path:
    """Two crawls of the generated demo crawl: its first two days, then its last two."""
    store = tmp_path_factory.mktemp("report-evo") / "store"
    add_crawl(demo_crawl.warc_paths[:2], store, "week1", workers=2)
    add_crawl(demo_crawl.warc_paths[1:], store, "week2", workers=2)
    return store


@pytest.fixture(scope="module")
def three_crawls(tmp_path_factory) -> Path:
    return write_store(tmp_path_factory.mktemp("report-evo3"), THREE_CRAWLS)


def test_two_crawl_store_has_the_section_with_the_right_numbers(two_crawls: Path) -> None:
    html = render_report(two_crawls)
    parser, data = parse(html)
    assert "evolution" in parser.ids and 'href="#evolution"' in html
    want = expected(two_crawls / "crawls" / "week1", two_crawls / "crawls" / "week2")
    rows = parser.tables["evolution-phi-psi"]
    assert {r["bucket"] for r in rows} == set(want["phi_psi"])
    assert len(want["phi_psi"]) >= 2  # the demo crawl has clusters, not only singletons
    for r in rows:
        assert (r["crawl-m"], r["crawl-n"]) == ("week1", "week2")
        assert r["kind"] == "cumulative + consecutive"
        n, phi, psi = want["phi_psi"][r["bucket"]]
        assert int(r["urls"]) == n
        assert float(r["phi"]) == pytest.approx(phi)
        assert float(r["psi"]) == pytest.approx(psi)
    changes = parser.tables["evolution-changes"]
    assert changes[0]["bucket"] == "all"
    assert {r["bucket"] for r in changes} == set(want["changes"])
    for r in changes:
        assert {c: int(r[c.replace(" ", "-")]) for c in CHANGES} == want["changes"][r["bucket"]]
        assert int(r["urls"]) == sum(want["changes"][r["bucket"]].values())
    (host_row,) = parser.tables["evolution-hosts"]
    assert (int(host_row["hosts"]), int(host_row["same"])) == want["hosts"]
    assert data["evolution"]["crawls"] == ["week1", "week2"]
    section = html[html.index('<section id="evolution">') :]
    assert section.count("<svg") == 2  # Φ/Ψ and the change bars
    assert "Duplication in " + str(two_crawls) in html and "crawl <b>week2</b>" in html


def test_three_crawls_show_cumulative_and_consecutive(three_crawls: Path) -> None:
    html = render_report(three_crawls)
    parser, data = parse(html)
    rows = parser.tables["evolution-phi-psi"]
    pairs = {(r["crawl-m"], r["crawl-n"], r["kind"]) for r in rows}
    assert pairs == {
        ("A", "B", "cumulative + consecutive"),
        ("A", "C", "cumulative"),
        ("B", "C", "consecutive"),
    }
    first_last = {r["bucket"]: r for r in rows if (r["crawl-m"], r["crawl-n"]) == ("A", "C")}
    # By hand (see test_evolution_cumulative): a, b, c together in A; apart in C.
    assert float(first_last["2-10"]["phi"]) == pytest.approx(7 / 9)
    assert float(first_last["2-10"]["psi"]) == pytest.approx(13 / 45)
    for m, n in (("A", "B"), ("A", "C"), ("B", "C")):
        want = expected(three_crawls / "crawls" / m, three_crawls / "crawls" / n)
        got = [r for r in rows if (r["crawl-m"], r["crawl-n"]) == (m, n)]
        assert {r["bucket"]: int(r["urls"]) for r in got} == {
            b: v[0] for b, v in want["phi_psi"].items()
        }
        hosts = [
            h for h in parser.tables["evolution-hosts"] if (h["crawl-m"], h["crawl-n"]) == (m, n)
        ]
        assert (int(hosts[0]["hosts"]), int(hosts[0]["same"])) == want["hosts"]
    assert [h["kind"] for h in data["evolution"]["hosts"]] == [
        "cumulative + consecutive",
        "cumulative",
        "consecutive",
    ]


def test_crawl_directory_of_a_store_gets_the_store_evolution(three_crawls: Path) -> None:
    ctx = report_context(three_crawls / "crawls" / "B")
    assert ctx["store"] == {"path": str(three_crawls), "crawl": "B", "crawls": 3}
    assert ctx["summary"]["sketched"] == len(THREE_CRAWLS["B"])
    assert ctx["evolution"] is not None


def test_single_crawl_store_has_no_section(tmp_path: Path) -> None:
    store = write_store(tmp_path, {"A": THREE_CRAWLS["A"]})
    html = render_report(store)
    parser, data = parse(html)
    assert "evolution" not in parser.ids
    assert not any(t.startswith("evolution") for t in parser.tables)
    assert "#evolution" not in html and "Evolution" not in html
    assert data["evolution"] is None
    assert "store-note" in parser.ids and "crawl <b>A</b>" in html  # what the report shows


def test_plain_run_has_no_section(demo_run) -> None:
    html = render_report(demo_run.path)
    parser, data = parse(html)
    assert "evolution" not in parser.ids and "store-note" not in parser.ids
    assert data["evolution"] is None


def test_report_command_on_a_store(three_crawls: Path, tmp_path: Path) -> None:
    out = tmp_path / "store-report.html"
    result = CliRunner().invoke(app, ["report", str(three_crawls), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert '<section id="evolution">' in out.read_text(encoding="utf-8")
    assert not (three_crawls / "report.html").exists()


def test_empty_store_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / CRAWLS_FILE).write_text(json.dumps({"crawls": []}))
    result = CliRunner().invoke(app, ["report", str(store), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "holds no crawl" in result.output


def test_evolution_plots_render_in_chromium(three_crawls: Path, tmp_path: Path) -> None:
    """The section's SVG plots draw (not blank) in a real browser, offline."""
    if not CHROMIUM.exists() and not os.environ.get("CI"):
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium); it runs on CI")
    from PIL import Image
    from playwright.sync_api import sync_playwright

    page_file = tmp_path / "report.html"
    page_file.write_text(render_report(three_crawls), encoding="utf-8")
    outside: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=["--headless=new", "--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})

            def guard(route) -> None:
                if route.request.url.startswith(("file:", "data:", "about:")):
                    route.continue_()
                else:
                    outside.append(route.request.url)
                    route.abort()

            page.route("**/*", guard)
            page.goto(page_file.as_uri())
            figures = page.locator("section#evolution figure")
            assert figures.count() == 2
            shots = []
            for i in range(2):
                box = figures.nth(i).bounding_box()
                assert box is not None and box["width"] > 300 and box["height"] > 150
                shot = tmp_path / f"evolution-{i}.png"
                figures.nth(i).screenshot(path=str(shot))
                shots.append(shot)
        finally:
            browser.close()
    assert outside == []
    for shot in shots:
        colours = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 20  # lines, bars, text: not blank
