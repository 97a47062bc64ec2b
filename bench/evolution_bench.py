"""Crawls over time on real consecutive manual releases, and query latency at 1M pages.

Three crawls of one store, each manual on its own host. LLVM is the manual with three
consecutive releases in Debian 12 (14.0.6, 15.0.6, 16.0.6): one per crawl. PostgreSQL
(15.18 -> 15.20) and Python 3.11 (deb12u8 -> deb12u9) have two, so they change at different
crawls, as real sites do: PostgreSQL in crawl 2, Python in crawl 3.

    crawl   PostgreSQL   Python 3.11   LLVM
    c1      15.18        deb12u8       14.0.6
    c2      15.20        deb12u8       15.0.6
    c3      15.20        deb12u9       16.0.6

At each crawl, MOVED pages present in the previous crawl are served from a new path
(`/moved/...`, same release content as the rest of the crawl) and stay there afterwards, so
lost and found has known answers after every crawl. `--mirrors` also serves each manual on a
mirror host frozen at its crawl-1 release (a stale mirror), which gives the crawls clusters.

LLVM 14's manual is not in ../shared/data/docs; `--fetch` makes it from Debian's package
(`apt-get download llvm-14-doc=1:14.0.6-12`, its html files repacked as .tar.xz like the
others) into --cache, outside the repository.

For query latency, a ~1M-page crawl is made of generated documents: 200-word windows of the
real manual text at random offsets, sketched with neardup.kernels (no HTML, no scan), indexed
with the store's band index; 1000 queries (windows with 2 % of the words replaced) are timed.

    .venv/bin/python bench/evolution_bench.py [--fetch] [--pages 1000000] [--mirrors]
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from docs_crawl import MANUALS, docs_pages

from neardup.config import Settings
from neardup.crawls.band_index import INDEX_THRESHOLD, BandIndex, build_band_index
from neardup.crawls.evolution import CHANGES, evolution
from neardup.crawls.lost_found import find_moved, find_moved_all
from neardup.crawls.store import add_crawl, crawl_dir, list_crawls
from neardup.kernels import sketch_texts
from neardup.store import open_run

MOVED = 20
HOSTS = {
    "postgresql": "www.postgresql.example",
    "python": "docs.python.example",
    "llvm": "llvm.example",
}
LLVM14_PACKAGE = "llvm-14-doc=1:14.0.6-12"
LLVM14_ARCHIVE = "llvm-14-doc_1_14.0.6-12.tar.xz"
DEFAULT_CACHE = Path.home() / ".cache" / "neardup" / "docs"


def fetch_llvm14(cache: Path) -> Path:
    """The LLVM 14 manual as a .tar.xz of its html files, made from Debian's package once."""
    archive = cache / LLVM14_ARCHIVE
    if archive.exists():
        return archive
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", LLVM14_PACKAGE], cwd=cache, check=True)
    deb = next(cache.glob("llvm-14-doc_*.deb"))
    tree = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], check=True, capture_output=True)
    tmp = archive.with_suffix(".tmp")
    with tarfile.open(fileobj=io.BytesIO(tree.stdout)) as src, tarfile.open(tmp, "w:xz") as dst:
        for member in src:
            if member.isfile() and member.name.endswith((".html", ".htm")):
                dst.addfile(member, src.extractfile(member))
    tmp.rename(archive)
    return archive


def schedule(llvm14: Path) -> list[tuple[str, dict[str, object]]]:
    """(crawl label, release of each manual) of the three crawls."""
    pg, py, llvm = MANUALS["postgresql"], MANUALS["python"], MANUALS["llvm"]
    return [
        ("c1", {"postgresql": pg[0], "python": py[0], "llvm": llvm14}),
        ("c2", {"postgresql": pg[1], "python": py[0], "llvm": llvm[0]}),
        ("c3", {"postgresql": pg[1], "python": py[1], "llvm": llvm[1]}),
    ]


def release_name(release: object) -> str:
    """A release as the tables print it."""
    return release.name.removesuffix(".tar.xz") if isinstance(release, Path) else release.archive


def moved_url(url: str) -> str:
    """Where a moved page is served: the same path under /moved/ on the same host."""
    scheme, rest = url.split("://", 1)
    host, path = rest.split("/", 1)
    return f"{scheme}://{host}/moved/{path}"


def crawl_urls(releases: dict[str, object], moved: set[str]) -> dict[str, bytes]:
    """url -> html of the primary hosts of one crawl, moved pages under /moved/."""
    out = {}
    for manual, host in HOSTS.items():
        for rel, html in docs_pages(releases[manual]):
            url = f"http://{host}/{rel}"
            out[moved_url(url) if url in moved else url] = html
    return out


def write_crawl(path: Path, pages: dict[str, bytes], mirror: dict[str, object] | None) -> Path:
    """One crawl as JSONL; with `mirror`, each manual also on mirror.HOST at that release."""
    with path.open("w") as fh:
        for url, html in pages.items():
            fh.write(json.dumps({"url": url, "html": html.decode("utf-8", "replace")}) + "\n")
        for manual, release in (mirror or {}).items():
            for rel, html in docs_pages(release):
                url = f"http://mirror.{HOSTS[manual]}/{rel}"
                fh.write(json.dumps({"url": url, "html": html.decode("utf-8", "replace")}) + "\n")
    return path


def _table(rows: list[dict], cols: list[str]) -> str:
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in cols]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _kind(row: dict) -> str:
    return " + ".join(k for k in ("cumulative", "consecutive") if row[k])


def change_by_manual(changes: pa.Table) -> list[dict]:
    """Share of each change bucket per comparison and manual (host), so a manual that did
    not change between two crawls is told apart from one that did."""
    shares = ", ".join(
        f"printf('%.1f %%', 100 * count(*) FILTER (WHERE change = '{c}') / count(*)) AS \"{c}\""
        for c in CHANGES
    )
    return (
        duckdb.sql(
            f"""
            SELECT crawl_m || ' → ' || crawl_n AS "crawl m → n",
                   regexp_extract(url, '^https?://([^/]+)/', 1) AS host,
                   count(*) AS urls, {shares}
            FROM changes GROUP BY ALL ORDER BY 1, 2
            """
        )
        .to_arrow_table()
        .to_pylist()
    )


def build_store(
    tmp: Path, llvm14: Path, mirrors: bool, rng: np.random.Generator
) -> tuple[Path, list[dict], list[set[str]], float]:
    """The three-crawl store; lost and found is run after each crawl is added, as a crawler
    would. Returns (store, lost-and-found rows per step, moved URLs per step, scan seconds)."""
    store = tmp / "store"
    settings = Settings()
    plan = schedule(llvm14)
    mirror = plan[0][1] if mirrors else None
    moved: set[str] = set()
    moved_steps: list[set[str]] = []
    steps: list[dict] = []
    previous: dict[str, bytes] | None = None
    t_scan = 0.0
    for label, releases in plan:
        if previous is not None:
            # Pages of the previous crawl whose URL the new release still has: they move now.
            stays = sorted(set(previous) & set(crawl_urls(releases, moved)))
            step = set(rng.choice(stays, MOVED, replace=False).tolist())
            moved_steps.append(step)
            moved |= step
        pages = crawl_urls(releases, moved)
        t = time.perf_counter()
        add_crawl([write_crawl(tmp / f"{label}.jsonl", pages, mirror)], store, label, settings)
        t_scan += time.perf_counter() - t
        if previous is not None:
            table = find_moved_all(store).to_pylist()
            found = sum(
                r["old_url"] in moved_steps[-1] and r["new_url"] == moved_url(r["old_url"])
                for r in table
            )
            steps.append(
                {
                    "crawls": f"{plan[len(steps)][0]} → {label}",
                    "moved": MOVED,
                    "found at /moved/": found,
                    "gone URLs": len(table),
                    "gone URLs matched": sum(r["new_url"] is not None for r in table),
                }
            )
        previous = pages
    return store, steps, moved_steps, t_scan


def moved_since_first(store: Path, moved: set[str]) -> int:
    """Pages moved between crawls 1 and 2, looked up from their crawl-1 content in crawl 3
    (`find-moved URL`: the last known content of a URL gone since)."""
    found = 0
    for url in sorted(moved):
        hits = find_moved(store, url, limit=1)
        found += bool(hits) and hits[0]["url"] == moved_url(url)
    return found


def query_latency(
    store: Path, pages: int, queries: int, rng: np.random.Generator, tmp: Path
) -> list[str]:
    """Median and p99 of BandIndex.lookup on ~`pages` generated documents, as report lines."""
    settings = Settings()
    with open_run(crawl_dir(store, "c1")) as con:
        words = " ".join(t for (t,) in con.execute("SELECT text FROM page_text").fetchall())
    words = np.array(words.split())
    n, w = pages, 200
    starts = rng.integers(0, words.size - w, n)
    big = tmp / "big"
    big.mkdir()
    t = time.perf_counter()
    sig = np.lib.format.open_memmap(big / "signatures.npy", "w+", np.uint32, (n, settings.num_perm))
    for s in range(0, n, 50_000):
        texts = [" ".join(words[i : i + w]) for i in starts[s : s + 50_000]]
        sig[s : s + len(texts)] = sketch_texts(texts, settings).minhash
    sig.flush()
    del sig
    t_sketch = time.perf_counter() - t
    np.save(big / "signature_docs.npy", np.arange(n, dtype=np.int64))
    (big / "settings.json").write_text(settings.to_json())
    t = time.perf_counter()
    meta = build_band_index(big)
    t_index = time.perf_counter() - t
    index = BandIndex.open(big)
    texts = []
    for i in rng.choice(starts, queries):
        q = words[i : i + w].copy()
        q[rng.choice(w, w // 50, replace=False)] = "zzqq"
        texts.append(" ".join(q))
    lat, found = [], 0
    for q in sketch_texts(texts, settings).minhash:
        t = time.perf_counter()
        _, docs, _est = index.lookup(q[None, :], INDEX_THRESHOLD)
        lat.append(time.perf_counter() - t)
        found += bool(docs.size)
    lat_ms = np.array(lat) * 1000
    return [
        f"{pages:,} generated documents (200-word windows of the real manual text at random "
        f"offsets, sketched with neardup.sketch_texts in {t_sketch:.0f} s); band index "
        f"{meta['bands']} x {meta['rows']} built in {t_index:.1f} s. {queries} queries "
        "(windows with 2 % of words replaced), `BandIndex.lookup` on the memory-mapped index "
        "(band search + candidate verification; no URL lookup):",
        "",
        f"- median {np.median(lat_ms):.2f} ms, p99 {np.percentile(lat_ms, 99):.2f} ms, "
        f"max {lat_ms.max():.2f} ms; {found} of {queries} queries found a page.",
    ]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=1_000_000, help="0 skips the query latency")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "evolution.md")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where LLVM 14 is kept")
    ap.add_argument("--fetch", action="store_true", help="make LLVM 14's archive if missing")
    ap.add_argument(
        "--mirrors",
        action="store_true",
        help="also serve each manual on a mirror host that stays on its crawl-1 release",
    )
    args = ap.parse_args()
    llvm14 = args.cache / LLVM14_ARCHIVE
    if args.fetch:
        llvm14 = fetch_llvm14(args.cache)
    if not llvm14.exists():
        raise SystemExit(f"{llvm14} is missing: run with --fetch (apt-get download, Debian)")
    tmp = Path(tempfile.mkdtemp(prefix="evo-bench-"))
    rng = np.random.default_rng(5)
    store, steps, moved_steps, t_scan = build_store(tmp, llvm14, args.mirrors, rng)
    t = time.perf_counter()
    result = evolution(store)
    t_evo = time.perf_counter() - t
    since_first = moved_since_first(store, moved_steps[0])
    crawls = list_crawls(store)
    plan = schedule(llvm14)
    phi_rows = [r | {"comparison": _kind(r)} for r in result.phi_psi_summary.to_pylist()]
    host_rows = [r | {"comparison": _kind(r)} for r in result.hosts.to_pylist()]
    changes = [r | {"comparison": _kind(r)} for r in result.change_summary.to_pylist()]
    releases = [
        {"crawl": label, "pages": c["pages"]} | {m: release_name(r) for m, r in releases.items()}
        for (label, releases), c in zip(plan, crawls, strict=True)
    ]
    command = (
        f".venv/bin/python bench/evolution_bench.py{' --fetch' if args.fetch else ''} "
        f"--pages {args.pages} --queries {args.queries}{' --mirrors' if args.mirrors else ''}"
    )
    lines = [
        "# Evolution benchmark",
        "",
        f"Command: `{command}`",
        "",
        "Three crawls of one store; each manual on its own host"
        + (
            ", and also on a mirror host that stays on its crawl-1 release (a stale mirror)"
            if args.mirrors
            else ""
        )
        + f". At each crawl {MOVED} pages of the previous crawl move under `/moved/`. Scanning "
        f"the three: {t_scan:.1f} s; evolution (all comparisons): {t_evo:.2f} s.",
        "",
        _table(releases, ["crawl", "pages", *HOSTS]),
        "",
        "## Φ and Ψ by cluster size in crawl m",
        "",
        _table(phi_rows, ["crawl_m", "crawl_n", "comparison", "bucket", "urls", "phi", "psi"]),
        "",
        "## Hosts in the same number of clusters",
        "",
        _table(host_rows, ["crawl_m", "crawl_n", "comparison", "hosts", "same_clusters", "share"]),
        "",
        "## Page change (K = 128; buckets scaled from Fetterly's 0/1-28/29-56/57-83/84/85)",
        "",
        _table(
            changes,
            ["crawl_m", "crawl_n", "comparison", "bucket", "change", "urls", "share"],
        ),
        "",
        "By manual (host):",
        "",
        _table(change_by_manual(result.changes), ["crawl m → n", "host", "urls", *CHANGES]),
        "",
        "## Lost and found",
        "",
        "`find-moved --all` after each crawl is added (URLs of the previous crawl gone from "
        "the latest):",
        "",
        _table(steps, ["crawls", "moved", "found at /moved/", "gone URLs", "gone URLs matched"]),
        "",
        f"From crawl 3, `find-moved URL` on the {MOVED} URLs that moved at crawl 2 (their last "
        f"known content is crawl 1's, two releases back): {since_first} found at their "
        "`/moved/` URL.",
        "",
    ]
    if args.pages:
        lines += ["## Query latency", "", *query_latency(store, args.pages, args.queries, rng, tmp)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
