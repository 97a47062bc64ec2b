"""Features of the methods that do not use the min-hash signature: chunk fingerprints,
Broder's MIN_s / MOD_m sketches (and their super-shingles), SimHash.

One parallel pass over `page_text`, row group by row group, in the same row order as
`signatures.npy` (so feature row i is signature row i). The shingle sets are the scan's
own (same seed and size, common shingles dropped when they were counted); chunks are cut
from the raw text, which keeps its lines and paragraphs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.kernels import CommonShingles
from neardup.kernels.broder import (
    min_s_kernel,
    mod_m_kernel,
    permutation_seed,
    sorted_sketch_supershingles,
)
from neardup.kernels.chunks import chunk_fingerprints_arrow
from neardup.kernels.shingles import packed_shingles
from neardup.kernels.simhash import simhash_packed
from neardup.kernels.tokens import canonicalize_packed, pack_arrow
from neardup.pipeline.executors.local import LocalEngine
from neardup.pipeline.steps.sketch import COMMON_FILE
from neardup.pipeline.steps.staging_tables import row_groups

FEATURE_METHODS = ("chunks", "broder-min", "broder-mod", "broder-supershingles", "simhash")


@dataclass
class Features:
    """Per page (rows aligned with the signature rows): a variable-length set of uint64
    values (chunks, or a Broder sketch) as flat + offsets, the shingle-set size, the MOD
    level, the Broder super-shingles (flat + offsets) and the SimHash."""

    doc_ids: np.ndarray
    values: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint64))
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    sizes: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    levels: np.ndarray = field(default_factory=lambda: np.empty(0, np.int8))
    supers: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    super_offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    simhash: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)


@lru_cache(maxsize=2)
def _load_common(path: str) -> CommonShingles:
    return CommonShingles.load(path, mmap=True)


def _shingle_sets(texts, settings: Settings, common_path: str | None):
    flat, offsets = packed_shingles(*canonicalize_packed(*pack_arrow(texts)), settings, True)
    if common_path and flat.size:
        common = _load_common(common_path)
        keep = ~common.is_common(flat)
        owner = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
        kept = np.bincount(owner[keep], minlength=offsets.size - 1)
        flat = flat[keep]
        offsets = np.zeros(offsets.size, dtype=np.int64)
        np.cumsum(kept, out=offsets[1:])
    return np.ascontiguousarray(flat, dtype=np.uint64), offsets


def _features_task(task: tuple[str, int, Settings, str | None]) -> Features:
    path, row_group, settings, common_path = task
    table = pq.ParquetFile(path).read_row_group(row_group, columns=["doc_id", "text"])
    doc_ids = table.column("doc_id").to_numpy()
    texts = table.column("text")
    method = settings.method
    if method == "chunks":
        values, offsets = chunk_fingerprints_arrow(texts, settings)
        return Features(doc_ids, values, offsets, np.diff(offsets))
    flat, offsets = _shingle_sets(texts, settings, common_path)
    sizes = np.diff(offsets)
    if method == "simhash":
        return Features(doc_ids, sizes=sizes, simhash=simhash_packed(flat, offsets, settings.seed))
    seed = permutation_seed(settings.seed)
    if method == "broder-mod":
        log_m = settings.mod_m.bit_length() - 1
        values, voff, levels = mod_m_kernel(flat, offsets, log_m, settings.mod_max, seed)
        return Features(doc_ids, values, voff, sizes, levels)
    values, voff = min_s_kernel(flat, offsets, settings.min_s, seed)
    result = Features(doc_ids, values, voff, sizes)
    if method == "broder-supershingles":
        result.supers, result.super_offsets = sorted_sketch_supershingles(
            values, voff, settings.broder_supershingle_size, settings.seed
        )
    return result


def _concat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.empty(0, dtype)


def _concat_offsets(parts: list[np.ndarray]) -> np.ndarray:
    out = [np.zeros(1, dtype=np.int64)]
    base = 0
    for off in parts:
        out.append(off[1:] - off[0] + base)
        base += int(off[-1] - off[0])
    return np.concatenate(out)


def run_features(
    staging: Path, settings: Settings, engine: LocalEngine, on_rows: Callable[[int], None]
) -> Features:
    """The features of every page with text, for `settings.method`."""
    common_path = staging / COMMON_FILE
    common_file = str(common_path) if common_path.exists() else None
    groups = row_groups(staging, "page_text")
    tasks = [(path, g, settings, common_file) for path, g, _ in groups]
    batches: list[Features] = []
    for batch in engine.map(_features_task, tasks):
        batches.append(batch)
        on_rows(int(batch.doc_ids.size))
    return Features(
        doc_ids=_concat([b.doc_ids for b in batches], np.int64),
        values=_concat([b.values for b in batches], np.uint64),
        offsets=_concat_offsets([b.offsets for b in batches]),
        sizes=_concat([b.sizes for b in batches], np.int64),
        levels=_concat([b.levels for b in batches], np.int8),
        supers=_concat([b.supers for b in batches], np.int64),
        super_offsets=_concat_offsets([b.super_offsets for b in batches]),
        simhash=_concat([b.simhash for b in batches], np.int64),
    )
