"""A failed Spark job is one line naming the stage and the cause, and leaves no run."""

from __future__ import annotations

import shutil

import pytest
from spark_session import spark  # noqa: F401 - the fixture
from typer.testing import CliRunner

from neardup.cli.main import app
from neardup.pipeline.executors.spark.failures import failure_cause

PYTHON_FAILURE = """An exception was thrown from the Python worker.
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/pyspark/worker.py", line 2035, in main
    process()
  File "/work/src/neardup/pipeline/executors/spark/kernels.py", line 88, in sketch_batches
    raise MemoryError("cannot allocate 2 GiB for the signature matrix")
MemoryError: cannot allocate 2 GiB for the signature matrix
"""

JAVA_FAILURE = """An error occurred while calling o412.parquet.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 3 failed 4 times
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2898)
\tat scala.collection.immutable.List.foreach(List.scala:334)
Caused by: java.io.IOException: No space left on device
\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)
"""


def test_the_cause_is_the_last_python_exception_or_the_deepest_java_cause():
    assert failure_cause(RuntimeError(PYTHON_FAILURE)) == (
        "MemoryError: cannot allocate 2 GiB for the signature matrix"
    )
    assert failure_cause(RuntimeError(JAVA_FAILURE)) == (
        "java.io.IOException: No space left on device"
    )
    one_line = failure_cause(RuntimeError("[PATH_NOT_FOUND] Path does not exist: file:/x."))
    assert one_line == "[PATH_NOT_FOUND] Path does not exist: file:/x."
    assert (
        "\n" not in failure_cause(RuntimeError("x" * 5000))
        and len(failure_cause(RuntimeError("x" * 5000))) <= 400
    )


def test_a_failed_job_says_which_stage_in_one_line_and_leaves_no_run(spark, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    missing = (tmp_path / "nowhere" / "crawl.warc.gz").as_uri()
    result = CliRunner().invoke(app, ["scan", missing, "--out", str(out), "--engine", "spark"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: Spark stage ingest failed: "), lines[0]
    assert "Traceback" not in result.output and "nowhere" in lines[0]
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []  # no staging folder left beside it


# Real reports of a task that ran a local session's driver out of heap (spark.driver.memory
# 512m, a task's one value of 2 GB: tests/pipeline/spark/test_spark_errors.py's real run
# below), as Py4J gives them: read while the JVM still answered, or not (it stops itself for
# an OutOfMemoryError, exit code 52, and a report asked for after that cannot be read).
OOM_READ = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.runJob.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 \
failed 1 times, most recent failure: Lost task 0.0 in stage 0.0 (TID 0) (192.0.2.2 executor \
driver): java.lang.OutOfMemoryError: Java heap space
\tat org.apache.spark.unsafe.types.UTF8String.repeat(UTF8String.java:1200)
\tat org.apache.spark.sql.execution.BufferedRowIterator.hasNext(BufferedRowIterator.java:44)
"""
OOM_UNREAD = (
    "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.runJob. (the "
    "JVM's report could not be read: ConnectionRefusedError(111, 'Connection refused'))"
)
# Issue 50's: a `neardup add --engine spark` of one 2.6 GB file, the cause only in the log.
OOM_SHUT_DOWN = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.runJob.
: org.apache.spark.SparkException: Job 0 cancelled because SparkContext was shut down
\tat org.apache.spark.scheduler.DAGScheduler.$anonfun$cleanUpAfterSchedulerStop$1(\
DAGScheduler.scala:1307)
"""
EXECUTOR_OOM = """An error occurred while calling o412.parquet.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 3 in stage 2.0 \
failed 4 times, most recent failure: Lost task 3.3 in stage 2.0 (TID 41) (10.0.0.7 executor 2): \
java.lang.OutOfMemoryError: Java heap space
\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)
"""


def test_a_jvm_out_of_memory_names_the_heap_and_the_setting_that_raises_it():
    from neardup.pipeline.executors.spark.failures import OOM_EXIT, explained, failure_cause

    def line(text: str, local: bool, code: int | None) -> str:
        got = explained(text, failure_cause(RuntimeError(text)), local, code)
        assert "\n" not in got and len(got) <= 400
        return got

    driver = "the Spark driver ran out of Java heap (java.lang.OutOfMemoryError"
    setting = "raise spark.driver.memory, e.g. --spark-conf spark.driver.memory=4g"
    for text, code in ((OOM_READ, None), (OOM_UNREAD, OOM_EXIT), (OOM_SHUT_DOWN, OOM_EXIT)):
        got = line(text, True, code)
        assert got.startswith(driver) and setting in got, got
    assert "Java heap space" in line(OOM_READ, True, None)
    assert "exited with code 52" in line(OOM_SHUT_DOWN, True, OOM_EXIT)
    # The driver's JVM, on a cluster too: the task ran in it ("executor driver"), or it
    # exited for an OutOfMemoryError.
    assert line(OOM_READ, False, None).startswith(driver)
    assert line(OOM_SHUT_DOWN, False, OOM_EXIT).startswith(driver)
    # An executor of a cluster: its own heap.
    got = line(EXECUTOR_OOM, False, None)
    assert got.startswith("a Spark executor ran out of Java heap (java.lang.OutOfMemoryError")
    assert "--spark-conf spark.executor.memory=4g" in got
    lost = "ExecutorLostFailure (executor 1 exited caused by one of the running tasks) Reason: "
    assert "spark.executor.memory" in line(lost + "Command exited with code 52", False, None)
    # Shut down with no exit code to read (a JVM this process did not start): the hint.
    got = line(OOM_SHUT_DOWN, True, None)
    assert got.startswith("org.apache.spark.SparkException: Job 0 cancelled because SparkContext")
    assert "OutOfMemoryError" in got and "spark.driver.memory" in got
    assert line(OOM_SHUT_DOWN, True, 1).endswith(
        "(the driver's JVM exited with code 1: see its log)"
    )
    big = "Total size of serialized results of 3 tasks (1100.0 MiB) is bigger than "
    assert "spark.driver.maxResultSize=4g" in line(big + "spark.driver.maxResultSize", True, None)
    assert line(JAVA_FAILURE, True, None) == "java.io.IOException: No space left on device"


def test_an_unreadable_report_still_gives_a_line():
    from neardup.pipeline.executors.spark.failures import UNREADABLE, error_text, failure_line

    class Gone(Exception):
        errmsg = "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.runJob."

        def __str__(self) -> str:
            raise ConnectionRefusedError(111, "Connection refused")

    assert UNREADABLE in error_text(Gone())
    got = failure_line(Gone(), None)
    assert "\n" not in got and "spark.driver.memory" in got, got


REAL_OOM = """
import sys
from neardup.pipeline.executors.spark.session import spark_session
from neardup.index.engines import spark_jobs as spark_feed
spark = spark_session("local[1]", {"spark.driver.memory": "512m"})
rows = spark.range(1).selectExpr("repeat('x', CAST(id AS INT) + 2000000000) AS s").rdd
try:
    spark_feed._run(spark.sparkContext, rows, lambda part: (b"" for _ in part), [0])
except Exception as err:
    print("LINE:", err)
"""


def test_a_real_task_out_of_the_drivers_heap_says_so_in_one_line(tmp_path):
    """A task of a local session (its driver's heap 512m, Spark's least) that asks for a
    2 GB string: the add's job runner (`spark_feed._run`) reports the driver's heap and the
    setting, whether the JVM's report could still be read or not."""
    import os
    import subprocess
    import sys

    pytest.importorskip("pyspark", reason="the Spark extra is not installed")
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        pytest.skip("no Java runtime")
    done = subprocess.run(
        [sys.executable, "-c", REAL_OOM],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("LINE:")]
    assert lines, done.stdout + done.stderr[-3000:]
    assert lines[0].startswith(
        "LINE: Spark stage add failed: the Spark driver ran out of Java heap"
    )
    assert "--spark-conf spark.driver.memory=4g" in lines[0]
