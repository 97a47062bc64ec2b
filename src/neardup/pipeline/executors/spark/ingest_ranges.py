"""The Spark ingest's tasks: one per range of an input, cut by the embedded engine's rule.

Why ranges: with one task per input file, a crawl published as a few large files, or one
JSONL file, kept one executor core busy while the rest waited (issue 47: 279 s on Spark
`local[2]` against 80 s embedded for one 2.65 GB file). Both engines cut their inputs with
`ingest/input_ranges.py` (`plan_ranges`), so a range is the same span of the same file for
either, and its records come out in the same order with the same offsets.

A task's files carry its range's index (`RANGE_IDX`), and its document ids count from 0;
after the ingest the driver shifts each range's ids by the records of the ranges before it
and its JSONL line numbers (`record_offset`) by the lines of the earlier ranges of the same
file (`range_shifts`): the embedded engine's ids and offsets, from a few numbers a range.

A URI (`s3a://`, `hdfs://`, `file://`) is read through Spark's `binaryFile` source, which
hands a task a whole file's bytes: each such file stays one task, read whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from neardup.ingest.input_ranges import InputRange, plan_ranges, range_bytes
from neardup.ingest.input_sizes import local_size

RANGE_IDX = "range_idx"  # the column that names a work file's range, in range order
# The kind of a file that Spark's `binaryFile` source reads for its task (its listing names
# it `file:/...`, `s3a://...`): the task detects the format from the bytes.
BINARY_FILE = "binaryFile"
TASKS_SCHEMA = (
    f"{RANGE_IDX} int, path string, kind string, start bigint, stop bigint, cut string, "
    "content binary"
)

# Tasks a core for the jobs over the ingest's ranges (the ingest, `tasks_frame`, and the
# per-range tables after it, `SparkJobs._per_range`), a run of neighbouring ranges a task:
# enough that a slow task leaves a core idle little at the end, few enough that each takes
# several ranges. A task of its own cost Spark about 0.17 s a range on top of the range's
# work (a third of a second to write its tables: 83 ranges of a 1 M-page file took 41.5
# task-seconds in 83 tasks, 28.7 in 8).
RANGE_TASKS_PER_CORE = 4


def task_count(spark: Any, ranges: int) -> int:
    """How many tasks a job over `ranges` ranges takes (`RANGE_TASKS_PER_CORE`)."""
    cores = int(spark.sparkContext.defaultParallelism)
    return max(1, min(ranges, max(1, cores) * RANGE_TASKS_PER_CORE))


@dataclass(frozen=True)
class RangeCount:
    """What an ingest task reports of its range: its records (every one, skipped or not:
    the ids count them all) and, for a range of a JSONL file, its lines."""

    range_idx: int
    records: int
    lines: int = 0


@dataclass(frozen=True)
class RangeShift:
    """Where a range's rows go in the run: its document ids are [shift, end), and its
    `record_offset`s (JSONL line numbers, counted from 0 in the range) move by
    `lines_before`, the lines of the earlier ranges of its file."""

    range_idx: int
    shift: int
    end: int
    lines_before: int = 0


def plan_tasks(spark: Any, inputs: list[str]) -> list[InputRange]:
    """The ingest's ranges in input order: a local input cut by `plan_ranges`, with the
    target the embedded engine takes for as many workers as Spark has cores
    (`range_bytes`), each file that a URI (or its glob) lists through Spark's file
    listing, sorted, whole."""
    from neardup.ingest.readers import expand_inputs

    local = {p: expand_inputs([p]) for p in inputs if "://" not in p}
    total = sum(local_size(path) for items in local.values() for path, _ in items)
    cores = int(spark.sparkContext.defaultParallelism) if spark is not None else 1
    target = range_bytes(total, cores)
    ranges: list[InputRange] = []
    for path in inputs:
        if path in local:
            ranges.extend(plan_ranges(local[path], target))
        else:
            listed = spark.read.format("binaryFile").load(path).select("path").collect()
            ranges.extend(InputRange(p, BINARY_FILE) for p in sorted(r["path"] for r in listed))
    if not ranges:
        raise ValueError("no input files found")
    return ranges


def is_uri(rng: InputRange) -> bool:
    """Whether the range is a file Spark's `binaryFile` source reads for the task."""
    return rng.kind == BINARY_FILE


def tasks_frame(spark: Any, ranges: Sequence[InputRange], uri_inputs: list[str]) -> Any:
    """One row per range (`TASKS_SCHEMA`), a partition per local range, so Spark runs
    the ranges side by side; a URI's row carries the file's bytes (`content`) read by
    `binaryFile` from the globs `uri_inputs`."""
    local = [
        (i, r.path, r.kind, r.start, r.stop, r.cut, None)
        for i, r in enumerate(ranges)
        if not is_uri(r)
    ]
    frames = []
    if local:
        rdd = spark.sparkContext.parallelize(local, task_count(spark, len(local)))
        frames.append(spark.createDataFrame(rdd, TASKS_SCHEMA))
    uris = {r.path: i for i, r in enumerate(ranges) if is_uri(r)}
    if uris:
        from pyspark.sql import functions as F

        index = spark.createDataFrame(list(uris.items()), f"path string, {RANGE_IDX} int")
        content = spark.read.format("binaryFile").load(sorted(set(uri_inputs)))
        frames.append(
            content.join(F.broadcast(index), "path").selectExpr(
                RANGE_IDX,
                "path",
                f"'{BINARY_FILE}' AS kind",
                "CAST(0 AS BIGINT) AS start",
                "CAST(NULL AS BIGINT) AS stop",
                "'' AS cut",
                "content",
            )
        )
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    return frame


def range_shifts(ranges: Sequence[InputRange], counts: Sequence[RangeCount]) -> list[RangeShift]:
    """Each range's place in the run, from the tasks' counts (in any order): the ids of
    the ranges before it, and the lines before it in its own file."""
    by_idx = {c.range_idx: c for c in counts}
    if sorted(by_idx) != list(range(len(ranges))):
        raise RuntimeError(f"{len(by_idx)} ingest counts for {len(ranges)} ranges")
    shifts: list[RangeShift] = []
    first = lines = 0
    for i, rng in enumerate(ranges):
        count = by_idx[i]
        if rng.first_of_input:
            lines = 0
        shifts.append(RangeShift(i, first, first + count.records, lines))
        first += count.records
        lines += count.lines
    return shifts
