"""One large file on Spark `local[2]` against the embedded engine, in one window (issue 47).

Why: with one ingest task per input file, one 2.65 GB JSONL file of 1 M pages kept one of
Spark's two cores busy (279 s against 80 s embedded). The Spark ingest now takes the
embedded engine's ranges (`spark/ingest_ranges.py`). This runs `neardup scan FILE` on both
engines, alternating, `--runs` times each (`scan_against.one_scan`: wall, the process
tree's CPU-seconds by psutil, peak memory), notes the load average before each run, and
compares the last runs' tables with DuckDB `EXCEPT ALL` both ways (the Spark run's tables
are folders of parts; `page_text` and `sketches` are left out: the text is the bulk of the
bytes, and the pages table holds every page's sketch figures and cluster).

    .venv/bin/python bench/spark_ranges.py bench/out/scale/web-1000000.jsonl --runs 1
    .venv/bin/python bench/spark_ranges.py FILE --runs 2 --before /tmp/before/src

`--before SRC` adds a Spark run of another checkout's code (its `src` folder) after each
pair, in the same window, to compare two codes.

Prints a markdown table; writes bench/out/spark_ranges/NAME.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scan_against import one_scan

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "spark_ranges"
COMPARED = ("pages", "pairs", "clusters", "containment", "links")
SPARK = ("--engine", "spark", "--spark-master", "local[2]")


def _table(run: Path, name: str) -> str:
    """A run's table as DuckDB reads it: one file (embedded) or a folder of parts (Spark)."""
    path = run / f"{name}.parquet"
    return f"read_parquet('{path / '*.parquet' if path.is_dir() else path}')"


def table_differences(a: Path, b: Path) -> dict[str, int]:
    """Rows of each compared table in one run and not the other (EXCEPT ALL, both ways)."""
    con = duckdb.connect()
    found = {}
    for name in COMPARED:
        x, y = _table(a, name), _table(b, name)
        found[name] = sum(
            con.execute(
                f"SELECT count(*) FROM (SELECT * FROM {p} EXCEPT ALL SELECT * FROM {q})"
            ).fetchone()[0]
            for p, q in ((x, y), (y, x))
        )
        found[f"{name}_rows"] = con.execute(f"SELECT count(*) FROM {x}").fetchone()[0]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2, help="the embedded engine's")
    parser.add_argument("--spark-conf", action="append", default=[])
    parser.add_argument("--before", type=Path, help="another checkout's src, run on Spark too")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    spark = [*SPARK, *(x for c in args.spark_conf for x in ("--spark-conf", c))]
    engines = {"embedded": (None, ()), "spark local[2]": (None, tuple(spark))}
    if args.before:
        engines["spark local[2], before"] = (args.before, tuple(spark))
    rows = []
    for run in range(args.runs):
        for engine, (src, extra) in engines.items():
            out = OUT / f"run-{engine.split()[0]}{'-before' if src else ''}"
            load = os.getloadavg()[0]
            result = one_scan([args.input], out, args.workers, src, extra)
            result.update(engine=engine, run=run, load_before=round(load, 2))
            rows.append(result)
            print(json.dumps(result), flush=True)
    diff = table_differences(OUT / "run-embedded", OUT / "run-spark")
    print("| engine | run | load before | wall s | tree CPU-s | peak MiB | stages |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        stages = ", ".join(f"{k} {v:.1f}" for k, v in r["stages"].items())
        print(
            f"| {r['engine']} | {r['run']} | {r['load_before']} | {r['wall_s']} | "
            f"{r['cpu_s']} | {r['peak_mb']} | {stages} |"
        )
    print("differences (rows in one run and not the other):", json.dumps(diff))
    name = Path(args.input).name.split(".")[0]
    (OUT / f"{name}.json").write_text(json.dumps({"runs": rows, "differences": diff}, indent=1))


if __name__ == "__main__":
    main()
