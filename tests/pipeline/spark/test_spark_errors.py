"""A failed Spark job is one line naming the stage and the cause, and leaves no run."""

from __future__ import annotations

from spark_session import spark  # noqa: F401 - the fixture
from typer.testing import CliRunner

from neardup.cli.main import app
from neardup.pipeline.executors.spark.engine import failure_cause

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
