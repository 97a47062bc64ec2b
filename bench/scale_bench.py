"""Scans of web-like text at scale: wall time, per-stage seconds, memory and recall (issue 16).

The corpus is `neardup.synth.webtext`: JSONL pages of 400 words drawn from a Zipf vocabulary
of real pages (~2.7 KB a page), 10 % of them planted copies of an earlier page with 1..6
words replaced, listed in a truth TSV (copy URL, original URL). Each size is generated once
and cached under bench/out/scale/ (a `.done` marker tells a finished file from an
interrupted one).

Each scan is `neardup scan web-N.jsonl --out ... --json` in its own process, so the figures
are those a user gets, import and worker start-up included. While it runs, the RSS of its
whole process tree is sampled every 50 ms: `peak RSS` is the largest sum over the processes,
`peak anon` the same for anonymous memory only (RssAnon: heaps, arrays), which leaves out
file-backed pages such as the memory-mapped signature matrix, which the kernel can drop and
re-read at will. Per-stage peaks attribute each sample to the stage running at that time,
from the summary's `stage_seconds` (stages run one after the other in `STAGES` order, then
`store`; the process start-up before the first stage is `wall - elapsed_seconds`).

Recall is measured against the planted copies, which the scan never sees: the share of
(copy, original) pairs whose pages share a `cluster_id`. Wrong merges are pairs of pages in
one cluster that belong to different planted families (a family is an original and all its
copies, transitively): independent Zipf pages of 400 words share almost no 5-word shingle,
so any such pair is a false merge.

    .venv/bin/python bench/scale_bench.py --sizes 100000 1000000 [--workers 2] [--tag main]
    .venv/bin/python bench/scale_bench.py --sizes 100000 -- --method supershingles

Arguments after `--` go to `neardup scan`. Results are appended as JSON lines to
bench/out/scale/results.jsonl and printed as a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "scale"
NEARDUP = [sys.executable, "-m", "neardup.cli.main"]
STAGE_ORDER = ("ingest", "count", "sketch", "features", "near", "cluster", "store")


SHARD = 1_000_000  # corpora above a million pages are shards of a million pages each


def _write_shard(k: int) -> float:
    """Write shard `k` (pages k·SHARD .. (k+1)·SHARD) with its truth; seconds taken."""
    from neardup.synth.webtext import write_webtext

    data, truth, done = _shard_paths(k)
    t = time.perf_counter()
    tmp = data.with_name(data.name + ".tmp")
    write_webtext(tmp, SHARD, truth=truth, first=k * SHARD)
    tmp.replace(data)
    seconds = time.perf_counter() - t
    done.write_text(f"{seconds:.1f} s\n")
    return seconds


def _shard_paths(k: int) -> tuple[Path, Path, Path]:
    folder = OUT / "shards"
    stem = f"web-{k * SHARD}-{(k + 1) * SHARD}"
    return folder / f"{stem}.jsonl", folder / f"{stem}.truth.tsv", folder / f"{stem}.done"


def ensure_corpus(pages: int, jobs: int = 2) -> tuple[list[Path], list[Path]]:
    """The JSONL corpus of `pages` pages and its truth TSVs, generated once.

    Up to a million pages: one file. Beyond: shards of a million pages (`pages` must be a
    multiple), the first N of which make the N-million-page corpus, written `jobs` at a time
    in parallel; the pages are those of one big file (`write_webtext(first=...)`), so the
    corpora of every size share their shards and a larger run adds pages to a smaller one's.
    """
    from neardup.synth.webtext import write_webtext

    OUT.mkdir(parents=True, exist_ok=True)
    if pages > SHARD:
        if pages % SHARD:
            raise SystemExit(f"sizes above {SHARD:,} must be multiples of it")
        (OUT / "shards").mkdir(exist_ok=True)
        one, one_truth = ensure_corpus(SHARD)  # shard 0 is the million-page file
        data0, truth0, done0 = _shard_paths(0)
        if not done0.exists():
            for src, dst in ((one[0], data0), (one_truth[0], truth0)):
                dst.unlink(missing_ok=True)
                os.link(src, dst)
            done0.write_text("linked\n")
        todo = [k for k in range(pages // SHARD) if not _shard_paths(k)[2].exists()]
        if todo:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                for k, seconds in zip(todo, pool.map(_write_shard, todo), strict=True):
                    print(f"  shard {k}: {seconds:.0f} s", flush=True)
        shards = [_shard_paths(k) for k in range(pages // SHARD)]
        return [s[0] for s in shards], [s[1] for s in shards]
    data = OUT / f"web-{pages}.jsonl"
    truth = OUT / f"web-{pages}.truth.tsv"
    done = OUT / f"web-{pages}.done"
    if not done.exists():
        t = time.perf_counter()
        write_webtext(data, pages, truth=truth)
        done.write_text(f"{time.perf_counter() - t:.1f} s\n")
    return [data], [truth]


def _memory(pid: int) -> tuple[int, int]:
    """(VmRSS, RssAnon) of one process in bytes, read from /proc (Linux; the bench needs no
    psutil); zeros for a process that has gone."""
    rss = anon = 0
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("RssAnon:"):
                    anon = int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, anon


def _tree(root: int) -> list[int]:
    """`root` and every process descended from it, from the parent ids in /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def sample_memory(root: int, stop: threading.Event, samples: list) -> None:
    """Poll (time, RSS, anonymous RSS) summed over a process and its descendants."""
    while not stop.is_set():
        rss = anon = 0
        for pid in _tree(root):
            r, a = _memory(pid)
            rss += r
            anon += a
        samples.append((time.perf_counter(), rss, anon))
        time.sleep(0.1)


def stage_peaks(summary: dict, start: float, end: float, samples: list) -> dict[str, list[float]]:
    """Peak (RSS, anon) MiB per stage, from the sample times and the stage durations."""
    seconds = summary.get("stage_seconds", {})
    t = end - float(summary.get("elapsed_seconds", 0.0))
    windows: list[tuple[str, float, float]] = [("startup", start, t)]
    for name in STAGE_ORDER:
        if name in seconds:
            windows.append((name, t, t + seconds[name]))
            t += seconds[name]
    windows.append(("exit", t, end + 1.0))
    peaks: dict[str, list[float]] = {}
    for when, rss, anon in samples:
        for name, lo, hi in windows:
            if lo <= when < hi:
                cur = peaks.setdefault(name, [0.0, 0.0])
                cur[0] = max(cur[0], rss / 2**20)
                cur[1] = max(cur[1], anon / 2**20)
                break
    return peaks


def run_scan(data: list[Path], out: Path, workers: int, extra: list[str]) -> dict:
    cmd = [*NEARDUP, "scan", *map(str, data), "--out", str(out), "--force", "--quiet", "--json"]
    cmd += ["--workers", str(workers), *extra]
    start = time.perf_counter()
    cpu0 = os.times()
    popen = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    samples: list = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_memory, args=(popen.pid, stop, samples))
    sampler.start()
    stdout, _ = popen.communicate()
    end = time.perf_counter()
    stop.set()
    sampler.join()
    if popen.returncode != 0:
        raise RuntimeError(f"scan failed ({popen.returncode}): {' '.join(cmd)}")
    cpu1 = os.times()
    summary = json.loads(stdout)
    summary["wall_seconds"] = end - start
    # CPU seconds of the scan's whole process tree (children are waited for, so counted)
    summary["cpu_seconds"] = (cpu1.children_user + cpu1.children_system) - (
        cpu0.children_user + cpu0.children_system
    )
    summary["peak_rss_mb"] = max((s[1] for s in samples), default=0) / 2**20
    summary["peak_anon_mb"] = max((s[2] for s in samples), default=0) / 2**20
    summary["stage_peaks_mb"] = stage_peaks(summary, start, end, samples)
    return summary


def _truth_pairs(truths: list[Path]) -> Iterator[tuple[str, str]]:
    """(copy URL, original URL) of every planted copy."""
    for truth in truths:
        with open(truth, encoding="utf-8") as f:
            for line in f:
                copy, original = line.rstrip("\n").split("\t")
                yield copy, original


def _families(truths: list[Path]) -> dict[str, str]:
    """URL -> the root original of its planted family, for every URL in the truth files."""
    parent = dict(_truth_pairs(truths))

    def root(u: str) -> str:
        while u in parent:
            u = parent[u]
        return u

    return {u: root(u) for u in list(parent) + list(parent.values())}


def quality(run: Path, truths: list[Path]) -> dict:
    """Recall of the planted copies and wrong merges across families (see module doc).
    Only pages in a cluster are loaded: at ten million pages, a dict of every URL would
    cost the bench more memory than the scan it measures."""
    pages = pq.read_table(
        run / "pages.parquet", columns=["url", "cluster_id"], filters=[("cluster_id", ">=", 0)]
    )
    urls = pages.column("url").to_pylist()
    clusters = pages.column("cluster_id").to_numpy(zero_copy_only=False)
    cluster_of = dict(zip(urls, clusters.tolist(), strict=True))
    fam = _families(truths)
    found = total = 0
    for copy, original in _truth_pairs(truths):
        total += 1
        a, b = cluster_of.get(copy), cluster_of.get(original)
        found += a is not None and a == b
    # pairs inside clusters, and how many of them join different families
    by_cluster: dict[float, list[str]] = {}
    for url, c in zip(urls, clusters.tolist(), strict=True):
        by_cluster.setdefault(c, []).append(url)
    same = wrong = 0
    for members in by_cluster.values():
        if len(members) < 2:
            continue
        roots: dict[str, int] = {}
        for u in members:
            r = fam.get(u, u)
            roots[r] = roots.get(r, 0) + 1
        n = len(members)
        pairs = n * (n - 1) // 2
        same += pairs
        wrong += pairs - sum(k * (k - 1) // 2 for k in roots.values())
    return {
        "planted_pairs": total,
        "recall": found / total if total else None,
        "same_cluster_pairs": same,
        "wrong_merge_pairs": wrong,
    }


def row(n: int, mb: float, r: dict) -> str:
    st = r.get("stage_seconds", {})
    stages = " / ".join(f"{st[k]:.1f}" for k in STAGE_ORDER if k in st)
    per_doc = r["peak_rss_mb"] * 2**20 / n
    return (
        f"| {r.get('tag', '')} | {n:,} | {mb:,.0f} | {r['wall_seconds']:.1f} | "
        f"{n / r['wall_seconds']:,.0f} | {mb / r['wall_seconds']:.1f} | {stages} | "
        f"{r['peak_rss_mb']:,.0f} | {r['peak_anon_mb']:,.0f} | {per_doc:,.0f} | "
        f"{r['recall']:.4f} | {r['wrong_merge_pairs']} |"
    )


HEADER = (
    "| tag | pages | MB | wall s | pages/s | MB/s | stage s (ingest / sketch / near / cluster"
    " / store) | peak RSS MiB | peak anon MiB | RSS bytes/page | recall (planted) "
    "| wrong merges |\n|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"
)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--tag", default="", help="label stored with the results")
    parser.add_argument("--keep", action="store_true", help="keep the run directories")
    parser.add_argument("--jobs", type=int, default=2, help="processes writing corpus shards")
    parser.add_argument(
        "--generate-only", action="store_true", help="write the corpora and stop (no scan)"
    )
    args = parser.parse_args(argv)
    lines = [HEADER]
    for n in args.sizes:
        data, truth = ensure_corpus(n, args.jobs)
        if args.generate_only:
            continue
        mb = sum(d.stat().st_size for d in data) / 1e6
        run = OUT / f"run-{n}"
        result = run_scan(data, run, args.workers, extra)
        result.update(quality(run, truth))
        result.update(
            {
                "tag": args.tag,
                "pages": n,
                "input_mb": mb,
                "workers": args.workers,
                "extra": extra,
                "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                f"load {os.getloadavg()[0]:.1f}",
                "when": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
            }
        )
        with open(OUT / "results.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(result, default=str) + "\n")
        lines.append(row(n, mb, result))
        print(lines[-1], flush=True)
        print("  stage peaks (RSS, anon MiB):", json.dumps(result["stage_peaks_mb"]), flush=True)
        if not args.keep:
            shutil.rmtree(run, ignore_errors=True)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
