"""Sketch: `page_text` -> `sketches` table plus memory-mapped signature matrices.

Two passes over the text, each parallel over Parquet row groups:

1. count, per shingle, how many pages contain it (a count-min sketch; skipped when the crawl
   has no more pages than `max_shingle_df`, since then no shingle can be too common);
2. canonicalise, shingle, drop the too-common shingles, and compute the min-hash signature,
   the lexical and shingle-set fingerprints and the super-shingles of every page.

Signatures go to `signatures.npy` (rows in document order) so later stages and the query
service read them with random access instead of loading a crawl's sketches into memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.engine import LocalEngine
from neardup.settings import Settings
from neardup.sketch import SIGNATURE_DTYPE, CommonShingles, sketch_arrow
from neardup.sketch.shingles import doc_shingle_counts_arrow

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
    sketched: int
    common_shingles_dropped: bool
    doc_ids: np.ndarray  # int64, the documents of the signature rows, increasing


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


def run_sketch(
    staging: Path,
    settings: Settings,
    engine: LocalEngine,
    on_rows: Callable[[str, int], None] | None = None,
) -> SketchResult:
    """Sketch every page with text; write `sketches.parquet`, `signatures.npy` and
    `supershingles.npy` into `staging`."""
    text_path = str(staging / "page_text.parquet")
    meta = pq.ParquetFile(text_path).metadata
    n_rows = meta.num_rows
    groups = range(meta.num_row_groups)

    common_path: str | None = None
    filter_common = settings.max_shingle_df > 0 and n_rows > settings.max_shingle_df
    if filter_common:
        common = CommonShingles.empty(settings)
        counted = engine.map(_count_task, [(text_path, g, settings) for g in groups])
        for g, (hashes, counts) in zip(groups, counted, strict=True):
            common.add(hashes, counts)
            if on_rows:
                on_rows("count", meta.row_group(g).num_rows)
        common_path = str(staging / "common_shingles.npy")
        common.save(common_path)
        del common

    k = settings.num_perm
    n_ss = settings.supershingle_count if settings.has_supershingles else 0
    signatures = np.lib.format.open_memmap(
        staging / "signatures.npy", mode="w+", dtype=SIGNATURE_DTYPE, shape=(n_rows, k)
    )
    supers = np.lib.format.open_memmap(
        staging / "supershingles.npy", mode="w+", dtype=np.int64, shape=(n_rows, n_ss)
    )
    doc_index = np.empty(n_rows, dtype=np.int64)
    writer = pq.ParquetWriter(staging / "sketches.parquet", SKETCHES_SCHEMA, compression="zstd")
    row = 0
    try:
        tasks = [(text_path, g, settings, common_path) for g in groups]
        for doc_ids, batch in engine.map(_sketch_task, tasks):
            n = len(doc_ids)
            signatures[row : row + n] = batch.minhash
            if n_ss:
                supers[row : row + n] = batch.supershingles
            doc_index[row : row + n] = doc_ids
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
            if on_rows:
                on_rows("sketch", n)
    finally:
        writer.close()
        signatures.flush()
        supers.flush()
        del signatures, supers
    np.save(staging / "signature_docs.npy", doc_index)
    return SketchResult(sketched=row, common_shingles_dropped=filter_common, doc_ids=doc_index)
