"""The Spark cluster stage: components of the verified graph, the clustering rule per
component, and every eligible page's cluster, component, identical group and class.

A graph of at most `DRIVER_GRAPH_CONF` edges (the verified pairs between class
representatives: about 0.12 a page on web crawls, so a few megabytes at a million pages) is
clustered on the driver by the embedded engine's own function (`steps.clusters.
cluster_graph`); a larger one by large-star / small-star rounds and the rule per component
on the executors (`spark/components.py`, `spark.kernels.cluster_component`). Both give the
embedded clusters. The pages that moved to another page's cluster meet their
representative's signature by document id in the ingest tasks' signature files
(`near_files.representative_batches`), not through a join.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.kernels.sorting import found_in_sorted, sorted_distinct
from neardup.pipeline.executors.base import StagesOutcome
from neardup.pipeline.executors.spark.components import connected_components
from neardup.pipeline.executors.spark.ingest_ranges import RANGE_IDX
from neardup.pipeline.executors.spark.kernels import (
    CLUSTER_SCHEMA,
    cluster_component,
    with_input_idx,
)
from neardup.pipeline.executors.spark.near_files import (
    EDGES,
    SHARED,
    RangeRows,
    representative_batches,
)
from neardup.pipeline.executors.spark.publish import named_jobs
from neardup.pipeline.executors.spark.run_parts import SIZED, SIZED_SCHEMA
from neardup.pipeline.executors.spark.tasks import on_one_thread
from neardup.pipeline.steps.clusters import ASSIGN_SCHEMA, cluster_graph, resemblance_to
from neardup.store.pages_table import sized_sql

if TYPE_CHECKING:
    from neardup.pipeline.executors.spark.jobs import SparkJobs

# The largest verified graph (edges between class representatives) clustered on the driver;
# above it, on the executors. A Spark setting, so `--spark-conf` overrides it (0: always on
# the executors). 10 M edges are about 240 MB of Arrow on the driver, under Spark's default
# 1 GB `spark.driver.maxResultSize`, and cover about 80 M web pages at 0.12 edges a page.
DRIVER_GRAPH_CONF = "spark.neardup.driverGraphMaxEdges"
DRIVER_GRAPH_EDGES = 10_000_000


def run_cluster(jobs: SparkJobs, outcome: StagesOutcome) -> None:
    """The cluster stage: the graph clustered where it fits (see the module docstring),
    then the sized assignments of the pages that are not alone."""
    jobs.current_stage = "cluster"
    limit = int(jobs.spark.conf.get(DRIVER_GRAPH_CONF, str(DRIVER_GRAPH_EDGES)))
    # both counted by the near stage
    if outcome.verified_pairs <= limit and jobs.shared_pages <= limit:
        cluster_on_driver(jobs)
    else:
        cluster_distributed(jobs)
        assign(jobs)


def _class_nodes(classes: Any) -> Any:
    """(class_id, weight, order_key) of the classes among the rows `classes`: the weight is
    the class's pages, the order key its representative's (the row whose doc_id is the
    class), in one pass over the rows."""
    from pyspark.sql import functions as F

    rep_key = F.when(F.col("doc_id") == F.col("class_id"), F.col("order_key"))
    return classes.groupBy("class_id").agg(
        F.count("*").alias("weight"), F.max(rep_key).alias("order_key")
    )


def cluster_on_driver(jobs: SparkJobs) -> None:
    """The sized assignments of the pages that are not alone, computed on the driver from
    the edges and the classes of several pages, which the driver reads where the near
    stage's tasks wrote them (the work folder it mounts), and written dealt by range
    (`SIZED`): the graph clustered by `cluster_graph`, each page labelled by its class,
    the pages that moved compared with their representative by `clusters.resemblance_to`, as
    `steps.clusters.run_clusters` does (`ASSIGNED_SQL` and `sized_sql` on Spark)."""
    work, starts = jobs.work, _starts(jobs)
    edges = pq.read_table(work / EDGES)
    shared = pq.read_table(work / SHARED)
    a = edges.column("doc_a").to_numpy()
    b = edges.column("doc_b").to_numpy()
    touched = sorted_distinct(np.concatenate([a, b]))
    classes = shared.column("class_id").to_numpy()
    kinds, sizes = np.unique(classes, return_counts=True)
    cluster, component, identical = cluster_graph(
        touched.size,
        np.searchsorted(touched, a),
        np.searchsorted(touched, b),
        edges.column("similarity").to_numpy(),
        edges.column("agree").to_numpy(),
        _lookup(kinds, sizes, touched, 1),  # a node's weight: its class's pages
        RangeRows(work, starts, "order")[touched],
        jobs.settings,
    )
    docs = np.union1d(shared.column("doc_id").to_numpy(), touched)
    class_of = docs.copy()  # a node that is alone in its class is its own class
    class_of[np.searchsorted(docs, shared.column("doc_id").to_numpy())] = classes

    def label(labels: np.ndarray) -> np.ndarray:
        return _lookup(touched, touched[labels], class_of, class_of)

    cluster_id = label(cluster)
    similarity = np.ones(docs.size, dtype=np.float32)
    moved = np.flatnonzero(cluster_id != docs)
    signatures = RangeRows(work, starts, "minhash")
    similarity[moved] = resemblance_to(docs[moved], cluster_id[moved], signatures)
    _, inverse, counts = np.unique(cluster_id, return_inverse=True, return_counts=True)
    sized = pa.table(
        [
            docs,
            cluster_id,
            label(component),
            label(identical),
            class_of,
            similarity,
            counts[inverse.reshape(-1)].astype(np.int64),
        ],
        schema=SIZED_SCHEMA,
    )
    shutil.rmtree(work / SIZED, ignore_errors=True)
    bounds = np.searchsorted(docs, starts)
    for r, (lo, hi) in enumerate(zip(bounds, [*bounds[1:], docs.size], strict=True)):
        if hi > lo:
            folder = work / SIZED / f"{RANGE_IDX}={r}"
            folder.mkdir(parents=True)
            pq.write_table(sized.slice(lo, hi - lo), folder / "part-00000.parquet")


def _starts(jobs: SparkJobs) -> np.ndarray:
    """The ranges' first document ids, in range order."""
    return np.array([r.shift for r in jobs.ranges], dtype=np.int64)


def _lookup(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray, default: Any) -> Any:
    """`values` of the sorted `keys` at each of `wanted`, `default` where a key is absent
    (an array like `wanted`, or one value)."""
    if not keys.size:
        return np.broadcast_to(default, wanted.shape).copy()
    at, hit = found_in_sorted(keys, wanted)
    return np.where(hit, values[at], default)


def cluster_distributed(jobs: SparkJobs) -> None:
    """The same views from large-star / small-star rounds over the edges and the rule run
    per component on the executors (`spark.kernels.cluster_component`)."""
    settings = jobs.settings
    spark = jobs.spark
    edges = jobs.table(EDGES)
    components = jobs.save(
        connected_components(
            edges.selectExpr("doc_a AS a", "doc_b AS b"), jobs.save
        ).withColumnRenamed("node", "doc_id"),
        "components",
    )
    sizes = _class_nodes(jobs.table("classes"))
    # Both sides are read back from Parquet: cogrouping two plans that share the
    # components' lineage trips Spark's self-join ambiguity check.
    nodes = jobs.save(
        components.join(sizes.withColumnRenamed("class_id", "doc_id"), "doc_id"), "nodes"
    )
    component_edges = jobs.save(
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
        .applyInArrow(on_one_thread(rule), jobs.spark_schema(CLUSTER_SCHEMA))
    )
    jobs.save(clustered, "cluster_of_rep").createOrReplaceTempView("cluster_of_rep")
    components.createOrReplaceTempView("components")
    identical = spark.createDataFrame([], "doc_id bigint, component bigint")
    if settings.has_supershingles:
        full = edges.where(f"agree = {settings.supershingle_count}").selectExpr(
            "doc_a AS a", "doc_b AS b"
        )
        if not full.isEmpty():
            identical = jobs.save(
                connected_components(full, jobs.save).withColumnRenamed("node", "doc_id"),
                "identical",
            )
    identical.createOrReplaceTempView("identical")


# Only the pages of a class of several pages or of a class that is a node of the graph:
# every other eligible page is alone in its cluster, component, identical group and class,
# and the task that writes its range's pages gives it that row (`spark/run_parts.py`), so
# most pages never cross this job.
ASSIGNED_SQL = """
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


def assign(jobs: SparkJobs) -> None:
    """The rows of `assignments` that are not a page's own (`SIZED`, with cluster sizes,
    dealt by range), from the views the clustering left. A page that represents its own
    cluster has resemblance 1 to its representative; only the others meet the signatures,
    theirs and their representative's, for the estimate."""
    spark = jobs.spark
    # Saved: two plans read it (the pages that moved, the others).
    assigned = jobs.save(spark.sql(ASSIGNED_SQL), "assigned")
    assigned.createOrReplaceTempView("assigned")
    own = spark.sql(
        "SELECT *, CAST(1.0 AS FLOAT) AS similarity_to_representative "
        "FROM assigned WHERE cluster_id = doc_id"
    )
    work, starts = str(jobs.work), _starts(jobs)
    others = assigned.where("cluster_id <> doc_id").mapInArrow(
        on_one_thread(lambda it: representative_batches(it, work, starts)),
        jobs.spark_schema(ASSIGN_SCHEMA),
    )
    own.select(*ASSIGN_SCHEMA.names).unionByName(others).createOrReplaceTempView("assignments")
    # Sized (the pages table's cluster sizes) and dealt by range: the task that writes a
    # range's pages reads its folder (`spark/run_parts.py`).
    indexes = np.array([r.range_idx for r in jobs.ranges], dtype=np.int32)
    schema = SIZED_SCHEMA.append(pa.field("input_idx", pa.int32()))
    sized = (
        spark.sql(sized_sql("assignments"))
        .mapInArrow(
            on_one_thread(lambda it: with_input_idx(it, starts, indexes)),
            jobs.spark_schema(schema),
        )
        .withColumnRenamed("input_idx", RANGE_IDX)  # a range's index, here
    )
    with named_jobs(spark, f"save {SIZED}"):
        sized.repartition(RANGE_IDX).write.mode("overwrite").partitionBy(RANGE_IDX).parquet(
            str(jobs.work / SIZED)
        )
