"""The Spark engine: the scan's stages as Spark jobs, writing the embedded engine's tables.

The stages and their order are the shared ones (`neardup.pipeline.stages.STAGES`); each is a
method of `SparkJobs` (`spark/jobs.py`). What only this engine does is its setup and teardown
in `SparkEngine.steps`: refusing the settings it does not implement, starting the session
(timed as `spark`), and, once the stages are done, writing the run's tables from the
executors as Parquet datasets in the staging folder (timed as `tables`; `spark/publish.py`).
The pipeline's store build then only creates views over them (`neardup.store.run`): no
table, and no page text, passes through the driver.

A Spark job that fails is reported as `SparkJobError`, one line that names the stage and
the cause (the Python or Java exception's own message, not its traceback; for a JVM out of
memory, which heap and the setting that raises it: `spark/failures.py`); the staging
folder is then removed by the output rule, so no half-written run is left.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from neardup.config import Settings, SettingsError
from neardup.pipeline.executors.base import EngineUnavailableError, StageTimer
from neardup.pipeline.executors.local import default_workers
from neardup.pipeline.executors.spark.failures import failure_line
from neardup.pipeline.executors.spark.jobs import SparkJobs, check_settings
from neardup.pipeline.executors.spark.session import spark_session
from neardup.pipeline.progress import Progress
from neardup.store.outputs import open_folder


class SparkJobError(EngineUnavailableError):
    """A Spark job failed: the engine could not finish the scan. Its message is one line,
    `Spark stage STAGE failed: CAUSE`, which the command line prints as is."""


def _local_folder(work: str | Path) -> Path:
    """The work folder as a path the driver opens: a plain path, or a `file:` URI."""
    text = str(work)
    if text.startswith("file:"):
        return Path(urlsplit(text).path)
    if "://" in text:
        raise ValueError(
            "the Spark work folder must be on a file system the driver mounts (local, "
            "NFS, a FUSE-mounted bucket), since the driver creates and cleans it"
        )
    return Path(text)


class SparkEngine:
    """Stages on Spark: `master` (default `local[*]`, or the session `spark-submit` made),
    `conf` extra Spark settings, `work` the folder for Spark's tables (default: inside the
    staging directory; on a cluster, a path every executor and the driver can reach)."""

    name = "spark"

    def __init__(
        self,
        master: str | None = None,
        conf: dict[str, str] | None = None,
        workers: int | None = None,
        work: str | Path | None = None,
    ) -> None:
        self.master = master
        self.conf = conf
        self.workers = workers if workers and workers > 0 else default_workers()
        self.work = _local_folder(work) if work is not None else None

    @contextmanager
    def steps(
        self,
        inputs: list[str],
        staging: Path,
        settings: Settings,
        base_url: str | None,
        stage: StageTimer,
        progress: Progress,
    ) -> Iterator[SparkJobs]:
        """Refuse what Spark does not run, start the session, yield the steps; when they
        are done, write the run's tables from the executors into the staging folder. A job
        that fails becomes a `SparkJobError` naming its stage."""
        check_settings(settings)
        if self.work is not None:  # Spark overwrites its table folders there: never a user's
            open_folder(self.work, "spark work folder", inputs)
        with stage("spark", "start Spark"):
            spark = spark_session(self.master, self.conf)
        run = SparkJobs(
            spark, self.work or staging / "spark", staging, settings, inputs, base_url, self.workers
        )
        try:
            yield run
            run.current_stage = "tables"
            with stage("tables", "write the run's tables"):
                run.publish()
        except (SettingsError, EngineUnavailableError):
            raise
        except Exception as err:  # Py4J, PySpark's captured errors, the executors' Python
            raise SparkJobError(
                f"Spark stage {run.current_stage} failed: {failure_line(err, spark.sparkContext)}"
            ) from err
