"""The min-hash signatures of a crawl's run, whichever engine wrote it.

An embedded run keeps its signatures in `signatures.npy` (one row per sketched page, in doc
order, memory-mapped) beside `signature_docs.npy`. A Spark run has no such matrix: its
executors write the signatures only into the `sketches.parquet/` dataset (a `minhash` list
column per `doc_id`, the part files in doc order), so that none pass through the driver.
Everything in `crawls/` that compares signatures reads them through `RunSignatures`, so both
layouts work the same and no matrix is ever loaded whole: `batches` streams the rows in doc
order, and `of_docs` fetches the rows of some documents, reading only the Parquet row groups
whose `doc_id` range holds one of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.kernels import SIGNATURE_DTYPE
from neardup.kernels.sorting import found_in_sorted
from neardup.store import RunError, load_settings

SIGNATURES = "signatures.npy"
SIGNATURE_DOCS = "signature_docs.npy"
SKETCHES = "sketches.parquet"
BATCH_ROWS = 65536  # rows per streamed batch: a few MiB of signatures at any K
CHUNK = 262144  # documents fetched at once when comparing many pairs


def row_lookup(docs: np.ndarray) -> np.ndarray:
    """doc_id -> signature row (-1 where the document has no signature)."""
    size = int(docs.max()) + 1 if docs.size else 0
    rows = np.full(size, -1, dtype=np.int64)
    rows[docs] = np.arange(docs.size)
    return rows


def signature_agreement(
    sig_a: np.ndarray, rows_a: np.ndarray, sig_b: np.ndarray, rows_b: np.ndarray, chunk: int = 65536
) -> np.ndarray:
    """Equal min-hash positions of row pairs of two (memory-mapped) signature matrices, read a
    chunk at a time so a million pairs never load both matrices whole."""
    out = np.empty(rows_a.size, dtype=np.int64)
    for start in range(0, rows_a.size, chunk):
        a = sig_a[rows_a[start : start + chunk]]
        b = sig_b[rows_b[start : start + chunk]]
        out[start : start + chunk] = np.count_nonzero(a == b, axis=1)
    return out


def _minhash_matrix(column: pa.Array | pa.ChunkedArray, k: int, where: Path) -> np.ndarray:
    """A `minhash` list column (fixed-size from the embedded export, plain from Spark, the
    uint32 values as int64 in both) as an N x K matrix of the scan's signature type."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.null_count:
        raise RunError(f"{where} holds pages without a min-hash signature")
    values = column.flatten().to_numpy(zero_copy_only=False)
    if values.size != len(column) * k:
        raise RunError(f"{where} holds signatures of another length than num_perm = {k}")
    return values.reshape(len(column), k).astype(SIGNATURE_DTYPE)


class RunSignatures:
    """The signatures of one run, read in place: memory-mapped from `signatures.npy` where
    the run has it, else streamed from its `sketches.parquet` (a file or a dataset)."""

    def __init__(self, run: str | Path) -> None:
        self.run = Path(run)
        self.k = load_settings(self.run).num_perm
        self._matrix: np.ndarray | None = None
        self._docs: np.ndarray | None = None
        self._lookup: np.ndarray | None = None
        self._files: list[Path] = []
        if (self.run / SIGNATURES).exists():
            self._matrix = np.load(self.run / SIGNATURES, mmap_mode="r")
            self._docs = np.load(self.run / SIGNATURE_DOCS)
            return
        sketches = self.run / SKETCHES
        if sketches.is_dir():  # the part files, in name order: doc order, as Spark wrote them
            names = sorted(p for p in sketches.glob("*.parquet") if p.name[0] not in "._")
            self._files = names
        elif sketches.is_file():
            self._files = [sketches]
        else:
            raise RunError(f"{self.run} has no signatures ({SIGNATURES} or {SKETCHES})")

    def batches(self, rows: int = BATCH_ROWS) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(doc ids, signatures) of every sketched page, `rows` at a time, in doc order."""
        if self._matrix is not None:
            assert self._docs is not None
            for start in range(0, self._docs.size, rows):
                end = start + rows
                yield self._docs[start:end], np.asarray(self._matrix[start:end])
            return
        for path in self._files:
            for batch in pq.ParquetFile(path).iter_batches(rows, columns=["doc_id", "minhash"]):
                yield self._parquet_rows(batch, path)

    def docs(self) -> np.ndarray:
        """The doc id of every signature row, in row order (8 bytes a page)."""
        if self._docs is not None:
            return self._docs
        parts = [
            pq.ParquetFile(p).read(columns=["doc_id"]).column("doc_id").to_numpy()
            for p in self._files
        ]
        return np.concatenate(parts).astype(np.int64) if parts else np.empty(0, np.int64)

    def of_docs(self, docs: np.ndarray | list[int]) -> np.ndarray:
        """The signatures of `docs` (len(docs) x K, in the order given). Raises RunError for
        a document without a signature."""
        wanted, inverse = np.unique(np.asarray(docs, dtype=np.int64), return_inverse=True)
        found = self._of_sorted(wanted)
        return found[inverse.reshape(-1)]

    def _of_sorted(self, wanted: np.ndarray) -> np.ndarray:
        """Signatures of sorted, distinct doc ids."""
        if self._matrix is not None:
            assert self._docs is not None
            if self._lookup is None:
                self._lookup = row_lookup(self._docs)
            inside = wanted < self._lookup.size
            rows = np.where(inside, self._lookup[np.where(inside, wanted, 0)], -1)
            self._check(wanted, rows >= 0)
            return np.asarray(self._matrix[rows])
        out = np.empty((wanted.size, self.k), dtype=SIGNATURE_DTYPE)
        seen = np.zeros(wanted.size, dtype=bool)
        for path in self._files if wanted.size else []:
            file = pq.ParquetFile(path)
            for group in self._groups_holding(file, wanted):
                for batch in file.iter_batches(
                    BATCH_ROWS, row_groups=[group], columns=["doc_id", "minhash"]
                ):
                    batch_docs, sig = self._parquet_rows(batch, path)
                    pos, hit = found_in_sorted(wanted, batch_docs)
                    out[pos[hit]] = sig[hit]
                    seen[pos[hit]] = True
        self._check(wanted, seen)
        return out

    def _check(self, wanted: np.ndarray, seen: np.ndarray) -> None:
        if not seen.all():
            missing = int(wanted[np.flatnonzero(~seen)[0]])
            raise RunError(f"document {missing} of {self.run} has no signature")

    @staticmethod
    def _groups_holding(file: pq.ParquetFile, wanted: np.ndarray) -> list[int]:
        """The row groups whose doc_id range holds a wanted document (all of them where the
        file has no statistics): a lookup of a few documents reads a few row groups."""
        meta = file.metadata
        column = meta.schema.names.index("doc_id")
        groups = []
        for group in range(meta.num_row_groups):
            stats = meta.row_group(group).column(column).statistics
            if stats is None or not stats.has_min_max:
                groups.append(group)
                continue
            lo = np.searchsorted(wanted, stats.min)
            if lo < wanted.size and wanted[lo] <= stats.max:
                groups.append(group)
        return groups

    def _parquet_rows(self, batch: pa.RecordBatch, path: Path) -> tuple[np.ndarray, np.ndarray]:
        docs = batch.column("doc_id").to_numpy().astype(np.int64)
        return docs, _minhash_matrix(batch.column("minhash"), self.k, path)


def pair_agreement(
    a: RunSignatures,
    docs_a: np.ndarray,
    b: RunSignatures,
    docs_b: np.ndarray,
    chunk: int = CHUNK,
) -> np.ndarray:
    """Equal min-hash positions of each document pair (docs_a[i] of run a, docs_b[i] of run
    b). Pairs go by `chunk`, in order of docs_a, so each chunk of a Parquet run reads a narrow
    range of its row groups and memory holds two chunks of signatures, never a crawl's."""
    out = np.empty(docs_a.size, dtype=np.int64)
    order = np.argsort(docs_a, kind="stable")
    for start in range(0, order.size, chunk):
        part = order[start : start + chunk]
        sig_a, sig_b = a.of_docs(docs_a[part]), b.of_docs(docs_b[part])
        out[part] = np.count_nonzero(sig_a == sig_b, axis=1)
    return out
