"""Embedded engine against Spark `local[2]` on the same input (issue 7).

Input: the peer benchmark's generated corpora (bench/peers_data.py: documents built from real
manual and crawl text, with known near-duplicate copies), 100 k and 1 M documents, split into
16 JSONL shards, since crawls arrive as many files and Spark reads one task per file. Both
engines scan the same shards with 2 workers / 2 cores, default settings; measured: wall time,
CPU time and peak RSS of the whole process tree (the JVM and Python workers included), each
stage's seconds, and whether the two runs' tables are identical.

    .venv/bin/python bench/spark_bench.py --sizes 100000 1000000

Writes bench/out/spark/spark.md and results.json (the corpora are made by
`bench/peers.py gen` when missing).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
OUT = BENCH / "out" / "spark"
NEARDUP = REPO / ".venv" / "bin" / "neardup"
sys.path.insert(0, str(BENCH))

import peers  # noqa: E402 - bench/ is on the path only now

TABLES = ("pages", "pairs", "clusters", "links", "sketches")


def shards(n: int, parts: int) -> Path:
    """The size's docs.jsonl split into `parts` files of consecutive lines."""
    source = peers.size_dir(n) / "docs.jsonl"
    if not source.exists():
        peers.gen([n], seed=0)
    folder = OUT / f"n{n}" / "parts"
    if folder.is_dir() and len(list(folder.glob("*.jsonl"))) == parts:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    step = -(-len(lines) // parts)
    for k in range(parts):
        chunk = lines[k * step : (k + 1) * step]
        (folder / f"part-{k:03d}.jsonl").write_text("".join(chunk), encoding="utf-8")
    return folder


def identical(a: Path, b: Path) -> bool:
    """Whether the two runs hold the same tables, row for row. A Spark run's tables are
    datasets (folders of part files, read in name order); its min-hash column is a plain list
    and its timestamps name their zone "UTC", so those two are compared by value."""
    for t in TABLES:
        x, y = pq.read_table(a / f"{t}.parquet"), pq.read_table(b / f"{t}.parquet")
        if x.column_names != y.column_names or x.num_rows != y.num_rows:
            return False
        for name in x.column_names:
            left, right = x.column(name), y.column(name)
            if left.type != right.type:
                if left.to_pylist() != right.to_pylist():
                    return False
            elif not left.equals(right):
                return False
    return True


def run(n: int, parts: int, timeout: float) -> dict:
    inputs = shards(n, parts)
    result: dict = {"docs": n, "shards": parts}
    common = ["scan", str(inputs), "--workers", "2", "--force", "--quiet", "--json"]
    engines = {
        "embedded": [],
        "spark": [
            "--engine",
            "spark",
            "--spark-master",
            "local[2]",
            "--spark-conf",
            "spark.driver.memory=6g",
        ],
    }
    for engine, extra in engines.items():
        out = OUT / f"n{n}" / f"run-{engine}"
        log = OUT / f"n{n}" / f"{engine}.log"
        cmd = [str(NEARDUP), *common, "--out", str(out), *extra]
        m = peers.measure(cmd, log, timeout)
        if m["rc"] == 0:
            summary = json.loads((out / "summary.json").read_text())
            m["stage_seconds"] = summary["stage_seconds"]
            m["clusters"] = summary.get("clusters")
            m["verified_pairs"] = summary.get("verified_pairs")
        result[engine] = m
        print(f"n={n} {engine}: {m}", file=sys.stderr)
    if result["embedded"]["rc"] == 0 and result["spark"]["rc"] == 0:
        result["identical_tables"] = identical(
            OUT / f"n{n}" / "run-embedded", OUT / f"n{n}" / "run-spark"
        )
    return result


def report(results: list[dict]) -> str:
    lines = [
        "| docs | engine | wall s | CPU s | peak RSS MB | stages (s) | identical tables |",
        "|---:|---|---:|---:|---:|---|---|",
    ]
    for r in results:
        for engine in ("embedded", "spark"):
            m = r[engine]
            stages = ", ".join(f"{k} {v:.1f}" for k, v in m.get("stage_seconds", {}).items())
            lines.append(
                f"| {r['docs']:,} | {engine} | {m['wall_seconds']:.1f} | {m['cpu_seconds']:.1f} "
                f"| {m['peak_rss_mb']:.0f} | {stages} | {r.get('identical_tables', 'n/a')} |"
            )
    by_engine = {e: [r[e]["wall_seconds"] for r in results] for e in ("embedded", "spark")}
    if len(results) >= 2:
        lines.append("")
        for engine, walls in by_engine.items():
            lines.append(
                f"- {engine}: {results[-1]['docs']:,} docs took {walls[-1] / walls[0]:.2f}× "
                f"the time of {results[0]['docs']:,}"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=7200)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    results = [run(n, args.shards, args.timeout) for n in args.sizes]
    (OUT / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    (OUT / "spark.md").write_text(report(results), encoding="utf-8")
    print(report(results))


if __name__ == "__main__":
    main()
