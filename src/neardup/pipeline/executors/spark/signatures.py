"""The signatures of chosen pages, read by Python tasks from the ingest tasks' files.

Why not through Spark's reader: a signature is a list of 128 integers, and the JVM decodes a
Parquet list and converts it to Arrow one element at a time; at a million pages that cost
several times the numba work that uses the signatures (the band keys: 25 task-seconds in
Spark against 5 in Python for the same rows). Here each range's texts file is read by
pyarrow, one task per ingest range, and only the rows a step needs leave the task: every eligible
class representative for the band keys (`rep_key_blobs`), and the few pages of candidate
pairs or moved clusters for the joins that compare signatures (`wanted_signatures`).

Each task gets `RANGES_SCHEMA` rows (range_idx, shift, end, lines_before): the range's
document ids are [shift, end).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.ingest.eligibility import enough_words
from neardup.kernels.sorting import sorted_distinct
from neardup.pipeline.executors.spark.ingest import RANGE_FILE, TEXTS
from neardup.pipeline.executors.spark.ingest_ranges import RANGE_IDX
from neardup.pipeline.executors.spark.kernels import binary_rows, key_blob_batches

# The signatures as binary values (`kernels.binary_rows`): they cross joins in Spark.
WANTED_SCHEMA = pa.schema(
    [("doc_id", pa.int64()), ("minhash", pa.binary()), ("supers", pa.binary())]
)
_READ_ROWS = 65536


def _doc_ids_in(folder: Path, lo: int, hi: int) -> np.ndarray:
    """The sorted doc ids in [lo, hi) of a work table of doc ids (`doc_id` column), read
    with the row groups' statistics pruning the rest."""
    table = pq.read_table(
        folder, columns=["doc_id"], filters=[("doc_id", ">=", lo), ("doc_id", "<", hi)]
    )
    return sorted_distinct(table.column("doc_id").to_numpy())


def _range_rows(
    range_idx: int, shift: int, work: Path, columns: list[str]
) -> Iterator[pa.RecordBatch]:
    """The text rows of one range with `columns`, doc ids shifted, in row groups."""
    source = pq.ParquetFile(work / TEXTS / RANGE_FILE.format(range_idx))
    for batch in source.iter_batches(batch_size=_READ_ROWS, columns=["doc_id", *columns]):
        ids = pc.add(batch.column("doc_id"), pa.scalar(shift, pa.int64()))
        yield batch.set_column(0, "doc_id", ids)


def rep_rows(
    range_idx: int, shift: int, end: int, work: Path, non_reps: str, min_tokens: int
) -> Iterator[pa.RecordBatch]:
    """(doc_id, minhash, supers, order_key) of the range's eligible pages that represent
    their class (`non_reps`: the work table of those that do not)."""
    others = _doc_ids_in(work / non_reps, shift, end)
    columns = ["n_tokens", "n_shingles", "minhash", "supers", "order_key"]
    for batch in _range_rows(range_idx, shift, work, columns):
        ids = batch.column("doc_id").to_numpy()
        keep = enough_words(
            batch.column("n_tokens").to_numpy(), batch.column("n_shingles").to_numpy(), min_tokens
        ) & ~np.isin(ids, others, assume_unique=False)
        if keep.any():
            yield batch.filter(pa.array(keep)).select(["doc_id", "minhash", "supers", "order_key"])


def rep_key_blobs(
    batches: Iterator[pa.RecordBatch], work: str, non_reps: str, settings: Settings, parts: int
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body over RANGES rows: the band-key blobs (`key_blob_batches`) of each
    range's class representatives."""
    for batch in batches:
        for row in batch.to_pylist():
            reps = rep_rows(
                row[RANGE_IDX],
                row["shift"],
                row["end"],
                Path(work),
                non_reps,
                settings.min_tokens,
            )
            yield from key_blob_batches(reps, settings, parts)


def wanted_signatures(
    batches: Iterator[pa.RecordBatch], work: str, wanted: str
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body over RANGES rows: (doc_id, minhash, supers) of the pages of each
    range listed in the work table `wanted` (doc ids)."""
    for batch in batches:
        for row in batch.to_pylist():
            shift, end = row["shift"], row["end"]
            docs = _doc_ids_in(Path(work) / wanted, shift, end)
            if not docs.size:
                continue
            for rows in _range_rows(row[RANGE_IDX], shift, Path(work), ["minhash", "supers"]):
                keep = np.isin(rows.column("doc_id").to_numpy(), docs)
                if keep.any():
                    found = rows.filter(pa.array(keep))
                    yield pa.RecordBatch.from_arrays(
                        [
                            found.column("doc_id"),
                            binary_rows(found.column("minhash")),
                            binary_rows(found.column("supers")),
                        ],
                        schema=WANTED_SCHEMA,
                    )
