"""End-to-end speed and memory of `neardup scan` against the HTML-to-text floor.

The floor is what no near-duplicate tool can beat on a crawl: reading the WARC records and
turning their HTML into text (FastWARC + resiliparse, the same libraries the scan uses), on
one core. The scan runs as a separate process with the same single core (`--workers 1`), then
with all cores, and its whole process tree is sampled for peak memory (RSS summed over the
workers). Two crawl sizes show whether memory grows with the crawl.

    python bench/scan_speed.py            # builds the docs crawls under bench/out if needed

Writes a markdown table to bench/out/scan_speed.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
from fastwarc.warc import ArchiveIterator, WarcRecordType
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
NEARDUP = [sys.executable, "-m", "neardup.cli.main"]


def ensure_crawl(topology: str) -> list[Path]:
    """The docs-manual crawl of this topology, built once with bench/docs_crawl.py."""
    target = OUT / f"docs-{topology}"
    if not list(target.glob("*.warc.gz")):
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "bench" / "docs_crawl.py"),
                "--out",
                str(target),
                "--topology",
                topology,
            ],
            check=True,
        )
    return sorted(target.glob("*.warc.gz"))


def html_to_text_floor(paths: list[Path]) -> dict:
    """Read every record and extract the text of every HTML response, in this process."""
    records = pages = chars = 0
    start = time.perf_counter()
    cpu = time.process_time()
    for path in paths:
        for rec in ArchiveIterator(
            str(path), parse_http=True, record_types=WarcRecordType.any_type
        ):
            records += 1
            body = rec.reader.read()
            if rec.record_type != WarcRecordType.response:
                continue
            if "html" not in (rec.http_content_type or ""):
                continue
            text = extract_plain_text(HTMLTree.parse_from_bytes(body, "utf-8"))
            pages += 1
            chars += len(text)
    return {
        "records": records,
        "pages": pages,
        "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time() - cpu,
        "peak_rss_mb": psutil.Process().memory_info().rss / 2**20,
    }


def sample_peak_rss(proc: psutil.Process, stop: threading.Event, peak: list[float]) -> None:
    """Poll the RSS of a process and its children, keeping the maximum of their sum."""
    while not stop.is_set():
        try:
            procs = [proc, *proc.children(recursive=True)]
            total = sum(p.memory_info().rss for p in procs if p.is_running())
            peak[0] = max(peak[0], total / 2**20)
        except psutil.Error:
            pass
        time.sleep(0.05)


def run_scan(paths: list[Path], out: Path, workers: int, extra: list[str]) -> dict:
    cmd = [
        *NEARDUP,
        "scan",
        *map(str, paths),
        "--out",
        str(out),
        "--force",
        "--quiet",
        "--json",
        "--workers",
        str(workers),
        *extra,
    ]
    start = time.perf_counter()
    popen = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    peak = [0.0]
    stop = threading.Event()
    sampler = threading.Thread(target=sample_peak_rss, args=(psutil.Process(popen.pid), stop, peak))
    sampler.start()
    stdout, _ = popen.communicate()
    stop.set()
    sampler.join()
    if popen.returncode != 0:
        raise RuntimeError(f"scan failed: {' '.join(cmd)}")
    summary = json.loads(stdout)
    summary["wall_seconds"] = time.perf_counter() - start
    summary["peak_rss_mb"] = peak[0]
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=psutil.cpu_count() or 2)
    args = parser.parse_args(argv)

    rows = []
    for topology in ("pairs", "mirrors"):
        paths = ensure_crawl(topology)
        size_mb = sum(p.stat().st_size for p in paths) / 2**20
        floor = html_to_text_floor(paths)
        one = run_scan(paths, OUT / f"speed-{topology}-w1", 1, [])
        bare = run_scan(paths, OUT / f"speed-{topology}-w1-nolinks", 1, ["--no-links"])
        many = run_scan(paths, OUT / f"speed-{topology}-w{args.workers}", args.workers, [])
        rows.append((topology, size_mb, floor, one, bare, many))

    def timed(seconds: float, pages: int) -> str:
        return f"{seconds:.1f} s ({pages / seconds:,.0f} pages/s)"

    w = args.workers
    lines = [
        f"Machine: {platform.processor() or platform.machine()}, {psutil.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB; Python {platform.python_version()}.",
        "",
        "| crawl | WARC MB | records | HTML pages | HTML-to-text floor, 1 core "
        "| scan, 1 worker | ratio | scan --no-links, 1 worker | ratio "
        f"| scan, {w} workers | peak RSS floor | peak RSS scan (1 / {w} workers) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for topology, size_mb, floor, one, bare, many in rows:
        ratio = one["wall_seconds"] / floor["seconds"]
        bare_ratio = bare["wall_seconds"] / floor["seconds"]
        lines.append(
            f"| docs-{topology} | {size_mb:.0f} | {floor['records']:,} | {floor['pages']:,} "
            f"| {timed(floor['seconds'], floor['pages'])} "
            f"| {timed(one['wall_seconds'], one['sketched'])} | {ratio:.2f}x "
            f"| {timed(bare['wall_seconds'], bare['sketched'])} | {bare_ratio:.2f}x "
            f"| {timed(many['wall_seconds'], many['sketched'])} "
            f"| {floor['peak_rss_mb']:.0f} MB "
            f"| {one['peak_rss_mb']:.0f} / {many['peak_rss_mb']:.0f} MB |"
        )
    lines += ["", "Time per stage (seconds, 1 worker / all workers):", ""]
    lines.append("| crawl | " + " | ".join(rows[0][3]["stage_seconds"]) + " |")
    lines.append("|---|" + "---:|" * len(rows[0][3]["stage_seconds"]))
    for topology, _, _, one, _, many in rows:
        cells = [
            f"{one['stage_seconds'][k]:.1f} / {many['stage_seconds'][k]:.1f}"
            for k in one["stage_seconds"]
        ]
        lines.append(f"| docs-{topology} | " + " | ".join(cells) + " |")
    report = "\n".join(lines) + "\n"
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "scan_speed.md").write_text(report, encoding="utf-8")
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
