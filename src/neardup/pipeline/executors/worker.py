"""What a worker process of the embedded engine holds before its first task.

`LocalEngine` has each worker import this module as it starts (its `preload`): the
tokenizer's character table, loaded from the cache (`neardup.pipeline.char_table_cache`)
rather than built again in every worker (the stage modules come with the first task). The
table lives in the kernels package, so this also imports the kernels (numba) in a worker
that will only extract text: about a quarter of a second, against the half second of
building the table in each worker that sketches.

The import ignores Ctrl-C (as the worker does from then on, see `die_with_parent`): it
reaches the whole process group, and the scanning process handles it and ends the pool.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def _ignoring_ctrl_c() -> Iterator[None]:
    """Ignore SIGINT for the duration, then put back the handler there was (only the main
    thread may set handlers; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


with _ignoring_ctrl_c():
    from neardup.pipeline.char_table_cache import prime_char_table

    prime_char_table()
