"""One scan's Spark jobs: the implementation of each shared stage (`StageSteps`) on Spark.

ingest and sketch (one task per range of an input, cut by the embedded engine's rule,
writing its own files, among them its signatures, bucket keys and class rows for the near
stage: `spark/ingest_ranges.py`, `spark/ingest.py`, `spark/near_files.py`) -> the near
stage (`spark/near_stage.py`: equivalence classes, candidate pairs and verification as
part tasks over those files, the embedded engine's rules, then the `pairs` table) -> the
cluster stage (`spark/cluster_stage.py`: on the driver by the embedded function while the
verified graph is small enough, else large-star / small-star rounds and the rule per
component on the executors; then the assignments). Intermediate tables are written as
Parquet in the work folder, which breaks Spark's lineage and lets a stage restart from the
last one (the page text once, in the ingest tasks' files, which `pages_raw` and `links`
are read from); `publish` then writes the run's tables from the executors, as datasets in
the staging folder (`spark/publish.py`), so no large table passes through the driver.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from neardup.config import Settings, SettingsError
from neardup.pipeline.executors.base import StagesOutcome
from neardup.pipeline.executors.spark.cluster_stage import run_cluster
from neardup.pipeline.executors.spark.ingest import (
    LINKS,
    LINKS_SCHEMA,
    RANGES_SCHEMA,
    RECORDS,
    RECORDS_SCHEMA,
    SUMMARY_SCHEMA,
    TEXTS,
    TEXTS_SCHEMA,
    ingest_partition,
)
from neardup.pipeline.executors.spark.ingest_ranges import (
    RANGE_IDX,
    RangeCount,
    RangeShift,
    plan_tasks,
    range_shifts,
    task_count,
    tasks_frame,
)
from neardup.pipeline.executors.spark.near_files import KEYS, SIGS
from neardup.pipeline.executors.spark.near_stage import run_near
from neardup.pipeline.executors.spark.publish import named_jobs, publish_tables
from neardup.pipeline.executors.spark.run_parts import PARTS_SCHEMA, run_parts_partition
from neardup.pipeline.executors.spark.tasks import on_one_thread
from neardup.pipeline.steps.ingest import PAGES_RAW_SCHEMA

SPARK_METHODS = ("minhash", "supershingles")
INGEST_SCHEMAS = {RECORDS: RECORDS_SCHEMA, TEXTS: TEXTS_SCHEMA, LINKS: LINKS_SCHEMA}
# Work tables read as projections of the per-range ingest files (`SparkJobs.table`), never
# copied: (folder, its document id column, the columns).
INGEST_VIEWS = {
    "pages_raw": (RECORDS, "doc_id", PAGES_RAW_SCHEMA.names),
    "links": (LINKS, "src_doc", ["src_doc", "pos", "dst_url"]),
}


def check_settings(settings: Settings) -> None:
    """Refuse, before any work, the settings the Spark stages do not implement."""
    if settings.method not in SPARK_METHODS:
        raise SettingsError(
            f"the Spark engine runs methods {' and '.join(SPARK_METHODS)}; "
            f"run --method {settings.method} on the embedded engine"
        )
    if settings.verify != "sketch":
        raise SettingsError("the Spark engine verifies with the sketch; drop --verify exact")
    if settings.max_shingle_df:
        raise SettingsError(
            "the Spark engine does not drop common shingles (--max-shingle-df); it caps "
            "buckets instead, as the embedded default does"
        )


def _spark_schema(schema: Any) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


class SparkJobs:
    """One scan's Spark jobs, a method per shared stage, and the folder of tables they
    leave. `count` and `features` are refused: `check_settings` keeps their settings out."""

    def __init__(
        self,
        spark: Any,
        work: Path,
        staging: Path,
        settings: Settings,
        inputs: list[str],
        base_url: str | None,
        workers: int,
    ) -> None:
        self.spark = spark
        self.work = work
        self.staging = staging
        self.settings = settings
        self.inputs = inputs
        self.base_url = base_url
        self.workers = workers
        self._stage = "start"
        # Each ingest range's place in the run (its ids, its line numbers), set by the
        # ingest stage
        self.ranges: list[RangeShift] = []
        # The schema each work table was written with: reading it back with its schema
        # spares the Spark job that infers it from the files.
        self.schemas: dict[str, Any] = {
            folder: _spark_schema(schema) for folder, schema in INGEST_SCHEMAS.items()
        }
        # Work tables that are plans, not files (`table` returns them)
        self.frames: dict[str, Any] = {}
        # Pages in classes of several pages, counted by the near stage's class tasks: the
        # cluster stage's driver path holds a row for each
        self.shared_pages = 0
        work.mkdir(parents=True, exist_ok=True)

    @property
    def current_stage(self) -> str:
        """The stage running now: a failure is reported in it."""
        return self._stage

    @current_stage.setter
    def current_stage(self, name: str) -> None:
        """Enter stage `name`; its Spark jobs carry it as their job group, so the event log
        and the UI tell each stage's jobs, tasks, CPU and shuffle bytes apart
        (bench/spark_scale.py reads them from the event log)."""
        self._stage = name
        self.spark.sparkContext.setJobGroup(f"neardup:{name}", f"neardup stage {name}")

    def save(self, df: Any, name: str) -> Any:
        """Write `df` as the table `name` and read it back (a checkpoint)."""
        path = str(self.work / name)
        with named_jobs(self.spark, f"save {name}"):
            df.write.mode("overwrite").parquet(path)
        self.schemas[name] = df.schema
        return self.table(name)

    @staticmethod
    def spark_schema(schema: pa.Schema) -> Any:
        """An Arrow schema as Spark's."""
        return _spark_schema(schema)

    def rows(self, name: str) -> int:
        """The rows of the saved work table `name`, from its Parquet footers: no Spark job
        (the driver mounts the work folder)."""
        import pyarrow.parquet as pq

        return sum(pq.read_metadata(f).num_rows for f in (self.work / name).glob("*.parquet"))

    def table(self, name: str) -> Any:
        """The work table `name`; `pages_raw` and `links` are read from the ingest tasks'
        own files (`INGEST_VIEWS`), not from copies of them."""
        if name in self.frames:
            return self.frames[name]
        if name in INGEST_VIEWS:
            return self._shifted(*INGEST_VIEWS[name])
        return self._read(name)

    def _read(self, name: str) -> Any:
        """The Parquet files of the work folder `name`, with their schema when known."""
        reader = self.spark.read
        if name in self.schemas:
            reader = reader.schema(self.schemas[name])
        return reader.parquet(str(self.work / name))

    def _shifted(self, folder: str, id_column: str, columns: list[str]) -> Any:
        """The per-range files of `folder` with each range's document ids shifted by the
        records of the ranges before it, and its JSONL line numbers by the lines before it
        in its file (`ranges`, a broadcast join), so they are the embedded engine's."""
        from pyspark.sql import functions as F

        shifts = [(r.range_idx, r.shift, r.lines_before) for r in self.ranges] or [(0, 0, 0)]
        shift = self.spark.createDataFrame(
            shifts, f"{RANGE_IDX} int, shift bigint, lines_before bigint"
        )
        frame = (
            self._read(folder)
            .join(F.broadcast(shift), RANGE_IDX)
            .withColumn(id_column, F.col(id_column) + F.col("shift"))
        )
        if "record_offset" in columns:
            frame = frame.withColumn(
                "record_offset", F.col("record_offset") + F.col("lines_before")
            )
        return frame.select(*columns)

    def ingest(self, outcome: StagesOutcome) -> None:
        """Each range of the inputs (`plan_tasks`: the embedded engine's ranges; a URI's
        file whole) read, extracted and sketched by one task that writes its own files
        (`spark/ingest.py`); then the ranges' shifts: the records of the ranges before
        each, and the lines before it in its file."""
        self.current_stage = "ingest"
        settings, base_url, work = self.settings, self.base_url, str(self.work)
        planned = plan_tasks(self.spark, self.inputs)
        for folder in (SIGS, KEYS):  # a work folder given may hold an earlier run's files
            shutil.rmtree(self.work / folder, ignore_errors=True)
        uri_inputs = [p for p in self.inputs if "://" in p]
        summary = (
            tasks_frame(self.spark, planned, uri_inputs)
            .mapInArrow(
                on_one_thread(lambda it: ingest_partition(it, settings, base_url, work)),
                _spark_schema(SUMMARY_SCHEMA),
            )
            .collect()
        )
        counts = [RangeCount(r[RANGE_IDX], r["records"], r["lines"]) for r in summary]
        self.ranges = range_shifts(planned, counts)
        outcome.records = self.ranges[-1].end if self.ranges else 0
        outcome.formats = Counter()
        for row in summary:
            outcome.formats.update(json.loads(row["formats"]))
        outcome.with_text = sum(outcome.formats.values())

    def count(self, outcome: StagesOutcome) -> None:
        # Unreachable: `check_settings` refuses --max-shingle-df before the session starts.
        raise SettingsError("the Spark engine does not drop common shingles (--max-shingle-df)")

    def sketch(self, outcome: StagesOutcome) -> None:
        """Nothing left to do: the ingest tasks sketched each text while they held it
        (`spark/ingest.py`); the run's `sketches` are written from their files."""
        self.current_stage = "sketch"

    def features(self, outcome: StagesOutcome) -> None:
        # Unreachable: `check_settings` refuses the feature methods before the session starts.
        raise SettingsError(f"the Spark engine does not run method {self.settings.method}")

    def near(self, outcome: StagesOutcome) -> None:
        """Equivalence classes, candidate pairs and verified edges as tasks over the ingest
        tasks' files, then the `pairs` table (`spark/near_stage.py`)."""
        run_near(self, outcome)

    def cluster(self, outcome: StagesOutcome) -> None:
        """The verified graph clustered, and the sized assignments of the pages that are
        not alone (`spark/cluster_stage.py`)."""
        run_cluster(self, outcome)

    def _per_range(self, body: Any, schema: pa.Schema) -> Any:
        """`body` (a mapInArrow function over RANGES_SCHEMA rows) run over the ingest
        ranges, a run of neighbouring ranges a task (`ingest_ranges.task_count`)."""
        places = [(r.range_idx, r.shift, r.end, r.lines_before) for r in self.ranges]
        rows = self.spark.sparkContext.parallelize(places, task_count(self.spark, len(places)))
        frame = self.spark.createDataFrame(rows, _spark_schema(RANGES_SCHEMA))
        return frame.mapInArrow(on_one_thread(body), _spark_schema(schema))

    def publish(self) -> dict[str, Any]:
        """Write the run's tables into the staging folder as datasets, from the executors
        (`spark/publish.py`; each range's pages, text and sketches by one task,
        `spark/run_parts.py`); return the summary's figures. The work folder's
        intermediate tables are removed when they lie in the staging folder."""
        work, staging = str(self.work), str(self.staging)
        num_perm, min_tokens = self.settings.num_perm, self.settings.min_tokens
        keep_text = self.settings.keep_text
        parts = self._per_range(
            lambda it: run_parts_partition(it, work, staging, num_perm, min_tokens, keep_text),
            PARTS_SCHEMA,
        )
        figures = publish_tables(
            self.spark, self.table, self.save, self.staging, parts.collect, self.rows(LINKS)
        )
        if self.work.is_relative_to(self.staging):
            shutil.rmtree(self.work)
        return figures
