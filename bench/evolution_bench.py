"""Crawls over time on real consecutive manual releases, and query latency at 1M pages.

Two crawls: the older and newer release of the PostgreSQL 15 (15.18 -> 15.20) and Python 3.11
(deb12u8 -> deb12u9) manuals, as one store. In the newer crawl MOVED pages are served from a
new path (`/moved/...`) with the same HTML, so lost and found has a known answer.

For query latency, a ~1M-page crawl is made of generated documents: 200-word windows of the
real manual text at random offsets, sketched with neardup.sketch (no HTML, no scan), indexed
with the store's band index; 1000 queries (windows with 10 % of the words replaced) are timed.

    .venv/bin/python bench/evolution_bench.py [--pages 1000000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from docs_crawl import MANUALS, docs_pages

from neardup import evolution as evo
from neardup.settings import Settings
from neardup.sketch import sketch_texts
from neardup.store import open_run

MOVED = 20
HOSTS = {"postgresql": "www.postgresql.example", "python": "docs.python.example"}


def _crawl(path: Path, release_index: int, moved: set[str], mirror_release: int | None) -> Path:
    """One crawl as JSONL: each manual at `release_index` on its host, the `moved` URLs under
    /moved/, and with `mirror_release` the same manual at that release on a mirror host."""
    with path.open("w") as fh:
        for manual, host in HOSTS.items():
            served = [(host, release_index)]
            if mirror_release is not None:
                served.append((f"mirror.{host}", mirror_release))
            for served_host, release in served:
                for rel, html in docs_pages(MANUALS[manual][release]):
                    url = f"http://{served_host}/{rel}"
                    if url in moved:
                        url = f"http://{served_host}/moved/{rel}"
                    text = html.decode("utf-8", "replace")
                    fh.write(json.dumps({"url": url, "html": text}) + "\n")
    return path


def _table(rows: list[dict], cols: list[str]) -> str:
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in cols]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "evolution.md")
    ap.add_argument(
        "--mirrors",
        action="store_true",
        help="also serve each manual on a mirror host that stays on the older release",
    )
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="evo-bench-"))
    rng = np.random.default_rng(5)
    settings = Settings()
    if True:
        # Pages of the older release, chosen to move in the newer crawl.
        old = [f"http://{HOSTS[m]}/{rel}" for m in HOSTS for rel, _ in docs_pages(MANUALS[m][0])]
        moved = set(rng.choice(sorted(old), MOVED, replace=False).tolist())
        store = tmp / "store"
        t = time.perf_counter()
        mirror = 0 if args.mirrors else None
        evo.add_crawl([_crawl(tmp / "m.jsonl", 0, set(), mirror)], store, "old", settings)
        evo.add_crawl([_crawl(tmp / "n.jsonl", 1, moved, mirror)], store, "new", settings)
        t_crawl = time.perf_counter() - t
        t = time.perf_counter()
        result = evo.evolution(store)
        t_evo = time.perf_counter() - t
        table = evo.find_moved_all(store).to_pylist()
        recovered = sum(
            r["new_url"] is not None and r["new_url"].replace("/moved/", "/") == r["old_url"]
            for r in table
            if r["old_url"] in moved
        )

        # ~1M generated documents from windows of real manual text.
        with open_run(evo.crawl_dir(store, "old")) as con:
            words = " ".join(t for (t,) in con.execute("SELECT text FROM page_text").fetchall())
        words = np.array(words.split())
        n, w = args.pages, 200
        starts = rng.integers(0, words.size - w, n)
        big = tmp / "big"
        big.mkdir()
        t = time.perf_counter()
        sig = np.lib.format.open_memmap(
            big / "signatures.npy", "w+", np.uint32, (n, settings.num_perm)
        )
        for s in range(0, n, 50_000):
            texts = [" ".join(words[i : i + w]) for i in starts[s : s + 50_000]]
            sig[s : s + len(texts)] = sketch_texts(texts, settings).minhash
        sig.flush()
        del sig
        t_sketch = time.perf_counter() - t
        np.save(big / "signature_docs.npy", np.arange(n, dtype=np.int64))
        (big / "settings.json").write_text(settings.to_json())
        t = time.perf_counter()
        meta = evo.build_band_index(big)
        t_index = time.perf_counter() - t
        index = evo.BandIndex.open(big)
        qstarts = rng.choice(starts, args.queries)
        queries = []
        for i in qstarts:
            q = words[i : i + w].copy()
            q[rng.choice(w, w // 50, replace=False)] = "zzqq"
            queries.append(" ".join(q))
        qsig = sketch_texts(queries, settings).minhash
        lat, found = [], 0
        for q in qsig:
            t = time.perf_counter()
            _, docs, _est = index.lookup(q[None, :], evo.INDEX_THRESHOLD)
            lat.append(time.perf_counter() - t)
            found += bool(docs.size)
        lat_ms = np.array(lat) * 1000
    lines = [
        "# Evolution benchmark",
        "",
        "Command: `.venv/bin/python bench/evolution_bench.py "
        f"--pages {args.pages} --queries {args.queries}{' --mirrors' if args.mirrors else ''}`",
        "",
        "Store: crawl `old` = PostgreSQL 15.18 + Python 3.11 deb12u8 manuals, crawl `new` = "
        f"PostgreSQL 15.20 + Python 3.11 deb12u9, with {MOVED} pages of `old` served under "
        f"`/moved/` in `new`"
        + (
            "; both crawls also serve each manual on a mirror host that stays on the older "
            "release (a stale mirror)"
            if args.mirrors
            else ""
        )
        + f". Scanning both: {t_crawl:.1f} s; evolution: {t_evo:.2f} s.",
        "",
        "## Φ and Ψ by first-crawl cluster size",
        "",
        _table(result.phi_psi_summary.to_pylist(), ["bucket", "urls", "phi", "psi"]),
        "",
        "Hosts in the same number of clusters: "
        + ", ".join(f"{r['same_clusters']}/{r['hosts']}" for r in result.hosts.to_pylist()),
        "",
        "## Page change (K = 128; buckets scaled from Fetterly's 0/1-28/29-56/57-83/84/85)",
        "",
        _table(result.change_summary.to_pylist(), ["bucket", "change", "urls", "share"]),
        "",
        "## Lost and found",
        "",
        f"{recovered} of {MOVED} moved pages recovered at their new URL "
        f"({len(table)} URLs gone from the newer crawl in all; "
        f"{sum(r['new_url'] is not None for r in table)} matched to some page).",
        "",
        "## Query latency",
        "",
        f"{args.pages:,} generated documents (200-word windows of the real manual text at "
        f"random offsets, sketched with neardup.sketch_texts in {t_sketch:.0f} s); band index "
        f"{meta['bands']} x {meta['rows']} built in {t_index:.1f} s. {args.queries} queries "
        "(windows with 2 % of words replaced), `BandIndex.lookup` on the memory-mapped index "
        "(band search + candidate verification; no URL lookup):",
        "",
        f"- median {np.median(lat_ms):.2f} ms, p99 {np.percentile(lat_ms, 99):.2f} ms, "
        f"max {lat_ms.max():.2f} ms; {found} of {args.queries} queries found a page.",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
