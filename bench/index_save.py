"""What one save of the duplicate index costs (issue 27: a save writes what changed since
the save before, the rest linked or copied by the kernel).

For each index given: a hard-linked copy of it (saved files are never changed in place,
the manifest is replaced by a rename), a writer opened on the copy, the pages of
`--increment` (JSONL, url and text) applied as one batch, then the save itself timed
(`ServiceIndex._save_graph_now`, with `os.sync` before and after, so the writing to disk
is in it): wall, user and system seconds, and the load average before. With `--src`,
another checkout's `src` folder runs instead (the code before).

    .venv/bin/python bench/index_save.py STORE... --increment new.jsonl [--src DIR]
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
from neardup.startup import without_probed_modules
without_probed_modules()
from neardup.service import PageUpdate, ServiceIndex
work, increment = sys.argv[1], sys.argv[2]
ix = ServiceIndex(work)
with open(increment, encoding="utf-8") as fh:
    ix.apply([PageUpdate(r["url"], text=r["text"]) for r in map(json.loads, fh)])
os.sync()
load = os.getloadavg()[0]
t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
ix._save_graph_now()
os.sync()
t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
pages = ix.pages.n
ix.close()
print(json.dumps({"pages": pages, "save_s": round(t1 - t0, 2),
                  "user_s": round(r1.ru_utime - r0.ru_utime, 2),
                  "system_s": round(r1.ru_stime - r0.ru_stime, 2), "load_before": round(load, 2)}))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+", type=Path)
    parser.add_argument("--increment", required=True, type=Path)
    parser.add_argument("--src", help="a checkout's src folder to run instead")
    parser.add_argument("--work", type=Path, default=Path("/tmp/neardup-index-save"))
    args = parser.parse_args()
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = args.src
    for store in args.stores:
        work = copy_of(store, args.work)
        try:
            done = subprocess.run(
                [sys.executable, "-c", _CHILD, str(work), str(args.increment)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            got = json.loads(done.stdout.strip().splitlines()[-1])
            print(json.dumps({"index": str(store), **got}), flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
