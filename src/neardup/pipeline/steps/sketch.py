"""Sketch: `page_text` -> `sketches` table plus memory-mapped signature matrices.

Up to two passes over the text, each parallel over Parquet row groups:

1. when `max_shingle_df` is set and the crawl has more pages than that, count per shingle how
   many pages contain it (a count-min sketch);
2. canonicalise, shingle, drop the too-common shingles, and compute the min-hash signature,
   the lexical and shingle-set fingerprints and the super-shingles of every page.

Signatures go to `signatures.npy` (rows in document order) so later stages and the query
service read them with random access instead of loading a crawl's sketches into memory.
They are written with plain file writes, not through a writable memory map: the pages of a
map count in the process's resident memory until the kernel writes them back, 512 bytes per
page at K = 128, which made the sketch stage's peak grow with the crawl (issue 16).

When no shingle is dropped as too common (`max_shingle_df` 0, the default), nothing of the
crawl is needed to sketch a page but its own text, so the embedded engine sketches each
batch in the ingest workers that made its text (`SketchSink` fed by `run_ingest`), as the
Spark engine does: the text is not read back and decompressed, and sketching overlaps the
reading. The sketch stage then has nothing left to compute. Either way the files are the
same, written by `SketchSink`: `sketches.parquet` with its `minhash` column (the store once
re-read and re-wrote the whole table to add it: 4.9 of a million pages' 7 s store stage).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.ingest.eligibility import enough_words
from neardup.kernels import SIGNATURE_DTYPE, CommonShingles, SketchBatch, sketch_arrow
from neardup.kernels.shingles import doc_shingle_counts_arrow
from neardup.npy_files import write_header
from neardup.pipeline.executors.local import LocalEngine
from neardup.pipeline.steps.staging_tables import row_groups

SKETCHES_SCHEMA = pa.schema(
    [
        ("doc_id", pa.int64()),
        ("n_tokens", pa.int32()),
        ("n_shingles", pa.int32()),
        ("lexical_fp", pa.int64()),
        ("shingle_fp", pa.int64()),
    ]
)
# Rows of `sketches.parquet` per row group: 8 MiB of min-hash values at K = 128, so the
# few row groups waiting for the ingest's writer thread stay small (65,536 rows held 0.3 GB
# more at 4 M pages), as the Spark engine writes its part files.
SKETCH_ROWS = 8192


def sketches_schema(num_perm: int) -> pa.Schema:
    """The run's `sketches` table: the fingerprints plus the min-hash values as a fixed-size
    list of int64 (the two's-complement view of the unsigned values, so engines without
    unsigned types read it), as the Spark engine writes it too."""
    return SKETCHES_SCHEMA.append(pa.field("minhash", pa.list_(pa.int64(), num_perm)))


# How `sketches.parquet` is written, by both engines. The min-hash values are unsigned 32-bit
# numbers widened to int64, so four of every value's eight bytes are zero: split by byte
# position (Parquet's BYTE_STREAM_SPLIT) before zstd, those bytes compress to nothing and the
# rest is not searched for matches it does not have. Measured over a million pages' sketches:
# 1.15 against 3.18 CPU-s to write, 524 against 539 MB; DuckDB and Spark 4 read it. Random
# 64-bit values and distinct ids get no dictionary: one is attempted and abandoned for
# nothing (it doubled the time to write the min-hash column, and grew it).
SKETCHES_PARQUET: dict[str, Any] = {
    "compression": "zstd",
    "use_dictionary": False,
    "column_encoding": {"minhash.list.element": "BYTE_STREAM_SPLIT"},
}


def minhash_column(values: np.ndarray, num_perm: int) -> pa.FixedSizeListArray:
    """The `minhash` column of `sketches_schema` from unsigned 32-bit min-hash values (rows
    of `num_perm`, or the same values flat), each widened to an int64."""
    widened = np.asarray(values, dtype=np.uint32).reshape(-1).astype(np.int64)
    return pa.FixedSizeListArray.from_arrays(pa.array(widened), num_perm)


@dataclass
class SketchResult:
    """The signature rows: their documents, which may take part in near-duplicate search,
    and their shingle-set fingerprints (for collapsing equivalent pages)."""

    doc_ids: np.ndarray  # int64, increasing
    eligible: np.ndarray  # bool: compared (`eligibility.enough_words`)
    shingle_fp: np.ndarray  # int64
    lexical_fp: np.ndarray | None = None  # int64 (the `exact` method's equivalence)

    @property
    def sketched(self) -> int:
        return int(self.doc_ids.size)


def _read_texts(path: str, row_group: int) -> tuple[np.ndarray, pa.ChunkedArray]:
    """One row group's doc ids and texts, the texts left in Arrow (no Python strings)."""
    table = pq.ParquetFile(path).read_row_group(row_group, columns=["doc_id", "text"])
    return table.column("doc_id").to_numpy(), table.column("text")


def _count_task(task: tuple[str, int, Settings]) -> tuple[np.ndarray, np.ndarray]:
    path, row_group, settings = task
    _, texts = _read_texts(path, row_group)
    return doc_shingle_counts_arrow(texts, settings)


@lru_cache(maxsize=2)
def _load_common(path: str) -> CommonShingles:
    return CommonShingles.load(path, mmap=True)


def _sketch_task(task: tuple[str, int, Settings, str | None]) -> tuple[np.ndarray, object]:
    path, row_group, settings, common_path = task
    doc_ids, texts = _read_texts(path, row_group)
    common = _load_common(common_path) if common_path else None
    return doc_ids, sketch_arrow(texts, settings, common)


COMMON_FILE = "common_shingles.npy"
PAGE_COLUMNS = "sketch_columns.npy"  # the near stage's per-page arrays (`SketchSink`)


class _AppendedRows:
    """A `.npy` file of `width` columns whose row count is known only at the end: rows are
    appended as they come and the header is written again with the count by `close`.
    numpy pads a header so that a 2-D shape's row count can grow in place to 21 digits,
    so the header keeps its size and the rows never move."""

    def __init__(self, path: Path, dtype: type, width: int) -> None:
        self.dtype = np.dtype(dtype)
        self.width = width
        self.rows = 0
        self.file = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.offset = write_header(self.file, self.dtype, (0, width))

    def append(self, values: np.ndarray) -> None:
        self.file.write(np.ascontiguousarray(values, dtype=self.dtype).tobytes())
        self.rows += len(values)

    def close(self) -> None:
        """Write the final row count into the header and close the file."""
        end = self.file.tell()
        self.file.seek(0)
        if write_header(self.file, self.dtype, (self.rows, self.width)) != self.offset:
            raise RuntimeError(f"{self.file.name}: the .npy header changed size")
        self.file.seek(end)
        self.file.close()


def page_columns(doc_ids: np.ndarray, batch: SketchBatch, min_tokens: int) -> np.ndarray:
    """The near stage's per-page columns (`PAGE_COLUMNS`) of a sketched batch: doc id,
    eligible (0/1), shingle-set and lexical fingerprints."""
    eligible = enough_words(batch.n_tokens, batch.n_shingles, min_tokens)
    columns = np.column_stack([doc_ids, eligible, batch.shingle_fp, batch.lexical_fp])
    return columns.astype(np.int64, copy=False)


def sketches_rows(doc_ids: np.ndarray, batch: SketchBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The `sketches` rows (`sketches_schema`) of a sketched batch."""
    columns = [
        pa.array(doc_ids, pa.int64()),
        pa.array(batch.n_tokens, pa.int32()),
        pa.array(batch.n_shingles, pa.int32()),
        pa.array(batch.lexical_fp, pa.int64()),
        pa.array(batch.shingle_fp, pa.int64()),
        minhash_column(batch.minhash, schema.field("minhash").type.list_size),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class SketchSink:
    """The sketch stage's files, written as sketched batches arrive in document order:
    `signatures.npy` and `supershingles.npy` (rows appended), `sketches.parquet` (with the
    `minhash` column, in row groups of `SKETCH_ROWS`) and `signature_docs.npy`; `close`
    returns the per-page arrays the near stage needs. Fed by the sketch pass (`run_sketch`)
    or by the ingest, whose Parquet writes run on its writer thread (`submit`)."""

    def __init__(
        self,
        staging: Path,
        settings: Settings,
        submit: Callable[..., None] | None = None,
    ) -> None:
        self.settings = settings
        self.k = settings.num_perm
        self.n_ss = settings.supershingle_count if settings.has_supershingles else 0
        self.submit = submit if submit is not None else (lambda fn, *args: fn(*args))
        self.staging = staging
        self.signatures = _AppendedRows(staging / "signatures.npy", SIGNATURE_DTYPE, self.k)
        self.supers = _AppendedRows(staging / "supershingles.npy", np.int64, self.n_ss)
        self.schema = sketches_schema(self.k)
        self.writer = pq.ParquetWriter(
            staging / "sketches.parquet", self.schema, **SKETCHES_PARQUET
        )
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        # Per page: doc id, eligible (0/1), shingle-set and lexical fingerprints, on disk
        # until the near stage maps them: held in lists while the ingest's workers were
        # alive, and joined at its end, they were 0.29 GB of the scan's peak at 4 M pages.
        self.columns = _AppendedRows(staging / PAGE_COLUMNS, np.int64, 4)

    def add(self, doc_ids: np.ndarray, batch: SketchBatch) -> None:
        """The sketches of the pages `doc_ids` (increasing, after every earlier batch's)."""
        n = len(doc_ids)
        if not n:
            return
        self.signatures.append(batch.minhash)
        if self.n_ss:
            self.supers.append(batch.supershingles)
        self.columns.append(page_columns(doc_ids, batch, self.settings.min_tokens))
        self.pending.append(sketches_rows(doc_ids, batch, self.schema))
        self.pending_rows += n
        if self.pending_rows >= SKETCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self.pending:
            table = pa.Table.from_batches(self.pending)
            self.submit(self.writer.write_table, table, 1 << 30)
            self.pending, self.pending_rows = [], 0

    def close(self) -> SketchResult:
        """Write what is pending and close the files (the Parquet file on the writer, so a
        caller with a writer thread waits for it before reading the table)."""
        self._flush()
        self.submit(self.writer.close)
        self.signatures.close()
        self.supers.close()
        self.columns.close()
        return sketch_result(self.staging)


def sketch_result(staging: Path) -> SketchResult:
    """The per-page arrays the near stage needs, mapped from the finished `PAGE_COLUMNS`
    file; writes `signature_docs.npy` beside it."""
    columns = np.load(staging / PAGE_COLUMNS, mmap_mode="r")
    docs = staging / "signature_docs.npy"
    np.save(docs, columns[:, 0])
    return SketchResult(
        doc_ids=np.load(docs, mmap_mode="r"),
        eligible=columns[:, 1].astype(bool),
        shingle_fp=columns[:, 2],
        lexical_fp=columns[:, 3],
    )


def sketches_in_ingest(settings: Settings) -> bool:
    """Whether the ingest sketches each page as it makes its text: when no shingle can be
    dropped as too common, a page's sketch needs nothing of the rest of the crawl."""
    return not settings.max_shingle_df


def count_common_shingles(
    staging: Path, settings: Settings, engine: LocalEngine, on_rows: Callable[[int], None]
) -> None:
    """First pass: how many pages hold each shingle, into `common_shingles.npy`, which the
    sketch pass reads to drop the shingles held by more than `max_shingle_df` pages."""
    groups = row_groups(staging, "page_text")
    common = CommonShingles.empty(settings)
    counted = engine.map(_count_task, [(path, g, settings) for path, g, _ in groups])
    for (_, _, rows), (hashes, counts) in zip(groups, counted, strict=True):
        common.add(hashes, counts)
        on_rows(rows)
    common.save(str(staging / COMMON_FILE))


def run_sketch(
    staging: Path, settings: Settings, engine: LocalEngine, on_rows: Callable[[int], None]
) -> SketchResult:
    """Sketch every page with text; write `sketches.parquet`, `signatures.npy` and
    `supershingles.npy` into `staging` (dropping common shingles when they were counted)."""
    groups = row_groups(staging, "page_text")
    common_path = staging / COMMON_FILE
    common_file = str(common_path) if common_path.exists() else None
    sink = SketchSink(staging, settings)
    try:
        tasks = [(path, g, settings, common_file) for path, g, _ in groups]
        for doc_ids, batch in engine.map(_sketch_task, tasks):
            sink.add(doc_ids, batch)
            on_rows(len(doc_ids))
    finally:
        result = sink.close()
    return result
