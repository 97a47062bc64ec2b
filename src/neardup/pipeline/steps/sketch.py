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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.ingest.eligibility import enough_words
from neardup.kernels import SIGNATURE_DTYPE, CommonShingles, sketch_arrow
from neardup.kernels.shingles import doc_shingle_counts_arrow
from neardup.pipeline.executors.local import LocalEngine

SKETCHES_SCHEMA = pa.schema(
    [
        ("doc_id", pa.int64()),
        ("n_tokens", pa.int32()),
        ("n_shingles", pa.int32()),
        ("lexical_fp", pa.int64()),
        ("shingle_fp", pa.int64()),
    ]
)


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


class _RowFile:
    """An (n_rows, width) `.npy` file filled in row order by file writes, so its rows never
    sit in this process's memory (see the module doc); readers memory-map it as usual."""

    def __init__(self, path: Path, dtype: type, n_rows: int, width: int) -> None:
        header = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(n_rows, width))
        self.offset = int(header.offset)  # where the rows start, after the .npy header
        del header  # the file now has its header and full size; nothing of it is mapped
        self.dtype = np.dtype(dtype)
        self.row_bytes = self.dtype.itemsize * width
        self.file = open(path, "r+b")  # noqa: SIM115 - closed by close()

    def write(self, row: int, values: np.ndarray) -> None:
        """Rows `row`, `row + 1`, ... from `values` (n x width)."""
        self.file.seek(self.offset + row * self.row_bytes)
        self.file.write(np.ascontiguousarray(values, dtype=self.dtype).tobytes())

    def close(self) -> None:
        self.file.close()


def count_common_shingles(
    staging: Path, settings: Settings, engine: LocalEngine, on_rows: Callable[[int], None]
) -> None:
    """First pass: how many pages hold each shingle, into `common_shingles.npy`, which the
    sketch pass reads to drop the shingles held by more than `max_shingle_df` pages."""
    text_path = str(staging / "page_text.parquet")
    meta = pq.ParquetFile(text_path).metadata
    groups = range(meta.num_row_groups)
    common = CommonShingles.empty(settings)
    counted = engine.map(_count_task, [(text_path, g, settings) for g in groups])
    for g, (hashes, counts) in zip(groups, counted, strict=True):
        common.add(hashes, counts)
        on_rows(meta.row_group(g).num_rows)
    common.save(str(staging / COMMON_FILE))


def run_sketch(
    staging: Path, settings: Settings, engine: LocalEngine, on_rows: Callable[[int], None]
) -> SketchResult:
    """Sketch every page with text; write `sketches.parquet`, `signatures.npy` and
    `supershingles.npy` into `staging` (dropping common shingles when they were counted)."""
    text_path = str(staging / "page_text.parquet")
    meta = pq.ParquetFile(text_path).metadata
    n_rows = meta.num_rows
    groups = range(meta.num_row_groups)
    common_path = staging / COMMON_FILE
    common_file = str(common_path) if common_path.exists() else None

    k = settings.num_perm
    n_ss = settings.supershingle_count if settings.has_supershingles else 0
    signatures = _RowFile(staging / "signatures.npy", SIGNATURE_DTYPE, n_rows, k)
    supers = _RowFile(staging / "supershingles.npy", np.int64, n_rows, n_ss)
    doc_index = np.empty(n_rows, dtype=np.int64)
    eligible = np.empty(n_rows, dtype=bool)
    shingle_fp = np.empty(n_rows, dtype=np.int64)
    lexical_fp = np.empty(n_rows, dtype=np.int64)
    writer = pq.ParquetWriter(staging / "sketches.parquet", SKETCHES_SCHEMA, compression="zstd")
    row = 0
    try:
        tasks = [(text_path, g, settings, common_file) for g in groups]
        for doc_ids, batch in engine.map(_sketch_task, tasks):
            n = len(doc_ids)
            part = slice(row, row + n)
            signatures.write(row, batch.minhash)
            if n_ss:
                supers.write(row, batch.supershingles)
            doc_index[part] = doc_ids
            eligible[part] = enough_words(batch.n_tokens, batch.n_shingles, settings.min_tokens)
            shingle_fp[part] = batch.shingle_fp
            lexical_fp[part] = batch.lexical_fp
            writer.write_table(
                pa.table(
                    {
                        "doc_id": doc_ids,
                        "n_tokens": batch.n_tokens,
                        "n_shingles": batch.n_shingles,
                        "lexical_fp": batch.lexical_fp,
                        "shingle_fp": batch.shingle_fp,
                    },
                    schema=SKETCHES_SCHEMA,
                )
            )
            row += n
            on_rows(n)
    finally:
        writer.close()
        signatures.close()
        supers.close()
    np.save(staging / "signature_docs.npy", doc_index)
    return SketchResult(
        doc_ids=doc_index, eligible=eligible, shingle_fp=shingle_fp, lexical_fp=lexical_fp
    )
