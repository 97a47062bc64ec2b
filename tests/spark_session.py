"""One local Spark session for all Spark tests (starting a JVM takes seconds)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark", reason="the Spark extra is not installed")
    from neardup.pipeline.executors.spark.session import spark_session

    session = spark_session("local[2]", {"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()
