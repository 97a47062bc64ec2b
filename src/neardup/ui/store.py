"""The run behind the web UI: one shared read-only DuckDB database, a cursor per request.

A DuckDB connection is not meant to be shared by threads, but its cursors are: each is its
own connection to the same database instance, so FastAPI's worker threads each take one
for a request and close it after. Read-only means the UI can never change a run, and several
UIs (or a scan elsewhere writing another run) do not block each other.

Text search reads the run's word index (`search_index`), built here on first open when the
run has none, or none that is up to date (a progress bar at a terminal).

Collections and mirrors come from the run's Parquet files; when a run has none yet they are
computed when the UI opens, once, and written into the run directory (what `neardup collections`
and `neardup mirrors` would write), or into a temporary folder if the run is read-only.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.api import resemblance
from neardup.config import Settings
from neardup.linkgraph.collections import COLLECTIONS_FILE
from neardup.pipeline.progress import Progress
from neardup.report.analyses import ensure_link_files
from neardup.store import load_settings, load_summary, open_run
from neardup.ui.search_index import ensure_index


class RunStore:
    """What the request handlers share: the database, settings, summary, lazy analyses."""

    def __init__(
        self, run: str | Path, cache: str | Path | None = None, progress: Progress | None = None
    ) -> None:
        self.run = Path(run)
        self.db = open_run(self.run)
        self.settings: Settings = load_settings(self.run)
        self.summary: dict[str, Any] = load_summary(self.run)
        with self.cursor() as cur:
            self.search_index = ensure_index(
                self.run, cur, None if cache is None else Path(cache), progress
            )
        if cache is None:
            writable = os.access(self.run, os.W_OK)
            cache = self.run if writable else Path(tempfile.mkdtemp(prefix="neardup-ui-"))
        self.cache = Path(cache)
        self._lock = threading.Lock()
        self._collection_pages: pa.Table | None = None
        # Computed now, not on the first visit to /mirrors or /collections: at a million
        # pages that visit took 1.6 s or more (both analyses, then the page).
        with self.cursor() as cur:
            self._files = ensure_link_files(self.run, cur, self.cache)
        # The first resemblance in a process loads the tokenizer's tables (most of a second):
        # paid here, not by the first diff.
        resemblance("warm up", "warm up", self.settings)

    @contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection of its own for one request (temporary tables stay private)."""
        cur = self.db.cursor()
        try:
            yield cur
        finally:
            cur.close()

    def files(self) -> dict[str, Path]:
        """Paths of collection_clusters / collection_copies / collections / mirrors Parquet."""
        return self._files

    def collection_pages(self) -> pa.Table:
        """The (doc_id, collection_cluster_id, collection_id) columns the roll-up needs."""
        files = self.files()
        with self._lock:
            if self._collection_pages is None:
                self._collection_pages = pq.read_table(
                    files[COLLECTIONS_FILE],
                    columns=["doc_id", "collection_cluster_id", "collection_id"],
                )
            return self._collection_pages

    def close(self) -> None:
        self.db.close()
