"""Spark at scale (issue 19): web-like pages through `local[2]` and a standalone cluster.

Generates (or reuses) `neardup.synth.webtext` pages, splits them into JSONL shards (Spark
reads one task per file), scans them with the embedded engine and with Spark, and reports
per-stage seconds, the peak memory of each kind of process, and whether both engines give
the same clusters. Memory is sampled from /proc every 0.25 s, summed per kind:

- driver: the `neardup` Python process (under spark-submit, the Python the submit starts);
- JVM: in `local[2]` the one JVM is both the driver's and the executors'; on a standalone
  cluster, the driver JVM (SparkSubmit) and the executor JVMs are counted apart;
- executor Python: the `pyspark.daemon` / `pyspark.worker` processes that run the kernels.

CPU seconds (user + system) are summed per kind the same way, from each process's last
sample (a forked Python worker that lives less than a sampling period is missed).
A Spark run writes Spark's event log into its folder, and each neardup stage's jobs carry
the stage as their job group (`SparkJobs.current_stage`), so the results hold, per stage:
jobs, tasks, executor run and CPU seconds (the JVM's task threads; the Python workers' time
is in their run seconds), shuffle bytes written and read, Parquet bytes read and written
(`stage_profile`).

    .venv/bin/python bench/spark_scale.py --pages 250000 --modes embedded local
    .venv/bin/python bench/spark_scale.py --pages 250000 --modes standalone
    .venv/bin/python bench/spark_scale.py --pages 250000 --no-text   # both engines with --no-text

Writes bench/out/spark_scale/results.json (one row per run, appended) and prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
OUT = BENCH / "out" / "spark_scale"
VENV_BIN = REPO / ".venv" / "bin"
CACHE = Path(os.environ.get("NEARDUP_WEBTEXT_CACHE", "/tmp/wt"))


def pages_file(n: int) -> Path:
    """`n` web-like pages as JSONL, cached (written beside and renamed into place)."""
    from neardup.synth.webtext import write_webtext

    path = CACHE / f"{n // 1000}k.jsonl"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".jsonl.tmp")
        write_webtext(tmp, n, truth=path.with_suffix(".truth.tsv"))
        tmp.rename(path)
    return path


def shards(n: int, parts: int) -> Path:
    """The pages split into `parts` JSONL files of consecutive lines (streamed)."""
    folder = CACHE / f"{n // 1000}k-shards{parts}"
    if folder.is_dir() and len(list(folder.glob("*.jsonl"))) == parts:
        return folder
    source = pages_file(n)
    folder.mkdir(parents=True, exist_ok=True)
    step = -(-n // parts)
    with contextlib.ExitStack() as stack:
        outs = [
            stack.enter_context(open(folder / f"part-{k:03d}.jsonl", "w", encoding="utf-8"))
            for k in range(parts)
        ]
        with open(source, encoding="utf-8") as lines:
            for i, line in enumerate(lines):
                outs[min(i // step, parts - 1)].write(line)
    return folder


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            cmd = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        table[int(entry.name)] = (ppid, cmd)
    return table


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid` so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _kind(cmd: str) -> str:
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
        return "executor_python"
    if "CoarseGrainedExecutorBackend" in cmd:
        return "executor_jvm"
    if "deploy.worker.Worker" in cmd or "deploy.master.Master" in cmd:
        return "cluster_daemons"
    if "java" in cmd.split(" ", 1)[0]:
        return "jvm"  # local mode: driver and executors; under spark-submit: the driver JVM
    return "driver_python"


def measure(cmd: list[str], log: Path, roots: list[int], timeout: float) -> dict:
    """Run `cmd`; its wall time and, per kind of process (among its descendants and those of
    `roots`, the standalone workers), the peak of their summed RSS."""
    peaks: dict[str, float] = {}
    cpu: dict[int, tuple[str, float]] = {}  # pid -> (kind, CPU seconds at its last sample)
    started = time.perf_counter()
    with log.open("w") as fh:
        popen = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        while popen.poll() is None:
            table = _processes()
            children: dict[int, list[int]] = {}
            for pid, (ppid, _) in table.items():
                children.setdefault(ppid, []).append(pid)
            tree, todo = set(), [popen.pid, *roots]
            while todo:
                pid = todo.pop()
                if pid in tree:
                    continue
                tree.add(pid)
                todo.extend(children.get(pid, []))
            sums: dict[str, float] = {}
            for pid in tree:
                if pid in roots or pid not in table:
                    continue
                kind = _kind(table[pid][1])
                sums[kind] = sums.get(kind, 0.0) + _rss_mb(pid)
                seconds = _cpu_seconds(pid)
                if seconds:
                    cpu[pid] = (kind, seconds)
            sums["total"] = sum(v for k, v in sums.items() if k != "cluster_daemons")
            for kind, mb in sums.items():
                peaks[kind] = max(peaks.get(kind, 0.0), mb)
            if time.perf_counter() - started > timeout:
                popen.kill()
            time.sleep(0.25)
    cpu_by_kind: dict[str, float] = {}
    for kind, seconds in cpu.values():
        cpu_by_kind[kind] = cpu_by_kind.get(kind, 0.0) + seconds
    return {
        "rc": popen.returncode,
        "wall_seconds": round(time.perf_counter() - started, 1),
        "peak_rss_mb": {k: round(v) for k, v in sorted(peaks.items())},
        "cpu_seconds": {k: round(v, 1) for k, v in sorted(cpu_by_kind.items())},
        "load_average_before": None,
    }


def stage_profile(event_log: Path) -> dict[str, dict[str, float]]:
    """Per neardup stage (the job group its jobs carry), from Spark's event log: jobs,
    tasks, executor run and CPU seconds, shuffle bytes written and read, bytes read and
    written by the tasks (Parquet checkpoints and the run's tables)."""
    group_of_stage: dict[int, str] = {}
    profile: dict[str, dict[str, float]] = {}
    # Spark 4 writes a folder per application (eventlog_v2_*) of rolled files (events_*).
    files = [event_log] if event_log.is_file() else sorted(event_log.rglob("events_*"))
    files += sorted(f for f in event_log.glob("*") if f.is_file())
    for file in files:
        with file.open(encoding="utf-8") as lines:
            for line in lines:
                event = json.loads(line)
                kind = event.get("Event")
                if kind == "SparkListenerJobStart":
                    group = (event.get("Properties") or {}).get("spark.jobGroup.id") or "other"
                    group = group.removeprefix("neardup:")
                    for stage_id in event.get("Stage IDs", []):
                        group_of_stage[stage_id] = group
                    row = profile.setdefault(group, {})
                    row["jobs"] = row.get("jobs", 0) + 1
                elif kind == "SparkListenerTaskEnd":
                    group = group_of_stage.get(event.get("Stage ID"), "other")
                    metrics = event.get("Task Metrics") or {}
                    row = profile.setdefault(group, {})
                    shuffle_read = metrics.get("Shuffle Read Metrics") or {}
                    figures = {
                        "tasks": 1,
                        "run_s": metrics.get("Executor Run Time", 0) / 1e3,
                        "cpu_s": metrics.get("Executor CPU Time", 0) / 1e9,
                        "shuffle_write_mb": (metrics.get("Shuffle Write Metrics") or {}).get(
                            "Shuffle Bytes Written", 0
                        )
                        / 1e6,
                        "shuffle_read_mb": (
                            shuffle_read.get("Remote Bytes Read", 0)
                            + shuffle_read.get("Local Bytes Read", 0)
                        )
                        / 1e6,
                        "read_mb": (metrics.get("Input Metrics") or {}).get("Bytes Read", 0) / 1e6,
                        "written_mb": (metrics.get("Output Metrics") or {}).get("Bytes Written", 0)
                        / 1e6,
                    }
                    for key, value in figures.items():
                        row[key] = row.get(key, 0) + value
    return {
        group: {key: round(value, 1) for key, value in row.items()}
        for group, row in profile.items()
    }


def same_clusters(a: Path, b: Path) -> dict:
    """Compare two runs' clusterings: pages whose cluster differs, and whether the two
    partitions are equal as sets of sets (labels aside)."""
    con = duckdb.connect()
    pa_, pb = (f"read_parquet('{p / 'pages.parquet'}')" for p in (a, b))
    differ = con.execute(
        f"SELECT count(*) FROM {pa_} AS x FULL JOIN {pb} AS y USING (doc_id) "
        "WHERE x.cluster_id IS DISTINCT FROM y.cluster_id OR x.doc_id IS NULL "
        "OR y.doc_id IS NULL"
    ).fetchone()[0]
    part = (
        "SELECT list(doc_id ORDER BY doc_id) AS members FROM {} "
        "WHERE cluster_id IS NOT NULL GROUP BY cluster_id"
    )
    only = con.execute(
        f"SELECT count(*) FROM (({part.format(pa_)}) EXCEPT ({part.format(pb)}))"
    ).fetchone()[0]
    return {"pages_with_other_cluster": int(differ), "clusters_not_in_other": int(only)}


def run(
    pages: int, parts: int, mode: str, master: str | None, timeout: float, keep_text: bool = True
) -> dict:
    inputs = shards(pages, parts)
    folder = OUT / f"n{pages}"
    folder.mkdir(parents=True, exist_ok=True)
    suffix = "" if keep_text else "-no-text"
    out = folder / f"run-{mode}{suffix}"
    common = ["scan", str(inputs), "--out", str(out), "--force", "--quiet", "--json"]
    common += [] if keep_text else ["--no-text"]
    events = folder / f"events-{mode}{suffix}"
    shutil.rmtree(events, ignore_errors=True)
    events.mkdir()
    event_conf = [
        *("--spark-conf", "spark.eventLog.enabled=true"),
        *("--spark-conf", f"spark.eventLog.dir={events.as_uri()}"),
        *("--spark-conf", "spark.eventLog.compress=false"),
    ]
    roots: list[int] = []
    if mode == "embedded":
        cmd = [str(VENV_BIN / "neardup"), *common, "--workers", "2"]
    elif mode == "local":
        cmd = [str(VENV_BIN / "neardup"), *common, "--engine", "spark"]
        cmd += ["--spark-master", "local[2]", "--spark-conf", "spark.driver.memory=4g"]
        cmd += event_conf
    else:
        import pyspark

        import neardup.cli.spark_submit as script

        spark_bin = Path(pyspark.__file__).parent / "bin"
        cmd = [
            str(spark_bin / "spark-submit"),
            *("--master", master or "spark://127.0.0.1:7077", "--driver-memory", "2g"),
            *("--conf", f"spark.pyspark.python={sys.executable}"),
            *("--conf", "spark.executor.memory=3g", "--conf", "spark.executor.cores=1"),
            *("--conf", "spark.eventLog.enabled=true"),
            *("--conf", f"spark.eventLog.dir={events.as_uri()}"),
            *("--conf", "spark.eventLog.compress=false"),
            script.__file__,
            *common,
            "--engine",
            "spark",
        ]
        roots = [pid for pid, (_, c) in _processes().items() if "deploy.worker.Worker" in c]
    load = os.getloadavg()[0]
    m = measure(cmd, folder / f"{mode}{suffix}.log", roots, timeout)
    m["load_average_before"] = round(load, 2)
    if mode != "embedded" and any(events.iterdir()):
        m["stage_profile"] = stage_profile(events)
    result = {"pages": pages, "shards": parts, "mode": mode, "keep_text": keep_text, **m}
    if m["rc"] == 0:
        summary = json.loads((out / "summary.json").read_text())
        for key in ("stage_seconds", "clusters", "verified_pairs", "candidate_pairs"):
            result[key] = summary.get(key)
        embedded = folder / f"run-embedded{suffix}"
        if mode != "embedded" and (embedded / "summary.json").exists():
            result["against_embedded"] = same_clusters(embedded, out)
    print(json.dumps(result), file=sys.stderr)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[250_000])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--modes", nargs="+", default=["embedded", "local"])
    parser.add_argument("--master", help="the standalone master (mode standalone)")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--no-text", action="store_true", help="scan with --no-text")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    results_file = OUT / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else []
    for n in args.pages:
        for mode in args.modes:
            run_ = run(n, args.shards, mode, args.master, args.timeout, not args.no_text)
            results.append(run_)
            results_file.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
