"""`neardup add --engine spark`: the crawl files read, their pages turned into text and
sketched on Spark's executors, one task a file; the batches come back to the process that
holds the index, in file order, and are applied there as the embedded engine applies its
own (`feed.add_files`). The index sees these jobs through one object, the Spark engine
(`spark.SparkEngine`).

What is distributed is what costs the most per page and needs no index: reading the
archives, HTML to text, the eligibility rule, the links, the sketches (`crawl_updates.page_batches`
and `prepare.prepare_batch`, the embedded engine's own functions, so both engines admit and
sketch a page alike). What a task sends back is a batch's sketches and URLs, not its text
(about 0.75 KB a page pickled, against several), through piece files of bounded size in the index's
folder, read back one record at a time (`spark_spool.py`), never as one value through
Spark: a file of any size goes in with Spark's default memory. Then the saved index is
searched on the executors for the keys each applied batch looks up in it
(`saved_entries_on_spark`: the band keys, the classes' fingerprints and the page keys,
each sorted, cut into ranges, a task a range, each reading only the part of each saved
array its keys fall in), so the process that
applies does not read those files, the parts of the index that grow with it and that a
batch searches. Applying (the batch's candidates from those entries and the changes
since the save, the touched components clustered again, winners, the new version
committed) stays in the one process that writes the index, over its mapped files:
its own memory is what the batches touch (docs/service.md). The pairs of sketches a batch
compares (its verified candidates, each touched group's members against its winner) are
compared on the executors too (`scores_on_spark`), which read the saved sketches where the
files are: the applying process reads none of them.
"""

from __future__ import annotations

import pickle
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from neardup.config import Settings
from neardup.index.engines import spark_spool
from neardup.index.engines.spark_spool import read_pieces, spool_folder, write_pieces
from neardup.index.files.saved_search import NODE_KEYS
from neardup.index.state.found import Found, PairsToScore
from neardup.index.state.prepare import PreparedBatch, prepare_batch

# A batch of fewer pages (the in-links' and removals' batches of `batch` pages, a small add)
# is applied by the process that holds the index alone: its searches and comparisons read
# a few thousand rows of the saved index there in milliseconds, where each of the up to
# four Spark jobs they make costs 0.1-0.3 s (a WARC add of 4,823 pages into 8,597: 16.1-16.7
# s with every batch's jobs, against 14.2-14.4 s before them).
EXECUTORS_FROM = 2_000


def sketched_on_spark(
    paths: list[str],
    store: Path,
    settings: Settings,
    dims: int,
    batch: int,
    links: bool,
    master: str | None,
    conf: dict[str, str] | None,
    skipped: Counter[str],
    inlinks: Counter[str],
    most: int = 16,
) -> Iterator[PreparedBatch]:
    """The files' batches sketched by Spark's executors (a task a file, `batch` pages a
    batch), yielded in file order, a file's batches joined `most` at a time into one (one
    transaction each, not one a batch). The files go in waves of as many tasks as the
    session runs at once (`SparkContext.runJob`: all cores busy; `toLocalIterator` runs one
    task after the other). A task writes its file's batches into pieces in a spool folder
    of the index `store` and sends back their names; they are read here a record at a time
    (`spark_spool.py`: a file of any size, with Spark's default memory). Each file's skipped
    records and in-links are added to `skipped` and `inlinks` once its batches are yielded."""
    from neardup.ingest.readers import expand_inputs

    if not paths:
        return
    files = [path for path, _ in expand_inputs(paths)]
    context = _context(master, conf)
    with spool_folder(Path(store)) as spool:
        tasks = context.parallelize(list(enumerate(files)), len(files))
        work = partial(
            _sketch_files,
            settings=settings,
            dims=dims,
            batch=batch,
            links=links,
            spool=str(spool),
            bound=spark_spool.PIECE_BYTES,
        )
        wave = max(1, int(context.defaultParallelism))
        held: list[PreparedBatch] = []
        for lo in range(0, len(files), wave):
            done = _run(context, tasks, work, list(range(lo, min(lo + wave, len(files)))))
            for folder, names in map(pickle.loads, done):
                for kind, got in read_pieces(spool / folder, names):
                    if kind == "batch":
                        held.append(got)
                        if len(held) >= most:
                            yield PreparedBatch.joined(held)
                            held = []
                    elif kind == "links":
                        inlinks.update(got)
                    else:
                        if held:
                            yield PreparedBatch.joined(held)
                            held = []
                        skipped.update(got)


def saved_entries_on_spark(
    folder: Path,
    queries: dict[str, list[np.ndarray]],
    master: str | None,
    conf: dict[str, str] | None,
    shape: tuple[int, int] | None = None,
) -> tuple[dict[str, list[Found]], dict[int, np.ndarray]]:
    """The saved index's entries for a batch's keys (`ServiceIndex.saved_queries`: the band
    keys a table, the classes' fingerprints, the page keys, each list sorted), searched by
    Spark's executors in the save's folder `folder`, which they read where the driver does
    (storage every worker shares). Each list is cut into as many ranges of keys as the
    session runs tasks at once, a task a range of each: a task reads, of each saved sorted
    array, only the pages its keys' binary searches land on
    (`saved_search.search_saved`). With `shape` (bands, rows), also the band keys of the
    saved nodes among the pages found, by slot (empty without)."""
    context = _context(master, conf)
    widest = max(q.size for rows in queries.values() for q in rows)
    parts = max(1, min(int(context.defaultParallelism), widest))

    def cut(q: np.ndarray, p: int) -> np.ndarray:
        bounds = np.linspace(0, q.size, parts + 1).astype(np.int64)
        return q[bounds[p] : bounds[p + 1]]

    tasks = [
        {name: [cut(q, p) for q in rows] for name, rows in queries.items()} for p in range(parts)
    ]
    work = partial(_search_saved, folder=str(folder), shape=shape)
    got = [
        pickle.loads(b)
        for b in _run(context, context.parallelize(tasks, parts), work, list(range(parts)))
    ]
    node_keys = {
        slot: keys
        for g in got
        for slots, matrix in g.get(NODE_KEYS, [])
        for slot, keys in zip(slots.tolist(), matrix, strict=True)
    }
    return {
        name: [
            Found.of(
                q,
                np.concatenate([g[name][row][0] for g in got]),
                np.concatenate([g[name][row][1] for g in got]),
            )
            for row, q in enumerate(rows)
        ]
        for name, rows in queries.items()
    }, node_keys


def scores_on_spark(
    folder: Path, pairs: PairsToScore, master: str | None, conf: dict[str, str] | None
) -> np.ndarray:
    """The resemblance of each pair of sketches a batch compares (its candidates, each
    group's members against its winner: `PageTable.resemblance`), computed by Spark's
    executors from the save's sketches in `folder` (storage every worker shares) and the
    changed ones that go with the pairs: a run of pairs a task, each reading only the saved
    rows its pairs name (`saved_search.score_saved`)."""
    context = _context(master, conf)
    parts = max(1, min(int(context.defaultParallelism), int(pairs.a.size)))
    tasks = context.parallelize(pairs.cut(parts), parts)
    work = partial(_score_saved, folder=str(folder))
    got = [pickle.loads(b) for b in _run(context, tasks, work, list(range(parts)))]
    return np.concatenate(got) if got else np.empty(0, np.float64)


def band_tables_on_spark(
    folder: Path, before: Path | None, tables: int, master: str | None, conf: dict[str, str] | None
) -> None:
    """A save's band index written by Spark's executors, a task a table, each reading its
    row of the save `before` and the changes since and writing its row of the files in
    `folder` in place (`band_save.write_table`; storage every worker shares). A band index
    of fewer than `EXECUTORS_FROM` nodes is written by this process (a job costs more)."""
    from neardup.index.files.band_save import fill_tables, widths

    if widths(folder)["new"] < EXECUTORS_FROM:
        fill_tables(folder, before, tables)
        return
    context = _context(master, conf)
    old = None if before is None else str(before)
    work = partial(_write_tables, folder=str(folder), before=old)
    _run(context, context.parallelize(range(tables), tables), work, list(range(tables)))


def _write_tables(tables: Iterable[int], folder: str, before: str | None) -> Iterator[bytes]:
    """On an executor: its tables of a save's band index written in place."""
    from neardup.index.files.band_save import write_table

    for t in tables:
        write_table(Path(folder), None if before is None else Path(before), t)
    yield b""


def _score_saved(tasks: Iterable[PairsToScore], folder: str) -> Iterator[bytes]:
    """On an executor: the resemblance of one run of pairs, pickled."""
    from neardup.index.files.saved_search import score_saved

    for pairs in tasks:
        yield pickle.dumps(score_saved(Path(folder), pairs))


def _search_saved(
    tasks: Iterable[dict[str, list[np.ndarray]]], folder: str, shape: tuple[int, int] | None
) -> Iterator[bytes]:
    """On an executor: the saved index's entries for one range of each list of keys,
    pickled."""
    from neardup.index.files.saved_search import search_saved

    for queries in tasks:
        yield pickle.dumps(search_saved(Path(folder), queries, shape))


def _context(master: str | None, conf: dict[str, str] | None) -> Any:
    """The Spark context of an add: the session's (`session.DEFAULT_CONF` under the
    user's `conf`)."""
    from neardup.pipeline.executors.spark.session import spark_session

    return spark_session(master, conf).sparkContext


def _run(context: Any, tasks: Any, work: Any, parts: list[int]) -> list[bytes]:
    """The results of the tasks `parts` (`SparkContext.runJob`); a failed job is one
    `SparkJobError` line naming its cause (the executor's exception; for a JVM out of
    memory, whose heap and the setting that raises it), as a scan's is."""
    from neardup.pipeline.executors.spark.engine import SparkJobError
    from neardup.pipeline.executors.spark.failures import failure_line
    from neardup.pipeline.executors.spark.tasks import on_one_thread

    try:
        return list(context.runJob(tasks, on_one_thread(work), parts))
    except Exception as err:  # Py4J's error for a failed job: its text says why
        raise SparkJobError(f"Spark stage add failed: {failure_line(err, context)}") from err


# In-links a record at the most: a file's links can name millions of URLs.
LINKS_A_RECORD = 100_000


def _sketch_files(
    tasks: Iterable[tuple[int, str]],
    settings: Settings,
    dims: int,
    batch: int,
    links: bool,
    spool: str,
    bound: int,
) -> Iterator[bytes]:
    """On an executor: each file's records written into pieces of about `bound` bytes in
    a folder of this attempt's own in `spool` (its batches, sketched and without their
    text; its in-links; its skipped records, last), and that folder's name and its pieces'
    names sent back, pickled."""
    import uuid

    for i, path in tasks:
        folder = f"file-{i:06d}-{uuid.uuid4().hex[:8]}"
        records = _file_records(path, settings, dims, batch, links)
        yield pickle.dumps((folder, write_pieces(records, Path(spool) / folder, bound)))


def _file_records(
    path: str, settings: Settings, dims: int, batch: int, links: bool
) -> Iterator[tuple[str, Any]]:
    """A file's records: its batches, its in-links `LINKS_A_RECORD` at a time, then its
    skipped records."""
    from neardup.index.engines.crawl_updates import page_batches

    skipped: Counter[str] = Counter()
    inlinks: Counter[str] = Counter()
    for updates in page_batches([path], settings, batch, links, skipped, inlinks):
        yield "batch", _without_text(prepare_batch(updates, settings, dims))
    targets = list(inlinks.items())
    for lo in range(0, len(targets), LINKS_A_RECORD):
        yield "links", Counter(dict(targets[lo : lo + LINKS_A_RECORD]))
    yield "file", skipped


def _without_text(prepared: PreparedBatch) -> PreparedBatch:
    """The batch as the index applies it: a page's text, read only to sketch it, is left
    behind (an empty text still marks the update as content, as `apply_batch.py` tells them)."""
    updates: dict[str, Any] = {
        url: replace(u, text="", html=None) if u.text is not None or u.html is not None else u
        for url, u in prepared.updates.items()
    }
    return replace(prepared, updates=updates)
