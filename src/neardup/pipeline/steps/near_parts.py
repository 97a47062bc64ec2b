"""The near and cluster stages on the embedded engine's workers, by parts (issue 47).

`near.run_near` runs the stage in the scanning process: it sorts every band key of the
crawl there, and with the ingest on the workers that process would still do a third of a
scan's CPU. Here each step is a set of worker tasks (`LocalEngine.map`) that read what they
need from files in the staging folder (`near_parts/`, and the memory-mapped `signatures.npy`
and `supershingles.npy`) and write what the next step reads; the scanning process only
writes the eligible pages' ids and fingerprints, deals out the tasks and adds up counts.

1. page keys (`near_pairs.page_keys`), a range of pages a task (their `pages_raw` rows
   read by doc id), into one shared file at the pages' positions;
2. equivalence classes: the pages dealt into parts by their shingle-set fingerprint
   (`key_parts`, about `CLASS_PAGES` pages a part), then one part a task: a class is whole
   in one part, so `equivalence_classes` over the part gives every page the representative
   it gives over all pages;
3. bucket keys of the class representatives (`near_pairs.candidate_keys`), a range of pages
   a task, dealt into parts by (table, key) with `kernels.buckets.key_parts`, the Spark
   engine's partitioning;
4. candidate pairs, a part a task (`kernels.buckets.partition_pairs`: `table_pairs`, the
   rule of every engine, over each table's keys in the part); every bucket is whole in one
   part, so the parts' pairs together are the pairs of all keys, large buckets' chains
   included. A pair found in several parts (two pages sharing buckets of different tables)
   is dealt into one verification part by its own hash, so each pair is verified once and
   the count of unique candidates is the whole's;
5. verification, a part of the pairs a task (`near_pairs.verify_pairs`, exact
   verification reading the page text as in this process); the edges that pass are saved
   sorted by pair (`pair_rows.edge_rows`), as step 2 saves its part's `identical` rows;
6. one task writes `pairs` from those parts, merged a window of pages at a time
   (`pair_rows.write_pair_rows`), and `containment`; the cluster stage is one more task
   (`clusters.cluster_parts` over the same parts), since its per-page work (similarities
   to the representative, the assignments table) cost 0.7-4.8 CPU-seconds of the scanning
   process at a million pages.

The scanning process's CPU in the two stages fell from 4.6 to 0.08 CPU-s at a million pages
(docs/benchmarks.md, issue 47's near stage); the stage's own work rose from 4 to 9 CPU-s,
spread over the workers. The pool starts afresh for the stage (`EmbeddedSteps.near`): the
ingest's workers keep what their allocators hold.

Memory: no process holds every key. A step-3 task holds `KEY_ROWS` signatures and their
keys (under 70 MiB at K = 128 and 18 bands); a step-4 task at most `PART_BYTES` of keys and
their pairs, about 110 MiB (the parts are as many as the workers, or more when the keys need
it); a step-2 task about `CLASS_PAGES` pages; a step-5 task its part's pairs and
`near_pairs.CHUNK` signature pairs at a time. Step 6 and the cluster task read the per-page
files (`docs.npy`, `rows.npy`, `class_rep.npy`, `page_keys.npy`) through `MappedRows`, a
slice or a gather mapped for that read only, and the parts one at a time: step 6 holds one
window's rows; the cluster task the graph of the pages that have an edge (a few arrays an
edge, `cluster_graph`) and a slice of `clusters.ASSIGN_SLICE` pages' labels. No task holds
an array of every page (issue 47, item 4).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from numpy.lib.format import open_memmap

from neardup.config import Settings
from neardup.kernels.buckets import CandidateStats, key_parts, partition_pairs, unpack_pairs
from neardup.kernels.sorting import sorted_distinct
from neardup.pipeline.executors.local import LocalEngine
from neardup.pipeline.steps.clusters import PageArrays, cluster_parts
from neardup.pipeline.steps.near import (
    URL_BATCH,
    _exact_similarity,
    batch_page_keys,
    write_contained,
)
from neardup.pipeline.steps.near_pairs import (
    MappedRows,
    band_shape,
    by_megashingles,
    candidate_keys,
    equivalence_classes,
    verify_pairs,
)
from neardup.pipeline.steps.pair_rows import edge_rows, identical_rows, write_pair_rows
from neardup.pipeline.steps.sketch import SketchResult

NEAR_DIR = "near_parts"  # in the staging folder; removed after the cluster stage
# Class representatives whose bucket keys one task computes: 32 Ki signatures (16 MiB at
# K = 128) and their keys, about 1.5 KB a page in all (the keys dealt into parts).
KEY_ROWS = 32_768
# Pages a task of steps 1 and 2 takes: their URLs (step 1), or about as many pages of a part
# of the classes (step 2, some 400 bytes a page while grouped; more parts than workers when
# needed), so that a task's memory stays bounded.
CLASS_PAGES = 131_072
# Bucket keys one part holds at most (16 bytes a key); more parts than workers when needed.
# A step-4 task holds about five times this (the keys read, put in table order, their
# page keys): at 64 MiB the two workers' tasks made the tree's peak 1.2-1.3 GB at a million
# pages, against 0.8 GB for the stage in one process.
PART_BYTES = 16 << 20
KEY_DTYPE = np.dtype([("key", "<i8"), ("node", "<i4"), ("tbl", "<i4")])
NO_TABLE = np.zeros(1, dtype=np.int64)  # `key_parts` of values that are not bucket keys


def parted_near_applies(settings: Settings, sketched: SketchResult, workers: int) -> bool:
    """Whether the near stage runs by parts: with workers to run them, for the candidate
    methods of `near_pairs` (min-hash bands, megashingles), and pages to compare. The
    feature methods and `exact` keep `run_near` in the scanning process."""
    return (
        workers > 1
        and settings.method in ("minhash", "supershingles")
        and bool(sketched.eligible.any())
    )


def part_count(pages: int, tables: int, workers: int) -> int:
    """Parts of the bucket keys: one a worker, more when a part would hold more than
    `PART_BYTES` of keys."""
    needed = -(-pages * max(tables, 1) * KEY_DTYPE.itemsize // PART_BYTES)
    return min(max(workers, needed), 1 << 16)  # parts numbered by uint16 (`_keys_task`)


@dataclass
class PartedNear:
    """What the scanning process keeps of a near stage run by parts: the folder of its
    files and the figures of the scan summary."""

    folder: Path
    bands: int = 0
    rows_per_band: int = 0
    candidates: int = 0
    stats: CandidateStats = field(default_factory=CandidateStats)
    verified_pairs: int = 0
    pairs_rows: int = 0
    containment_rows: int = 0


def run_near_parted(
    staging: Path, settings: Settings, sketched: SketchResult, pool: LocalEngine
) -> PartedNear:
    """The near stage by parts on `pool`'s workers (see the module docstring); `pairs` and
    `containment` written, as `run_near` and `write_pairs` write them."""
    folder = staging / NEAR_DIR
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    rows = np.flatnonzero(sketched.eligible).astype(np.int64)
    n = int(rows.size)
    np.save(folder / "docs.npy", sketched.doc_ids[rows])
    np.save(folder / "rows.npy", rows)
    np.save(folder / "fps.npy", np.asarray(sketched.shingle_fp[rows], dtype=np.int64))
    open_memmap(folder / "page_keys.npy", mode="w+", dtype=np.int64, shape=(n,)).flush()
    open_memmap(folder / "class_rep.npy", mode="w+", dtype=np.int64, shape=(n,)).flush()
    del rows

    workers = pool.workers
    slices = _slices(n, min(CLASS_PAGES, -(-n // (2 * workers))))  # two tasks a worker or more
    found = sum(pool.map(_page_keys_task, [(folder, s, e) for s, e in slices]))
    if found != n:
        raise ValueError("pages_raw lacks some sketched pages")
    classes = max(workers, -(-n // CLASS_PAGES))
    list(pool.map(_deal_classes_task, [(folder, s, e, classes) for s, e in slices]))
    list(pool.map(_classes_task, [(folder, p) for p in range(classes)]))

    bands, rows_per_band = band_shape(settings)
    count = settings.supershingle_count
    tables = count * (count - 1) // 2 if by_megashingles(settings) else bands
    parts = part_count(n, tables, workers)
    spans = _slices(n, KEY_ROWS)
    list(pool.map(_keys_task, [(folder, s, e, parts, settings) for s, e in spans]))
    stats = CandidateStats(tables=tables)
    for emitted, large, largest in pool.map(
        _buckets_task, [(folder, p, parts, settings) for p in range(parts)]
    ):
        stats.emitted += emitted
        stats.large_buckets += large
        stats.largest_bucket = max(stats.largest_bucket, largest)
    stats.unique = sum(pool.map(_verify_task, [(folder, q, settings) for q in range(parts)]))
    (verified, pairs_rows, containment_rows), *_ = pool.map(_gather_task, [folder])
    return PartedNear(
        folder=folder,
        bands=bands,
        rows_per_band=rows_per_band,
        candidates=stats.unique,
        stats=stats,
        verified_pairs=verified,
        pairs_rows=pairs_rows,
        containment_rows=containment_rows,
    )


def cluster_parted(near: PartedNear, settings: Settings, pool: LocalEngine) -> int:
    """The cluster stage of a near stage run by parts: `run_clusters` in one worker, over
    the arrays the near stage left; then its folder is removed. The number of clusters of
    two pages or more."""
    try:
        (clusters,) = pool.map(_cluster_task, [(near.folder, settings)])
    finally:
        shutil.rmtree(near.folder, ignore_errors=True)
    return clusters


def _slices(n: int, size: int) -> list[tuple[int, int]]:
    """(start, stop) of the slices of `size` rows that cover n rows."""
    return [(start, min(start + size, n)) for start in range(0, n, size)]


def _page_keys_task(task: tuple[Path, int, int]) -> int:
    """Step 1: the page keys of eligible pages start .. stop - 1, written at their positions
    in `page_keys.npy`; how many `pages_raw` had. The rows are read by a filter on their
    doc ids (the row groups' statistics skip the others), from one file or a folder of
    parts alike."""
    folder, start, stop = task
    docs = np.load(folder / "docs.npy", mmap_mode="r")
    fps = np.load(folder / "fps.npy", mmap_mode="r")
    first, last = int(docs[start]), int(docs[stop - 1])
    rows = pq.read_table(
        folder.parent / "pages_raw.parquet",
        columns=["doc_id", "url_key"],
        filters=[("doc_id", ">=", first), ("doc_id", "<=", last)],
    )
    keys = open_memmap(folder / "page_keys.npy", mode="r+")
    count = 0
    for batch in rows.to_batches(max_chunksize=URL_BATCH):
        at, found = batch_page_keys(batch, docs[start:stop], fps[start:stop])
        keys[start + at] = found
        count += int(at.size)
    keys.flush()
    return count


def _deal_classes_task(task: tuple[Path, int, int, int]) -> None:
    """Step 2, first half: the positions of pages start .. stop - 1, dealt into the parts
    of the classes by their shingle-set fingerprint (`class-PART-START.npy`)."""
    folder, start, stop, parts = task
    fps = np.asarray(np.load(folder / "fps.npy", mmap_mode="r")[start:stop])
    part = key_parts(NO_TABLE, fps, parts)
    for p in range(parts):
        np.save(folder / f"class-{p:05d}-{start:012d}.npy", start + np.flatnonzero(part == p))


def _classes_task(task: tuple[Path, int]) -> None:
    """Step 2: the class representative of each page of class part `part`, written at its
    position in `class_rep.npy`. The positions come in increasing order (the files by
    their first page), so the first of equal keys is the first page, as over all pages."""
    folder, part = task
    mine = read_parts(sorted(folder.glob(f"class-{part:05d}-*.npy")), np.int64)
    fps = np.asarray(np.load(folder / "fps.npy", mmap_mode="r")[mine])
    keys = np.asarray(np.load(folder / "page_keys.npy", mmap_mode="r")[mine])
    reps = mine[equivalence_classes(fps, keys)]
    class_rep = open_memmap(folder / "class_rep.npy", mode="r+")
    class_rep[mine] = reps
    class_rep.flush()
    np.save(folder / f"same-{part:05d}.npy", identical_rows(mine, reps))


def _keys_task(task: tuple[Path, int, int, int, Settings]) -> None:
    """Step 3: the bucket keys of the class representatives among pages start .. stop - 1,
    one file per part (`keys-PART-START.npy`, rows of `KEY_DTYPE`)."""
    folder, start, stop, parts, settings = task
    span = np.arange(start, stop, dtype=np.int64)
    class_rep = np.load(folder / "class_rep.npy", mmap_mode="r")
    nodes = span[np.asarray(class_rep[start:stop]) == span]
    rows = np.asarray(np.load(folder / "rows.npy", mmap_mode="r")[nodes])
    staging = folder.parent
    keys, _, _ = candidate_keys(
        MappedRows(staging / "signatures.npy"),
        MappedRows(staging / "supershingles.npy"),
        rows,
        settings,
    )
    keys = np.asarray(keys)
    tables = keys.shape[1]
    entries = np.empty(keys.size, dtype=KEY_DTYPE)
    entries["key"] = keys.reshape(-1)
    entries["node"] = np.repeat(nodes, tables)
    entries["tbl"] = np.tile(np.arange(tables, dtype=np.int32), nodes.size)
    part = key_parts(entries["tbl"], entries["key"], parts)
    by_part = np.argsort(part.astype(np.uint16), kind="stable")  # a radix sort, one pass
    bounds = np.searchsorted(part[by_part], np.arange(parts + 1))
    for p in range(parts):
        np.save(
            folder / f"keys-{p:05d}-{start:012d}.npy", entries[by_part[bounds[p] : bounds[p + 1]]]
        )


def read_parts(files: list[Path], dtype: np.dtype | type) -> np.ndarray:
    """The rows of `files` (1-d `.npy` arrays of `dtype`) in one array, each file read
    into its place and removed: one copy of the rows in memory, not two."""
    sizes = [np.load(f, mmap_mode="r").shape[0] for f in files]
    out = np.empty(sum(sizes), dtype=dtype)
    at = 0
    for f, size in zip(files, sizes, strict=True):
        out[at : at + size] = np.load(f)
        at += size
        f.unlink()
    return out


def _buckets_task(task: tuple[Path, int, int, Settings]) -> tuple[int, int, int]:
    """Step 4: the candidate pairs of one part of the bucket keys, dealt by their own hash
    into `pairs-DEST-PART.npy` files; (emitted, large buckets, largest bucket)."""
    folder, part, parts, settings = task
    entries = read_parts(sorted(folder.glob(f"keys-{part:05d}-*.npy")), KEY_DTYPE)
    nodes = entries["node"].astype(np.int64)
    order = np.asarray(np.load(folder / "page_keys.npy", mmap_mode="r")[nodes])
    stats = CandidateStats()
    packed = partition_pairs(
        entries["tbl"], entries["key"], nodes, order, settings.max_bucket_pairs, stats
    )
    del entries, nodes, order
    dest = key_parts(NO_TABLE, packed, parts)
    for q in range(parts):
        np.save(folder / f"pairs-{q:05d}-{part:05d}.npy", packed[dest == q])
    return stats.emitted, stats.large_buckets, stats.largest_bucket


def _verify_task(task: tuple[Path, int, Settings]) -> int:
    """Step 5: the pairs dealt to part `part`, each once, verified; the edges that pass go
    to `edges-PART.npz`. The number of unique candidate pairs of the part."""
    folder, part, settings = task
    packed = sorted_distinct(read_parts(sorted(folder.glob(f"pairs-{part:05d}-*.npy")), np.int64))
    a, b = unpack_pairs(packed)
    staging = folder.parent
    docs = np.load(folder / "docs.npy", mmap_mode="r")

    def exact(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return _exact_similarity(staging, np.asarray(docs[x]), np.asarray(docs[y]), settings)

    found = verify_pairs(
        a,
        b,
        MappedRows(staging / "signatures.npy"),
        settings,
        rows=np.load(folder / "rows.npy", mmap_mode="r"),
        supers=MappedRows(staging / "supershingles.npy") if settings.has_supershingles else None,
        megashingle=by_megashingles(settings),
        rescore=exact if settings.verify == "exact" else None,
    )
    np.save(
        folder / f"edges-{part:05d}.npy",
        edge_rows(found.a, found.b, found.similarity, found.agree),
    )
    return int(packed.size)


def _parts(folder: Path, name: str) -> list[MappedRows]:
    """The files `name-PART.npy` of every part, in part order, each mapped per read."""
    return [MappedRows(f) for f in sorted(folder.glob(f"{name}-*.npy"))]


def _gather_task(folder: Path) -> tuple[int, int, int]:
    """Step 6: `pairs` from the parts' verified edges and identical rows, merged a window
    of pages at a time (`pair_rows.write_pair_rows`); `containment` (empty: the min-hash
    methods find no containment). (verified pairs, rows of `pairs`, rows of
    `containment`)."""
    staging = folder.parent
    edges = _parts(folder, "edges")
    docs = MappedRows(folder / "docs.npy")
    parts = [*edges, *_parts(folder, "same")]
    pairs_rows = write_pair_rows(staging / "pairs.parquet", docs, parts, len(docs))
    containment_rows = write_contained(staging / "containment.parquet", None)
    return sum(len(part) for part in edges), pairs_rows, containment_rows


def _cluster_task(task: tuple[Path, Settings]) -> int:
    """The cluster stage in a worker: `cluster_parts` over the near stage's files, each
    read a part or a slice at a time."""
    folder, settings = task
    pages = PageArrays(
        docs=MappedRows(folder / "docs.npy"),
        rows=MappedRows(folder / "rows.npy"),
        class_rep=MappedRows(folder / "class_rep.npy"),
        keys=MappedRows(folder / "page_keys.npy"),
    )
    edges, classes = _parts(folder, "edges"), _parts(folder, "same")
    return cluster_parts(folder.parent, pages, edges, classes, settings)
