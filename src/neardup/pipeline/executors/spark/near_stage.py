"""The Spark near stage: equivalence classes, candidate pairs and verified edges as tasks
over the files the ingest tasks left (`spark/near_files.py`), then the `pairs` table.

Three jobs of plain Python tasks, each a run of the keys' fine parts, as the embedded
engine's workers run the stage (`steps/near_parts.py`): the classes (every class whole in
a part), the candidate pairs of each part's buckets (`kernels.buckets.partition_pairs`),
and the verification of each pair once (`near_pairs.verify_pairs`). They pass their rows
to each other as files in the work folder, so no key, pair or signature crosses Spark's
rows, its shuffle or the driver; only the `pairs` table (verified plus identical pairs) is
a Spark job. Before (issue 47's measure at a million pages), the classes were a Spark
window over the sketches, the keys went through a shuffle and the candidates' signatures
were read back from the range files and joined: 264 of 715 task-seconds.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from neardup.kernels.buckets import CandidateStats
from neardup.pipeline.executors.base import StagesOutcome
from neardup.pipeline.executors.spark.kernels import EDGE_SCHEMA
from neardup.pipeline.executors.spark.near_files import (
    CLASSES,
    CLASSES_SCHEMA,
    EDGES,
    FINE_PARTS,
    NON_REPS,
    PAIRS,
    SHARED,
    bucket_part,
    class_part,
    parted_count,
    verify_part,
)
from neardup.pipeline.executors.spark.publish import named_jobs
from neardup.pipeline.executors.spark.tasks import on_one_thread
from neardup.pipeline.steps.near_pairs import band_shape
from neardup.pipeline.steps.near_parts import CLASS_PAGES, PART_BYTES

if TYPE_CHECKING:
    from neardup.pipeline.executors.spark.jobs import SparkJobs

R = TypeVar("R")


def part_tasks(jobs: SparkJobs, name: str, count: int, body: Callable[[int], R]) -> list[R]:
    """`body(part)` for parts 0 .. count - 1, a Spark task each (the job named `name`); the
    results in part order. `body` must close over plain values only: it is pickled."""
    context = jobs.spark.sparkContext
    with named_jobs(jobs.spark, name):
        return context.parallelize(range(count), count).map(on_one_thread(body)).collect()


def _parts(rows: int, row_bytes: int, cores: int) -> int:
    """Tasks for `rows` rows of `row_bytes`: one a core, more when a task would hold more
    than `near_parts.PART_BYTES` (the embedded engine's bound on a worker's part)."""
    return min(FINE_PARTS, max(cores, -(-rows * row_bytes // PART_BYTES), 1))


def run_near(jobs: SparkJobs, outcome: StagesOutcome) -> None:
    """Classes, candidate pairs and verified edges between class representatives, then the
    `pairs` table (verified plus identical pairs)."""
    jobs.current_stage = "near"
    settings, work = jobs.settings, jobs.work
    # A work folder given may hold an earlier run's files.
    for folder in (CLASSES, NON_REPS, SHARED, PAIRS, EDGES):
        shutil.rmtree(work / folder, ignore_errors=True)
    starts = np.array([r.shift for r in jobs.ranges], dtype=np.int64)
    cores = int(jobs.spark.sparkContext.defaultParallelism)
    pages = parted_count(work, "class", len(starts))
    classes = min(FINE_PARTS, max(cores, -(-pages // CLASS_PAGES)))
    counts = part_tasks(jobs, "classes", classes, lambda p: class_part(work, p, classes, starts))
    non_reps = sum(n for n, _ in counts)
    jobs.shared_pages = sum(n for _, n in counts)
    for name in (CLASSES, SHARED):
        jobs.schemas[name] = jobs.spark_schema(CLASSES_SCHEMA)
    jobs.table(CLASSES).createOrReplaceTempView("classes")
    jobs.table(SHARED).createOrReplaceTempView("shared_classes")  # classes of several pages

    parts = _parts(parted_count(work, "keys", len(starts)), 16, cores)
    max_bucket = settings.max_bucket_pairs
    stats = CandidateStats()
    for emitted, large, largest in part_tasks(
        jobs, "bucket pairs", parts, lambda p: bucket_part(work, p, parts, starts, max_bucket)
    ):
        stats.emitted += emitted
        stats.large_buckets += large
        stats.largest_bucket = max(stats.largest_bucket, largest)
    candidates = sum(
        part_tasks(jobs, "verify", parts, lambda p: verify_part(work, p, starts, settings))
    )
    shutil.rmtree(work / PAIRS, ignore_errors=True)
    jobs.schemas[EDGES] = jobs.spark_schema(EDGE_SCHEMA)
    jobs.table(EDGES).createOrReplaceTempView("edges")
    # Not saved: the tables stage sorts it once, as it writes the run's `pairs`.
    jobs.frames["pairs"] = jobs.spark.sql(
        """
        SELECT doc_a, doc_b, similarity,
            CAST(CASE WHEN agree >= 0 THEN agree END AS TINYINT) AS supershingles_agree,
            'near' AS kind
        FROM edges
        UNION ALL
        SELECT class_id, doc_id, CAST(1.0 AS FLOAT), CAST(NULL AS TINYINT), 'identical'
        FROM shared_classes WHERE doc_id <> class_id
        """
    )
    outcome.bands, outcome.rows_per_band = band_shape(settings)
    outcome.candidates = candidates
    outcome.candidates_emitted = stats.emitted
    outcome.large_buckets = stats.large_buckets
    outcome.verified_pairs = jobs.rows(EDGES)
    outcome.pairs_rows = outcome.verified_pairs + non_reps  # an identical pair a non-rep
