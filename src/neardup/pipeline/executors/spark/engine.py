"""The Spark engine: the scan's stages as Spark jobs, writing the embedded engine's tables.

The stages and their order are the shared ones (`neardup.pipeline.stages.STAGES`); each is a
method of `SparkJobs` (`spark/jobs.py`). What only this engine does is its setup and teardown
in `SparkEngine.steps`: refusing the settings it does not implement, starting the session
(timed as `spark`), and, once the stages are done, copying the tables from Spark's work
folder into the staging layout (timed as `localize`), from which the pipeline builds the
store as for the embedded engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from neardup.config import Settings
from neardup.pipeline.executors.base import StageTimer
from neardup.pipeline.executors.local import default_workers
from neardup.pipeline.executors.spark.jobs import SparkJobs, check_settings
from neardup.pipeline.executors.spark.session import spark_session
from neardup.pipeline.progress import Progress
from neardup.store.outputs import open_folder


def _local_folder(work: str | Path) -> Path:
    """The work folder as a path the driver opens: a plain path, or a `file:` URI."""
    text = str(work)
    if text.startswith("file:"):
        return Path(urlsplit(text).path)
    if "://" in text:
        raise ValueError(
            "the Spark work folder must be on a file system the driver mounts (local, "
            "NFS, a FUSE-mounted bucket): the tables are copied into the run from there"
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
        are done, copy the tables from the work folder into the staging layout."""
        check_settings(settings)
        if self.work is not None:  # Spark overwrites its table folders there: never a user's
            open_folder(self.work, "spark work folder", inputs)
        with stage("spark", "start Spark"):
            spark = spark_session(self.master, self.conf)
        run = SparkJobs(
            spark, self.work or staging / "spark", staging, settings, inputs, base_url, self.workers
        )
        yield run
        with stage("localize", "collect tables"):
            run.localize()
