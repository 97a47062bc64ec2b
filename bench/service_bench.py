"""Service bench: the incremental service against `neardup scan` and exact Jaccard, on real
manuals.

Data: the docs-manual crawl of bench/docs_crawl.py (PostgreSQL, Python and LLVM manuals; per
manual a primary host, a full mirror, a stale copy of the older release, a partial mirror and
a re-rooted copy), read from its WARCs with the link graph (in-links give the winner rule its
popularity). It is replayed into the service in batches, in five phases (milestones):

1. primaries, 2. full mirrors and stale copies, 3. partial mirrors and re-rooted copies,
4. a re-crawl of 25 % of the pages, each edited by replacing a contiguous block of 3-20 % of
   its words with real words of another page (resemblance to the old version ≈ 0.67-0.94,
   straddling τ = 0.8),
5. a second re-crawl of 10 % (edits compound), 15 % of the partial mirror's pages turning into
   redirects to the primary copy, and 5 % of the stale copies removed.

At each milestone the reference is independent of the service: `neardup scan` of the live
pages written as JSONL (its `pages.cluster_id` gives the partition), and the exact 5-shingle
Jaccard of every pair whose min-hash estimate reaches 0.7 (a pair with J >= 0.9 is below that
estimate with negligible probability at 128 permutations). Reported: same-group pairs of
each; REP / RER, the share of the service's pairs the scan does not have and of the scan's
pairs the service does not have; and the recall of the pairs with J >= 0.9, for the service
and the scan side by side. Then the load-imbalance factor of 1-3 dimensions and the API under
load on loopback.

    .venv/bin/python bench/service_bench.py [--batch 500] [--out bench/out/service.md]
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import httpx
import numpy as np
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_crawl import DOCS_DIR, build

from neardup import scan
from neardup.config import Settings
from neardup.index.state.tier2 import all_pairs
from neardup.ingest import extract_page, iter_records
from neardup.kernels import (
    canonicalize,
    estimate_resemblance,
    jaccard,
    shingle_hashes,
    sketch_texts,
)
from neardup.service import (
    PageUpdate,
    ServiceIndex,
    ServiceOptions,
    dim_lengths,
    length_partition_report,
)
from neardup.service.api import create_service_app

MANUALS = ["postgresql", "python", "llvm"]


@dataclass
class CrawlPage:
    url: str
    role: str
    manual: str
    rel: str
    text: str


@dataclass
class Replay:
    """What the bench believes is live: the ground state a full recomputation starts from."""

    texts: dict[str, str] = field(default_factory=dict)
    redirects: dict[str, str] = field(default_factory=dict)
    links: dict[str, int] = field(default_factory=dict)

    def apply(self, u: PageUpdate) -> None:
        if u.remove:
            self.texts.pop(u.url, None)
            self.redirects.pop(u.url, None)
        elif u.redirect_to:
            self.texts.pop(u.url, None)
            self.redirects[u.url] = u.redirect_to
        else:
            self.redirects.pop(u.url, None)
            self.texts[u.url] = u.text or ""
        if u.links_in is not None:
            self.links[u.url] = u.links_in


def read_crawl(out: Path) -> tuple[list[CrawlPage], dict[str, int]]:
    """Pages of the docs crawl with their text, and in-links (distinct linking pages)."""
    info = build(out, MANUALS, "mirrors", 0.3, 0)
    pages: list[CrawlPage] = []
    inlinks: Counter[str] = Counter()
    for h in info["hosts"]:
        for rec in iter_records([str(out / h["warc"])]):
            page = extract_page(rec, links=True)
            if page.skipped_reason or not page.text or not rec.url:
                continue
            rel = rec.url[len(h["base_url"]) :]
            pages.append(CrawlPage(rec.url, h["role"], h["manual"], rel, page.text))
            inlinks.update({u.split("#")[0] for u in page.links} - {rec.url})
    return pages, dict(inlinks)


def edit(text: str, share: float, donor: str, rng: random.Random) -> str:
    """Replace a contiguous block of `share` of the words by words of another real page."""
    words, dwords = text.split(), donor.split() or ["x"]
    m = max(1, round(share * len(words)))
    at = rng.randrange(0, max(1, len(words) - m))
    d0 = rng.randrange(0, max(1, len(dwords) - m))
    block = (dwords * (m // len(dwords) + 2))[d0 : d0 + m]
    return " ".join(words[:at] + block + words[at + m :])


def phases(pages: list[CrawlPage], links: dict[str, int], seed: int) -> list[tuple[str, list]]:
    """The five replay phases as lists of PageUpdate (see the module doc)."""
    rng = random.Random(seed)
    by_role: dict[str, list[CrawlPage]] = {}
    for p in pages:
        by_role.setdefault(p.role, []).append(p)

    def fresh(roles: tuple[str, ...]) -> list[PageUpdate]:
        return [
            PageUpdate(p.url, text=p.text, links_in=links.get(p.url, 0))
            for r in roles
            for p in by_role.get(r, [])
        ]

    def recrawl(current: dict[str, str], share: float) -> list[PageUpdate]:
        urls = sorted(current)
        picked = rng.sample(urls, int(share * len(urls)))
        out = []
        for u in picked:
            donor = current[rng.choice(urls)]
            out.append(PageUpdate(u, text=edit(current[u], rng.uniform(0.03, 0.2), donor, rng)))
        return out

    primary = {(p.manual, p.rel): p.url for p in by_role["primary"]}
    out: list[tuple[str, list]] = [
        ("1 primaries", fresh(("primary",))),
        ("2 + full mirrors, stale copies", fresh(("full", "stale"))),
        ("3 + partial mirrors, re-rooted", fresh(("partial", "rerooted"))),
    ]
    # Phases 4 and 5 depend on the texts live by then: built lazily by `run`.
    out.append(("4 re-crawl 25 %, edits near τ", [recrawl, 0.25]))
    redirs = [
        PageUpdate(p.url, redirect_to=primary[(p.manual, p.rel)])
        for p in rng.sample(by_role["partial"], int(0.15 * len(by_role["partial"])))
        if (p.manual, p.rel) in primary
    ]
    gone = [
        PageUpdate(p.url, remove=True)
        for p in rng.sample(by_role["stale"], int(0.05 * len(by_role["stale"])))
    ]
    out.append(("5 re-crawl 10 %, redirects, removals", [recrawl, 0.10, redirs + gone]))
    return out


def scan_groups(replay: Replay, settings: Settings, folder: Path) -> tuple[list[set[str]], float]:
    """`neardup scan` of the live pages (JSONL): its clusters by URL, and its seconds."""
    folder.mkdir(parents=True)
    path = folder / "pages.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for url in sorted(replay.texts):
            fh.write(json.dumps({"url": url, "text": replay.texts[url]}) + "\n")
    t0 = time.perf_counter()
    run = scan([path], folder / "run", settings).path
    seconds = time.perf_counter() - t0
    con = duckdb.connect(str(run / "neardup.duckdb"), read_only=True)
    rows = con.sql("SELECT url, cluster_id FROM pages").fetchall()
    con.close()
    groups: dict[object, set[str]] = {}
    for url, cluster in rows:
        groups.setdefault(url if cluster is None else cluster, set()).add(url)
    return list(groups.values()), seconds


def exact_pairs(replay: Replay, settings: Settings) -> dict:
    """Exact 5-shingle Jaccard of the pairs whose min-hash estimate reaches 0.7, and the
    pairs at τ by estimate (for the length-mapping table)."""
    urls = sorted(replay.texts)
    texts = [replay.texts[u] for u in urls]
    sk = sketch_texts(texts, settings)
    sigs = np.ascontiguousarray(sk.minhash)
    ok = np.flatnonzero(sk.n_shingles > 0)
    a, b = all_pairs(sigs[ok], int(np.ceil(0.7 * settings.num_perm - 1e-9)))
    a, b = ok[a], ok[b]
    sets = {}
    for i in np.union1d(a, b).tolist():
        sets[i] = np.unique(
            shingle_hashes(
                canonicalize(texts[i]), settings.shingle_size, settings.wrap_shingles, settings.seed
            )
        )
    jac = np.array([jaccard(sets[i], sets[j]) for i, j in zip(a.tolist(), b.tolist(), strict=True)])
    est = estimate_resemblance(sigs[a], sigs[b]) if a.size else np.empty(0)
    at_tau = np.asarray(est) >= settings.threshold
    return {
        "urls": urls,
        "ok": ok,
        "high": [
            (urls[i], urls[j])
            for i, j, x in zip(a.tolist(), b.tolist(), jac, strict=True)
            if x >= 0.9
        ],
        "tau_pairs": (a[at_tau], b[at_tau]),
    }


def recall(groups: list[set[str]], pairs: list[tuple[str, str]]) -> float:
    """Share of `pairs` whose pages share a group."""
    of = {u: i for i, g in enumerate(groups) for u in g}
    hit = sum(1 for x, y in pairs if x in of and of.get(x) == of.get(y))
    return hit / len(pairs) if pairs else 1.0


def pair_codes(groups, ids: dict[str, int]) -> set[int]:
    """Same-group page pairs as integers (i * n + j, i < j)."""
    n = len(ids)
    out: set[int] = set()
    for g in groups:
        s = sorted(ids[u] for u in g)
        for x in range(len(s)):
            out.update(s[x] * n + y for y in s[x + 1 :])
    return out


def api_load(ix: ServiceIndex, urls: list[str], texts: list[str], requests: int) -> dict:
    """90 % GET /status, 10 % POST /check from 8 threads against a real loopback server."""
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
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)

    def one(i: int) -> float:
        t = time.perf_counter()
        if i % 10 == 0:
            r = client.post("/check", json={"text": texts[i % len(texts)]})
        else:
            r = client.get("/status", params={"url": urls[(i * 7919) % len(urls)]})
        r.raise_for_status()
        return time.perf_counter() - t

    t0 = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        lat = np.array(list(pool.map(one, range(requests)))) * 1000
    wall = time.perf_counter() - t0
    srv.should_exit = True
    th.join(10)
    return {
        "rps": requests / wall,
        "p50": float(np.percentile(lat, 50)),
        "p99": float(np.percentile(lat, 99)),
    }


def imbalance_table(lens3: np.ndarray, pairs: np.ndarray, opts: ServiceOptions) -> list[str]:
    """Load imbalance (max machine / mean) and avoided comparisons for 1-3 dimensions."""
    lines = [
        "| machines | 1-D imbalance | 2-D | 3-D | avoided 1-D | 2-D | 3-D |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in (8, 16, 32, 64):
        reps = []
        for d in (1, 2, 3):
            lens = lens3.sum(1) if d == 1 else lens3[:, :d]
            reps.append(length_partition_report(lens, d, m, 0.8, opts.rho, machines=m))
        imb = " | ".join(f"{r['imbalance']:.2f}" for r in reps)
        av = " | ".join(f"{r['avoided']:.1%}" for r in reps)
        lines.append(f"| {m} | {imb} | {av} |")
    lines += ["", "| ρ | 3-D avoided | true pairs kept |", "|---|---|---|"]
    for rho in (1.0, 1.1, 1.2, 1.3, 1.5):
        r = length_partition_report(lens3, 3, opts.parts, 0.8, rho, pairs=pairs, sample=3000)
        lines.append(f"| {rho} | {r['avoided']:.1%} | {r.get('pairs_kept', 1.0):.4f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--out", default="bench/out/service.md")
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not DOCS_DIR.is_dir():
        print(f"{DOCS_DIR} is absent: this bench needs the shared docs data", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="service-bench-"))
    t0 = time.perf_counter()
    pages, links = read_crawl(tmp / "crawl")
    print(f"crawl: {len(pages)} pages in {time.perf_counter() - t0:.0f}s", flush=True)
    settings = Settings()
    opts = ServiceOptions()
    ix = ServiceIndex(tmp / "store", settings, opts)
    replay = Replay()
    rows = []
    total: Counter[str] = Counter()
    for n, (name, spec) in enumerate(phases(pages, links, args.seed)):
        if callable(spec[0]):
            updates = spec[0](replay.texts, spec[1]) + (spec[2] if len(spec) > 2 else [])
        else:
            updates = spec
        secs = []
        phase: Counter[str] = Counter()
        for start in range(0, len(updates), args.batch):
            chunk = updates[start : start + args.batch]
            for u in chunk:
                replay.apply(u)
            rep = ix.apply(chunk)
            secs.append(rep.seconds)
            phase.update({k: v for k, v in rep.to_dict().items() if k != "seconds"})
        total.update(phase)
        scanned, scan_s = scan_groups(replay, settings, tmp / f"scan{n}")
        exact = exact_pairs(replay, settings)
        ids = {u: i for i, u in enumerate(exact["urls"])}
        mine = [set(g) for g in ix.groups.values()]
        ps, pi = pair_codes(scanned, ids), pair_codes(mine, ids)
        both = len(ps & pi)
        rows.append(
            {
                "milestone": name,
                "pages": len(replay.texts),
                "service_pairs": len(pi),
                "scan_pairs": len(ps),
                "rep": 1 - both / len(pi) if pi else 0.0,
                "rer": 1 - both / len(ps) if ps else 0.0,
                "high": len(exact["high"]),
                "recall_service": recall(mine, exact["high"]),
                "recall_scan": recall(scanned, exact["high"]),
                "tier1": phase["tier1"] / max(1, phase["changed"]),
                "inc_s": float(np.mean(secs)),
                "scan_s": scan_s,
                "batches": len(secs),
            }
        )
        print(rows[-1], flush=True)
    a, b = exact["tau_pairs"]
    urls, ok = exact["urls"], exact["ok"]
    lens3 = dim_lengths([replay.texts[u] for u in urls], 3, settings.seed)[ok]
    pos = -np.ones(len(urls), dtype=np.int64)
    pos[ok] = np.arange(len(ok))
    imb = imbalance_table(lens3, np.stack([pos[a], pos[b]], 1), opts)
    api = api_load(ix, urls, [replay.texts[u] for u in urls[:300]], args.requests)
    ix.close()
    lines = [
        "# Incremental duplicate service",
        "",
        f"Command: `.venv/bin/python bench/service_bench.py --batch {args.batch}`",
        "",
        f"Crawl: {len(pages)} pages of the docs-manual crawl (mirrors topology, "
        f"{', '.join(MANUALS)}); batches of {args.batch}; τ = {settings.threshold}. "
        "Reference: `neardup scan` of the live pages at each milestone, and exact 5-shingle "
        "Jaccard.",
        "",
        "| milestone | live pages | service pairs | scan pairs | REP | RER | pairs J ≥ 0.9 | "
        "recall service | recall scan | tier 1 share | s/batch | s scan |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        t1 = f"{r['tier1']:.1%}" if r["milestone"][0] in "45" else "—"
        lines.append(
            f"| {r['milestone']} | {r['pages']} | {r['service_pairs']} | {r['scan_pairs']} | "
            f"{r['rep']:.2%} | {r['rer']:.2%} | {r['high']} | {r['recall_service']:.3f} | "
            f"{r['recall_scan']:.3f} | {t1} | {r['inc_s']:.3f} | {r['scan_s']:.2f} |"
        )
    lines += [
        "",
        f"Tier 1 (same sketch again) settled {total['tier1']} of {total['changed']} re-crawled "
        f"pages; the scan's graph verified {total['comparisons']:,} candidate pairs in all; "
        f"{total['recomputed']:,} components were clustered again.",
        "",
        "Length mapping on the final store (docs crawl after the replay): load imbalance "
        "(largest machine over mean machine, cells mapped onto machines largest first) and "
        "share of comparisons avoided, with as many intervals per dimension as machines; "
        "then ρ against the pairs at τ (min-hash estimate):",
        "",
        *imb,
        "",
        f"API: {args.requests} requests (90 % GET /status, 10 % POST /check), 8 threads, "
        f"loopback: {api['rps']:.0f} req/s, p50 {api['p50']:.1f} ms, p99 {api['p99']:.1f} ms.",
    ]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
