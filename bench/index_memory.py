"""The memory of `neardup add` as the index grows (issue 27: the process that applies a
batch should hold what the batch touches, not the index).

For each index given, `--runs` times: a hard-linked copy of it (segments and saved arrays
are never changed in place), then `neardup add COPY INCREMENT...` as a user runs it, in a
child process that reports, as it ends, its peak resident memory and what is resident of
it then, split into its own memory (anonymous: what it allocated) and mapped files (the
index's saved arrays and segments in the page cache, which the kernel can drop and read
again). With `--src`, another checkout's `src` folder runs instead (the code before).

    .venv/bin/python bench/index_memory.py STORE... --increment FILE... [--src DIR]
        [--add-args '--engine spark --spark-master local[2]']

(on Spark the figures are the driver's Python process: the JVM is a child it does not wait
for, and the executors' Python workers are its children).

An index an older neardup saved (no pages beside its graph) is opened once by a writer
first (`--convert`), so the runs time increments, not that one-time save.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
PYTHON = BENCH.parent / ".venv" / "bin" / "python"

# The child's pieces, shared with bench/index_at_scale.py's: its memory figures from
# /proc/self/status (MiB), and `neardup add`'s own exit (no interpreter tear-down), made to
# call the child's `report()` first.
STATUS_FIELDS = """
def status_fields():
    fields = {}
    for line in open("/proc/self/status"):
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"):
            fields[key] = int(value.split()[0]) // 1024
    return fields
"""
REPORT_AT_EXIT = """
leave = cli._leave_now  # `add` ends with it (no interpreter tear-down): report first


def reported_leave(code):
    report()
    leave(code)


cli._leave_now = reported_leave
cli.main()
"""

# Runs `neardup add ...` as the command line does, then writes the process's memory figures
# (from /proc/self/status) to the file named by the first argument.
_CHILD = (
    """
import sys
out = sys.argv[1]
sys.argv = ["neardup", *sys.argv[2:]]
import neardup.cli.main as cli
"""
    + STATUS_FIELDS
    + """

def report():
    open(out, "w").write(repr(status_fields()))
"""
    + REPORT_AT_EXIT
)


def linked_copy(base: Path, dest: Path) -> Path:
    """A copy of an index that shares its files (hard links: saved files are never changed
    in place, and a manifest is replaced by a rename), with a lock file of its own: a
    linked one is the base's inode, locked by any add on any copy or on the base itself.
    Flushed, and a second's rest, before it is measured."""
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run(["cp", "-al", str(base), str(dest)], check=True)
    (dest / "writer.lock").unlink(missing_ok=True)
    os.sync()
    time.sleep(1)
    return dest


def run_add(
    copy: Path, increment: list[str], src: str | None, report: Path, extra: list[str]
) -> dict[str, object]:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    cmd = [str(PYTHON), "-c", _CHILD, str(report), "add", str(copy), *increment, "--json", *extra]
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd[3:])} failed:\n{done.stderr.decode()[-2000:]}")
    mem = eval(report.read_text())  # the dict our own child wrote
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    added = json.loads(done.stdout)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "peak_mib": mem["VmHWM"],
        "end_anon_mib": mem["RssAnon"],
        "end_file_mib": mem["RssFile"],
        "load_before": round(load, 2),
        "index_pages": added.get("index_pages"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+", type=Path)
    parser.add_argument(
        "--increment", nargs="*", default=[], help="files to add (none: --add-args --remove FILE)"
    )
    parser.add_argument("--src", help="a checkout's src folder to run instead")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--convert", action="store_true", help="open each index once first")
    parser.add_argument("--work", type=Path, default=Path("/tmp/neardup-index-memory"))
    parser.add_argument(
        "--add-args", default="", help="more arguments for neardup add (--engine spark ...)"
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for store in args.stores:
        if args.convert:
            env = dict(os.environ, PYTHONPATH=args.src) if args.src else None
            code = "import sys; from neardup.service import ServiceIndex; "
            code += "ServiceIndex(sys.argv[1]).close()"
            subprocess.run([str(PYTHON), "-c", code, str(store)], env=env, check=True)
        for _ in range(args.runs):
            copy = linked_copy(store, args.work / "copy")
            extra = args.add_args.split()
            got = run_add(copy, args.increment, args.src, args.work / "m", extra)
            row = {"index": str(store), **got}
            rows.append(row)
            print(json.dumps(row), flush=True)
        shutil.rmtree(args.work / "copy", ignore_errors=True)
    print("| index | pages after | wall s | CPU s | peak MiB | own (anon) MiB | mapped MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['index']} | {r['index_pages']} | {r['wall_s']} | {r['cpu_s']} | "
            f"{r['peak_mib']} | {r['end_anon_mib']} | {r['end_file_mib']} |"
        )


if __name__ == "__main__":
    main()
