"""Near-duplicate pairs: collapse equivalent pages, generate candidates, verify them.

Broder et al. (§5.2): pages with the same selected shingle set are equivalent (identical and
lexically-equivalent pages are special cases), so only one page of each class, the one with
the lowest page key (`near_pairs.page_keys`: its URL's hash, not its input position), goes
through candidate generation; the others join its cluster afterwards.
Candidates come from LSH bands of the min-hash signature (`method="minhash"`) or from
Fetterly's megashingles (`method="supershingles"`), and every candidate is verified: the
estimated resemblance from the full sketch (or the exact shingle Jaccard) against the
threshold, or, for super-shingles, at least two of the six super-shingles in agreement. That
sequence is `steps.near_pairs`, shared with the Spark engine and the cross-crawl clustering;
this module adds what only the embedded scan does: the classes, exact verification from the
stored text, the feature methods and the `pairs` / `containment` tables.
The other methods (chunks, Broder's MIN_s / MOD_m sketches and super-shingles, SimHash) find
their pairs in `steps.feature_pairs`; `exact` collapses pages with the same canonical text
(lexical fingerprint) and stops there. See docs/methods.md.

Where it runs: `run_near` is the stage in one process, the scan's with one worker and for
the feature methods and `exact`. With two workers or more, the min-hash and super-shingle
methods run by parts on the workers instead (`steps.near_parts`, issue 47): the band keys
dealt into parts by a hash of (table, key), each part's buckets paired by the same rule
(`kernels.buckets.partition_pairs` over `table_pairs`) and the pairs verified by the same
test (`near_pairs.verify_pairs`), reading the signatures from the mapped staging files; the
scanning process keeps a few counts. The tables are the same row for row: a bucket is whole
in one part, so the parts' pairs together are `verified_candidates`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.kernels import (
    CommonShingles,
    canonical_shingles,
    canonicalize,
    jaccard,
    supershingle_agreement,
)
from neardup.kernels.buckets import CandidateStats
from neardup.kernels.sorting import sorted_distinct
from neardup.pipeline.steps.feature_pairs import feature_pairs
from neardup.pipeline.steps.features import Features
from neardup.pipeline.steps.near_pairs import (
    MappedRows,
    SpilledKeys,
    by_megashingles,
    candidate_keys,
    equivalence_classes,
    page_keys,
    verified_candidates,
)
from neardup.pipeline.steps.pair_rows import edge_rows, identical_rows, write_pair_rows
from neardup.pipeline.steps.sketch import COMMON_FILE, SketchResult
from neardup.pipeline.steps.staging_tables import table_files

CONTAINMENT_SCHEMA = pa.schema(
    [
        ("doc_small", pa.int64()),
        ("doc_large", pa.int64()),
        ("containment", pa.float32()),
        ("resemblance", pa.float32()),
    ]
)


@dataclass
class NearResult:
    """Eligible pages (positions into the signature rows) and the verified graph between
    the class representatives among them."""

    docs: np.ndarray  # doc ids of eligible pages, increasing
    rows: np.ndarray  # their rows in signatures.npy
    class_rep: np.ndarray  # per eligible page: position of its class representative
    reps: np.ndarray  # positions of class representatives, increasing
    keys: np.ndarray  # per eligible page: its tie-break key (`near_pairs.page_keys`)
    edge_a: np.ndarray  # positions (into docs) of verified pairs, a < b
    edge_b: np.ndarray
    similarity: np.ndarray
    agree: np.ndarray  # super-shingles in agreement per edge (-1 when not computed)
    bands: int = 0
    rows_per_band: int = 0
    candidates: int = 0
    stats: CandidateStats = field(default_factory=CandidateStats)
    method_stats: dict[str, Any] = field(default_factory=dict)
    # doc ids: (contained page, containing page, containment, resemblance), or None
    contained: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None


def _exact_similarity(
    staging: Path, docs_a: np.ndarray, docs_b: np.ndarray, settings: Settings
) -> np.ndarray:
    """Exact Jaccard of the selected shingle sets, recomputed from the stored text."""
    import pyarrow.compute as pc  # here: its import costs every scan 0.05 s

    needed = np.union1d(docs_a, docs_b)
    table = pq.read_table(
        staging / "page_text.parquet",
        filters=pc.field("doc_id").isin(pa.array(needed)),
    )
    common_path = staging / COMMON_FILE
    common = CommonShingles.load(str(common_path), mmap=True) if common_path.exists() else None
    sets: dict[int, np.ndarray] = {}
    for doc, text in zip(
        table.column("doc_id").to_pylist(), table.column("text").to_pylist(), strict=True
    ):
        hashes = canonical_shingles(canonicalize(text), settings)
        if common is not None and hashes.size:
            hashes = hashes[~common.is_common(hashes)]
        sets[doc] = hashes
    return np.array(
        [jaccard(sets[a], sets[b]) for a, b in zip(docs_a.tolist(), docs_b.tolist(), strict=True)],
        dtype=np.float32,
    )


URL_BATCH = 65_536  # pages_raw rows whose URLs are in memory at once (as Python strings)


def eligible_keys(staging: Path, docs: np.ndarray, fingerprints: np.ndarray) -> np.ndarray:
    """Page keys of the eligible pages `docs` (increasing), from their URLs' identities in
    `pages_raw` (its `url_key` column, normalized by the ingest's workers: hashed here, not
    parsed again, which was 1.1 of a million pages' 6.9 s near stage).

    Read a batch of rows at a time: a crawl's URLs as Python strings would cost about 100
    bytes a page at once, the largest per-page cost of this stage before (issue 16)."""
    docs = np.asarray(docs, dtype=np.int64)
    fps = np.asarray(fingerprints, dtype=np.int64)
    keys = np.empty(docs.size, dtype=np.int64)
    seen = np.zeros(docs.size, dtype=bool)
    for path in table_files(staging, "pages_raw"):
        source = pq.ParquetFile(path)
        for batch in source.iter_batches(batch_size=URL_BATCH, columns=["doc_id", "url_key"]):
            at, found = batch_page_keys(batch, docs, fps)
            keys[at] = found
            seen[at] = True
    if not seen.all():
        raise ValueError("pages_raw lacks some sketched pages")
    return keys


def batch_page_keys(
    batch: pa.RecordBatch | pa.Table, docs: np.ndarray, fingerprints: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(positions into `docs`, page keys) of the eligible pages among the `pages_raw` rows
    of `batch` (columns doc_id, url_key); `fingerprints` are those of `docs` (an array or a
    mapped file): `eligible_keys` in this process, or the scan's workers a range each
    (`near_parts`)."""
    ids = np.asarray(batch.column(0).to_numpy(), dtype=np.int64)
    pos = np.searchsorted(docs, ids)
    hit = pos < docs.size
    hit[hit] = docs[pos[hit]] == ids[hit]
    at = pos[hit]
    if not at.size:
        return at, np.empty(0, dtype=np.int64)
    column = batch.column(1)
    # `take` imports pyarrow.compute (0.05 s of a small scan): not when every row is taken
    urls = (column if hit.all() else column.take(pa.array(np.flatnonzero(hit)))).to_pylist()
    return at, page_keys(urls, np.asarray(fingerprints[at]), normalized=True)


def run_near(
    staging: Path, settings: Settings, sketched: SketchResult, features: Features | None = None
) -> NearResult:
    """Find verified near-duplicate pairs among the eligible signature rows."""
    signatures = MappedRows(staging / "signatures.npy")
    supers = MappedRows(staging / "supershingles.npy")
    rows = np.flatnonzero(sketched.eligible).astype(np.int64)
    docs = sketched.doc_ids[rows]
    exact_only = settings.method == "exact" and sketched.lexical_fp is not None
    identity = sketched.lexical_fp if exact_only else sketched.shingle_fp
    keys_of = eligible_keys(staging, docs, sketched.shingle_fp[rows])
    class_rep = equivalence_classes(identity[rows], keys_of)
    reps = sorted_distinct(class_rep)
    base = {"docs": docs, "rows": rows, "class_rep": class_rep, "reps": reps, "keys": keys_of}

    if settings.method not in ("minhash", "supershingles"):
        if settings.method == "exact":
            found = None
            a = b_ = np.empty(0, dtype=np.int64)
            sim = np.empty(0, dtype=np.float32)
        else:
            if features is None:
                raise ValueError(f"method {settings.method} needs the features stage")
            if not np.array_equal(features.doc_ids, sketched.doc_ids):
                raise ValueError("features and signatures are not aligned")
            found = feature_pairs(settings, features, rows[reps])
            a, b_, sim = reps[found.a], reps[found.b], found.similarity
        agree = (
            supershingle_agreement(np.asarray(supers[rows[a]]), np.asarray(supers[rows[b_]]))
            if settings.has_supershingles and a.size
            else np.full(a.size, -1)
        )
        contained = None
        if found is not None and found.contained is not None:
            small, large, c, r = found.contained
            contained = (docs[reps[small]], docs[reps[large]], c, r)
        return NearResult(
            **base,
            edge_a=a.astype(np.int64),
            edge_b=b_.astype(np.int64),
            similarity=np.asarray(sim, dtype=np.float32),
            agree=np.asarray(agree, dtype=np.int8),
            candidates=found.candidates if found is not None else 0,
            method_stats=found.stats if found is not None else {},
            contained=contained,
        )

    def exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _exact_similarity(staging, docs[a], docs[b], settings)

    # band keys wait on disk, one table read at a time (`SpilledKeys`)
    spill = staging / "band_keys.tmp"
    keys, bands, rows_per_band = candidate_keys(signatures, supers, rows[reps], settings, spill)
    try:
        found = verified_candidates(
            keys,
            reps,
            signatures,
            settings,
            rows=rows,
            supers=supers if settings.has_supershingles else None,
            megashingle=by_megashingles(settings),
            rescore=exact if settings.verify == "exact" else None,
            order=keys_of[reps],
        )
    finally:
        if isinstance(keys, SpilledKeys):
            keys.close()
    return NearResult(
        **base,
        edge_a=found.a,
        edge_b=found.b,
        similarity=found.similarity.astype(np.float32),
        agree=found.agree,
        bands=bands,
        rows_per_band=rows_per_band,
        candidates=found.candidates,
        stats=found.stats,
    )


def write_containment(path: Path, near: NearResult) -> int:
    """`containment.parquet`: contained-in pairs (empty when containment was not asked)."""
    return write_contained(path, near.contained)


def write_contained(
    path: Path, contained: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None
) -> int:
    """`containment.parquet` from the doc ids (contained, containing, containment,
    resemblance) of its pairs; empty for None (the min-hash methods find none)."""
    if contained is None:
        table = CONTAINMENT_SCHEMA.empty_table()
    else:
        small, large, c, r = contained
        order = np.lexsort((large, small))
        table = pa.table(
            {
                "doc_small": small[order],
                "doc_large": large[order],
                "containment": c[order],
                "resemblance": r[order],
            },
            schema=CONTAINMENT_SCHEMA,
        )
    pq.write_table(table, path, compression="zstd")
    return table.num_rows


def write_pairs(path: Path, near: NearResult) -> int:
    """Verified pairs plus one `identical` pair per page collapsed into a class, written a
    window at a time as the near stage by parts writes them (`pair_rows`): the edges one
    part, the classes another."""
    n = near.docs.size
    parts = [
        edge_rows(near.edge_a, near.edge_b, near.similarity, near.agree),
        identical_rows(np.arange(n), near.class_rep),
    ]
    return write_pair_rows(path, near.docs, parts, n)
