"""The HTML report: every section is there, offline, with the numbers recomputed here.

The expected figures are computed independently of `neardup.report.data`: from the run's
Parquet files with pyarrow and plain Python, or with the analyses' own public functions.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from neardup.cli.main import app
from neardup.linkgraph.avoid import avoid_list_from_run
from neardup.linkgraph.collections import collections_from_run
from neardup.linkgraph.mirrors import mirrors_from_run
from neardup.report import render_report, write_report
from neardup.report.data import copy_bucket_labels

SECTIONS = (
    "overview",
    "replication",
    "sizes",
    "clusters",
    "collections",
    "mirrors",
    "similarity",
    "savings",
)


class Rows(HTMLParser):
    """The `data-*` attributes of the <tr> rows of each table, by table id."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[dict[str, str]]] = {}
        self.ids: set[str] = set()
        self.current: str | None = None
        self.tags: Counter[str] = Counter()
        self.attrs_seen: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags[tag] += 1
        self.attrs_seen += [(tag, k, v) for k, v in a.items()]
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "table":
            self.current = a.get("id")
            if self.current:
                self.tables[self.current] = []
        elif tag == "tr" and self.current and any(k.startswith("data-") for k in a):
            self.tables[self.current].append({k[5:]: v for k, v in a.items() if k[:5] == "data-"})


@pytest.fixture(scope="module")
def report(demo_run, tmp_path_factory):
    """The report of the shared demo run (its analyses computed, as on a fresh scan)."""
    run = tmp_path_factory.mktemp("report") / "run"
    shutil.copytree(demo_run.path, run)
    for name in run.glob("*.parquet"):  # outputs of other tests' commands, if any
        if name.stem.startswith(("collection", "mirrors", "avoid")):
            name.unlink()
    html = write_report(run, run.parent / "report.html").read_text(encoding="utf-8")
    parser = Rows()
    parser.feed(html)
    blob = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    return run, html, parser, json.loads(blob.group(1))


def compared_pages(run: Path):
    pages = pq.read_table(run / "pages.parquet")
    return pages.filter(pc.is_null(pages["skipped_reason"]))


def bucket_of(copies: int) -> int:
    """0, 1, 2–10 → 2, 11–100 → 3, … (written apart from the SQL on purpose)."""
    if copies <= 1:
        return copies
    bucket, upper = 2, 10
    while copies > upper:
        bucket, upper = bucket + 1, upper * 10
    return bucket


def test_report_is_self_contained_with_every_section(report):
    _, html, parser, _ = report
    assert set(SECTIONS) <= parser.ids
    assert html.count("<svg") >= 4  # replication, sizes, collections, similarity
    assert parser.tags["link"] == 0 and parser.tags["img"] == 0 and parser.tags["iframe"] == 0
    assert not [a for a in parser.attrs_seen if a[1] == "src"]  # no external script or image
    assert "@import" not in html and "url(http" not in html
    assert "evolution" not in parser.ids  # the multi-crawl hook renders nothing on one crawl


def test_replication_histogram_numbers(report):
    run, _, parser, figures = report
    pages = compared_pages(run)
    exact_groups = Counter(pages["exact_fp"].to_pylist())
    exact = Counter(bucket_of(exact_groups[fp] - 1) for fp in pages["exact_fp"].to_pylist())
    near = Counter(bucket_of(size - 1) for size in pages["cluster_size"].to_pylist())
    labels = copy_bucket_labels(10 ** max(1, max(exact | near) - 1))
    expected = [(labels[b], exact[b], near[b]) for b in range(len(labels))]
    rows = parser.tables["replication-table"]
    assert [(r["bucket"], int(r["exact"]), int(r["near"])) for r in rows] == expected
    assert sum(int(r["near"]) for r in rows) == pages.num_rows
    total = pages.num_rows
    for row, (_, e, n) in zip(figures["replication"], expected, strict=True):
        assert row["exact_share"] == pytest.approx(e / total)
        assert row["near_share"] == pytest.approx(n / total)
    assert near[0] < total  # the demo crawl has near-duplicates to show


def test_cluster_size_distribution_and_power_law(report):
    run, html, parser, _ = report
    clusters = pq.read_table(run / "clusters.parquet")
    sizes = Counter(clusters["size"].to_pylist())
    singletons = compared_pages(run).num_rows - sum(clusters["size"].to_pylist())
    expected = sorted(({1: singletons} if singletons else {}) | dict(sizes))
    rows = parser.tables["sizes-table"]
    assert [(int(r["size"]), int(r["clusters"])) for r in rows] == [
        (s, singletons if s == 1 else sizes[s]) for s in expected
    ]
    fit = sorted(sizes)
    slope = np.polyfit(np.log10(fit), np.log10([sizes[s] for s in fit]), 1)[0]
    assert re.search(rf'id="power-law-slope">{slope:.2f}<', html)


def test_largest_clusters_table(report):
    run, html, parser, _ = report
    clusters = pq.read_table(run / "clusters.parquet").to_pylist()
    top = sorted(clusters, key=lambda c: (-c["size"], c["cluster_id"]))[:20]
    rows = parser.tables["clusters-table"]
    assert [(int(r["cluster"]), int(r["size"])) for r in rows] == [
        (c["cluster_id"], c["size"]) for c in top
    ]
    # the representative URL, a member URL and a snippet of the representative's text
    first = top[0]
    assert first["representative_url"] in html
    text = pq.read_table(run / "page_text.parquet").to_pylist()
    rep_text = next(t["text"] for t in text if t["doc_id"] == first["representative_doc_id"])
    words = " ".join(rep_text.split()[:8])
    assert words in html


def test_collections_and_mirrors_computed_when_absent(report):
    run, _, parser, figures = report
    assert {"collections", "mirrors", "avoid-list"} <= set(figures["computed"])
    expected = collections_from_run(run).clusters.to_pylist()
    rows = parser.tables["collections-table"]
    assert expected, "the demo crawl has a replicated collection"
    assert [(int(r["cardinality"]), int(r["size"])) for r in rows] == [
        (c["cardinality"], c["size"]) for c in expected[:20]
    ]
    pairs = mirrors_from_run(run).pairs.to_pylist()
    assert pairs
    assert [(r["host-a"], r["host-b"], r["kind"]) for r in parser.tables["mirrors-table"]] == [
        (p["host_a"], p["host_b"], p["kind"]) for p in pairs
    ]


def test_similarity_histogram_and_s_curve(report):
    run, html, _, figures = report
    pairs = pq.read_table(run / "pairs.parquet").to_pylist()
    near = [p["similarity"] for p in pairs if p["kind"] == "near"]
    hist = figures["similarity_histogram"]
    assert sum(n for _, n in hist) == len(near)
    assert min(b for b, _ in hist) == pytest.approx(math.floor(min(near) * 100) / 100)
    summary = json.loads((run / "summary.json").read_text())
    settings = json.loads((run / "settings.json").read_text())
    b, r, t = summary["bands"], summary["rows_per_band"], settings["threshold"]
    assert figures["banding"]["bands"] == b and figures["banding"]["rows"] == r
    p = 1 - (1 - t**r) ** b
    assert figures["banding"]["p_at_threshold"] == pytest.approx(p)
    assert f'id="p-at-threshold">{p:.1%}<' in html
    assert f"{b} bands × {r} rows" in html


def test_savings_of_skipping_duplicates(report):
    run, _, parser, _ = report
    pages = compared_pages(run).to_pylist()
    dups = [p for p in pages if not p["is_representative"]]
    dedup = next(r for r in parser.tables["savings-table"] if "pages" in r and r)
    assert int(dedup["pages"]) == len(dups) > 0
    assert int(dedup["bytes"]) == sum(p["payload_bytes"] or 0 for p in dups)
    avoid = avoid_list_from_run(run)
    avoid_row = parser.tables["savings-table"][1]
    assert (int(avoid_row["pages"]), int(avoid_row["bytes"])) == (avoid.pages, avoid.bytes)


def test_report_reads_existing_outputs(demo_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(demo_run.path, run)
    collections_from_run(run).write(run)
    mirrors_from_run(run).write(run)
    avoid_list_from_run(run).write(run)
    html = render_report(run)
    blob = re.search(r'id="report-data">(.*?)</script>', html, re.S).group(1)
    assert json.loads(blob)["computed"] == []
    assert "Computed for this report" not in html


def test_report_command(demo_run, tmp_path):
    out = tmp_path / "r" / "report.html"
    result = CliRunner().invoke(app, ["report", str(demo_run.path), "-o", str(out), "--top", "3"])
    assert result.exit_code == 0, result.output
    parser = Rows()
    parser.feed(out.read_text(encoding="utf-8"))
    assert len(parser.tables["clusters-table"]) == 3
    bad = CliRunner().invoke(app, ["report", str(tmp_path), "-o", str(out)])
    assert bad.exit_code == 2
