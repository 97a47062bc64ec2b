"""The scanning process's share of a scan's CPU, by number of workers (issue 47).

A scan's workers extract and sketch; the scanning process plans, frames records, sends them
to the workers, writes the tables and runs the later stages. Whatever it does alone caps
what more cores can give: a process that does a share `s` of the CPU bounds the speed-up
near 1/s. This bench runs `neardup scan INPUTS --workers N` in a process of its own for each
N and samples its whole process tree (`scan_against.sample_tree`: every process's user +
system seconds, four times a second, and the tree's summed resident memory), so the
scanning process's own CPU-seconds stand beside the tree's, not only what the waiting
parent reaps (the forkserver's workers are not its children).

    .venv/bin/python bench/serial_share.py bench/out/scale/web-1000000.jsonl --workers 1 2
    .venv/bin/python bench/serial_share.py bench/out/docs-mirrors-cc --workers 1 2 4 8 16 \
        --floor --before /tmp/before/src

The issue's bench (47): `--workers` takes every count to run (1 2 4 8 16 and the machine's
cores on a large machine); `--floor`, for WARC inputs, runs the HTML-to-text floor in as
many processes side by side for each count (`scan_against.side_by_side_floor`: FastWARC +
resiliparse and nothing else); `--before SRC` runs the same scans with another commit's
code (a `git worktree`'s `src`), alternating, in the same window. Arguments after `--` go
to `neardup scan`. Prints a markdown table; appends JSON lines to
bench/out/serial_share/results.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scan_against import one_scan as scan_against_one
from scan_against import side_by_side_floor

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "serial_share"


def one_scan(inputs: list[str], workers: int, extra: list[str], src: Path | None = None) -> dict:
    """One scan with `workers` workers in a process of its own (`scan_against.one_scan`,
    with this checkout's code): its wall time, the tree's and the scanning process's
    CPU-seconds, the peak memory and the stages' seconds."""
    with tempfile.TemporaryDirectory(dir=OUT) as scratch:
        run = scan_against_one(inputs, Path(scratch) / "run", workers, src, extra)
    tree, own = run["cpu_s"], run["own_cpu_s"]
    return {
        "workers": workers,
        "wall_s": run["wall_s"],
        "tree_cpu_s": tree,
        "scanning_process_cpu_s": own,
        "serial_share": round(own / tree, 4) if tree else None,
        "peak_mb": run["peak_mb"],
        "stages": run["stages"],
        "records": run["pages"],
    }


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--floor", action="store_true", help="the floor side by side (WARC)")
    parser.add_argument("--before", type=Path, help="another commit's src folder, alternated")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    codes = {"now": None, **({"before": args.before} if args.before else {})}
    warcs = [
        p
        for item in map(Path, args.inputs)
        for p in (sorted(item.glob("*.warc.gz")) if item.is_dir() else [item])
        if ".warc" in p.name
    ]
    rows = []
    for _ in range(args.runs):
        for workers in args.workers:
            for code, src in codes.items():
                row = one_scan(args.inputs, workers, extra, src)
                row.update(code=code, inputs=args.inputs, load_before=round(load, 2), extra=extra)
                if args.floor and warcs and code == "now":
                    row["floor"] = side_by_side_floor(warcs, workers)
                with open(OUT / "results.jsonl", "a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")
                rows.append(row)
                said = f"  {code}, {workers} workers: {row['wall_s']} s"
                print(said, file=sys.stderr, flush=True)
    print(f"{', '.join(args.inputs)}: load {load:.2f} before, {os.cpu_count()} cores")
    print(
        "| code | workers | wall s | tree CPU-s | scanning process CPU-s | its share | peak MiB "
        "| floor side by side: wall s, CPU-s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        floor = r.get("floor")
        beside = f"{floor['seconds']:.1f}, {floor['cpu_seconds']:.1f}" if floor else ""
        print(
            f"| {r['code']} | {r['workers']} | {r['wall_s']} | {r['tree_cpu_s']} | "
            f"{r['scanning_process_cpu_s']} | {100 * r['serial_share']:.1f} % | "
            f"{r['peak_mb']:,} | {beside} |"
        )


if __name__ == "__main__":
    main()
