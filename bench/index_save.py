"""What one save of the duplicate index costs (issue 27: a save writes what changed since
the save before, the rest linked or copied by the kernel).

For each index given: a hard-linked copy of it (saved files are never changed in place,
the manifest is replaced by a rename), a writer opened on the copy, the pages of
`--increment` (JSONL, url and text) applied as one batch, then the save itself timed
(`ServiceIndex._save_graph_now`, with `os.sync` before and after, so the writing to disk
is in it): wall, user and system seconds of the saving process, the bytes it wrote itself
(`/proc/self/io` write_bytes), the bytes of the new save's files that are not files of the
save before (`new_mb`: linked files are not written), its peak resident memory, the CPU
seconds of the whole machine (`/proc/stat`: with `--engine spark`, the executors' too), the
seconds of the band index's tables (`band_s`), and the load average before. With `--engine
spark` the band index is written by Spark's executors (`--master`, default local[2]; the session is
started and its Python workers import what an add's executors import before the timing),
as a Spark add's saves are. With `--src`, another checkout's
`src` folder runs instead (the code before).

    .venv/bin/python bench/index_save.py STORE... --increment new.jsonl [--src DIR]
    .venv/bin/python bench/index_save.py STORE... --increment new.jsonl --engine spark
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

_CHILD = """
import json, os, resource, sys, time
from neardup.service import PageUpdate, ServiceIndex
work, increment, master = sys.argv[1], sys.argv[2], sys.argv[3]
if master == "-":
    from neardup.startup import without_probed_modules
    without_probed_modules()
ix = ServiceIndex(work)
with open(increment, encoding="utf-8") as fh:
    ix.apply([PageUpdate(r["url"], text=r["text"]) for r in map(json.loads, fh)])
band = [0.0]
from neardup.index.files.band_save import fill_tables
write_tables = fill_tables  # this process's, unless Spark's below
from neardup.index.files import band_save
real = band_save.filled
def timed(*args):
    t = time.perf_counter()
    real(*args)
    band[0] += time.perf_counter() - t
band_save.filled = timed
if master != "-":
    from neardup.index.engines import spark_jobs as spark_feed
    # The session started before the timing, and its Python workers warm, as an add's are
    # by the time it saves (they read and sketched its files: `neardup.index.state.prepare`).
    context = spark_feed._context(master, None)
    width = int(context.defaultParallelism)
    context.parallelize(range(width), width).foreach(
        lambda _: __import__("neardup.index.state.prepare")
    )
    from neardup.index.engines.spark import SparkEngine
    write_tables = SparkEngine(master).write_tables
def machine_cpu():
    with open("/proc/stat") as fh:
        f = [int(x) for x in fh.readline().split()[1:]]
    return (f[0] + f[1] + f[2] + f[5] + f[6]) / os.sysconf("SC_CLK_TCK")
def written():
    with open("/proc/self/io") as fh:
        return int(next(x for x in fh if x.startswith("write_bytes:")).split()[1])
os.sync()
load = os.getloadavg()[0]
t0, r0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF), machine_cpu()
w0 = written()
ix._save_graph_now(write_tables)
os.sync()
t1, r1, c1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF), machine_cpu()
w1 = written()
pages = ix.pages.n
graph = ix.graph_meta["name"]
ix.close()
print(json.dumps({"pages": pages, "save_s": round(t1 - t0, 2), "graph": graph,
                  "written_mb": round((w1 - w0) / 2**20),
                  "peak_mib": r1.ru_maxrss >> 10,
                  "user_s": round(r1.ru_utime - r0.ru_utime, 2),
                  "system_s": round(r1.ru_stime - r0.ru_stime, 2),
                  "machine_cpu_s": round(c1 - c0, 2), "band_s": round(band[0], 2),
                  "load_before": round(load, 2)}))
"""


def copy_of(store: Path, work: Path) -> Path:
    """A copy of `store` that shares its files (hard links) but not its manifest."""
    shutil.rmtree(work, ignore_errors=True)
    subprocess.run(["cp", "-al", str(store), str(work)], check=True)
    (work / "writer.lock").unlink(missing_ok=True)
    manifest = work / "manifest.json"
    data = manifest.read_bytes()
    manifest.unlink()
    manifest.write_bytes(data)
    return work


def new_bytes(store: Path, graph: Path) -> int:
    """The bytes of the files of the save `graph` that are no file of `store` (the index
    it was copied from by links): what the save wrote, not what it linked."""
    old = {p.stat().st_ino for p in store.rglob("*") if p.is_file()}
    return sum(p.stat().st_size for p in graph.iterdir() if p.stat().st_ino not in old)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+", type=Path)
    parser.add_argument("--increment", required=True, type=Path)
    parser.add_argument("--src", help="a checkout's src folder to run instead")
    parser.add_argument("--work", type=Path, default=Path("/tmp/neardup-index-save"))
    parser.add_argument("--engine", choices=["embedded", "spark"], default="embedded")
    parser.add_argument("--master", default="local[2]", help="Spark master (with --engine spark)")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = args.src
    for store in args.stores:
        work = copy_of(store, args.work)
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    *("-c", _CHILD, str(work), str(args.increment)),
                    args.master if args.engine == "spark" else "-",
                ],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            got = json.loads(done.stdout.strip().splitlines()[-1])
            got["new_mb"] = round(new_bytes(store, work / got["graph"]) / 2**20)
            print(json.dumps({"index": str(store), **got}), flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
