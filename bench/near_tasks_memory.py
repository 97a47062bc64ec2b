"""The memory of the near stage's last two tasks by themselves: the task that writes `pairs`
and the cluster task (issue 47, item 4).

A scan's tree peak mixes every process and the pages of mapped files the kernel lends them
(the verification's gathers of signature rows bring in up to the whole `signatures.npy` at
a million pages), so it cannot say whether these two tasks grow with the corpus. This bench
runs `scan INPUTS --workers N` in this process with the near stage's folder kept (its files
linked aside just before the cluster stage removes it), then runs each task alone in a
fresh process on those files, as a worker runs it: the Python and NumPy allocations' peak
(tracemalloc; Arrow's own buffers are not among them), the growth of the process's
anonymous memory over the task (RssAnon) and of its resident high-water mark (VmHWM,
mapped files included), both from after its imports.

    .venv/bin/python bench/near_tasks_memory.py bench/out/scale/web-1000000.jsonl --workers 2
    PYTHONPATH=/tmp/before/src .venv/bin/python bench/near_tasks_memory.py ...  # another commit

Prints one JSON object; appends it to bench/out/near_tasks_memory/results.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "near_tasks_memory"

CHILD = r"""
import json, sys, tracemalloc
from pathlib import Path
import pandas, pyarrow.compute, pyarrow.parquet  # as a worker that ran tasks has them
from neardup.config import Settings
from neardup.kernels import estimate_resemblance
from neardup.pipeline.steps import clusters, near_parts

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024
    return 0

folder, task = Path(sys.argv[1]), sys.argv[2]
settings = Settings.from_json((folder.parent / "settings.json").read_text())
before_hwm, before_anon = status("VmHWM"), status("RssAnon")
tracemalloc.start()
if task == "gather":
    near_parts._gather_task(folder)
else:
    near_parts._cluster_task((folder, settings))
_, peak = tracemalloc.get_traced_memory()
print(json.dumps({
    "task": task,
    "traced_peak_mb": round(peak / 2**20, 1),
    "anon_growth_mb": status("RssAnon") - before_anon,
    "hwm_growth_mb": status("VmHWM") - before_hwm,
}))
"""


def keep_near_folder(inputs: list[str], workers: int, scratch: Path) -> tuple[Path, dict]:
    """Scan `inputs` here with the near stage's files linked into `scratch/staging` before
    the cluster stage; that folder's `near_parts`, and the scan's summary."""
    from neardup import scan
    from neardup.config import Settings
    from neardup.pipeline.executors import embedded

    kept = scratch / "staging"
    original = embedded.cluster_parted

    def keeping(near, settings, pool):  # type: ignore[no-untyped-def]
        staging = near.folder.parent
        (kept / near.folder.name).mkdir(parents=True)
        for f in near.folder.iterdir():
            os.link(f, kept / near.folder.name / f.name)
        for name in ("signatures.npy", "supershingles.npy"):
            if (staging / name).exists():
                os.link(staging / name, kept / name)
        (kept / "settings.json").write_text(settings.to_json())
        return original(near, settings, pool)

    embedded.cluster_parted = keeping
    try:
        summary = scan(inputs, scratch / "run", Settings(), workers=workers, force=True).summary
    finally:
        embedded.cluster_parted = original
    return kept / "near_parts", summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=OUT))
    try:
        folder, summary = keep_near_folder(args.inputs, args.workers, scratch)
        tasks = []
        for task in ("gather", "cluster"):
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(folder), task],
                check=True,
                capture_output=True,
                text=True,
                env=dict(os.environ),
            )
            tasks.append(json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result = {
        "inputs": args.inputs,
        "workers": args.workers,
        "code": os.environ.get("PYTHONPATH", "this checkout"),
        "load_1min": os.getloadavg()[0],
        "pages": summary.get("records"),
        "verified_pairs": summary.get("verified_pairs"),
        "pairs_rows": summary.get("pairs_rows"),
        "tasks": tasks,
    }
    print(json.dumps(result, indent=1))
    with (OUT / "results.jsonl").open("a") as fh:
        fh.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
