"""Every similarity method of the literature, side by side, on one real crawl.

The crawl is the docs-manual `pairs` crawl (bench/out/docs-pairs, built by
bench/docs_crawl.py when missing) plus every real crawl file in ../shared/data/warc as
unrelated background (files that yield no page are skipped). Each method runs as its own
`neardup scan` process (peak memory = RSS of the process tree, sampled), and every run is
scored with bench/accuracy.py against the exact 5-word-shingle Jaccard of all page pairs:

  recall        share of pairs with Jaccard >= 0.9 whose pages share a cluster;
  wrong merges  same-cluster pairs with Jaccard < 0.5.

The chunk rows also show the iceberg query's point: the (doc, doc) rows the sort-based join
materialises against those the coarse counting materialises, for the same pairs.

    python bench/methods.py [--workers N]     # writes bench/out/methods.md
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import psutil
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
SHARED = ROOT.parent / "shared" / "data" / "warc"
NEARDUP = [sys.executable, "-m", "neardup.cli.main"]
sys.path.insert(0, str(ROOT / "bench"))

from accuracy import (  # noqa: E402
    evaluate,
    exact_pairs,
    incidence_matrix,
    load_run,
    shingle_backend,
    shingle_sets,
)
from scan_speed import run_scan as measured_scan  # noqa: E402

VARIANTS: list[tuple[str, list[str]]] = [
    ("exact", ["--method", "exact"]),
    ("minhash (default)", []),
    ("supershingles (Fetterly)", ["--method", "supershingles"]),
    ("chunks lines4 T=15, iceberg", ["--method", "chunks", "--chunking", "lines4"]),
    (
        "chunks lines4 T=15, sort",
        ["--method", "chunks", "--chunking", "lines4", "--chunk-join", "sort"],
    ),
    ("chunks lines2 T=25, iceberg", ["--method", "chunks", "--chunking", "lines2"]),
    (
        "chunks lines2 T=25, sort",
        ["--method", "chunks", "--chunking", "lines2", "--chunk-join", "sort"],
    ),
    (
        "chunks lines2 T=5, iceberg",
        ["--method", "chunks", "--chunking", "lines2", "--chunk-threshold", "5"],
    ),
    ("chunks sentences T=10", ["--method", "chunks", "--chunking", "sentences"]),
    ("chunks paragraphs T=5", ["--method", "chunks", "--chunking", "paragraphs"]),
    ("broder-min s=128, containment 0.8", ["--method", "broder-min", "--containment", "0.8"]),
    ("broder-mod m=16, containment 0.8", ["--method", "broder-mod", "--containment", "0.8"]),
    ("broder-supershingles", ["--method", "broder-supershingles"]),
    ("simhash k=3", ["--method", "simhash"]),
]


def docs_crawl() -> list[Path]:
    target = OUT / "docs-pairs"
    if not list(target.glob("*.warc.gz")):
        builder = ROOT / "bench" / "docs_crawl.py"
        subprocess.run(
            [sys.executable, str(builder), "--out", str(target), "--topology", "pairs"], check=True
        )
    return sorted(target.glob("*.warc.gz"))


def background() -> list[Path]:
    """The real crawl files that yield at least one page (probed once, cached)."""
    cache = OUT / "methods-background.json"
    files = sorted(p for p in SHARED.glob("*") if p.is_file()) if SHARED.is_dir() else []
    if cache.exists():
        known = json.loads(cache.read_text())
        if known.get("files") == [str(p) for p in files]:
            return [Path(p) for p in known["usable"]]
    usable = []
    for path in files:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [
                *NEARDUP,
                "scan",
                str(path),
                "--out",
                f"{tmp}/r",
                "-q",
                "--json",
                "--workers",
                "1",
                "--no-links",
            ]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode == 0 and json.loads(done.stdout).get("sketched", 0) > 0:
                usable.append(path)
            else:
                print(f"background: skipping {path.name} (no page)", file=sys.stderr)
    cache.write_text(
        json.dumps({"files": [str(p) for p in files], "usable": [str(p) for p in usable]}, indent=1)
    )
    return usable


def run_scan(paths: list[Path], out: Path, workers: int, extra: list[str]) -> dict:
    """bench/scan_speed.py's measured scan, plus the disk the run directory takes."""
    summary = measured_scan(paths, out, workers, extra)
    summary["disk_mb"] = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 2**20
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=psutil.cpu_count() or 2)
    args = parser.parse_args(argv)
    paths = docs_crawl() + background()

    truth = None
    rows = []
    runs: dict[str, tuple[Path, dict]] = {}
    for i, (name, extra) in enumerate(VARIANTS):
        out = OUT / f"methods-run-{i}"
        summary = run_scan(paths, out, args.workers, extra)
        cols, texts = load_run(out)
        if truth is None:  # the sketched pages are the same for every method
            sets = shingle_sets(texts, 5, 1, shingle_backend())
            keep = np.flatnonzero([s.size > 0 for s in sets])
            matrix = incidence_matrix([sets[k] for k in keep])
            truth = (cols["doc_id"], keep, exact_pairs(matrix, 0.5))
            del sets, matrix
        doc_ids, keep, pairs = truth
        if not np.array_equal(cols["doc_id"], doc_ids):
            raise RuntimeError(f"{name}: another set of sketched pages")
        score = evaluate("cluster_id", cols["cluster_id"][keep], pairs)
        near = pq.read_table(out / "pairs.parquet", columns=["kind"]).column("kind").to_pylist()
        rows.append((name, summary, score, near.count("near"), len(near)))
        runs[name] = (out, summary)
        print(f"{name}: {summary['wall_seconds']:.1f}s recall {score.recall}", file=sys.stderr)

    sketched = rows[0][1]["sketched"]
    lines = [
        f"Crawl: docs-pairs ({len(docs_crawl())} WARC files) + {len(paths) - len(docs_crawl())} "
        f"real background files from shared/data/warc; {rows[0][1]['records']:,} records, "
        f"{sketched:,} pages compared, {rows[0][2].high_pairs:,} page pairs with exact "
        f"Jaccard >= 0.9. Machine: {psutil.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}; "
        f"`--workers {args.workers}`.",
        "",
        "| method | near pairs | pairs rows (near + identical) | recall J>=0.9 | wrong merges "
        "J<0.5 (share of same-cluster pairs) | containment pairs | time | peak RSS | run dir |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s, score, n_near, n_all in rows:
        share = f"{100 * score.wrong_merge_share:.2f} %" if score.wrong_merge_share else "0"
        contained = s.get("containment_pairs")
        lines.append(
            f"| {name} | {n_near:,} | {n_all:,} | {score.recall:.4f} | {score.wrong_merges:,} "
            f"({share}) | {'' if contained is None else f'{contained:,}'} "
            f"| {s['wall_seconds']:.1f} s | {s['peak_rss_mb']:.0f} MB | {s['disk_mb']:.0f} MB |"
        )
    lines += ["", "All-pairs overlap of the chunk methods (rows of (doc, doc) materialised):", ""]
    lines.append(
        "| chunking | T | sort-based join rows | iceberg rows | iceberg buckets heavy "
        "| candidates | false positives removed | pairs | same pairs |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for chunking, t in (("lines4", 15), ("lines2", 25)):
        ice_out, ice = runs[f"chunks {chunking} T={t}, iceberg"]
        sort_out, srt = runs[f"chunks {chunking} T={t}, sort"]
        same = pq.read_table(ice_out / "pairs.parquet").equals(
            pq.read_table(sort_out / "pairs.parquet")
        )
        i, s = ice["method_stats"], srt["method_stats"]
        lines.append(
            f"| {chunking} | {t} | {s['materialised_rows']:,} | {i['materialised_rows']:,} "
            f"| {i['heavy_buckets']:,} of {i['buckets']:,} | {i['candidates']:,} "
            f"| {i['false_positives']:,} | {i['pairs']:,} | {'yes' if same else 'NO'} |"
        )
        print(
            f"{chunking}: sort-based join rows {s['materialised_rows']:,}, "
            f"iceberg rows {i['materialised_rows']:,}, same result: {same}"
        )
    report = "\n".join(lines) + "\n"
    (OUT / "methods.md").write_text(report, encoding="utf-8")
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
