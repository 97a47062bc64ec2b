"""One ingest task: a worker reads a range of the input and writes its own part of every table.

Why: when one process framed every record, sent it to a worker and wrote every table, that
process did nearly half of a text scan's CPU and stopped the scan at about four cores
(issue 47). Now a task is a range of an input (`ingest/input_ranges.py`, the rule both
engines cut by). The worker reads and frames it, extracts, sketches, and writes the run's
tables for it as part files of the staging folder:
`pages_raw.parquet/part-NNNNNN.parquet`, `page_text.parquet/...`, `links.parquet/...`,
`sketches.parquet/...` (parts in document order, so a folder reads as the one table it
replaces), and its rows of the signature matrices straight into their place in the shared
`.npy` files (`SharedRows`).

The rows carry their final document ids. A task counts its records as it goes; before it
writes, it waits for the totals of the tasks before it (`ordered_totals.py`): the ids and
signature rows before it, and, for a range of a JSONL file, the lines before it (a row's
offset is its line number). Only a small summary goes back to the scanning process.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.ingest.eligibility import rule_of
from neardup.ingest.input_ranges import (
    InputRange,
    group_ranges,
    iter_range_units,
    plan_ranges,
    target_for,
)
from neardup.ingest.readers import expand_inputs, iter_input_units
from neardup.ingest.record import RawRecord
from neardup.ingest.remote import STDIN, is_remote
from neardup.ingest.tables import LineBlock
from neardup.kernels import SIGNATURE_DTYPE, SketchBatch
from neardup.npy_files import write_header
from neardup.pipeline.executors.local import LocalEngine
from neardup.pipeline.executors.ordered_totals import OrderedTotals, TotalsHandle
from neardup.pipeline.steps.ingest import (
    LINKS_SCHEMA,
    PAGE_TEXT_SCHEMA,
    PAGES_RAW_SCHEMA,
    REPEATING_COLUMNS,
    TEXT_ROW_GROUP,
    _units,
    add_to_column,
    batch_task,
    text_read_back,
)
from neardup.pipeline.steps.sketch import (
    PAGE_COLUMNS,
    SKETCH_ROWS,
    SKETCHES_PARQUET,
    SketchResult,
    page_columns,
    sketch_result,
    sketches_rows,
    sketches_schema,
)

# The totals each task hands on: document ids, signature rows, lines of the JSONL file.
TOTALS = 3
PART = "part-{:06d}.parquet"


@dataclass(frozen=True)
class RangeTask:
    """What a worker needs for one range (small: it is pickled to the worker)."""

    index: int  # the task's place in input order
    ranges: tuple[InputRange, ...]  # one cut range, or whole inputs (`group_ranges`)
    staging: str
    settings: Settings
    base_url: str | None
    sketch: bool  # sketch the texts here (`sketches_in_ingest`)
    texts: bool  # write `page_text` (`text_read_back`)
    totals: TotalsHandle
    # With `sketch`: where the signature matrices are (`SharedRows.place`), by file name.
    rows: dict[str, tuple[str, int, int]] = field(default_factory=dict)


@dataclass
class RangeSummary:
    """What comes back to the scanning process: counts, never rows."""

    records: int = 0
    with_text: int = 0
    input_bytes: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    formats: Counter[str] = field(default_factory=Counter)


def part_path(staging: Path, table: str, index: int) -> Path:
    """The part file of task `index` in the folder of `table` (`pages_raw`, ...)."""
    return staging / f"{table}.parquet" / PART.format(index)


class SharedRows:
    """A `.npy` matrix that tasks fill at known rows, from any process.

    The scanning process creates the file with a header that can take any row count
    (numpy pads it) and writes the final count at the end (`finish`); a task writes its rows
    at `first_row` with `os.pwrite`, so no row passes through another process."""

    def __init__(self, path: Path, dtype: type, width: int) -> None:
        self.path = path
        self.dtype = np.dtype(dtype)
        self.width = width
        with open(path, "wb") as fh:
            self.offset = write_header(fh, self.dtype, (0, width))

    @property
    def place(self) -> tuple[str, int, int]:
        """(path, offset of row 0, bytes a row): what a task needs to write its rows."""
        return str(self.path), self.offset, self.dtype.itemsize * self.width

    def finish(self, rows: int) -> None:
        """Write the row count into the header; the file is cut to exactly those rows."""
        with open(self.path, "r+b") as fh:
            if write_header(fh, self.dtype, (rows, self.width)) != self.offset:
                raise RuntimeError(f"{self.path}: the .npy header changed size")
            fh.truncate(self.offset + rows * self.dtype.itemsize * self.width)


def write_rows(place: tuple[str, int, int], first_row: int, values: np.ndarray) -> None:
    """Write `values` at row `first_row` of the matrix at `place` (`SharedRows.place`)."""
    path, offset, row_bytes = place
    data = np.ascontiguousarray(values).tobytes()
    if not data:
        return
    fd = os.open(path, os.O_WRONLY)
    try:
        at = offset + first_row * row_bytes
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, at)
            view, at = view[written:], at + written
    finally:
        os.close(fd)


SIGNATURES = "signatures.npy"
SUPERSHINGLES = "supershingles.npy"


def run_range(task: RangeTask) -> RangeSummary:
    """Read, extract (and sketch) one range, then write its parts with final ids.

    If anything fails before the totals are handed on, the tasks after this one are told
    (`TotalsHandle.fail`), so they fail too instead of waiting for ever."""
    handed_on = False
    try:
        held, summary, lines = _extract_range(task)
        first_doc, first_row, first_line = task.totals.wait(task.index)
        if task.ranges[0].first_of_input:
            first_line = 0
        task.totals.publish(
            task.index + 1,
            (first_doc + summary.records, first_row + summary.with_text, first_line + lines),
        )
        handed_on = True
        _write_parts(task, held, first_doc, first_row, first_line)
        return summary
    except BaseException:
        if not handed_on:
            task.totals.fail(task.index + 1)
        raise


@dataclass
class _Held:
    """A range's tables, ids counted from 0 in the range, until its totals are known."""

    pages: list[pa.RecordBatch] = field(default_factory=list)
    texts: list[pa.RecordBatch] = field(default_factory=list)
    links: list[pa.RecordBatch] = field(default_factory=list)
    sketches: list[tuple[np.ndarray, SketchBatch]] = field(default_factory=list)


def _extract_range(task: RangeTask) -> tuple[_Held, RangeSummary, int]:
    """The range's tables held in memory (its size bounds them), its summary and lines."""
    settings = task.settings
    rule = rule_of(settings)
    lines: list[int] = []
    seen = _Seen()

    def whole(path: str, kind: str) -> Iterator[RawRecord | LineBlock]:
        counted = seen if is_remote(path) else None  # a local input's size is known
        return iter_input_units(path, kind, task.base_url, settings.max_payload_bytes, counted)

    cap = settings.max_payload_bytes
    units = (
        unit for rng in task.ranges for unit in iter_range_units(rng, whole, cap, lines.append)
    )
    held = _Held()
    summary = RangeSummary()
    for unit in _units(units, settings):
        tables = batch_task(unit, settings, rule, task.sketch, task.texts)
        tables = tables.shifted(summary.records)
        held.pages.append(tables.pages)
        held.texts.append(tables.texts)
        held.links.append(tables.links)
        if task.sketch and tables.sketch is not None:
            held.sketches.append((tables.texts.column(0).to_numpy(), tables.sketch))
        summary.records += tables.pages.num_rows
        summary.with_text += tables.with_text
        summary.skipped.update(tables.skipped)
        summary.formats.update(tables.formats)
    sizes = [rng.size for rng in task.ranges]
    summary.input_bytes = sum(size for size in sizes if size is not None) + seen.count
    return held, summary, sum(lines)


class _Seen:
    """The input bytes a URL's reader reports (its size is unknown)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, n: int) -> None:
        self.count += n


def _write_parts(
    task: RangeTask, held: _Held, first_doc: int, first_row: int, first_line: int
) -> None:
    """Write the range's part of every table, ids shifted to their place in the run."""
    staging = Path(task.staging)
    pages = [add_to_column(b, first_doc) for b in held.pages]
    if first_line and task.ranges[0].cut == "lines":
        pages = [_add_to_offsets(b, first_line) for b in pages]
    _write(staging, "pages_raw", task.index, pages, PAGES_RAW_SCHEMA, 8192, REPEATING_COLUMNS)
    if task.texts:
        texts = [add_to_column(b, first_doc) for b in held.texts]
        _write(staging, "page_text", task.index, texts, PAGE_TEXT_SCHEMA, TEXT_ROW_GROUP, False)
    links = [add_to_column(b, first_doc) for b in held.links]
    _write(staging, "links", task.index, links, LINKS_SCHEMA, 65536, True)
    if task.sketch:
        _write_sketches(task, held.sketches, first_doc, first_row)


def _add_to_offsets(batch: pa.RecordBatch, lines: int) -> pa.RecordBatch:
    """A JSONL range's rows with their line numbers counted from the file's start."""
    i = batch.schema.get_field_index("record_offset")
    column = pa.array(batch.column(i).to_numpy(zero_copy_only=False) + np.int64(lines), pa.int64())
    return batch.set_column(i, batch.schema.field(i), column)


def _write(
    staging: Path,
    table: str,
    index: int,
    batches: list[pa.RecordBatch],
    schema: pa.Schema,
    rows: int,
    dictionary: tuple[str, ...] | bool,
    **options: object,
) -> None:
    """One part file, written under a temporary name and renamed: a part is whole or absent."""
    path = part_path(staging, table, index)
    tmp = path.with_name(f".{path.name}.tmp")
    use = dictionary if isinstance(dictionary, bool) else list(dictionary)
    kwargs = {"compression": "zstd", "use_dictionary": use, **options}
    with pq.ParquetWriter(tmp, schema, **kwargs) as writer:
        if batches:
            writer.write_table(pa.Table.from_batches(batches, schema), row_group_size=rows)
    tmp.replace(path)


def _write_sketches(
    task: RangeTask,
    sketched: list[tuple[np.ndarray, SketchBatch]],
    first_doc: int,
    first_row: int,
) -> None:
    """The range's sketches: its `sketches` part and its rows of the shared matrices."""
    schema = sketches_schema(task.settings.num_perm)
    batches = []
    row = first_row
    for local_ids, batch in sketched:
        doc_ids = local_ids.astype(np.int64) + np.int64(first_doc)
        write_rows(task.rows[SIGNATURES], row, batch.minhash.astype(SIGNATURE_DTYPE, copy=False))
        if batch.supershingles.shape[1]:
            write_rows(task.rows[SUPERSHINGLES], row, batch.supershingles.astype(np.int64))
        columns = page_columns(doc_ids, batch, task.settings.min_tokens)
        write_rows(task.rows[PAGE_COLUMNS], row, columns)
        row += len(doc_ids)
        batches.append(sketches_rows(doc_ids, batch, schema))
    options = {k: v for k, v in SKETCHES_PARQUET.items() if k not in _WRITE_OPTIONS}
    staging = Path(task.staging)
    _write(staging, "sketches", task.index, batches, schema, SKETCH_ROWS, False, **options)


_WRITE_OPTIONS = ("compression", "use_dictionary")  # `_write` sets these itself


@dataclass
class IngestResult:
    records: int = 0
    with_text: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    formats: Counter[str] = field(default_factory=Counter)
    sketched: SketchResult | None = None  # when the ingest sketched the pages too


TABLES = ("pages_raw", "page_text", "links")


def run_ingest(
    inputs: list[str],
    staging: Path,
    settings: Settings,
    engine: LocalEngine,
    base_url: str | None = None,
    advance: Callable[[int], None] | None = None,
    sketch: bool = False,
) -> IngestResult:
    """Read every input and write the ingest's tables into `staging` as folders of parts,
    one part per range (`run_range`, in the workers); with `sketch`, the sketch stage's
    files too, their per-page arrays in the result.

    `advance(n)` hears progress in bytes of input: a range's bytes count once its parts are
    written. Stdin, which no other process can read, is read in this process."""
    items = expand_inputs(inputs)
    target = target_for(items, engine.workers)
    groups = group_ranges(plan_ranges(items, target), target)
    texts = not sketch or text_read_back(settings)
    for table in (*TABLES, *(("sketches",) if sketch else ())):
        (staging / f"{table}.parquet").mkdir()
    if not texts:  # the run's `page_text` has no rows, but has its columns
        pq.write_table(PAGE_TEXT_SCHEMA.empty_table(), part_path(staging, "page_text", 0))
    matrices = _sketch_matrices(staging, settings) if sketch else {}
    result = IngestResult()
    slots = 2 * engine.window + 4
    with OrderedTotals(staging / ".ingest_totals", slots, TOTALS) as totals:
        tasks = [
            RangeTask(
                i,
                group,
                str(staging),
                settings,
                base_url,
                sketch,
                texts,
                totals.handle,
                {name: rows.place for name, rows in matrices.items()},
            )
            for i, group in enumerate(groups)
        ]
        for summary in _run_tasks(engine, tasks):
            result.records += summary.records
            result.with_text += summary.with_text
            result.skipped.update(summary.skipped)
            result.formats.update(summary.formats)
            if advance and summary.input_bytes:
                advance(summary.input_bytes)
    if sketch:
        result.sketched = _sketched(staging, matrices, result.with_text)
    return result


def _run_tasks(engine: LocalEngine, tasks: list[RangeTask]) -> Iterator[RangeSummary]:
    """The tasks' summaries in order: in the workers, except stdin's, run here between."""
    start = 0
    for i, task in enumerate(tasks):
        if task.ranges[0].path == STDIN:
            yield from engine.map(run_range, tasks[start:i])
            yield run_range(task)
            start = i + 1
    yield from engine.map(run_range, tasks[start:])


def _sketch_matrices(staging: Path, settings: Settings) -> dict[str, SharedRows]:
    """The shared `.npy` matrices the tasks write their sketch rows into."""
    n_ss = settings.supershingle_count if settings.has_supershingles else 0
    matrices = {
        SIGNATURES: SharedRows(staging / SIGNATURES, SIGNATURE_DTYPE, settings.num_perm),
        SUPERSHINGLES: SharedRows(staging / SUPERSHINGLES, np.int64, n_ss),
        PAGE_COLUMNS: SharedRows(staging / PAGE_COLUMNS, np.int64, 4),
    }
    return matrices


def _sketched(staging: Path, matrices: dict[str, SharedRows], rows: int) -> SketchResult:
    """The per-page arrays the near stage needs, from the finished matrices."""
    for matrix in matrices.values():
        matrix.finish(rows)
    return sketch_result(staging)
