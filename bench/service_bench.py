"""Service bench: incremental two-tier groups against a full recomputation, on real manuals.

Data: the docs-manual crawl of bench/docs_crawl.py (PostgreSQL, Python and LLVM manuals; per
manual a primary host, a full mirror, a stale copy of the older release, a partial mirror and
a re-rooted copy), read from its WARCs with the link graph (in-links give the winner rule its
popularity). It is replayed into the service in batches, in five phases (milestones):

1. primaries, 2. full mirrors and stale copies, 3. partial mirrors and re-rooted copies,
4. a re-crawl of 25 % of the pages, each edited by replacing a contiguous block of 3-20 % of
   its words with real words of another page (resemblance to the old version ≈ 0.67-0.94,
   straddling τ = 0.8: the cases where tier 1, tier 2 and group repair disagree most),
5. a second re-crawl of 10 % (edits compound), 15 % of the partial mirror's pages turning into
   redirects to the primary copy, and 5 % of the stale copies removed.

The same batches go to two indexes, tier 2 by the multidimensional length mapping (default)
and by LSH bands. At each milestone a full recomputation really recomputes: it re-sketches the
text of every live page so far, compares all pairs (brute force, the exact baseline; and,
timed too, the same length-partitioned all-to-all the service uses), and groups them with the
same rules (components, repair, winners with redirect-credited in-links). Precision and
recall are over same-group page pairs; relative errors are 1 - precision and 1 - recall.
Then the load-imbalance factor of 1-3 dimensions and the API under load on loopback.

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
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_crawl import DOCS_DIR, build

from neardup.config import Settings
from neardup.ingest import extract_page, iter_records
from neardup.kernels import sketch_texts
from neardup.service import (
    PageUpdate,
    ServiceIndex,
    ServiceOptions,
    SignatureStore,
    dim_lengths,
    effective_popularity,
    length_partition_report,
)
from neardup.service.api import create_service_app
from neardup.service.groups import _UnionFind, settle_component
from neardup.service.tier2 import all_pairs

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


def full_recompute(replay: Replay, settings: Settings, opts: ServiceOptions) -> dict:
    """Groups from scratch over every live page: re-sketch, compare, group. Timed twice:
    brute-force all pairs (exact), and the length-partitioned all-to-all."""
    urls = sorted(replay.texts)
    texts = [replay.texts[u] for u in urls]
    t0 = time.perf_counter()
    sk = sketch_texts(texts, settings)
    sigs = np.ascontiguousarray(sk.minhash)
    ok = np.flatnonzero(sk.n_shingles > 0)
    need = int(np.ceil(settings.threshold * settings.num_perm - 1e-9))
    a, b = all_pairs(sigs[ok], need)
    a, b = ok[a], ok[b]
    groups = group_pairs(urls, sigs, a, b, replay, settings, opts)
    exact_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sk2 = sketch_texts(texts, settings)
    lens = dim_lengths(texts, opts.dims, settings.seed)
    st = SignatureStore(
        settings.num_perm, opts.dims, settings.threshold, "lengths", opts.parts, opts.rho
    )
    for i in ok.tolist():
        st.put(urls[i], sk2.minhash[i], lens[i])
    rows = np.array([st.row_of[urls[i]] for i in ok.tolist()], dtype=np.int64)
    found = st.many_to_all(st.sigs[rows], st.lens[rows], rows)
    group_pairs(urls, sigs, ok[found.query], ok[found.row], replay, settings, opts)
    lengths_s = time.perf_counter() - t0
    n = len(ok)
    return {
        "groups": groups,
        "exact_s": exact_s,
        "lengths_s": lengths_s,
        "pairs": (sigs, ok, a, b),
        "avoided": 1 - found.comparisons / max(1, n * (n - 1)),
    }


def group_pairs(urls, sigs, a, b, replay: Replay, settings: Settings, opts: ServiceOptions):
    """Components of verified pairs, each settled by the service's repair and winner rules."""
    uf = _UnionFind()
    for i, j in zip(a.tolist(), b.tolist(), strict=True):
        uf.union(i, j)
    comps: dict[int, list[int]] = {}
    for i in range(len(urls)):
        comps.setdefault(uf.find(i), []).append(i)
    out = []
    for comp in comps.values():
        if len(comp) == 1:
            out.append({urls[comp[0]]})
            continue
        curls = [urls[i] for i in comp]
        pop = effective_popularity(replay.links, replay.redirects, curls)
        local = list(range(len(comp)))
        for part in settle_component(local, curls, sigs[comp], pop, settings.threshold, opts):
            out.append({curls[i] for i in part})
    return out


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
    modes = {m: ServiceOptions(tier2=m) for m in ("lengths", "lsh")}
    ixs = {m: ServiceIndex(tmp / f"store-{m}", settings, o) for m, o in modes.items()}
    opts = modes["lengths"]
    replay = Replay()
    rows = []
    totals = {m: Counter() for m in modes}
    for name, spec in phases(pages, links, args.seed):
        if callable(spec[0]):
            updates = spec[0](replay.texts, spec[1]) + (spec[2] if len(spec) > 2 else [])
        else:
            updates = spec
        secs = {m: [] for m in modes}
        phase_tot = {m: Counter() for m in modes}
        for start in range(0, len(updates), args.batch):
            chunk = updates[start : start + args.batch]
            for u in chunk:
                replay.apply(u)
            for m, ix in ixs.items():
                rep = ix.apply(chunk)
                secs[m].append(rep.seconds)
                phase_tot[m].update(rep.to_dict())
        full = full_recompute(replay, settings, opts)
        ids = {u: i for i, u in enumerate(sorted(replay.texts))}
        pf = pair_codes(full["groups"], ids)
        for m, ix in ixs.items():
            totals[m].update(phase_tot[m])
            pi = pair_codes([ix.groups[g] for g in ix.groups], ids)
            both = len(pf & pi)
            t2 = phase_tot[m]
            rows.append(
                {
                    "milestone": name,
                    "mode": m,
                    "pages": len(replay.texts),
                    "full_pairs": len(pf),
                    "rep": 1 - both / len(pi) if pi else 0.0,
                    "rer": 1 - both / len(pf) if pf else 0.0,
                    "tier1": t2["tier1"] / max(1, t2["changed"]),
                    "avoided": 1 - t2["tier2_comparisons"] / max(1, t2["tier2_all_pairs"]),
                    "inc_s": float(np.mean(secs[m])),
                    "full_exact_s": full["exact_s"],
                    "full_lengths_s": full["lengths_s"],
                    "batches": len(secs[m]),
                }
            )
            print(rows[-1], flush=True)
    _sigs, ok, a, b = full["pairs"]
    urls = sorted(replay.texts)
    lens3 = dim_lengths([replay.texts[u] for u in urls], 3, settings.seed)[ok]
    pos = -np.ones(len(urls), dtype=np.int64)
    pos[ok] = np.arange(len(ok))
    imb = imbalance_table(lens3, np.stack([pos[a], pos[b]], 1), opts)
    api = api_load(ixs["lengths"], urls, [replay.texts[u] for u in urls[:300]], args.requests)
    for ix in ixs.values():
        ix.close()
    lines = [
        "# Incremental duplicate service",
        "",
        f"Command: `.venv/bin/python bench/service_bench.py --batch {args.batch}`",
        "",
        f"Crawl: {len(pages)} pages of the docs-manual crawl (mirrors topology, "
        f"{', '.join(MANUALS)}); batches of {args.batch}; τ = {settings.threshold}; "
        f"tier 2 lengths: N = {opts.dims}, {opts.parts} intervals per dimension, "
        f"ρ = {opts.rho}.",
        "",
        "| milestone | tier 2 | live pages | full pairs | REP | RER | tier 1 share | "
        "tier-2 comparisons avoided | s/batch incr. | s full exact | s full lengths | "
        "full / incr. |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        t1 = f"{r['tier1']:.1%}" if r["milestone"][0] in "45" else "—"
        lines.append(
            f"| {r['milestone']} | {r['mode']} | {r['pages']} | {r['full_pairs']} | "
            f"{r['rep']:.2%} | {r['rer']:.2%} | {t1} | {r['avoided']:.1%} | "
            f"{r['inc_s']:.3f} | {r['full_exact_s']:.2f} | {r['full_lengths_s']:.2f} | "
            f"{r['full_lengths_s'] / r['inc_s']:.1f}× |"
        )
    for m in modes:
        t = totals[m]
        lines.append("")
        lines.append(
            f"{m}: tier 1 settled {t['tier1']} of {t['changed']} re-crawled pages "
            f"({t['tier1'] / max(1, t['changed']):.1%}); tier 2 compared "
            f"{t['tier2_comparisons']:,} of {t['tier2_all_pairs']:,} page pairs "
            f"({1 - t['tier2_comparisons'] / max(1, t['tier2_all_pairs']):.1%} avoided); "
            f"{t['repaired']} groups repaired."
        )
    lines += [
        "",
        "Length mapping on the final store (docs crawl after the replay): load imbalance "
        "(largest machine over mean machine, cells mapped onto machines largest first) and "
        "share of comparisons avoided, with as many intervals per dimension as machines; "
        "then ρ against the exact pairs of the full recomputation:",
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
