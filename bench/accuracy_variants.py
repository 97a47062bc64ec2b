"""Accuracy of several scan settings on the docs-manual crawl, in one table.

Builds the `pairs` crawl (two releases of each manual on two made-up hosts) with
bench/docs_crawl.py when it is missing, scans it once per variant, and scores every run
with bench/accuracy.py (exact shingle Jaccard of all page pairs by brute force).

    python bench/accuracy_variants.py        # writes bench/out/accuracy_variants.md
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
NEARDUP = [sys.executable, "-m", "neardup.cli.main"]

VARIANTS: list[tuple[str, list[str]]] = [
    ("default (minhash 18x7, core rule)", []),
    ("--cluster-rule center", ["--cluster-rule", "center"]),
    ("--cluster-rule transitive", ["--cluster-rule", "transitive"]),
    ("--max-shingle-df 1000 (Broder's drop)", ["--max-shingle-df", "1000"]),
    ("--verify exact", ["--verify", "exact"]),
    ("--bands 9 --rows 13 (FP/FN balance)", ["--bands", "9", "--rows", "13"]),
    ("--method supershingles (K=128)", ["--method", "supershingles"]),
    ("--preset fetterly", ["--preset", "fetterly"]),
]


def crawl() -> list[Path]:
    target = OUT / "docs-pairs"
    if not list(target.glob("*.warc.gz")):
        builder = ROOT / "bench" / "docs_crawl.py"
        cmd = [sys.executable, str(builder), "--out", str(target), "--topology", "pairs"]
        subprocess.run(cmd, check=True)
    return sorted(target.glob("*.warc.gz"))


def main() -> int:
    paths = [str(p) for p in crawl()]
    rows = [
        "| settings | candidates | verified pairs | clusters | scan s "
        "| recall J>=0.9 | wrong merges J<0.5 | target |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for i, (name, args) in enumerate(VARIANTS):
        run = OUT / f"accuracy-run-{i}"
        scan = [*NEARDUP, "scan", *paths, "--out", str(run), "--force", "-q", "--json", *args]
        done = subprocess.run(scan, check=True, capture_output=True, text=True)
        summary = json.loads(done.stdout)
        result_file = OUT / f"accuracy-run-{i}.json"
        score = [sys.executable, str(ROOT / "bench" / "accuracy.py"), str(run)]
        subprocess.run([*score, "--json", str(result_file)], capture_output=True, text=True)
        view = json.loads(result_file.read_text())["views"][0]
        rows.append(
            f"| {name} | {summary['candidate_pairs']:,} | {summary['verified_pairs']:,} "
            f"| {summary['clusters']:,} | {summary['elapsed_seconds']:.1f} "
            f"| {view['recall']:.4f} | {100 * view['wrong_merge_share']:.3f} % "
            f"| {'met' if view['passed'] else 'missed'} |"
        )
        print(rows[-1], flush=True)
    report = "\n".join(rows) + "\n"
    (OUT / "accuracy_variants.md").write_text(report, encoding="utf-8")
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
