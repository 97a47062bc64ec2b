"""How close the embedded scan's design can come to the floor on a WARC crawl (issue 29).

Three measurements a round, alternating in one window on the same files:

1. the floor side by side (`scan_against.side_by_side_floor`): FastWARC + resiliparse's
   HTML-to-text, nothing else, in `--workers` processes, the files dealt out by size;
2. `neardup scan` with the default settings and `--workers` workers (`scan_against.one_scan`:
   the process tree's CPU-seconds);
3. the scan's own per-page work with no main process in the way: `--workers` processes each
   read whole input files and run the scan's ingest task (`steps.ingest._units` and
   `_extract_task`: framing checks, HTML to text, links, the eligibility rule, the tables'
   rows, the sketches) on every batch, as a Spark ingest task does, and send back only counts.
   Once as the scan runs it, once without the links (`--no-links`' settings).

The third is what the workers of a design in which they read and frame their own files would
cost, before they hand anything on: no records through a pipe, no Parquet, no store, no near
stage. Its ratio to the floor is a lower bound for any scan that does the same work per page.

    .venv/bin/python bench/own_files.py bench/out/docs-mirrors-cc --runs 3

Prints a markdown table; writes bench/out/own_files/NAME.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scan_against import one_scan, side_by_side_floor

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "own_files"


def _file_task(job: tuple[str, bool]) -> tuple[int, int, int, float]:
    """The scan's ingest task over every batch of one input file, in this worker: (records,
    pages with text, this process's id, its CPU-seconds so far)."""
    path, links = job
    from neardup.config import Settings
    from neardup.ingest.eligibility import rule_of
    from neardup.ingest.readers import iter_record_units
    from neardup.kernels import jit
    from neardup.pipeline.steps.ingest import _extract_task, _units

    jit.one_thread()  # as a worker of the local engine runs its kernels
    settings = Settings(extract_links=links)
    rule = rule_of(settings)
    records = texts = 0
    for unit in _units(iter_record_units([path], None, settings.max_payload_bytes), settings):
        task = (unit, settings.max_payload_bytes, links, rule, settings, True)
        tables = _extract_task(task)
        records += tables.pages.num_rows
        texts += tables.with_text
    return records, texts, os.getpid(), time.process_time()


def own_files(paths: list[Path], workers: int, links: bool) -> dict:
    """Every file read and ingested by one of `workers` fresh processes (forkserver, as the
    scan's pool), the largest files first; wall time and the processes' CPU-seconds."""
    jobs = [(str(p), links) for p in sorted(paths, key=lambda p: -p.stat().st_size)]
    start = time.perf_counter()
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        done = list(pool.map(_file_task, jobs))
    wall = time.perf_counter() - start
    cpu: dict[int, float] = {}
    for _, _, pid, seconds in done:  # a process's CPU-seconds grow from task to task
        cpu[pid] = max(cpu.get(pid, 0.0), seconds)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(sum(cpu.values()), 2),
        "records": sum(d[0] for d in done),
        "pages": sum(d[1] for d in done),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+", help="WARC files or folders of them")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--name", help="results name (default: the first input's)")
    args = parser.parse_args()
    paths: list[Path] = []
    for given in map(Path, args.inputs):
        paths += sorted(given.glob("*.warc.gz")) if given.is_dir() else [given]
    name = args.name or Path(args.inputs[0]).name
    OUT.mkdir(parents=True, exist_ok=True)
    scratch = OUT / f"{name}.run"
    print(f"load before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    seen: dict[str, list[dict]] = {"floor": [], "scan": [], "own": [], "own_no_links": []}
    for run in range(args.runs):
        floor = side_by_side_floor(paths, args.workers)
        seen["floor"].append({"wall_s": floor["seconds"], "cpu_s": floor["cpu_seconds"]})
        seen["scan"].append(one_scan(list(map(str, paths)), scratch, args.workers, None))
        seen["own"].append(own_files(paths, args.workers, links=True))
        seen["own_no_links"].append(own_files(paths, args.workers, links=False))
        done = ", ".join(f"{key} {runs[-1]['cpu_s']:.1f}" for key, runs in seen.items())
        print(f"round {run + 1}, CPU-s: {done}", file=sys.stderr)
    shutil.rmtree(scratch, ignore_errors=True)
    if seen["own"][0]["records"] != seen["scan"][0]["pages"]:
        raise SystemExit("the workers' own reading framed another number of records than the scan")
    floor_cpu = statistics.median(r["cpu_s"] for r in seen["floor"])
    rows = {
        "floor": "the floor side by side",
        "scan": "`neardup scan` (default settings)",
        "own": "the scan's ingest task, workers reading their own files",
        "own_no_links": "the same without links",
    }
    print(
        f"| {args.workers} processes, {len(paths)} files, {args.runs} runs each | wall s, "
        "median (range) | CPU-s, median (range) | CPU against the floor |"
    )
    print("|---|---|---|---:|")
    report = {"inputs": args.inputs, "workers": args.workers, "runs": seen}
    for key, label in rows.items():
        walls = [r["wall_s"] for r in seen[key]]
        cpus = [r["cpu_s"] for r in seen[key]]
        ratio = statistics.median(cpus) / floor_cpu
        print(
            f"| {label} | {statistics.median(walls):.1f} ({min(walls):.1f}-{max(walls):.1f}) | "
            f"{statistics.median(cpus):.1f} ({min(cpus):.1f}-{max(cpus):.1f}) | {ratio:.2f}x |"
        )
    (OUT / f"{name}.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
