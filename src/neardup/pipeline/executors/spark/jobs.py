"""One scan's Spark jobs: the implementation of each shared stage (`StageSteps`) on Spark.

ingest and sketch (one task per range of an input, cut by the embedded engine's rule,
writing its own files: `spark/ingest_ranges.py`, `spark/ingest.py`) ->
equivalence classes (a window over the shingle-set fingerprint) -> bucket keys (Python
tasks over the ingest files: `spark/signatures.py`) -> candidate pairs (the keys dealt by
table and key, each partition's buckets paired by the embedded numba rule)
-> verification (the embedded test over the joined signatures) -> the clustering (on the
driver by the embedded function while the verified graph is small enough, else
large-star / small-star rounds and the rule per component on the executors) ->
assignments. Intermediate tables are written as Parquet in the work folder, which breaks
Spark's lineage and lets a stage restart from the last one (the page text once, in the
ingest tasks' files, which `pages_raw`, `links` and `sketches` are read from); `publish`
then writes the run's tables from the executors, as datasets in the staging folder
(`spark/publish.py`), so no large table passes through the driver.

The near stage takes its band shape, bucket keys, bucket rule, scores and verification test
from `neardup.pipeline.steps.near_pairs` and `neardup.kernels.buckets` (through the batch
functions of `spark.kernels`), as the embedded engine does. What is Spark's own is the
distributed plumbing between them: the equivalence classes as a window (the lowest
(page key, doc_id) per shingle-set fingerprint, the embedded `equivalence_classes`, with the
keys from the embedded `page_keys`), the partitioning that puts each bucket in one task, and
the `pairs` table as a union (the embedded `write_pairs`).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from neardup.config import Settings, SettingsError
from neardup.ingest.eligibility import enough_words_sql
from neardup.kernels.sorting import sorted_distinct
from neardup.pipeline.executors.base import StagesOutcome
from neardup.pipeline.executors.spark.components import connected_components
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
    tasks_frame,
)
from neardup.pipeline.executors.spark.kernels import (
    BUCKET_PAIRS_SCHEMA,
    CLUSTER_SCHEMA,
    EDGE_SCHEMA,
    KEY_BLOBS_SCHEMA,
    bucket_blob_batches,
    cluster_component,
    representative_batches,
    verify_batches,
    with_input_idx,
)
from neardup.pipeline.executors.spark.publish import named_jobs, publish_tables
from neardup.pipeline.executors.spark.run_parts import (
    PARTS_SCHEMA,
    SIZED,
    SIZED_SCHEMA,
    run_parts_partition,
)
from neardup.pipeline.executors.spark.signatures import (
    WANTED_SCHEMA,
    rep_key_blobs,
    wanted_signatures,
)
from neardup.pipeline.executors.spark.tasks import on_one_thread
from neardup.pipeline.steps.clusters import ASSIGN_SCHEMA, cluster_graph
from neardup.pipeline.steps.ingest import PAGES_RAW_SCHEMA
from neardup.pipeline.steps.near_pairs import band_shape, class_representative_sql
from neardup.store.pages_table import sized_sql

SPARK_METHODS = ("minhash", "supershingles")
# The largest verified graph (edges between class representatives) clustered on the driver;
# above it, on the executors. A Spark setting, so `--spark-conf` overrides it (0: always on
# the executors). 10 M edges are about 240 MB of Arrow on the driver, under Spark's default
# 1 GB `spark.driver.maxResultSize`, and cover about 80 M web pages at 0.12 edges a page.
DRIVER_GRAPH_CONF = "spark.neardup.driverGraphMaxEdges"
DRIVER_GRAPH_EDGES = 10_000_000
# Parts of bucket keys per shuffle partition (`kernels.key_blob_batches`): several, so that
# the hash of a part onto the partitions evens out.
BLOB_PARTS = 4
INGEST_SCHEMAS = {RECORDS: RECORDS_SCHEMA, TEXTS: TEXTS_SCHEMA, LINKS: LINKS_SCHEMA}
# Work tables read as projections of the per-range ingest files (`SparkJobs.table`), never
# copied: (folder, its document id column, the columns).
INGEST_VIEWS = {
    "pages_raw": (RECORDS, "doc_id", PAGES_RAW_SCHEMA.names),
    "links": (LINKS, "src_doc", ["src_doc", "pos", "dst_url"]),
    "sketches": (
        TEXTS,
        "doc_id",
        [
            "doc_id",
            "n_tokens",
            "n_shingles",
            "lexical_fp",
            "shingle_fp",
            "minhash",
            "supers",
            "order_key",
        ],
    ),
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

    def _write_small(self, table: pa.Table, name: str) -> Any:
        """Write `table`, computed on the driver, as the work table `name` (one part file,
        by pyarrow: no Spark job) and read it back."""
        import pyarrow.parquet as pq

        folder = self.work / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        pq.write_table(table, folder / "part-0.parquet")
        self.schemas[name] = _spark_schema(table.schema)
        return self.table(name)

    def rows(self, name: str) -> int:
        """The rows of the saved work table `name`, from its Parquet footers: no Spark job
        (the driver mounts the work folder)."""
        import pyarrow.parquet as pq

        return sum(pq.read_metadata(f).num_rows for f in (self.work / name).glob("*.parquet"))

    def table(self, name: str) -> Any:
        """The work table `name`; `pages_raw`, `links` and `sketches` are read from the
        ingest tasks' own files (`INGEST_VIEWS`), not from copies of them."""
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
        (`spark/ingest.py`), and `sketches` is a projection of their files."""
        self.current_stage = "sketch"

    def features(self, outcome: StagesOutcome) -> None:
        # Unreachable: `check_settings` refuses the feature methods before the session starts.
        raise SettingsError(f"the Spark engine does not run method {self.settings.method}")

    def near(self, outcome: StagesOutcome) -> None:
        """Equivalence classes, candidate pairs and verified edges between class
        representatives, then the `pairs` table (verified plus identical pairs)."""
        self.current_stage = "near"
        settings = self.settings
        spark = self.spark
        eligible = self.table("sketches").where(enough_words_sql(settings.min_tokens))
        eligible.createOrReplaceTempView("eligible")
        classes = self.save(
            spark.sql(
                f"SELECT doc_id, order_key, {class_representative_sql()} AS class_id FROM eligible"
            ),
            "classes",
        )
        classes.createOrReplaceTempView("classes")
        # The class representatives are the eligible pages less the few that are not (the
        # page keys came with the sketches); the band keys of the representatives are
        # computed by Python tasks that read the signatures where the ingest left them
        # (`spark/signatures.py`), so no signature passes through Spark's rows.
        self.save(classes.where("class_id <> doc_id").select("doc_id"), "non_reps")
        # Every bucket whole in one partition (hashed on table and key), where the embedded
        # bucket rule runs on it; a pair found in several tables is kept once.
        max_bucket = settings.max_bucket_pairs
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
        parts = partitions * BLOB_PARTS
        work = str(self.work)
        bucket_pairs = self.save(
            self._per_range(
                lambda it: rep_key_blobs(it, work, "non_reps", settings, parts), KEY_BLOBS_SCHEMA
            )
            .repartition(partitions, "part")
            .mapInArrow(
                on_one_thread(lambda it: bucket_blob_batches(it, max_bucket)),
                _spark_schema(BUCKET_PAIRS_SCHEMA),
            ),
            "bucket_pairs",
        )
        candidates = self.save(
            bucket_pairs.where("doc_a IS NOT NULL").select("doc_a", "doc_b").distinct(),
            "candidates",
        )
        stats = (
            bucket_pairs.where("doc_a IS NULL")
            .selectExpr(
                "coalesce(sum(emitted), 0) AS emitted",
                "coalesce(sum(large_buckets), 0) AS large_buckets",
            )
            .collect()[0]
        )
        candidates.createOrReplaceTempView("candidates")
        self._signatures_of(
            candidates.selectExpr("doc_a AS doc_id").union(candidates.selectExpr("doc_b")),
            "candidate_docs",
        ).createOrReplaceTempView("candidate_sketches")
        pairs_with_sketches = spark.sql(
            """
            SELECT c.doc_a, c.doc_b, x.minhash AS minhash_a, y.minhash AS minhash_b,
                x.supers AS supers_a, y.supers AS supers_b
            FROM candidates AS c
            JOIN candidate_sketches AS x ON x.doc_id = c.doc_a
            JOIN candidate_sketches AS y ON y.doc_id = c.doc_b
            """
        )
        edges = self.save(
            pairs_with_sketches.mapInArrow(
                on_one_thread(lambda it: verify_batches(it, settings)), _spark_schema(EDGE_SCHEMA)
            ),
            "edges",
        )
        edges.createOrReplaceTempView("edges")
        pairs = spark.sql(
            """
            SELECT doc_a, doc_b, similarity,
                CAST(CASE WHEN agree >= 0 THEN agree END AS TINYINT) AS supershingles_agree,
                'near' AS kind
            FROM edges
            UNION ALL
            SELECT class_id, doc_id, CAST(1.0 AS FLOAT), CAST(NULL AS TINYINT), 'identical'
            FROM classes WHERE doc_id <> class_id
            """
        )
        self.save(pairs, "pairs")
        outcome.bands, outcome.rows_per_band = band_shape(settings)
        outcome.candidates = self.rows("candidates")
        outcome.candidates_emitted = int(stats["emitted"])
        outcome.large_buckets = int(stats["large_buckets"])
        outcome.verified_pairs = self.rows("edges")
        outcome.pairs_rows = self.rows("pairs")

    def _per_range(self, body: Any, schema: pa.Schema) -> Any:
        """`body` (a mapInArrow function over RANGES_SCHEMA rows) run by one task per
        ingest range."""
        places = [(r.range_idx, r.shift, r.end, r.lines_before) for r in self.ranges]
        rows = self.spark.sparkContext.parallelize(places, max(1, len(places)))
        frame = self.spark.createDataFrame(rows, _spark_schema(RANGES_SCHEMA))
        return frame.mapInArrow(on_one_thread(body), _spark_schema(schema))

    def _signatures_of(self, docs: Any, name: str) -> Any:
        """(doc_id, minhash, supers) of the pages `docs` (a doc_id column, repeats allowed),
        read from the ingest files by Python tasks (`spark/signatures.py`): only the few
        rows a join needs cross into Spark."""
        self.save(docs.distinct(), name)
        work = str(self.work)
        return self._per_range(lambda it: wanted_signatures(it, work, name), WANTED_SCHEMA)

    @staticmethod
    def _class_nodes(classes: Any) -> Any:
        """(class_id, weight, order_key) of the classes among the rows `classes`: the weight
        is the class's pages, the order key its representative's (the row whose doc_id is
        the class), in one pass over the rows."""
        from pyspark.sql import functions as F

        rep_key = F.when(F.col("doc_id") == F.col("class_id"), F.col("order_key"))
        return classes.groupBy("class_id").agg(
            F.count("*").alias("weight"), F.max(rep_key).alias("order_key")
        )

    def cluster(self, outcome: StagesOutcome) -> None:
        """Components of the verified graph, the clustering rule per component, and every
        eligible page's cluster, component, identical group and class.

        A graph of at most `DRIVER_GRAPH_CONF` edges (the verified pairs between class
        representatives: about 0.12 a page on web crawls, so a few megabytes at a million
        pages) is clustered on the driver by the embedded engine's own function
        (`steps.clusters.cluster_graph`); a larger one by large-star / small-star rounds
        and the rule per component on the executors. Both give the embedded clusters."""
        self.current_stage = "cluster"
        limit = int(self.spark.conf.get(DRIVER_GRAPH_CONF, str(DRIVER_GRAPH_EDGES)))
        if outcome.verified_pairs <= limit:  # counted by the near stage
            self._cluster_on_driver()
        else:
            self._cluster_distributed()
        self._assign()

    def _cluster_on_driver(self) -> None:
        """The views `cluster_of_rep`, `components` and `identical` (per representative
        that has an edge), computed on the driver from the collected edges."""
        from pyspark.sql import functions as F

        edges = self.table("edges").toArrow()
        a = edges.column("doc_a").to_numpy()
        b = edges.column("doc_b").to_numpy()
        touched = sorted_distinct(np.concatenate([a, b]))
        nodes = self._write_small(pa.table({"class_id": touched}), "graph_nodes")
        info = (
            self._class_nodes(self.table("classes").join(F.broadcast(nodes), "class_id"))
            .toArrow()
            .sort_by("class_id")
        )
        same_nodes = np.array_equal(info.column("class_id").to_numpy(), touched)
        if not same_nodes or info.column("order_key").null_count:
            raise RuntimeError("a node of the verified graph has no class or no page key")
        cluster, component, identical = cluster_graph(
            touched.size,
            np.searchsorted(touched, a),
            np.searchsorted(touched, b),
            edges.column("similarity").to_numpy(),
            edges.column("agree").to_numpy(),
            info.column("weight").to_numpy(),
            info.column("order_key").to_numpy(),
            self.settings,
        )
        labels = pa.table(
            {
                "doc_id": touched,
                "cluster_doc": touched[cluster],
                "component": touched[component],
                "identical": touched[identical],
            }
        )
        graph = self._write_small(labels, "graph_labels")
        graph.select("doc_id", "cluster_doc").createOrReplaceTempView("cluster_of_rep")
        graph.select("doc_id", "component").createOrReplaceTempView("components")
        graph.selectExpr("doc_id", "identical AS component").createOrReplaceTempView("identical")

    def _cluster_distributed(self) -> None:
        """The same views from large-star / small-star rounds over the edges and the rule
        run per component on the executors (`spark.kernels.cluster_component`)."""

        settings = self.settings
        spark = self.spark
        edges = self.table("edges")
        components = self.save(
            connected_components(
                edges.selectExpr("doc_a AS a", "doc_b AS b"), self.save
            ).withColumnRenamed("node", "doc_id"),
            "components",
        )
        sizes = self._class_nodes(self.table("classes"))
        # Both sides are read back from Parquet: cogrouping two plans that share the
        # components' lineage trips Spark's self-join ambiguity check.
        nodes = self.save(
            components.join(sizes.withColumnRenamed("class_id", "doc_id"), "doc_id"), "nodes"
        )
        component_edges = self.save(
            edges.join(components.withColumnRenamed("doc_id", "doc_a"), "doc_a").select(
                "component", "doc_a", "doc_b", "similarity"
            ),
            "component_edges",
        )

        def rule(left: Any, right: Any) -> Any:
            return cluster_component(left, right, settings)

        clustered = (
            nodes.groupBy("component")
            .cogroup(component_edges.groupBy("component"))
            .applyInArrow(on_one_thread(rule), _spark_schema(CLUSTER_SCHEMA))
        )
        self.save(clustered, "cluster_of_rep").createOrReplaceTempView("cluster_of_rep")
        components.createOrReplaceTempView("components")
        identical = spark.createDataFrame([], "doc_id bigint, component bigint")
        if settings.has_supershingles:
            full = edges.where(f"agree = {settings.supershingle_count}").selectExpr(
                "doc_a AS a", "doc_b AS b"
            )
            if not full.isEmpty():
                identical = self.save(
                    connected_components(full, self.save).withColumnRenamed("node", "doc_id"),
                    "identical",
                )
        identical.createOrReplaceTempView("identical")

    def _assign(self) -> None:
        """The rows of `assignments` that are not a page's own (`SIZED`, with cluster sizes,
        dealt by input), from the views the clustering left. A page that represents its
        own cluster has resemblance 1 to its representative; only the others meet the
        signatures, theirs and their representative's, for the estimate."""
        settings = self.settings
        spark = self.spark
        # Only the pages of a class of several pages or of a class that is a node of the
        # graph: every other eligible page is alone in its cluster, component, identical
        # group and class, and the task that writes its range's pages gives it that row
        # (`spark/run_parts.py`), so most pages never cross this job.
        # Saved: three plans read it (the pages that moved, their own rows, the others).
        assigned = self.save(
            spark.sql(
                """
            WITH shared AS (
                SELECT class_id FROM classes WHERE class_id <> doc_id
                UNION
                SELECT doc_id AS class_id FROM components
            )
            SELECT c.doc_id,
                coalesce(r.cluster_doc, c.class_id) AS cluster_id,
                coalesce(m.component, c.class_id) AS component_id,
                coalesce(i.component, c.class_id) AS identical_id,
                c.class_id
            FROM classes AS c
            LEFT SEMI JOIN shared AS s ON s.class_id = c.class_id
            LEFT JOIN cluster_of_rep AS r ON r.doc_id = c.class_id
            LEFT JOIN components AS m ON m.doc_id = c.class_id
            LEFT JOIN identical AS i ON i.doc_id = c.class_id
            """
            ),
            "assigned",
        )
        assigned.createOrReplaceTempView("assigned")
        moved = assigned.where("cluster_id <> doc_id")
        self._signatures_of(
            moved.select("doc_id").union(moved.selectExpr("cluster_id")), "moved_docs"
        ).createOrReplaceTempView("signatures")
        own = spark.sql(
            "SELECT *, CAST(1.0 AS FLOAT) AS similarity_to_representative "
            "FROM assigned WHERE cluster_id = doc_id"
        )
        others = spark.sql(
            """
            SELECT a.doc_id, a.cluster_id, a.component_id, a.identical_id, a.class_id,
                s.minhash AS minhash_a, t.minhash AS minhash_b
            FROM assigned AS a
            JOIN signatures AS s ON s.doc_id = a.doc_id
            JOIN signatures AS t ON t.doc_id = a.cluster_id
            WHERE a.cluster_id <> a.doc_id
            """
        ).mapInArrow(
            on_one_thread(lambda it: representative_batches(it, settings)),
            _spark_schema(ASSIGN_SCHEMA),
        )
        own.select(*ASSIGN_SCHEMA.names).unionByName(others).createOrReplaceTempView("assignments")
        # Sized (the pages table's cluster sizes) and dealt by range: the task that writes a
        # range's pages reads its folder (`spark/run_parts.py`).
        firsts = np.array([r.shift for r in self.ranges], dtype=np.int64)
        indexes = np.array([r.range_idx for r in self.ranges], dtype=np.int32)
        schema = SIZED_SCHEMA.append(pa.field("input_idx", pa.int32()))
        sized = (
            spark.sql(sized_sql("assignments"))
            .mapInArrow(
                on_one_thread(lambda it: with_input_idx(it, firsts, indexes)),
                _spark_schema(schema),
            )
            .withColumnRenamed("input_idx", RANGE_IDX)  # a range's index, here
        )
        with named_jobs(spark, f"save {SIZED}"):
            sized.repartition(RANGE_IDX).write.mode("overwrite").partitionBy(RANGE_IDX).parquet(
                str(self.work / SIZED)
            )

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
