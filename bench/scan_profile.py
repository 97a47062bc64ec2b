"""Where a scan's CPU-seconds go, by kind of work, over its whole process tree (issue 29).

Runs `neardup scan INPUTS --out OUT --workers W` under py-spy (`record --subprocesses`, raw
stacks, the `bench` extra), and sorts every sample into one kind of work by the frames of its
stack (the first rule below that matches, from the leaf up): imports, HTML to text, links,
WARC and HTTP reading, JSON rows, URL normalisation, the tables (Arrow and Parquet),
sketches, candidates and verification, clustering, the store (DuckDB), passing work
between processes, waiting. The process tree's CPU-seconds are measured apart (psutil,
every process's user + system time at its last sample), so the shares can be turned into
seconds; py-spy's own overhead slows the scan it samples, so its wall time is given too.

    .venv/bin/python bench/scan_profile.py bench/out/docs-mirrors --workers 1
    .venv/bin/python bench/scan_profile.py bench/out/scale/web-1000000.jsonl --workers 2

Prints a table (markdown) and writes bench/out/scan_profile/NAME.json.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scan_against import sample_tree

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "scan_profile"
BIN = ROOT / ".venv" / "bin"

# (kind, substrings of a frame that put a sample in it); the first kind any frame of the
# stack matches, looking from the leaf up, takes the sample.
KINDS: list[tuple[str, tuple[str, ...]]] = [
    ("imports", ("_find_and_load", "_call_with_frames_removed")),
    ("waiting (idle threads, queues)", ("Condition.wait", "select ", "Queue.get", "_recv ")),
    ("passing work between processes", ("multiprocessing/", "ForkingPickler")),
    ("HTML to text", ("_extract_html", "html2text", "extract_plain_text")),
    ("links", ("_raw_links", "_links", "ingest/urls.py")),
    (
        "WARC and HTTP reading",
        ("warc_scan", "warc_framing", "warc_reader", "fastwarc", "arc_reader"),
    ),
    ("JSON and table rows read", ("ingest/tables.py", "orjson")),
    ("the tables (Arrow, Parquet)", ("pyarrow/", "_tables_of", "_add_to_column", "ParquetWriter")),
    ("sketches", ("kernels/tokens.py", "kernels/shingles.py", "kernels/batch.py", "steps/sketch")),
    ("candidates and verification", ("near_pairs", "kernels/buckets", "kernels/lsh", "verify")),
    ("clustering", ("kernels/graph", "steps/cluster", "cluster")),
    ("the store (DuckDB)", ("store/run.py", "duckdb")),
    ("numba's kernels loaded", ("numba/",)),
]


def kind_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for kind, marks in KINDS:
            if any(m in frame for m in marks):
                return kind
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples a second")
    parser.add_argument("--name", help="results name (default: the first input's)")
    args = parser.parse_args()
    name = args.name or f"{Path(args.inputs[0]).name}-w{args.workers}"
    OUT.mkdir(parents=True, exist_ok=True)
    run, raw = OUT / f"{name}.run", OUT / f"{name}.raw"
    shutil.rmtree(run, ignore_errors=True)
    scan = [str(BIN / "neardup"), "scan", *args.inputs, "--out", str(run)]
    scan += ["--workers", str(args.workers), "--json", "--quiet"]
    spy = [str(BIN / "py-spy"), "record", "-o", str(raw), "-f", "raw", "-r", str(args.rate)]
    spy += ["--subprocesses", "--"]
    t0 = time.perf_counter()
    proc = psutil.Popen([*spy, *scan], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    stop, seen = threading.Event(), {}
    sampler = threading.Thread(target=sample_tree, args=(proc, stop, seen, [0.0, 0.0], 0.1))
    sampler.start()
    out, _ = proc.communicate()
    stop.set()
    sampler.join()
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"the scan failed under py-spy ({proc.returncode})")
    text = out.decode()  # py-spy says a line of its own on the same stream
    summary = json.loads(text[text.index("{") : text.rindex("}") + 1])
    kinds: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        kinds[kind_of(stack.split(";"))] += int(count)
    spy_pid = proc.pid
    cpu = sum(v for pid, v in seen.items() if pid != spy_pid)
    total = sum(kinds.values())
    result = {
        "inputs": args.inputs,
        "workers": args.workers,
        "pages": summary.get("sketched"),
        "wall_s_under_py_spy": round(wall, 2),
        "tree_cpu_s": round(cpu, 2),
        "samples": total,
        "kinds": {k: round(v / total, 4) for k, v in kinds.most_common()},
    }
    (OUT / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"{name}: {result['pages']} pages, {cpu:.1f} CPU-s over the process tree")
    print(table(result))


WAITING = KINDS[1][0]


def table(result: dict) -> str:
    """The kinds of work as a markdown table: each kind's share of the samples, and its
    CPU-seconds: the tree's CPU spread over the samples that were not waiting (py-spy takes
    some threads blocked in a queue or a pipe for running ones)."""
    kinds: dict[str, float] = result["kinds"]
    busy = sum(v for k, v in kinds.items() if k != WAITING) or 1.0
    rows = ["| work | share of samples | CPU-s |", "|---|---:|---:|"]
    for k, v in kinds.items():
        seconds = "" if k == WAITING else f"{result['tree_cpu_s'] * v / busy:.1f}"
        rows.append(f"| {k} | {v:.1%} | {seconds} |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
