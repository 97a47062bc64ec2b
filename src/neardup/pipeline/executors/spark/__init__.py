"""The Spark engine (`pip install 'neardup[spark]'`): the scan's stages on a Spark cluster,
writing the same tables as the embedded engine. Nothing here is imported unless Spark is
asked for, so the embedded engine needs no Spark."""

import warnings

from neardup.pipeline.executors.spark.engine import SparkEngine
from neardup.pipeline.executors.spark.session import SparkUnavailableError, spark_session

__all__ = ["SparkEngine", "SparkUnavailableError", "spark_session"]

# PySpark warns about pandas releases newer than it knows; these stages exchange Arrow
# batches and do not go through pandas.
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
