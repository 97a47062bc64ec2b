"""Parquet writes in a thread of their own, so that compressing a table overlaps the work
that produces its rows (the ingest stage's records, the store's queries)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable


class WriterThread:
    """Runs the Parquet writes in a thread of their own, in the order they are given.

    Compression (zstd over every page's text) is the largest single cost of ingesting a
    table, and pyarrow runs it without the GIL: in this thread it overlaps the reading, the
    workers' results and, with one worker, the extraction itself, on another core. At most
    `depth` writes wait, so memory stays bounded; a failed write is raised to the caller at
    its next `submit` or at `close`."""

    def __init__(self, depth: int = 4) -> None:
        self.jobs: queue.Queue[tuple[Callable[..., object], tuple[object, ...]] | None] = (
            queue.Queue(maxsize=depth)
        )
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="neardup-writer", daemon=True)
        self.thread.start()

    def submit(self, fn: Callable[..., object], *args: object) -> None:
        if self.error is not None:
            raise self.error
        self.jobs.put((fn, args))

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            if self.error is None:  # after a failure, the rest is drained, not written
                try:
                    job[0](*job[1])
                except BaseException as exc:  # handed to the caller
                    self.error = exc

    def close(self) -> None:
        """Wait for every write; raise the first that failed."""
        self.jobs.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error
