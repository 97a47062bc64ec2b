"""The Spark near stage's files: signatures, bucket keys and class rows written by the ingest
tasks, read by the part tasks by row (issue 47).

Why files: after the ingest, Spark spent most of its time moving signatures and keys
through its own rows: the band keys through a shuffle (85 task-s at a million pages), the
candidates' and the moved pages' signatures decoded again from the range files' list
columns and joined (75 and 81 task-s), where the embedded engine's workers read rows of a
mapped matrix (`steps/near_parts.py`). Here an ingest task, while it holds a range's
sketches, also writes

- `near_sigs/range-NNNNN.npy`: a row per record of the range, by its local id (zeros for a
  record without text), with its min-hash signature, super-shingles and page key
  (`sig_dtype`), so that any task reads them by the page's document id (`RangeRows`);
- `near_keys/keys-NNNNN.npy` and `keys-bounds-NNNNN.npy`: the bucket keys of its eligible
  pages (`near_pairs.candidate_keys`), dealt into `FINE_PARTS` parts by (table, key)
  (`kernels.buckets.key_parts`, the one partitioning) and stored in part order, with each
  part's bounds;
- `near_keys/class-NNNNN.npy` and `class-bounds-NNNNN.npy`: its eligible pages' shingle-set
  fingerprints and page keys, dealt into the fine parts by the fingerprint.

A class task takes a run of fine parts of the class rows (every class whole in it) and
writes the classes (`class_part`). A pair task takes a run of fine parts of the keys (every
bucket whole in it), reads its slice of every range's keys, drops the pages that do not
represent their class, pairs the buckets with `partition_pairs` and deals the pairs by
their own hash into verification parts (`bucket_part`), as `near_parts` does; a
verification task verifies its part's pairs once each with `near_pairs.verify_pairs`,
reading the signatures by document id, and writes its edges as a Parquet file
(`verify_part`). Only counts go back to the driver, and no row passes through Spark. The
files lie in the work folder, which every executor already reaches (the ingest tasks'
files are there).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.ingest.eligibility import enough_words
from neardup.kernels import SIGNATURE_DTYPE, estimate_resemblance
from neardup.kernels.buckets import CandidateStats, key_parts, partition_pairs, unpack_pairs
from neardup.kernels.sorting import found_in_sorted, sorted_distinct
from neardup.pipeline.executors.spark.kernels import EDGE_SCHEMA, matrix_of
from neardup.pipeline.steps.clusters import ASSIGN_SCHEMA
from neardup.pipeline.steps.near_pairs import (
    by_megashingles,
    candidate_keys,
    equivalence_classes,
    verify_pairs,
)
from neardup.pipeline.steps.near_parts import NO_TABLE, read_parts

SIGS = "near_sigs"
KEYS = "near_keys"
PAIRS = "near_pairs"
EDGES = "edges"  # the verified edges, a Parquet file per verification part
# Parts the ingest tasks deal the keys into; a pairing task takes a run of them, so the
# driver picks the number of tasks once the keys are counted.
FINE_PARTS = 1024
KEY_ROW = np.dtype([("key", "<i8"), ("doc", "<i8"), ("order", "<i8"), ("tbl", "<i4")])
# An eligible page for the equivalence classes: dealt into parts by its shingle-set
# fingerprint, so that a class is whole in one part.
CLASS_ROW = np.dtype([("fp", "<i8"), ("doc", "<i8"), ("order", "<i8")])
CLASSES = "classes"  # (doc_id, order_key, class_id) of every eligible page
NON_REPS = "non_reps"  # the doc ids of the pages that do not represent their class
SHARED = "shared_classes"  # the `CLASSES` rows of the classes of several pages
CLASSES_SCHEMA = pa.schema(
    [("doc_id", pa.int64()), ("order_key", pa.int64()), ("class_id", pa.int64())]
)


def supers_width(settings: Settings) -> int:
    """The super-shingles a page keeps: none unless the sketch holds them."""
    return settings.supershingle_count if settings.has_supershingles else 0


def sig_dtype(settings: Settings) -> np.dtype:
    """A row of a range's signature file: the min-hash values and the super-shingles."""
    return np.dtype(
        [
            ("minhash", SIGNATURE_DTYPE, (settings.num_perm,)),
            ("supers", "<i8", (supers_width(settings),)),
            ("order", "<i8"),  # the page key (`near_pairs.page_keys`)
        ]
    )


def _save(path: Path, array: np.ndarray) -> None:
    """`array` as the `.npy` file `path`, written under a temporary name and renamed: a
    retried task leaves one whole file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as handle:
            np.save(handle, array)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def sig_path(work: Path, range_idx: int) -> Path:
    """A range's signature file."""
    return work / SIGS / f"range-{range_idx:05d}.npy"


def keys_paths(work: Path, range_idx: int, kind: str = "keys") -> tuple[Path, Path]:
    """A range's rows dealt into fine parts (`kind`: bucket `keys` or `class` rows), in
    part order, and the bounds of each part."""
    return (
        work / KEYS / f"{kind}-{range_idx:05d}.npy",
        work / KEYS / f"{kind}-bounds-{range_idx:05d}.npy",
    )


def _save_parted(work: Path, range_idx: int, kind: str, rows: np.ndarray, part: np.ndarray) -> None:
    """`rows` put in the order of their fine part `part` and saved with the parts' bounds."""
    by_part = np.argsort(part.astype(np.uint16), kind="stable")  # a radix sort
    rows_file, bounds_file = keys_paths(work, range_idx, kind)
    _save(rows_file, rows[by_part])
    _save(bounds_file, np.searchsorted(part[by_part], np.arange(FINE_PARTS + 1)))


def _part_rows(
    work: Path, kind: str, part: int, parts: int, starts: np.ndarray, dtype: np.dtype
) -> np.ndarray:
    """Run `part` of `parts` of the fine parts of every range's `kind` rows, in range
    order, their `doc` ids shifted to the run's."""
    lo, hi = part * FINE_PARTS // parts, (part + 1) * FINE_PARTS // parts
    found = []
    for r, start in enumerate(np.asarray(starts).tolist()):
        rows_file, bounds_file = keys_paths(work, r, kind)
        bounds = np.load(bounds_file)
        rows = np.load(rows_file, mmap_mode="r")[int(bounds[lo]) : int(bounds[hi])]
        if rows.size:
            rows = np.array(rows)
            rows["doc"] += start
            found.append(rows)
    return np.concatenate(found) if found else np.empty(0, dtype=dtype)


class NearRows:
    """What an ingest task keeps of its range's sketched rows for the near stage, written
    as the range's signature and key files when the range is done (`write`)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.docs: list[np.ndarray] = []
        self.rows: list[np.ndarray] = []
        self.keys: list[np.ndarray] = []
        self.classes: list[np.ndarray] = []

    def add(self, texts: pa.Table) -> None:
        """Sketched text rows (`ingest.sketch_rows`: local doc ids, signatures, page keys)."""
        settings = self.settings
        n = texts.num_rows
        if not n:
            return
        row = np.zeros(n, dtype=sig_dtype(settings))
        row["minhash"] = matrix_of(texts.column("minhash"), settings.num_perm, np.int32).view(
            SIGNATURE_DTYPE
        )
        width = supers_width(settings)
        if width:
            row["supers"] = matrix_of(texts.column("supers"), width, np.int64)
        row["order"] = texts.column("order_key").to_numpy()
        docs = texts.column("doc_id").to_numpy()
        self.docs.append(docs)
        self.rows.append(row)
        eligible = np.flatnonzero(
            enough_words(
                texts.column("n_tokens").to_numpy(),
                texts.column("n_shingles").to_numpy(),
                settings.min_tokens,
            )
        )
        if not eligible.size:
            return
        order = row["order"][eligible]
        pages = np.empty(eligible.size, dtype=CLASS_ROW)
        pages["fp"] = texts.column("shingle_fp").to_numpy()[eligible]
        pages["doc"] = docs[eligible]
        pages["order"] = order
        self.classes.append(pages)
        keys, _, _ = candidate_keys(row["minhash"], row["supers"], eligible, settings)
        keys = np.asarray(keys)
        tables = keys.shape[1]
        entries = np.empty(keys.size, dtype=KEY_ROW)
        entries["key"] = keys.reshape(-1)
        entries["doc"] = np.repeat(docs[eligible], tables)
        entries["order"] = np.repeat(order, tables)
        entries["tbl"] = np.tile(np.arange(tables, dtype=np.int32), eligible.size)
        self.keys.append(entries)

    def write(self, work: Path, range_idx: int, records: int) -> None:
        """The range's signature file (a row per record), its keys and its class rows in
        part order."""
        rows = np.zeros(records, dtype=sig_dtype(self.settings))
        for docs, found in zip(self.docs, self.rows, strict=True):
            rows[docs] = found
        _save(sig_path(work, range_idx), rows)
        del rows
        entries = np.concatenate(self.keys) if self.keys else np.empty(0, dtype=KEY_ROW)
        part = key_parts(entries["tbl"], entries["key"], FINE_PARTS)
        _save_parted(work, range_idx, "keys", entries, part)
        pages = np.concatenate(self.classes) if self.classes else np.empty(0, dtype=CLASS_ROW)
        _save_parted(work, range_idx, "class", pages, key_parts(NO_TABLE, pages["fp"], FINE_PARTS))


class RangeRows:
    """One field of the ranges' signature files, by document id: `rows[docs]` is the
    matrix of those pages' rows. `starts` are the ranges' first ids (`RangeShift.shift`),
    in range order. Each read maps the files it needs for that read only, as
    `store.rows.MappedRows` does, so a task's resident memory holds the rows it asked for."""

    def __init__(self, work: Path, starts: np.ndarray, field: str) -> None:
        self.work = work
        self.starts = np.asarray(starts, dtype=np.int64)
        self.field = field

    def __getitem__(self, docs: np.ndarray) -> np.ndarray:
        docs = np.asarray(docs, dtype=np.int64)
        where = np.searchsorted(self.starts, docs, side="right") - 1
        out: np.ndarray | None = None
        for r in np.unique(where).tolist():
            mapped = np.load(sig_path(self.work, r), mmap_mode="r")
            try:
                column = mapped[self.field]
                if out is None:
                    out = np.empty((docs.size, *column.shape[1:]), dtype=column.dtype)
                mine = where == r
                out[mine] = column[docs[mine] - self.starts[r]]
            finally:
                del mapped
        if out is None:
            probe = np.load(sig_path(self.work, 0), mmap_mode="r")[self.field]
            out = np.empty((0, *probe.shape[1:]), dtype=probe.dtype)
        return out


def parted_count(work: Path, kind: str, ranges: int) -> int:
    """The `kind` rows (bucket `keys`, `class` rows) the ingest tasks wrote, from the
    files' headers: the driver sizes the part tasks by them."""
    return sum(np.load(keys_paths(work, r, kind)[0], mmap_mode="r").shape[0] for r in range(ranges))


def _sorted_ids(folder: Path) -> np.ndarray:
    """The sorted doc ids of a work table of doc ids (a `doc_id` column)."""
    files = sorted(folder.glob("*.parquet"))
    if not files:
        return np.empty(0, dtype=np.int64)
    return sorted_distinct(pq.read_table(files, columns=["doc_id"]).column("doc_id").to_numpy())


def _write_parquet(table: pa.Table, path: Path) -> None:
    """`table` as the Parquet file `path`, under a temporary name first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def class_part(work: Path, part: int, parts: int, starts: np.ndarray) -> tuple[int, int]:
    """The equivalence classes of run `part` of the fine parts of the eligible pages (every
    class whole in it): `near_pairs.equivalence_classes` over its pages in document order,
    so that a class's representative is the one it has over all pages. Writes the part's
    `CLASSES`, `NON_REPS` and `SHARED` files; the number of its pages that do not
    represent their class, and of its pages in classes of several pages."""
    pages = _part_rows(work, "class", part, parts, starts, CLASS_ROW)
    pages = pages[np.argsort(pages["doc"], kind="stable")]
    class_id = pages["doc"][equivalence_classes(pages["fp"], pages["order"])]
    name = f"part-{part:05d}.parquet"
    table = pa.table([pages["doc"], pages["order"], class_id], schema=CLASSES_SCHEMA)
    _write_parquet(table, work / CLASSES / name)
    moved = class_id != pages["doc"]
    others = pages["doc"][moved]
    _write_parquet(pa.table({"doc_id": others}), work / NON_REPS / name)
    shared = np.isin(class_id, class_id[moved])
    _write_parquet(table.filter(pa.array(shared)), work / SHARED / name)
    return int(others.size), int(shared.sum())


def bucket_part(
    work: Path, part: int, parts: int, starts: np.ndarray, max_bucket: int
) -> tuple[int, int, int]:
    """The candidate pairs of run `part` of `parts` of the fine parts: every range's keys of
    those parts, less those of pages that do not represent their class (`NON_REPS`),
    paired by `partition_pairs` and dealt by their own hash into `parts`
    verification files (`pairs-DEST-PART.npy`); (emitted, large buckets, largest)."""
    entries = _part_rows(work, "keys", part, parts, starts, KEY_ROW)
    others = _sorted_ids(work / NON_REPS)
    if others.size:
        entries = entries[~found_in_sorted(others, entries["doc"])[1]]
    stats = CandidateStats()
    packed = partition_pairs(
        entries["tbl"], entries["key"], entries["doc"], entries["order"], max_bucket, stats
    )
    del entries
    dest = key_parts(NO_TABLE, packed, parts)
    for q in range(parts):
        _save(work / PAIRS / f"pairs-{q:05d}-{part:05d}.npy", packed[dest == q])
    return stats.emitted, stats.large_buckets, stats.largest_bucket


def verify_part(work: Path, part: int, starts: np.ndarray, settings: Settings) -> int:
    """The pairs dealt to verification part `part`, each once, verified by `verify_pairs`
    with the signatures read by document id; the edges written as `edges/part-PART.parquet`
    (`EDGE_SCHEMA`). The part's unique candidate pairs."""
    files = sorted((work / PAIRS).glob(f"pairs-{part:05d}-*.npy"))
    packed = sorted_distinct(read_parts(files, np.int64))
    a, b = unpack_pairs(packed)
    found = verify_pairs(
        a,
        b,
        RangeRows(work, starts, "minhash"),
        settings,
        supers=RangeRows(work, starts, "supers") if settings.has_supershingles else None,
        megashingle=by_megashingles(settings),
    )
    folder = work / EDGES
    folder.mkdir(parents=True, exist_ok=True)
    edges = pa.table(
        [
            pa.array(found.a),
            pa.array(found.b),
            pa.array(found.similarity.astype(np.float32)),
            pa.array(found.agree.astype(np.int32)),
        ],
        schema=EDGE_SCHEMA,
    )
    _write_parquet(edges, folder / f"part-{part:05d}.parquet")
    return int(packed.size)


def representative_batches(
    batches: Iterator[pa.RecordBatch], work: str, starts: np.ndarray
) -> Iterator[pa.RecordBatch]:
    """Assignments of pages that moved to another page's cluster (`doc_id`, `cluster_id`,
    ...) -> the assignment rows with the estimated resemblance to the representative, as
    `steps.clusters.run_clusters` computes it, the two signatures read by document id."""
    signatures = RangeRows(Path(work), starts, "minhash")
    for batch in batches:
        if not batch.num_rows:
            continue
        sim = estimate_resemblance(
            signatures[batch.column("doc_id").to_numpy()],
            signatures[batch.column("cluster_id").to_numpy()],
        )
        columns = [batch.column(name) for name in ASSIGN_SCHEMA.names[:-1]]
        similarity = np.asarray(sim, dtype=np.float32).reshape(-1)
        yield pa.RecordBatch.from_arrays([*columns, pa.array(similarity)], schema=ASSIGN_SCHEMA)
