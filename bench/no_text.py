"""A scan with its page text against the same scan with `--no-text`, in one window (issue 29).

Runs `neardup scan INPUT --out OUT --workers W` and the same with `--no-text`,
alternating, `--runs` times each: wall seconds, the process tree's CPU-seconds and peak
memory (`scan_against.sample_tree`), and the run's size on disk. The last two runs' tables
are compared (DuckDB `EXCEPT ALL` both ways, every table but `page_text`, the matrices
byte for byte) and `page_text` must be empty without the text.

    .venv/bin/python bench/no_text.py bench/out/scale/web-1000000.jsonl --runs 2
    .venv/bin/python bench/no_text.py bench/out/docs-mirrors-cc --runs 3

Prints a markdown table; writes bench/out/no_text/NAME.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scan_against

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "no_text"


def one_scan(inputs: list[str], out: Path, workers: int, extra: list[str]) -> dict[str, float]:
    """`scan_against.one_scan` (wall, tree CPU, peak memory) and the run's size on disk."""
    shutil.rmtree(out, ignore_errors=True)
    done = scan_against.one_scan(inputs, out, workers, None, extra)
    disk = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    return {**done, "disk_mb": disk / 2**20}


def differences(a: Path, b: Path) -> list[str]:
    """Tables (but `page_text`) and matrices of run `a` that differ from run `b`'s
    (`scan_against.differences`), and `page_text` if `b`, scanned without it, has rows."""
    differ = [k for k, n in scan_against.differences(a, b).items() if n and k != "page_text"]
    rows = duckdb.connect().execute(f"SELECT count(*) FROM '{b / 'page_text.parquet'}'")
    if rows.fetchone()[0]:
        differ.append("page_text (rows without the text)")
    return differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--name", help="results name (default: the first input's)")
    args = parser.parse_args()
    name = args.name or Path(args.inputs[0]).name
    OUT.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    codes = {"with the text": [], "--no-text": ["--no-text"]}
    results: dict[str, list[dict[str, float]]] = {code: [] for code in codes}
    for _ in range(args.runs):
        for code, extra in codes.items():
            out = OUT / f"{name}.{'text' if not extra else 'no-text'}"
            results[code].append(one_scan(args.inputs, out, args.workers, extra))
    differ = differences(OUT / f"{name}.text", OUT / f"{name}.no-text")
    print(f"{name}: load {load:.2f} before, {args.runs} runs each, alternating")
    print("| scan | wall s (median, range) | CPU-s (median, range) | peak MB | on disk MB |")
    print("|---|---|---|---:|---:|")
    for code, runs in results.items():
        wall = [r["wall_s"] for r in runs]
        cpu = [r["cpu_s"] for r in runs]
        print(
            f"| {code} | {statistics.median(wall):.1f} ({min(wall):.1f}-{max(wall):.1f}) "
            f"| {statistics.median(cpu):.1f} ({min(cpu):.1f}-{max(cpu):.1f}) "
            f"| {statistics.median(r['peak_mb'] for r in runs):.0f} "
            f"| {statistics.median(r['disk_mb'] for r in runs):.0f} |"
        )
    print(f"tables and matrices that differ: {differ or 'none'}")
    summary = {"inputs": args.inputs, "load": load, "runs": results, "differ": differ}
    (OUT / f"{name}.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
