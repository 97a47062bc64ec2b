"""A scan by this checkout against the same scan by another commit, in one window (issue 29).

Runs `neardup scan INPUTS` with this checkout's code and with the code of `--before` (a
source folder, e.g. a `git worktree` of an earlier commit: `PYTHONPATH` points the same
interpreter and packages at it), `--runs` times each, alternating, on the same inputs and
workers; every run's wall time and its process tree's CPU-seconds (user + system of the
scan and every worker, psutil) and peak memory (the tree's resident memory summed). Then
the tables of the last run of each are compared with DuckDB `EXCEPT ALL` both ways, and the
signature matrices byte for byte: a speed-up counts only if the results are identical.

    git worktree add /tmp/before ac28a7b --detach
    .venv/bin/python bench/scan_against.py bench/out/scale/web-1000000.jsonl \\
        --before /tmp/before/src --runs 3

With `--floor`, the inputs' WARC records are also read and their HTML turned into text in
one process (FastWARC + resiliparse: `scan_speed.html_to_text_floor`), the issue's floor,
once a round; and the same work side by side in `--workers` processes, the files dealt
out by size (`side_by_side_floor`): what the floor's own work costs in core-seconds when as
many processes share the machine as the scan runs workers (caches, memory bandwidth).
Prints a markdown table; writes bench/out/scan_against/NAME.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import duckdb
import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scan_speed import html_to_text_floor

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "scan_against"
TABLES = ("pages", "pairs", "containment", "clusters", "links", "page_text", "sketches")
MATRICES = ("signatures.npy", "signature_docs.npy", "supershingles.npy")


_FLOOR_OF = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from scan_speed import html_to_text_floor
print(json.dumps(html_to_text_floor([Path(p) for p in sys.argv[2:]])))
"""


def side_by_side_floor(paths: list[Path], processes: int) -> dict:
    """The floor's work in `processes` processes at once, each over its share of the files
    (the largest first, each to the least loaded); the slowest one's wall time, the sum of
    their CPU-seconds."""
    shares: list[list[Path]] = [[] for _ in range(processes)]
    sizes = [0] * processes
    for path in sorted(paths, key=lambda p: -p.stat().st_size):
        least = sizes.index(min(sizes))
        shares[least].append(path)
        sizes[least] += path.stat().st_size
    here = str(Path(__file__).resolve().parent)
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _FLOOR_OF, here, *map(str, share)], stdout=subprocess.PIPE
        )
        for share in shares
        if share
    ]
    done = [json.loads(p.communicate()[0]) for p in procs]
    return {
        "seconds": time.perf_counter() - start,
        "cpu_seconds": sum(d["cpu_seconds"] for d in done),
        "pages": sum(d["pages"] for d in done),
        "processes": len(procs),
    }


def one_scan(
    inputs: list[str], out: Path, workers: int, src: Path | None, extra: Sequence[str] = ()
) -> dict:
    """One scan in a process of its own (with the options `extra`); its wall time, tree
    CPU and peak memory."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled modules as a user's install has them
    if src is not None:
        env["PYTHONPATH"] = str(src)
    cmd = [sys.executable, "-m", "neardup.cli.main", "scan", *inputs, "--out", str(out)]
    cmd += ["--force", "--quiet", "--json", "--workers", str(workers), *extra]
    start = time.perf_counter()
    proc = psutil.Popen(cmd, stdout=subprocess.PIPE, env=env)
    stop, seen, peak = threading.Event(), {}, [0.0, 0.0]
    sampler = threading.Thread(target=sample_tree, args=(proc, stop, seen, peak))
    sampler.start()
    stdout, _ = proc.communicate()
    wall = time.perf_counter() - start
    stop.set()
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"scan failed ({proc.returncode}): {' '.join(cmd)}")
    summary = json.loads(stdout)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(sum(seen.values()), 2),
        "own_cpu_s": round(seen.get(proc.pid, 0.0), 2),  # the scanning process's alone
        "peak_mb": round(peak[0]),
        "peak_anon_mb": round(peak[1]),
        "stages": summary["stage_seconds"],
        "pages": summary["records"],
    }


def sample_tree(
    root: psutil.Process,
    stop: threading.Event,
    seen: dict[int, float],
    peak: list[float],
    every: float = 0.25,
    names: dict[int, str] | None = None,
    series: list[tuple[float, float, float, float]] | None = None,
) -> None:
    """Each process of the tree's user + system seconds at its last sample, and the peaks of
    their summed resident and anonymous memory (RssAnon: the heaps and arrays, without the
    mapped files the kernel can drop), every `every` seconds: four times a second by
    default, since sampling more often took CPU from the scan it measures on two cores (a
    worker's last quarter second is missed). `names`, where given, gets each process's
    name; `series` each sample's (time, the tree's resident MiB, the root's, the tree's
    anonymous MiB), for the peaks of a part of the run (`near_stage_cpu.py`'s stages)."""
    while not stop.is_set():
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            break
        rss = anon = own = 0
        for p in procs:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    rss += p.memory_info().rss
                    own = p.memory_info().rss if p.pid == root.pid else own
                    if names is not None:
                        names[p.pid] = p.name()
                anon += _anon_bytes(p.pid)
                seen[p.pid] = t.user + t.system
            except (psutil.Error, OSError):
                pass
        peak[0] = max(peak[0], rss / 2**20)
        peak[1] = max(peak[1], anon / 2**20)
        if series is not None:
            series.append((time.time(), rss / 2**20, own / 2**20, anon / 2**20))
        stop.wait(every)


def _anon_bytes(pid: int) -> int:
    """A process's anonymous resident memory (RssAnon in /proc/PID/status), in bytes."""
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def differences(a: Path, b: Path) -> dict[str, int]:
    """Rows of each table in one run and not the other (EXCEPT ALL, both ways), and 1 for
    each signature matrix that differs."""
    con = duckdb.connect()
    found: dict[str, int] = {}
    for table in TABLES:
        fa, fb = a / f"{table}.parquet", b / f"{table}.parquet"
        if not fa.exists() and not fb.exists():
            continue
        ra, rb = f"read_parquet('{fa}')", f"read_parquet('{fb}')"
        found[table] = sum(
            con.execute(
                f"SELECT count(*) FROM (SELECT * FROM {x} EXCEPT ALL SELECT * FROM {y})"
            ).fetchone()[0]
            for x, y in ((ra, rb), (rb, ra))
        )
    for name in MATRICES:
        x, y = np.load(a / name, mmap_mode="r"), np.load(b / name, mmap_mode="r")
        found[name] = int(not (x.shape == y.shape and np.array_equal(x, y)))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--before", type=Path, help="source folder of the other code")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--floor", action="store_true", help="measure the HTML-to-text floor")
    parser.add_argument("--name", help="results name (default: the first input's)")
    parser.add_argument(
        "--no-compare",
        action="store_true",
        help="remove each run's output at once, no tables compared (inputs too large to "
        "keep two outputs on the disk)",
    )
    args = parser.parse_args()
    name = args.name or f"{Path(args.inputs[0]).name}-w{args.workers}"
    OUT.mkdir(parents=True, exist_ok=True)
    codes = {"now": None, **({"before": args.before} if args.before else {})}
    runs: dict[str, list[dict]] = {code: [] for code in codes}
    result: dict = {"inputs": args.inputs, "workers": args.workers}
    result["load_before"] = os.getloadavg()[0]
    paths: list[Path] = []
    for item in map(Path, args.inputs):
        paths += sorted(item.glob("*.warc.gz")) if item.is_dir() else [item]
    floors: list[dict] = []
    for _ in range(args.runs):
        if args.floor:
            alone = html_to_text_floor(paths)
            floors.append({"alone": alone, "side_by_side": side_by_side_floor(paths, args.workers)})
        for code, src in codes.items():
            runs[code].append(one_scan(args.inputs, OUT / f"{name}-{code}", args.workers, src))
            if args.no_compare:
                shutil.rmtree(OUT / f"{name}-{code}", ignore_errors=True)
    result["runs"] = runs
    if floors:
        result["floors"] = floors
        result["floor"] = {
            key: statistics.median(f["alone"][key] for f in floors)
            for key in ("seconds", "cpu_seconds", "pages")
        }
        result["floor_side_by_side"] = {
            key: statistics.median(f["side_by_side"][key] for f in floors)
            for key in ("seconds", "cpu_seconds")
        }
    if args.before and not args.no_compare:
        result["differences"] = differences(OUT / f"{name}-now", OUT / f"{name}-before")
    for code in codes:
        shutil.rmtree(OUT / f"{name}-{code}", ignore_errors=True)
    (OUT / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"{name}: load {result['load_before']:.2f} before")
    if args.floor:
        f, g = result["floor"], result["floor_side_by_side"]
        print(
            f"floor (medians): {f['seconds']:.2f} s, {f['cpu_seconds']:.2f} CPU-s "
            f"({f['pages']:.0f} HTML pages); side by side in {args.workers} processes: "
            f"{g['seconds']:.2f} s, {g['cpu_seconds']:.2f} CPU-s"
        )
    print(
        "| code | wall s (median, range) | CPU-s (median) | peak MB (anon) | stages (median run) |"
    )
    print("|---|---|---:|---:|---|")
    for code, rs in runs.items():
        walls = [r["wall_s"] for r in rs]
        mid = sorted(rs, key=lambda r: r["wall_s"])[len(rs) // 2]
        stages = ", ".join(f"{k} {v:.1f}" for k, v in mid["stages"].items())
        cpu = statistics.median(r["cpu_s"] for r in rs)
        print(
            f"| {code} | {statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f}) "
            f"| {cpu:.1f} | {max(r['peak_mb'] for r in rs)} "
            f"({max(r['peak_anon_mb'] for r in rs)}) | {stages} |"
        )
    if args.floor:
        f, g = result["floor"], result["floor_side_by_side"]
        for code, rs in runs.items():
            wall = statistics.median(r["wall_s"] for r in rs)
            cpu = statistics.median(r["cpu_s"] for r in rs)
            print(
                f"{code}: {wall / f['seconds']:.2f}x the floor's wall time, "
                f"{cpu / f['cpu_seconds']:.2f}x its CPU-s, "
                f"{cpu / g['cpu_seconds']:.2f}x the CPU-s of the floor side by side"
            )
    if "differences" in result:
        print("differences (rows, both ways):", json.dumps(result["differences"]))


if __name__ == "__main__":
    main()
