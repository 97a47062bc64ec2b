"""What every function neardup gives Spark to run on its executors does first.

A PySpark Python worker runs one task at a time, on one thread: its kernels run compiled
ahead of time whatever the size of a call (`jit.one_thread`, as the local engine's workers
run them). Without it the first call over `jit.AHEAD_MAX_BYTES` of a kernel marked `nogil`
(a batch of texts to sketch, a page of links) started numba's JIT in each Python worker:
its import and its kernels loaded from numba's cache or compiled, 5-14 CPU-s over the two
Python workers of a Spark scan of the docs-mirrors crawl here (docs/benchmarks.md), and the
whole compile in each worker where the executors' numba cache is cold (a fresh node or
container).

It also gives the worker its tokenizer's character table from the on-disk cache
(`pipeline/char_table_cache.py`, as the embedded engine's workers start), where each Python
worker built it from the Unicode database on its first text: about a second of CPU a worker
(8 % of the ingest's samples of a 200,000-page scan, py-spy).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from neardup.kernels import jit
from neardup.pipeline.char_table_cache import prime_char_table

P = ParamSpec("P")
R = TypeVar("R")


def on_one_thread(body: Callable[P, R]) -> Callable[P, R]:
    """`body` (a `mapInArrow`/`applyInArrow` body, a `runJob` function), run by a task with
    its kernels on one thread and its character table loaded. The wrapper shows `body`'s
    own signature, even to `inspect.getfullargspec` (PySpark counts a cogroup function's
    arguments with it)."""

    @functools.wraps(body)
    def task(*args: P.args, **kwargs: P.kwargs) -> R:
        jit.one_thread()
        prime_char_table()  # nothing to do once the worker holds it
        return body(*args, **kwargs)

    task.__signature__ = inspect.signature(body)  # type: ignore[attr-defined]
    return task
