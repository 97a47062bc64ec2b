"""Run a stage's tasks in local worker processes, in order, with bounded memory.

`multiprocessing.Pool.imap` drains its input iterator as fast as it can, so a fast reader
in front of slow workers would pull a whole crawl into memory. This engine keeps at most
`window` tasks in flight and yields results in submission order, which is what makes the
output identical whatever the number of workers.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def default_workers() -> int:
    """All cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


class LocalEngine:
    """Ordered, bounded parallel map over worker processes (or inline with one worker)."""

    def __init__(self, workers: int | None = None, window_per_worker: int = 2) -> None:
        self.workers = workers if workers and workers > 0 else default_workers()
        self.window = max(1, self.workers * window_per_worker)
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> LocalEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # forkserver avoids inheriting DuckDB/numba threads from the parent process.
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=get_context("forkserver")
            )
        return self._pool

    def map(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[R]:
        """Apply `fn` to every task; results come back in the order of `tasks`."""
        if self.workers == 1:
            for task in tasks:
                yield fn(task)
            return
        pool = self._executor()
        pending: deque[Future[R]] = deque()
        for task in tasks:
            pending.append(pool.submit(fn, task))
            if len(pending) >= self.window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
