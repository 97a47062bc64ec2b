"""Service bench: incremental groups vs full recomputation, tier-1 share, API latency.

Replays PostgreSQL 15.18 docs, then 15.20 as a re-crawl, plus generated near-copies, in
batches; after each batch compares the incremental groups with a full recomputation on the
same signatures (LSH candidates, verified pairs, `partition_group` per component) by
same-group pairs. Then 2,000 GET /status + POST /check requests on loopback (8 threads).

    .venv/bin/python bench/service_bench.py [--batch 500] [--out bench/out/service.md]
"""

from __future__ import annotations

import argparse
import random
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_crawl import docs_pages, manual_releases

from neardup.service import PageUpdate, ServiceIndex, html_to_text, partition_group
from neardup.service.api import create_service_app
from neardup.service.index import _UnionFind


def full_groups(ix: ServiceIndex) -> list[set[str]]:
    """Batch recomputation from scratch over the index's live signatures."""
    live = [p for p in ix.pages.values() if not p.removed and p.signature is not None]
    uf = _UnionFind()
    buckets: dict[int, list[int]] = {}
    for i, p in enumerate(live):
        uf.find(i)
        for k in p.keys.tolist():
            buckets.setdefault(k, []).append(i)
    for members in buckets.values():
        for j in members[1:]:
            if uf.find(members[0]) != uf.find(j):
                uf.union(members[0], j)  # provisional; verified inside partition_group
    comps: dict[int, list[int]] = {}
    for i in range(len(live)):
        comps.setdefault(uf.find(i), []).append(i)
    out = []
    for comp in comps.values():
        urls = [live[i].url for i in comp]
        sigs = np.stack([live[i].signature for i in comp])
        kmax = max(1, max(len(live[i].keys) for i in comp))
        keys = np.full((len(comp), kmax), 0, dtype=np.int64)
        for r, i in enumerate(comp):
            k = live[i].keys
            keys[r, : len(k)] = k
            keys[r, len(k) :] = -2 - r
        links = [live[i].links_in for i in comp]
        for part in partition_group(urls, sigs, keys, links, ix.threshold, ix.options):
            out.append({urls[i] for i in part})
    return out


def pair_set(groups: list[set[str]]) -> set[tuple[str, str]]:
    pairs = set()
    for g in groups:
        s = sorted(g)
        for i in range(len(s)):
            for j in range(i + 1, len(s)):
                pairs.add((s[i], s[j]))
    return pairs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--out", default="bench/out/service.md")
    ap.add_argument("--requests", type=int, default=2000)
    args = ap.parse_args(argv)
    rng = random.Random(0)
    old, new = manual_releases("postgresql")
    crawls = []
    for rel in (old, new):
        pages = [
            (f"http://docs.example.org/docs/15/{p}", html_to_text(b)) for p, b in docs_pages(rel)
        ]
        crawls.append((rel.version, pages))
    # Generated near-copies: mirror URLs with a small edit, so groups have several members.
    base = crawls[0][1]
    gen = [
        (f"http://mirror{n}.example.net/pg/{u.rsplit('/', 1)[1]}?s={n}", t + f" mirror {n}")
        for n in range(2)
        for u, t in rng.sample(base, min(400, len(base)))
    ]
    milestones = [("15.18", crawls[0][1]), ("generated", gen), ("15.20 re-crawl", crawls[1][1])]
    rows = []
    tmp = tempfile.mkdtemp()
    ix = ServiceIndex(Path(tmp) / "store")
    tier1 = changed = 0
    for name, pages in milestones:
        inc_t = []
        for start in range(0, len(pages), args.batch):
            chunk = [PageUpdate(u, text=t) for u, t in pages[start : start + args.batch]]
            rep = ix.apply(chunk)
            inc_t.append(rep.seconds)
            tier1 += rep.tier1
            changed += rep.changed
        t0 = time.perf_counter()
        full = full_groups(ix)
        full_s = time.perf_counter() - t0
        inc = [set(m) for m in ix.groups.values()]
        pf, pi = pair_set(full), pair_set(inc)
        prec = len(pf & pi) / len(pi) if pi else 1.0
        rec = len(pf & pi) / len(pf) if pf else 1.0
        rows.append((name, ix.counts()["pages"], len(pf), prec, rec, np.mean(inc_t), full_s))
        print(rows[-1], flush=True)
    # API load.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    app = create_service_app(ix, "t")
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    th = threading.Thread(target=srv.run, daemon=True)
    th.start()
    while not srv.started:
        time.sleep(0.05)
    urls = [u for u, _ in crawls[1][1]]
    texts = [t for _, t in crawls[1][1][:200]]
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)

    def one(i: int) -> float:
        t = time.perf_counter()
        if i % 10 == 0:
            r = client.post("/check", json={"text": texts[i % len(texts)]})
        else:
            r = client.get("/status", params={"url": urls[i % len(urls)]})
        r.raise_for_status()
        return time.perf_counter() - t

    t0 = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        lat = list(pool.map(one, range(args.requests)))
    wall = time.perf_counter() - t0
    srv.should_exit = True
    th.join(10)
    lat_ms = np.array(lat) * 1000
    lines = [
        "# Incremental duplicate service",
        "",
        f"Command: `.venv/bin/python bench/service_bench.py --batch {args.batch}`",
        "",
        "| milestone | pages | full pairs | precision | recall | s/batch incr. | s full |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {n} | {p} | {fp} | {pr:.4f} | {rc:.4f} | {it:.2f} | {fs:.2f} |"
        for n, p, fp, pr, rc, it, fs in rows
    ]
    lines += [
        "",
        f"Tier 1 settled {tier1} of {changed} changed pages ({tier1 / max(1, changed):.1%}).",
        "",
        f"API: {args.requests} requests (90 % GET /status, 10 % POST /check), 8 threads: "
        f"{args.requests / wall:.0f} req/s, p50 {np.percentile(lat_ms, 50):.1f} ms, "
        f"p99 {np.percentile(lat_ms, 99):.1f} ms.",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
