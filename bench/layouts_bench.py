"""The same real pages in every layout crawlers publish: what does `neardup scan` find?

Pages: the Python 3.11 manual (bench/docs_crawl.py) in its `mirrors` topology (primary, full
mirror, stale copy of the older release, partial copy with 30 % of pages dropped, re-rooted
copy) plus its `pairs` topology (the two releases on two more hosts): 7 hosts, one replicated
collection, 21 true mirror pairs, about 3,500 pages with their real links.

Each page is written by warcio's WARCWriter (independent of neardup's own writer) in four
layouts:

  1. response-only WARC;
  2. request-first WARC as Common Crawl/Heritrix write it: warcinfo, then per page a `request`,
     the `response` and a `metadata` record (application/warc-fields outlinks);
  3. WET: `conversion` records (text/plain) with the text `neardup.ingest.extract_page`
     extracts from the response record;
  4. WET + WAT: the WET of (3) beside a WAT whose `metadata` records carry Common Crawl's JSON
     envelope with the page's links (Envelope → Payload-Metadata → HTTP-Response-Metadata →
     HTML-Metadata → Links, each {"path": "A@/href", "url": ...}).

Each layout is scanned with `neardup.scan(paths, out, workers=2, force=True)`. Measured per
layout: records written, pages compared, recall on pairs with exact 5-word-shingle Jaccard
>= 0.9 (brute force over the run's page texts, bench/accuracy.py), wrong merges (same-cluster
pairs with J < 0.5), replicated collections (`find_collections`) and confirmed mirrored host
pairs (`find_mirrors`).

    .venv/bin/python bench/layouts_bench.py [--out DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from io import BytesIO
from itertools import combinations
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pyarrow.parquet as pq
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
try:
    import neardup
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(BENCH.parent / "src"))
    import neardup

import accuracy  # noqa: E402
import docs_crawl  # noqa: E402

from neardup.ingest import extract_page, iter_records  # noqa: E402
from neardup.linkgraph.collections import find_collections  # noqa: E402
from neardup.linkgraph.mirrors import find_mirrors  # noqa: E402
from neardup.linkgraph.relational import connect  # noqa: E402

MANUAL = "python"
DATE_FMT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass
class Page:
    url: str
    host: str
    date: str
    body: bytes


def build_pages(manual: str = MANUAL, seed: int = 0) -> tuple[list[Page], list[dict]]:
    """(pages, hosts) of the manual's mirrors topology plus its pairs topology."""
    rng = np.random.default_rng(seed)
    plans = docs_crawl.plan_mirrors(manual, 0.3, rng) + docs_crawl.plan_pairs(manual)
    pages, hosts = [], []
    for k, plan in enumerate(plans):
        records = docs_crawl.host_records(plan, f"198.51.100.{10 + k}")
        pages += [Page(r.url, plan.host, r.fetched_at.strftime(DATE_FMT), r.body) for r in records]
        hosts.append({"host": plan.host, "role": plan.role, "pages": len(records)})
    return pages, hosts


def _response(writer: WARCWriter, page: Page):
    http = StatusAndHeaders(
        "200 OK",
        [
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Length", str(len(page.body))),
            ("Server", "nginx/1.22.1"),
        ],
        protocol="HTTP/1.1",
    )
    return writer.create_warc_record(
        page.url,
        "response",
        payload=BytesIO(page.body),
        http_headers=http,
        warc_headers_dict={"WARC-Date": page.date},
    )


def write_response_only(path: Path, pages: list[Page]) -> int:
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        for page in pages:
            writer.write_record(_response(writer, page))
    return len(pages)


def write_request_first(path: Path, pages: list[Page], links: dict[str, list[str]]) -> int:
    """Common Crawl/Heritrix layout: warcinfo; per page request, response, metadata."""
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        writer.write_record(
            writer.create_warcinfo_record(
                path.name,
                {
                    "software": "Apache Nutch 1.19 (modified, https://commoncrawl.org/)",
                    "format": "WARC File Format 1.1",
                },
            )
        )
        for page in pages:
            response = _response(writer, page)
            rid = response.rec_headers.get_header("WARC-Record-ID")
            parts = urlsplit(page.url)
            request = writer.create_warc_record(
                page.url,
                "request",
                payload=BytesIO(b""),
                http_headers=StatusAndHeaders(
                    f"GET {parts.path or '/'} HTTP/1.1",
                    [("Host", parts.netloc), ("User-Agent", "CCBot/2.0"), ("Accept", "*/*")],
                    is_http_request=True,
                ),
                warc_headers_dict={"WARC-Date": page.date, "WARC-Concurrent-To": rid},
            )
            writer.write_record(request)
            writer.write_record(response)
            outlinks = "".join(f"outlink: {u} L a/@href\r\n" for u in links.get(page.url, []))
            meta = writer.create_warc_record(
                page.url,
                "metadata",
                payload=BytesIO(f"fetchTimeMs: 120\r\n{outlinks}".encode()),
                warc_content_type="application/warc-fields",
                warc_headers_dict={"WARC-Date": page.date, "WARC-Concurrent-To": rid},
            )
            writer.write_record(meta)
    return 1 + 3 * len(pages)


def write_wet(path: Path, texts: list[tuple[Page, str]]) -> int:
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        writer.write_record(writer.create_warcinfo_record(path.name, {"format": "WET"}))
        for page, text in texts:
            writer.write_record(
                writer.create_warc_record(
                    page.url,
                    "conversion",
                    payload=BytesIO(text.encode("utf-8", "surrogatepass")),
                    warc_content_type="text/plain",
                    warc_headers_dict={
                        "WARC-Date": page.date,
                        "WARC-Identified-Content-Language": "eng",
                    },
                )
            )
    return 1 + len(texts)


def write_wat(path: Path, pages: list[Page], links: dict[str, list[str]]) -> int:
    """Per page the JSON of its request record (no links) and of its response record, whose
    HTML-Metadata lists the page's links as Common Crawl does."""
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        writer.write_record(writer.create_warcinfo_record(path.name, {"format": "WAT"}))
        for page in pages:
            request = {
                "Envelope": {
                    "WARC-Header-Metadata": {"WARC-Type": "request", "WARC-Target-URI": page.url},
                    "Payload-Metadata": {"HTTP-Request-Metadata": {}},
                }
            }
            response = {
                "Envelope": {
                    "WARC-Header-Metadata": {"WARC-Type": "response", "WARC-Target-URI": page.url},
                    "Payload-Metadata": {
                        "HTTP-Response-Metadata": {
                            "Response-Message": {"Status": "200"},
                            "HTML-Metadata": {
                                "Links": [
                                    {"path": "A@/href", "url": u} for u in links.get(page.url, [])
                                ]
                            },
                        }
                    },
                }
            }
            for doc in (request, response):
                writer.write_record(
                    writer.create_warc_record(
                        page.url,
                        "metadata",
                        payload=BytesIO(json.dumps(doc).encode()),
                        warc_content_type="application/json",
                        warc_headers_dict={"WARC-Date": page.date},
                    )
                )
    return 1 + 2 * len(pages)


def accuracy_of(run: Path) -> dict:
    """Recall (J >= 0.9) and wrong merges (J < 0.5) of the run's clusters, exact Jaccard."""
    settings = accuracy.run_settings(run)
    cols, texts = accuracy.load_run(run)
    sets = accuracy.shingle_sets(
        texts, int(settings.get("shingle_size", 5)), int(settings.get("seed", 1))
    )
    keep = np.flatnonzero(np.fromiter((s.size > 0 for s in sets), bool, len(sets)))
    matrix = accuracy.incidence_matrix([sets[k] for k in keep])
    pairs = accuracy.exact_pairs(matrix, 0.5)
    r = accuracy.evaluate("cluster_id", cols["cluster_id"][keep], pairs, 0.9, 0.5)
    return {
        "pages": int(keep.size),
        "high_pairs": r.high_pairs,
        "recall": r.recall,
        "wrong_merges": r.wrong_merges,
        "same_cluster_pairs": r.same_cluster_pairs,
    }


def cluster_groups(run: Path) -> set[frozenset[str]]:
    """The run's clusters as sets of URLs, to compare runs page for page."""
    rows = pq.read_table(run / "pages.parquet", columns=["url", "cluster_id"]).to_pylist()
    groups: dict[int, set[str]] = {}
    for r in rows:
        if r["url"] and r["cluster_id"] is not None:
            groups.setdefault(r["cluster_id"], set()).add(r["url"])
    return {frozenset(g) for g in groups.values()}


def graph_of(run: Path, true_pairs: set[frozenset[str]]) -> dict:
    con = connect(run)
    try:
        coll = find_collections(con)
        mirrors = find_mirrors(con)
        sql = "SELECT count(*) FROM links WHERE dst_doc IS NOT NULL"
        links = con.sql(sql).fetchall()[0][0]
    finally:
        con.close()
    clusters = coll.clusters.to_pylist()
    confirmed = {frozenset((r["host_a"], r["host_b"])) for r in mirrors.confirmed().to_pylist()}
    return {
        "collections": len(clusters),
        "collection_pages": int(sum(c["pages"] for c in clusters)),
        "cardinalities": sorted((c["cardinality"] for c in clusters), reverse=True),
        "mirror_pairs": len(confirmed),
        "mirror_pairs_true": len(confirmed & true_pairs),
        "resolved_links": int(links),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="work folder (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args(argv)
    if not docs_crawl.DOCS_DIR.is_dir():
        print(f"{docs_crawl.DOCS_DIR} is absent: this benchmark needs the shared data")
        return 2
    work = args.out or Path(tempfile.mkdtemp(prefix="layouts-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    pages, hosts = build_pages()
    true_pairs = {frozenset(p) for p in combinations([h["host"] for h in hosts], 2)}

    records: dict[str, int] = {}
    warc = work / "crawl.warc.gz"
    records["warc"] = write_response_only(warc, pages)
    # Text and links as Common Crawl derives WET and WAT: from the response record.
    by_url = {p.url: p for p in pages}
    texts: list[tuple[Page, str]] = []
    links: dict[str, list[str]] = {}
    for rec in iter_records([str(warc)]):
        extracted = extract_page(rec)
        if rec.url not in by_url:
            continue
        links[rec.url] = list(extracted.links)
        if extracted.text and extracted.text.strip():
            texts.append((by_url[rec.url], extracted.text))
    cc_warc = work / "CC-MAIN-crawl.warc.gz"
    records["cc"] = write_request_first(cc_warc, pages, links)
    wet = work / "CC-MAIN-crawl.warc.wet.gz"
    records["wet"] = write_wet(wet, texts)
    wat = work / "CC-MAIN-crawl.warc.wat.gz"
    n_wat = write_wat(wat, pages, links)
    records["wet+wat"] = records["wet"] + n_wat
    print(
        f"{len(pages)} pages on {len(hosts)} hosts, {sum(map(len, links.values()))} links; "
        f"files written in {time.perf_counter() - started:.1f}s",
        file=sys.stderr,
    )

    layouts = [
        ("warc", "(1) response-only WARC", [warc]),
        ("cc", "(2) request-first WARC (Common Crawl/Heritrix)", [cc_warc]),
        ("wet", "(3) WET", [wet]),
        ("wet+wat", "(4) WET + WAT", [wet, wat]),
    ]
    results = []
    reference = None
    for key, name, paths in layouts:
        run = work / f"run-{key.replace('+', '-')}"
        t0 = time.perf_counter()
        neardup.scan(paths, run, workers=2, force=True)
        scan_s = time.perf_counter() - t0
        row = {"layout": name, "records": records[key], "scan_s": scan_s}
        row |= accuracy_of(run)
        row |= graph_of(run, true_pairs)
        groups = cluster_groups(run)
        reference = groups if reference is None else reference
        row["clusters"] = len(groups)
        row["same_clusters_as_1"] = groups == reference
        results.append(row)
        print(f"{name}: {row}", file=sys.stderr)

    lines = [
        "| layout | records | pages compared | recall J>=0.9 | wrong merges | "
        "collections (clusters/pages) | mirror pairs confirmed | scan seconds |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        recall = "n/a" if r["recall"] is None else f"{r['recall']:.4f}"
        lines.append(
            f"| {r['layout']} | {r['records']:,} | {r['pages']:,} | {recall} "
            f"({r['high_pairs']:,} pairs) | {r['wrong_merges']} of {r['same_cluster_pairs']:,} "
            f"| {r['collections']} / {r['collection_pages']:,} | {r['mirror_pairs_true']} of "
            f"{len(true_pairs)} true ({r['mirror_pairs']} found) | {r['scan_s']:.1f} |"
        )
    print("\n".join(lines))
    print(
        f"\n{len(pages)} pages of the {MANUAL} manual on {len(hosts)} hosts "
        f"({', '.join(h['role'] for h in hosts)}); collection cardinalities: "
        + "; ".join(f"{r['layout'][:3]} {r['cardinalities']}" for r in results)
        + "; clusters (same as (1), URL for URL): "
        + "; ".join(
            f"{r['layout'][:3]} {r['clusters']} ({'yes' if r['same_clusters_as_1'] else 'NO'})"
            for r in results
        )
        + "; links resolved to a crawled page: "
        + "; ".join(f"{r['layout'][:3]} {r['resolved_links']:,}" for r in results)
        + f"; total {time.perf_counter() - started:.0f}s"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    if not args.keep and args.out is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
