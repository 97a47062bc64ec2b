"""One local Spark session for all Spark tests (starting a JVM takes seconds).

On CI (`CI` set) the Spark tests must run: `scripts/setup.sh` installs PySpark and a Java
runtime there, so a missing one is a failure, never a silent skip. On a developer machine
without Java they are skipped with the reason."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def spark():
    on_ci = bool(os.environ.get("CI"))
    if not on_ci:
        pytest.importorskip("pyspark", reason="the Spark extra is not installed")
    from neardup.pipeline.executors.spark.session import SparkUnavailableError, spark_session

    try:
        session = spark_session("local[2]", {"spark.sql.shuffle.partitions": "4"})
    except SparkUnavailableError as err:
        if on_ci:
            raise
        pytest.skip(str(err))
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_run(spark, demo_crawl, tmp_path_factory):
    """The generated crawl scanned once by the Spark engine (local mode), for the tests
    that read a Spark-written run."""
    import neardup

    out = tmp_path_factory.mktemp("spark-runs") / "run"
    return neardup.scan(demo_crawl.warc_paths, out, engine="spark")
