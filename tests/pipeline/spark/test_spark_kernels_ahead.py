"""The Spark engine's Python workers run neardup's kernels compiled ahead of time, and its
JVM by the first compiler tier only.

A PySpark Python worker runs one task at a time on one thread, so, as in the local engine's
workers, no call of a kernel needs numba's JIT there (`spark/tasks.on_one_thread`); before,
the first batch of texts over `jit.AHEAD_MAX_BYTES` started it in every worker."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

from spark_session import spark  # noqa: F401 - the fixture

from neardup.kernels import jit


def test_a_spark_scan_imports_numba_in_no_process(spark, tmp_path):  # noqa: F811
    """The scan runs in a process of its own (its own session), so that every Python
    process starts fresh; the `spark` fixture is asked for its rule: where the Spark
    engine cannot start, skipped off CI and a failure on it."""
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(5000)]
    path = tmp_path / "pages.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for i in range(300):  # 300 texts of about 8 KB: one sketch batch of about 2.4 MB
            text = " ".join(rng.choice(vocabulary) for _ in range(1400))
            f.write(json.dumps({"url": f"https://h{i % 7}.example/{i}", "text": text}) + "\n")
    assert path.stat().st_size > 2 * jit.AHEAD_MAX_BYTES
    env = {k: v for k, v in os.environ.items() if k != "NEARDUP_KERNELS"}
    # every Python process reports its imports on stderr: this one and Spark's workers,
    # whose stderr the JVM passes on in local mode
    env["PYTHONPROFILEIMPORTTIME"] = "1"
    args = ["scan", str(path), "--engine", "spark", "--out", str(tmp_path / "run"), "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "neardup.cli.main", *args, "-q"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["sketched"] == 300
    imported = [ln.rsplit("|", 1)[-1].strip() for ln in done.stderr.splitlines() if "|" in ln]
    assert imported.count("neardup.kernels") >= 2  # the driver and a worker: reports of both
    assert "numba" not in imported


def test_a_task_body_keeps_its_signature_and_runs_its_kernels_on_one_thread(monkeypatch):
    """PySpark counts a cogroup function's arguments (`inspect.getfullargspec`), so the
    wrapper shows the body's own; the body runs with no size limit on the module compiled
    ahead (the limit restored after the test)."""
    import inspect

    from neardup.pipeline.executors.spark.tasks import on_one_thread

    monkeypatch.setattr(jit, "_max_bytes", jit.AHEAD_MAX_BYTES)

    def rule(left, right):
        return left + right, jit._max_bytes

    wrapped = on_one_thread(rule)
    assert inspect.getfullargspec(wrapped).args == ["left", "right"]
    assert wrapped(1, 2) == (3, None)


def test_the_sessions_jvm_runs_the_first_compiler_tier_only(spark):  # noqa: F811
    """Every heavy step of a Spark run is Python: its JVM compiled by both tiers spent
    about twice the CPU of the first alone on a 1 M-page scan (`session.DEFAULT_CONF`).
    Read from the running JVM's own arguments, not from the configuration asked for."""
    bean = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert "-XX:TieredStopAtLevel=1" in list(bean.getInputArguments())
