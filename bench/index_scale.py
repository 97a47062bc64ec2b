"""`neardup add` of many millions of web-like pages in one run, and opening the result (issue 26).

    .venv/bin/python bench/index_scale.py --parts 10 --work /tmp/index-scale

The pages are `neardup.synth.webtext`'s (the corpus of bench/scale_bench.py and
bench/service_scale.py: 400 words from a Zipf vocabulary of real pages, 10 % planted near
copies), written once as gzip'd JSONL files of a million pages each (`--part-pages`),
numbered on from the previous file, gzip level 1 (about 1.35 GB a file, 2.8 GB as text),
two files at a time. Then, each in its own process as a user runs them:

1. `neardup add STORE part-*.jsonl.gz --json`: wall time, pages a second, CPU seconds, and the
   peak resident memory of the process (`os.wait4`), with its resident memory sampled every
   5 s (`/proc/PID/status`: anonymous and file-backed) into `rss.txt`;
2. opening the index (`neardup.open_index(STORE, read_only=True)`) in a fresh interpreter,
   twice: seconds, and resident memory after opening less before (the index's own).

Results go to WORK/index_scale.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [str(ROOT / ".venv" / "bin" / "neardup")]

OPEN = r"""
import json, sys, time
def rss():
    return int(open('/proc/self/statm').read().split()[1]) * 4096
import neardup, numpy, pyarrow, duckdb  # the interpreter's own imports, not the index's
from neardup.index.handle import open_index
base = rss()
t = time.perf_counter()
ix = open_index(sys.argv[1], read_only=True)
secs = time.perf_counter() - t
print(json.dumps({"open_s": secs, "index_bytes": rss() - base, "rss_bytes": rss()}))
"""


def write_part(folder: Path, pages: int, k: int) -> Path:
    """Pages k * pages .. (k + 1) * pages - 1 as gzip'd JSONL (written once)."""
    from neardup.synth.webtext import iter_webtext

    path = folder / f"part-{pages}-{k:02d}.jsonl.gz"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) as out:
            for page in iter_webtext(pages, seed=0, first=k * pages):
                line = json.dumps({"url": page.url, "text": page.text}, ensure_ascii=False)
                out.write(line + "\n")
        os.replace(tmp, path)
    return path


def sample(pid: int, out: Path, stop: threading.Event) -> None:
    with open(out, "w") as f:
        while not stop.wait(5):
            try:
                fields = Path(f"/proc/{pid}/status").read_text().splitlines()
            except OSError:
                return
            kb = {k: v.split()[0] for k, v in (x.split(":", 1) for x in fields) if "Rss" in k}
            f.write(f"{time.time():.0f} {kb.get('RssAnon')} {kb.get('RssFile')}\n")
            f.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", type=int, default=10, help="files of --part-pages pages")
    ap.add_argument("--part-pages", type=int, default=1_000_000, help="a multiple of 10,000")
    ap.add_argument("--work", type=Path, default=Path("/tmp/index-scale"))
    a = ap.parse_args(argv)
    parts_dir, store = a.work / "parts", a.work / "store"
    parts_dir.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(2) as pool:
        n = a.parts
        parts = list(pool.map(write_part, [parts_dir] * n, [a.part_pages] * n, range(n)))
    subprocess.run(["rm", "-rf", str(store)], check=True)
    res: dict = {"pages": a.parts * a.part_pages, "load_before": os.getloadavg()}
    t0 = time.perf_counter()
    with open(a.work / "add.json", "w") as out:
        proc = subprocess.Popen([*CLI, "add", str(store), *map(str, parts), "--json"], stdout=out)
    stop = threading.Event()
    sampler = threading.Thread(target=sample, args=(proc.pid, a.work / "rss.txt", stop))
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    stop.set()
    sampler.join()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"neardup add failed: {status}")
    res.update(
        add_s=time.perf_counter() - t0,
        add_cpu_s=usage.ru_utime + usage.ru_stime,
        add_peak_bytes=usage.ru_maxrss * 1024,
    )
    res["add_pages_per_s"] = res["pages"] / res["add_s"]
    res["add_peak_bytes_per_page"] = res["add_peak_bytes"] / res["pages"]
    res["open"] = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", OPEN, str(store)], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(2)
    ]
    (a.work / "index_scale.json").write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
