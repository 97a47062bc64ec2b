"""A scan on a real Spark cluster: a standalone master and two workers on loopback, started
from the classes the pyspark package ships, the scan handed to `spark-submit` through
`neardup/cli/spark_submit.py`, inputs and outputs on a path every process shares.

The executors are separate JVMs with their own Python workers, so what local mode hides
(code shipped to the executors, tables written by them and never collected, the session
`spark-submit` made) is exercised here. The run must hold the embedded engine's clusters.
On CI (`CI` set) a missing Java or PySpark fails the test instead of skipping it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pyarrow.parquet as pq
import pytest

import neardup.cli.spark_submit as submit_script
from neardup.store import open_run


def _spark_bin() -> Path:
    on_ci = bool(os.environ.get("CI"))
    if not on_ci:
        pytest.importorskip("pyspark", reason="the Spark extra is not installed")
        if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
            pytest.skip("no Java runtime for the Spark cluster")
    import pyspark

    return Path(pyspark.__file__).parent / "bin"


def _bound_port(log: Path, pattern: str, deadline: float) -> int | None:
    """The port a Spark daemon says in its log that it bound (`pattern` has one group), read
    as it starts. Ports are chosen by the daemons themselves (port 0), not picked here and
    handed over: a port found free here can be taken by another process before the daemon
    binds it, and the daemon then falls back to the next one, so a probe of the port picked
    here reached the master's RPC port instead of its web UI (CI, 2026-11-26)."""
    while time.monotonic() < deadline:
        found = re.search(pattern, log.read_text(errors="replace")) if log.exists() else None
        if found:
            return int(found.group(1))
        time.sleep(0.2)
    return None


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as reply:
            return int(json.load(reply).get("aliveworkers", 0))
    except OSError:
        return 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(`spark://127.0.0.1:PORT`, the folder of the logs and the workers' work dirs) of a
    master with two one-core workers; stopped after."""
    spark_bin = _spark_bin()
    logs = tmp_path_factory.mktemp("spark-cluster")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(logs)}
    procs: list[subprocess.Popen[bytes]] = []
    handles: list[BinaryIO] = []

    def start(name: str, *args: str) -> None:
        log = open(logs / f"{name}.log", "wb")  # noqa: SIM115 - closed in the finally below
        handles.append(log)
        procs.append(
            subprocess.Popen(
                [str(spark_bin / "spark-class"), *args], env=env, stdout=log, stderr=log
            )
        )

    def fail() -> None:
        text = "\n".join(
            (logs / f).read_text(errors="replace")[-2000:]
            for f in ("master.log", "worker1.log", "worker2.log")
            if (logs / f).exists()
        )
        pytest.fail(f"the standalone cluster did not start:\n{text}")

    start(
        "master",
        "org.apache.spark.deploy.master.Master",
        *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
    )
    try:
        deadline = time.monotonic() + 90
        port = _bound_port(
            logs / "master.log", r"Starting Spark master at spark://[^:]+:(\d+)", deadline
        )
        ui_port = _bound_port(logs / "master.log", r"Bound MasterWebUI to .*:(\d+)\s", deadline)
        if port is None or ui_port is None:
            fail()
        master_url = f"spark://127.0.0.1:{port}"
        for n in (1, 2):
            start(
                f"worker{n}",
                "org.apache.spark.deploy.worker.Worker",
                *("--host", "127.0.0.1", "--cores", "1", "--memory", "1g"),
                *("--port", "0", "--webui-port", "0", "--work-dir", str(logs / f"work{n}")),
                master_url,
            )
        while _alive_workers(ui_port) < 2:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                fail()
            time.sleep(0.5)
        yield master_url, logs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for handle in handles:
            handle.close()


def _partition(run: Path) -> set[frozenset[int]]:
    """The clusters of a run as a set of sets of doc_ids (compared whatever the labels)."""
    with open_run(run) as con:
        rows = con.execute(
            "SELECT list(doc_id ORDER BY doc_id) FROM pages WHERE cluster_id IS NOT NULL "
            "GROUP BY cluster_id"
        ).fetchall()
    return {frozenset(r[0]) for r in rows}


def test_scan_through_spark_submit_on_a_standalone_cluster(cluster, demo_crawl, demo_run, tmp_path):
    master, logs = cluster
    shared = tmp_path / "shared"  # the path the driver and both workers see
    inputs = shared / "crawl"
    shutil.copytree(Path(demo_crawl.warc_paths[0]).parent, inputs)
    out = shared / "run"
    spark_bin = _spark_bin()
    command = [
        str(spark_bin / "spark-submit"),
        *("--master", master),
        *("--conf", f"spark.pyspark.python={sys.executable}"),
        *("--conf", f"spark.pyspark.driver.python={sys.executable}"),
        *("--conf", "spark.executor.memory=768m", "--conf", "spark.executor.cores=1"),
        *("--conf", "spark.sql.shuffle.partitions=4", "--driver-memory", "768m"),
        submit_script.__file__,
        "scan",
        *sorted(str(inputs / Path(p).name) for p in demo_crawl.warc_paths),
        *("--out", str(out), "--engine", "spark", "--json"),
    ]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads(done.stdout)
    assert summary["engine"] == "spark"
    for n in (1, 2):  # both workers ran an executor of the scan
        assert list((logs / f"work{n}").glob("app-*/*")), f"worker {n} ran nothing"
    # The tables are datasets the executors wrote: folders of part files, never collected.
    assert (out / "pages.parquet").is_dir() and (out / "page_text.parquet").is_dir()
    assert len(list((out / "pages.parquet").glob("*.parquet"))) >= 1
    assert _partition(out) == _partition(demo_run.path)
    assert len([c for c in _partition(out) if len(c) > 1]) > 0  # real clusters were compared
    for key in ("records", "sketched", "clusters", "verified_pairs", "candidate_pairs"):
        assert summary[key] == demo_run.summary[key], key
    # A moved run still opens: its views name the datasets relative to the run.
    moved = tmp_path / "moved"
    shutil.move(out, moved)
    assert pq.read_table(moved / "pages.parquet").num_rows == demo_run.summary["records"]
    assert _partition(moved) == _partition(demo_run.path)


def test_add_on_a_standalone_cluster(cluster, demo_crawl, demo_run, tmp_path):
    """`neardup add --engine spark --spark-master spark://...`: the files read and sketched
    by the cluster's executors (both workers), the index written by the command's process;
    its groups are the scan's."""
    from run_groups import scan_groups

    from neardup.service import ServiceIndex

    master, logs = cluster
    before = {n: set((logs / f"work{n}").glob("app-*")) for n in (1, 2)}
    store = tmp_path / "index"
    command = [
        sys.executable,
        *("-m", "neardup.cli.main", "add", str(store)),
        *sorted(str(p) for p in demo_crawl.warc_paths),
        *("--engine", "spark", "--spark-master", master, "--json"),
        *("--spark-conf", "spark.executor.memory=768m", "--spark-conf", "spark.executor.cores=1"),
        *("--spark-conf", "spark.driver.host=127.0.0.1"),
    ]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout)
    assert report["new_pages"] > 0 and report["skipped"] > 0
    for n in (1, 2):  # both workers ran an executor of the add
        assert set((logs / f"work{n}").glob("app-*")) - before[n], f"worker {n} ran nothing"
    with ServiceIndex(store, read_only=True) as ix:
        got = {frozenset(m) for m in ix.groups.values() if len(m) >= 2}
    assert got == scan_groups(demo_run.path) and got
