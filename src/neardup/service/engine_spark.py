"""The index's Spark engine: a feed's files sketched on Spark's executors, a batch's reads of
the saved index and its comparisons of saved sketches run there, and a save's band tables
written there (`spark_feed.py` holds the jobs; see its notes for why each is distributed).

One object where there were hooks: the feed passes it to the index's apply and close as
any engine (`engine_base.IndexEngine`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from neardup.service import spark_feed
from neardup.service.engine_base import Entries, FeedInputs, found_elsewhere
from neardup.service.index import ServiceIndex
from neardup.service.lookups import HERE, BatchLookups
from neardup.service.prepare import PreparedBatch
from neardup.service.saved_search import PairsToScore


class SparkEngine:
    """Spark's executors, on the session of `master` with `conf` (as for a scan)."""

    def __init__(self, master: str | None = None, conf: dict[str, str] | None = None) -> None:
        self.master = master
        self.conf = conf

    def sketched(self, feed: FeedInputs) -> Iterator[PreparedBatch]:
        return spark_feed.sketched_on_spark(
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
        """On the executors for a batch of `spark_feed.EXECUTORS_FROM` pages or more; a
        smaller one reads here (a job costs more than its reads)."""
        if len(prepared.updates) < spark_feed.EXECUTORS_FROM:
            return HERE
        return found_elsewhere(self, index, prepared)

    def search(
        self,
        folder: Path,
        queries: dict[str, list[np.ndarray]],
        shape: tuple[int, int] | None = None,
    ) -> Entries:
        return spark_feed.saved_entries_on_spark(folder, queries, self.master, self.conf, shape)

    def score(self, folder: Path, pairs: PairsToScore) -> np.ndarray:
        return spark_feed.scores_on_spark(folder, pairs, self.master, self.conf)

    def write_tables(self, folder: Path, before: Path | None, tables: int) -> None:
        spark_feed.band_tables_on_spark(folder, before, tables, self.master, self.conf)
