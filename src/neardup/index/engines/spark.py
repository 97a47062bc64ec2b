"""The index's Spark engine: a feed's files sketched on Spark's executors, a batch's reads of
the saved index and its comparisons of saved sketches run there, and a save's band tables
written there (`engines/spark_jobs.py` holds the jobs; see its notes for why each is distributed).

One object where there were hooks: the feed passes it to the index's apply and close as
any engine (`base.IndexEngine`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from neardup.index.engines import spark_jobs
from neardup.index.engines.base import Entries, FeedInputs, found_elsewhere
from neardup.index.service_index import ServiceIndex
from neardup.index.state.found import PairsToScore
from neardup.index.state.lookups import HERE, BatchLookups
from neardup.index.state.prepare import PreparedBatch


class SparkEngine:
    """Spark's executors, on the session of `master` with `conf` (as for a scan)."""

    def __init__(self, master: str | None = None, conf: dict[str, str] | None = None) -> None:
        self.master = master
        self.conf = conf

    def sketched(self, feed: FeedInputs) -> Iterator[PreparedBatch]:
        return spark_jobs.sketched_on_spark(
            feed.paths,
            feed.store,
            feed.settings,
            feed.dims,
            feed.batch,
            feed.links,
            self.master,
            self.conf,
            feed.skipped,
            feed.inlinks,
        )

    def lookups(self, index: ServiceIndex, prepared: PreparedBatch) -> BatchLookups:
        """On the executors for a batch of `spark_jobs.EXECUTORS_FROM` pages or more; a
        smaller one reads here (a job costs more than its reads)."""
        if len(prepared.updates) < spark_jobs.EXECUTORS_FROM:
            return HERE
        return found_elsewhere(self, index, prepared)

    def search(
        self,
        folder: Path,
        queries: dict[str, list[np.ndarray]],
        shape: tuple[int, int] | None = None,
    ) -> Entries:
        return spark_jobs.saved_entries_on_spark(folder, queries, self.master, self.conf, shape)

    def score(self, folder: Path, pairs: PairsToScore) -> np.ndarray:
        return spark_jobs.scores_on_spark(folder, pairs, self.master, self.conf)

    def write_tables(self, folder: Path, before: Path | None, tables: int) -> None:
        spark_jobs.band_tables_on_spark(folder, before, tables, self.master, self.conf)
