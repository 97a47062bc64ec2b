"""Where a Spark scan's CPU goes by process: the driver, the JVM, Spark's Python workers.

Runs `neardup scan INPUTS --engine spark` (a local session, `local[*]`) with this checkout's
code and, with `--before SRC`, another commit's (a `git worktree`'s `src` on `PYTHONPATH`,
which the JVM passes on to its Python workers), alternating, and samples the process tree
(psutil, every 0.1 s): each process's user + system CPU at its last sample, summed by kind.
Whether a worker imported numba is read from `PYTHONPROFILEIMPORTTIME`'s reports (the
workers' stderr reaches the driver's in local mode) with `--imports`.

    .venv/bin/python bench/spark_workers.py bench/out/docs-mirrors --runs 2 --before /tmp/before/src
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scan_against import sample_tree


def _kind(pid: int, name: str, driver: int) -> str:
    """The scan's own process is the driver; Java is the JVM; every other process is one of
    Spark's Python workers (the daemon and the workers it forks)."""
    if pid == driver:
        return "driver"
    return "JVM" if "java" in name else "Python workers"


def one_scan(inputs: list[str], out: Path, src: str | None, imports: bool) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NEARDUP_KERNELS")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if src:
        env["PYTHONPATH"] = src
    if imports:
        env["PYTHONPROFILEIMPORTTIME"] = "1"
    cmd = [sys.executable, "-m", "neardup.cli.main", "scan", *inputs, "--engine", "spark"]
    cmd += ["--out", str(out), "--force", "--quiet", "--json"]
    seen: dict[int, float] = {}
    names: dict[int, str] = {}
    stop = threading.Event()
    start = time.perf_counter()
    root = psutil.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    args = (root, stop, seen, [0.0, 0.0], 0.1, names)
    sampler = threading.Thread(target=sample_tree, args=args)
    sampler.start()
    _, err = root.communicate()
    stop.set()
    sampler.join()
    if root.returncode:
        raise SystemExit(f"the scan failed:\n{err.decode()[-2000:]}")
    result: dict[str, float] = {"wall": time.perf_counter() - start}
    for pid, cpu in seen.items():
        kind = _kind(pid, names.get(pid, ""), root.pid)
        result[kind] = result.get(kind, 0.0) + cpu
    if imports:
        imported = [ln.rsplit("|", 1)[-1].strip() for ln in err.decode().splitlines() if "|" in ln]
        result["processes importing numba"] = imported.count("numba")
        result["processes importing neardup.kernels"] = imported.count("neardup.kernels")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--before", help="source folder of another commit's code")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument(
        "--imports", action="store_true", help="count the processes importing numba"
    )
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    codes = {"now": None, **({"before": args.before} if args.before else {})}
    seen: dict[str, list[dict[str, float]]] = {code: [] for code in codes}
    with tempfile.TemporaryDirectory(prefix="neardup-spark-") as work:
        for _ in range(args.runs):
            for code, src in codes.items():
                out = Path(work) / code
                seen[code].append(one_scan(args.inputs, out, src, args.imports))
                shutil.rmtree(out, ignore_errors=True)
    keys = sorted({k for runs in seen.values() for r in runs for k in r})
    print("| code | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for code, runs in seen.items():
        cells = [
            ", ".join(f"{r.get(k, 0):.1f}" for r in runs)
            + f" (median {statistics.median(r.get(k, 0) for r in runs):.1f})"
            for k in keys
        ]
        print(f"| {code} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
