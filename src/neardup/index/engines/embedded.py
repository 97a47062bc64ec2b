"""The index's embedded engine: all in this process and its sketching workers.

A batch reads the mapped saved arrays as it goes, so the engine finds nothing before it
(`lookups`: `HERE`); `search` and `score` run the functions Spark's tasks run
(`saved_search`), here, for a caller that wants the answers before a batch (and for the
engines' contract test)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import numpy as np

from neardup.index.engines.base import Entries, FeedInputs
from neardup.index.engines.crawl_updates import page_batches
from neardup.index.files.band_save import fill_tables
from neardup.index.files.saved_search import NODE_KEYS, score_saved, search_saved
from neardup.index.service_index import ServiceIndex
from neardup.index.state.found import Found, PairsToScore
from neardup.index.state.lookups import HERE, BatchLookups
from neardup.index.state.prepare import PreparedBatch, prepare_batch
from neardup.index.state.updates import PageUpdate
from neardup.pipeline.executors.local import LocalEngine

INLINE_SKETCH_S = 3.0  # sketching in this process before the worker processes start


class EmbeddedEngine:
    """All in this process (and its sketching workers)."""

    def sketched(self, feed: FeedInputs) -> Iterator[PreparedBatch]:
        sketch = partial(prepare_batch, settings=feed.settings, dims=feed.dims)
        batches = page_batches(
            feed.paths, feed.settings, feed.batch, feed.links, feed.skipped, feed.inlinks
        )
        return sketched_here(batches, sketch, feed.workers)

    def lookups(self, index: ServiceIndex, prepared: PreparedBatch) -> BatchLookups:
        return HERE

    def search(
        self,
        folder: Path,
        queries: dict[str, list[np.ndarray]],
        shape: tuple[int, int] | None = None,
    ) -> Entries:
        got = search_saved(folder, queries, shape)
        node_keys = {
            slot: keys
            for slots, matrix in got.get(NODE_KEYS, [])
            for slot, keys in zip(slots.tolist(), matrix, strict=True)
        }
        return {
            name: [Found.of(q, *got[name][row]) for row, q in enumerate(rows)]
            for name, rows in queries.items()
        }, node_keys

    def score(self, folder: Path, pairs: PairsToScore) -> np.ndarray:
        return score_saved(folder, pairs)

    def write_tables(self, folder: Path, before: Path | None, tables: int) -> None:
        fill_tables(folder, before, tables)


def sketched_here(
    batches: Iterator[list[PageUpdate]],
    sketch: Callable[[list[PageUpdate]], PreparedBatch],
    workers: int | None,
) -> Iterator[PreparedBatch]:
    """The batches sketched in order: in this process until that has taken
    `INLINE_SKETCH_S`, then by `workers` processes beside it. Starting the processes costs
    about a second of the machine (each imports neardup), more than a 1 % increment of a
    million-page index takes to sketch (0.2 s for 10,000 pages, 0.5-0.7 s with the first
    kernels' loading and the index opening beside it: a bound of one second was crossed
    now and then, and the pool's start added to the increment), so a small `neardup add`
    never pays it; a large one pays the three seconds inline once."""
    spent = 0.0
    for b in batches:
        t0 = time.perf_counter()
        done = sketch(b)
        spent += time.perf_counter() - t0
        yield done
        if spent > INLINE_SKETCH_S and workers != 1:
            break
    else:
        return
    with LocalEngine(workers, window_per_worker=1) as engine:
        yield from engine.map(sketch, batches)
