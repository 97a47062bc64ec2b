"""Run a stage's tasks in local worker processes, in order, with bounded memory.

`multiprocessing.Pool.imap` drains its input iterator as fast as it can, so a fast reader
in front of slow workers would pull a whole crawl into memory. This engine keeps at most
`window` tasks in flight and yields results in submission order, which is what makes the
output identical whatever the number of workers.

A stage of a single task runs in this process: no worker could run beside it, and starting
the pool (a forkserver, then workers that import the package) costs more than a small input's
whole scan. Modules named in `preload` are imported by each worker as it starts, before its
first task. (Not by the forkserver, which would fork every worker with them loaded: it takes
Ctrl-C until its preload is done, and workers it forks after a Ctrl-C has ended the pool fail
with tracebacks of their own.)
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import itertools
import multiprocessing
import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import context, popen_forkserver, spawn
from multiprocessing.connection import wait
from typing import Any, TypeVar

from neardup.kernels import jit
from neardup.startup import in_worker

T = TypeVar("T")
R = TypeVar("R")


def default_workers() -> int:
    """All cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def die_with_parent() -> None:
    """Ignore Ctrl-C, and end this worker as soon as the process that started the pool is gone.

    A scan killed with SIGKILL (the OOM killer's way) cannot shut its pool down, and its
    workers would wait on their task queue for ever, holding memory. The parent's sentinel
    (a pipe end the parent holds open) becomes readable when the parent ends, however it
    ends; a daemon thread waits on it and exits the worker. (`PR_SET_PDEATHSIG` would not
    do: a worker's parent is the forkserver, which itself stays alive while workers hold
    its pipe.)"""
    # Ctrl-C reaches the whole process group; the scanning process handles it and ends the
    # pool, so a worker neither prints a traceback nor stops half-way through a task.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        wait([parent.sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="neardup-parent-watch", daemon=True).start()


class _PopenWithoutMain(popen_forkserver.Popen):
    """A forkserver child that does not re-run the parent's main script.

    multiprocessing normally imports the parent's `__main__` in every child so that
    functions defined there can be unpickled. Ours never are (the tasks are neardup's own
    functions), and re-running a user's script that calls `neardup.scan` at module level,
    without an `if __name__ == "__main__":` guard, would start a scan inside every worker
    and break the pool. Leaving the main module out of the preparation data removes the
    need for the guard."""

    def _launch(self, process_obj: Any) -> None:
        original = spawn.get_preparation_data

        def without_main(name: str) -> dict[str, Any]:
            data = original(name)
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
            return data

        spawn.get_preparation_data = without_main
        try:
            super()._launch(process_obj)
        finally:
            spawn.get_preparation_data = original


class _ProcessWithoutMain(context.ForkServerProcess):
    @staticmethod
    def _Popen(process_obj: Any) -> _PopenWithoutMain:
        return _PopenWithoutMain(process_obj)


class _ContextWithoutMain(context.ForkServerContext):
    """forkserver (no DuckDB or numba threads inherited from the parent), minus `__main__`;
    the results come back through a pipe of a larger buffer (`_widened`)."""

    Process = _ProcessWithoutMain

    def SimpleQueue(self) -> Any:
        """The queue the pool's workers put their results on (`ProcessPoolExecutor`)."""
        queue = super().SimpleQueue()
        _widened(queue._reader)
        return queue


# A pipe's buffer for results: Linux gives 64 KiB, so a worker's result of megabytes (a
# batch's page text) crossed it in thousands of wake-ups of both processes. With 1 MiB
# (the default most a process may ask for, /proc/sys/fs/pipe-max-size), 2.4 GB took 0.85 s
# instead of 3.0 s here, the reading side's CPU 0.76 s instead of 1.26 s.
RESULT_PIPE_BYTES = 1 << 20


def _widened(conn: Any) -> None:
    """Ask for `RESULT_PIPE_BYTES` of buffer on the pipe of `conn`; where the system
    refuses or has no such call, the pipe stays as it was (only slower)."""
    with contextlib.suppress(AttributeError, OSError):
        fcntl.fcntl(conn.fileno(), fcntl.F_SETPIPE_SZ, RESULT_PIPE_BYTES)


def _start_worker(preload: Sequence[str]) -> None:
    """A worker's initializer: `die_with_parent`, its command's start-up rule
    (`startup.in_worker`), its kernels on one thread (`jit.one_thread`: compiled ahead,
    with no JIT to start), then the `preload` modules."""
    die_with_parent()
    in_worker()
    jit.one_thread()
    for name in preload:
        importlib.import_module(name)


def _call_apart(conn: Any, fn: Callable[..., R], args: tuple[Any, ...]) -> None:
    """The body of `run_apart`'s process: the call's result, or its exception, sent back."""
    _start_worker(())
    try:
        result: tuple[bool, Any] = (True, fn(*args))
    except BaseException as exc:  # sent back and raised in the caller
        result = (False, exc)
    conn.send(result)
    conn.close()


def run_apart(fn: Callable[..., R], *args: Any) -> R:
    """`fn(*args)` in a fresh worker process of its own; its result (or exception) comes
    back by pickle.

    Why: a stage whose work is another library's threads (DuckDB's store build) still
    counts as the scanning process's own CPU, and its memory stays in that process after it
    ends; in a process of its own the scanning process only coordinates. Ctrl-C or any
    error here ends the child at once (it would otherwise finish a store nobody keeps)."""
    context = _ContextWithoutMain()
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_call_apart, args=(send, fn, args), name="neardup-apart")
    child.start()
    send.close()
    try:
        ok, value = receive.recv()
    except EOFError:
        child.join()
        raise RuntimeError(f"a worker process ended with exit code {child.exitcode}") from None
    except BaseException:
        child.kill()
        child.join()
        raise
    finally:
        receive.close()
    child.join()
    if not ok:
        raise value
    return value


class LocalEngine:
    """Ordered, bounded parallel map over worker processes (or inline with one worker, or
    for a stage of one task).

    Results come back in order, so one slow task (a batch of large pages) holds back the
    results after it; `window_per_worker` tasks a worker may run ahead of it. Eight, not two:
    on a WARC crawl of mixed pages the workers then stayed busy while a slow batch ran (the
    docs-mirrors scan 10.1-10.2 s against 10.6-10.9 s, two runs each), for a few batches more
    held (at most 16 MB of records each, `steps/ingest.py`'s BATCH_BYTES; a JSONL block is
    1 MB)."""

    def __init__(
        self,
        workers: int | None = None,
        window_per_worker: int = 8,
        preload: Sequence[str] = (),
    ) -> None:
        self.workers = workers if workers and workers > 0 else default_workers()
        self.window = max(1, self.workers * window_per_worker)
        self.preload = tuple(preload)
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
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=_ContextWithoutMain(),
                initializer=_start_worker,
                initargs=(self.preload,),
            )
        return self._pool

    def map(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[R]:
        """Apply `fn` to every task; results come back in the order of `tasks`. A stage of
        one task, with no pool running yet, runs in this process (see the module doc)."""
        if self.workers == 1:
            yield from map(fn, tasks)
            return
        tasks = iter(tasks)
        ahead = list(itertools.islice(tasks, 2))  # is there more than one task?
        if len(ahead) < 2 and self._pool is None:
            yield from map(fn, ahead)
            return
        yield from self._in_pool(fn, itertools.chain(ahead, tasks))

    def _in_pool(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[R]:
        """`map` over the worker processes, at most `window` tasks in flight."""
        pool = self._executor()
        pending: deque[Future[R]] = deque()
        for task in tasks:
            pending.append(pool.submit(fn, task))
            if len(pending) >= self.window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
