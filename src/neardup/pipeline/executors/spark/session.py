"""Starting (or joining) the Spark session the Spark engine runs on.

`spark-submit` users get the session their submit created (its master and settings win);
library and CLI users get a local one, `local[*]` unless told otherwise. Python workers must
run the interpreter that has neardup installed, hence `PYSPARK_PYTHON`.
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from typing import Any

from neardup.pipeline.executors import EngineUnavailableError
from neardup.pipeline.executors.spark.jvm_archive import with_archive

DEFAULT_CONF = {
    # Arrow carries every batch between the JVM and the Python kernels.
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "4096",
    # Small local runs should not pay for 200 shuffle partitions; clusters override this.
    "spark.sql.shuffle.partitions": "16",
    "spark.sql.adaptive.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # The driver JVM schedules tasks and passes small Arrow batches between the Python
    # workers and the driver (in local mode it is the executor too); every heavy step of
    # ours is Python. Compiled by the first tier only, it starts sooner and does not spend
    # a core on the second tier's compiler: a 1 M-page scan on local[2] spent 41.5 CPU-s in
    # its JVM with both tiers, 18-20 with the first only (docs/benchmarks.md, issue 47), and
    # an add's session started in 3.4 against 4.0 s. A cluster's executors keep both tiers:
    # Spark's own sorts, joins and shuffles of a large run are theirs. A session already
    # running (spark-submit's, a caller's) is used as it is; a user's own setting wins.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
}


class SparkUnavailableError(EngineUnavailableError):
    """PySpark or Java is missing: the Spark engine cannot start."""


def spark_session(master: str | None = None, conf: dict[str, str] | None = None) -> Any:
    """The active session, or a new one on `master` (default `local[*]`) with `conf`."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise SparkUnavailableError(
            "the Spark engine needs PySpark: pip install 'neardup[spark]'"
        ) from exc
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        raise SparkUnavailableError(
            "the Spark engine needs Java 17 or later (apt-get install openjdk-17-jre-headless)"
        )
    builder = SparkSession.builder.appName("neardup")
    if os.environ.get("PYSPARK_GATEWAY_PORT") and master is None:
        # Under spark-submit: its --master and --conf (spark.pyspark.python for the
        # executors' interpreter among them) are the cluster's; do not override them.
        pass
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = builder.master(master or "local[*]")
    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # spark-submit's driver JVM runs already
        settings = {**DEFAULT_CONF, **(conf or {})}
    else:  # the driver JVM starts here: from the class archive where there is one
        settings = with_archive(conf or {}, DEFAULT_CONF)
    for key, value in settings.items():
        builder = builder.config(key, value)
    with warnings.catch_warnings():
        # PySpark warns about pandas releases it has not caught up with; neardup's Spark
        # stages exchange Arrow batches and never go through pandas.
        warnings.simplefilter("ignore", FutureWarning)
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
