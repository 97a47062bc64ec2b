"""The web UI at scale: how long each page of `neardup ui RUN` takes to answer (issue 28).

Starts `neardup ui RUN --port P` as a user would (its own process, 127.0.0.1) and times every
kind of page over HTTP with httpx: the front page, text and URL searches (first and a later
result page), a cluster, a page, a diff, mirrors, collections, a collection, the roll-up, and
the JSON API behind them. Each URL is asked once cold (the first request of its kind, caches
empty) and then `--repeat` more times; the table gives the cold time and the median and max
of the warm ones. Start-up (process start until `/api/summary` answers) is reported apart: it
includes building the search index the first time a run is opened.

The IDs come from the run itself: the largest cluster, its representative and another member
(the diff), the first collection. Queries are words of `neardup.synth.webtext`'s vocabulary
(the standard library's documentation): two-word searches with many hits and with few, a
rare word, a word no page holds, prefixes, a word of every URL, a URL.

    .venv/bin/python bench/ui_bench.py RUN [--repeat 5] [--tag after] [--port 8791]

Results are appended as JSON lines to bench/out/ui/results.jsonl and printed as a markdown
table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "ui"
QUERIES = {  # hits at a million pages in the comments
    "two words, many hits": "return value",  # most pages
    "two words, few hits": "socket timeout",  # 85,606
    "two words, rarely together": "tarfile sqlite3",  # 1,014
    "one rare word": "mimetypes",  # 1,965
    "a word in no page": "monkeypatch",  # 0
    "prefix": "sock*",
    "common prefix": "con*",  # FTS5 merges the postings of every word starting so
    "a word of every URL": "page",  # every page a title/URL candidate
}


def start(run: Path, port: int, log: Path) -> tuple[subprocess.Popen, float]:
    """`neardup ui RUN` in its own process; seconds until it answers."""
    t = time.perf_counter()
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "neardup.cli.main", "ui", str(run), "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    url = f"http://127.0.0.1:{port}/api/summary"
    while True:
        if proc.poll() is not None:
            sys.exit(f"neardup ui exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url, timeout=600).status_code == 200:
                return proc, time.perf_counter() - t
        except httpx.TransportError:
            time.sleep(0.2)


def targets(client: httpx.Client) -> list[tuple[str, str]]:
    """(label, path) of every page to time, with IDs taken from the run."""
    top = client.get("/api/clusters").json()["rows"][0]
    members = client.get(f"/api/cluster/{top['cluster_id']}").json()["members"]["rows"]
    a = top["representative_doc_id"]
    b = next(m["doc_id"] for m in members if m["doc_id"] != a)
    collections = client.get("/api/collections").json()["rows"]
    host = client.get(f"/api/page/{a}").json()["url"].split("/")[2]
    paths = [
        ("front", "/"),
        ("front, page 2", "/?page=2"),
    ]
    for label, query in QUERIES.items():
        paths.append((f"search: {label} ({query!r})", f"/search?q={query}"))
    paths += [
        ("search: two words, page 40", f"/search?q={QUERIES['two words, many hits']}&page=40"),
        (f"search by URL ({host!r})", f"/search?q={host}"),
        ("search by URL, none", "/search?q=nowhere.invalid"),
        ("cluster", f"/cluster/{top['cluster_id']}"),
        ("page", f"/page/{a}"),
        ("diff", f"/diff?a={a}&b={b}"),
        ("mirrors", "/mirrors"),
        ("collections", "/collections"),
    ]
    if collections:
        paths.append(("collection", f"/collection/{collections[0]['collection_cluster_id']}"))
    paths += [
        ("roll-up", f"/rollup?q={QUERIES['two words, few hits']}"),
        ("api: summary", "/api/summary"),
        ("api: search", f"/api/search?q={QUERIES['two words, few hits']}"),
        ("api: clusters", "/api/clusters"),
        ("api: cluster", f"/api/cluster/{top['cluster_id']}"),
        ("api: page", f"/api/page/{a}"),
        ("api: diff", f"/api/diff?a={a}&b={b}"),
        ("api: mirrors", "/api/mirrors"),
        ("api: collections", "/api/collections"),
        ("api: roll-up", f"/api/rollup?q={QUERIES['two words, few hits']}"),
    ]
    return paths


def timed(client: httpx.Client, path: str) -> tuple[float, int, int | None]:
    """Seconds, status and the number of result rows (JSON answers) of one request."""
    t = time.perf_counter()
    r = client.get(path)
    seconds = time.perf_counter() - t
    rows = None
    if path.startswith("/api/") and r.status_code == 200:
        body = r.json()
        rows = len(body["rows"]) if isinstance(body, dict) and "rows" in body else None
    return seconds, r.status_code, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--port", type=int, default=8791)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    proc, startup = start(args.run, args.port, OUT / "server.log")
    results = []
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{args.port}", timeout=600) as client:
            for label, path in targets(client):
                cold, status, rows = timed(client, path)
                warm = [timed(client, path)[0] for _ in range(args.repeat)]
                results.append(
                    {
                        "label": label,
                        "path": path,
                        "status": status,
                        "rows": rows,
                        "cold_s": cold,
                        "warm_median_s": statistics.median(warm),
                        "warm_max_s": max(warm),
                    }
                )
                print(f"{label}: {cold:.3f} s cold, {statistics.median(warm):.3f} s", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    record = {
        "tag": args.tag,
        "run": str(args.run),
        "pages": json.loads((args.run / "summary.json").read_text())["records"],
        "startup_s": startup,
        "loadavg": os.getloadavg(),
        "cpus": os.cpu_count(),
        "results": results,
    }
    with open(OUT / "results.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    print(f"\n{record['pages']:,} pages, start-up {startup:.1f} s, load {record['loadavg']}\n")
    print("| page | status | cold | warm median | warm max |")
    print("|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['label']} | {r['status']} | {r['cold_s'] * 1e3:,.0f} ms "
            f"| {r['warm_median_s'] * 1e3:,.0f} ms | {r['warm_max_s'] * 1e3:,.0f} ms |"
        )


if __name__ == "__main__":
    main()
