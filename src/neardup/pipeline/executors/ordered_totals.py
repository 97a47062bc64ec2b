"""Running totals handed from each task to the next, across worker processes.

Why: a worker that reads its own range of the input (`ingest/input_ranges.py`) does not
know how many records came before it, yet it should write its rows with their final
document ids (input order), so that nothing has to be renumbered or rewritten afterwards.
Task k learns the totals of the tasks before it from task k-1, which publishes them as
soon as its own counts are known; the workers run ahead on everything else (reading,
extracting, sketching) and wait only for that handful of numbers before they write.

The totals live in a small ring of `slots` entries (sequence number, flag, then the values)
in a file that every process maps (a file in the run's staging folder rather than POSIX
shared memory, whose tracker in Python 3.10-3.12 would unlink it when a worker exits).
The engine's window bounds how far a task can run ahead of the oldest unfinished one, so
a ring a little larger than the window never overwrites an entry still waited on.
A task that fails publishes a failure instead, so that the tasks after it stop waiting and
fail too, rather than hang the pool.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

_FAILED = -1


class EarlierTaskFailed(RuntimeError):
    """A task before this one failed, so its totals will never come."""


@dataclass(frozen=True)
class TotalsHandle:
    """What a task needs to reach the ring (picklable: a path and sizes)."""

    path: str
    slots: int
    width: int

    def wait(self, task: int) -> tuple[int, ...]:
        """The totals of the tasks before `task`, once task-1 has published them."""
        ring = _attached(self.path, self.slots, self.width)
        row = ring[task % self.slots]
        delay = 0.0001
        while int(row[0]) != task:
            time.sleep(delay)
            delay = min(delay * 2, 0.01)
        values = tuple(int(v) for v in row[2:])
        if int(row[1]) == _FAILED:
            raise EarlierTaskFailed(f"task {task - 1} failed; task {task} stops")
        return values

    def publish(self, task: int, values: tuple[int, ...]) -> None:
        """The totals of tasks 0..task-1, for `task` to read."""
        self._put(task, 0, values)

    def fail(self, task: int) -> None:
        """No totals will come for `task`: its predecessor failed."""
        self._put(task, _FAILED, (0,) * self.width)

    def _put(self, task: int, flag: int, values: tuple[int, ...]) -> None:
        ring = _attached(self.path, self.slots, self.width)
        row = ring[task % self.slots]
        row[1] = flag
        row[2:] = values
        row[0] = task  # last: a reader that sees the sequence number sees the values


@lru_cache(maxsize=4)
def _attached(path: str, slots: int, width: int) -> np.ndarray:
    """The ring as a shared map of its file, opened once per process."""
    return np.memmap(path, dtype=np.int64, mode="r+", shape=(slots, 2 + width))


class OrderedTotals:
    """The ring, owned by the process that hands out the tasks (`handle` goes in each)."""

    def __init__(self, path: Path, slots: int, width: int) -> None:
        self.path = path
        ring = np.full((slots, 2 + width), -1, dtype=np.int64)
        path.write_bytes(ring.tobytes())
        self.handle = TotalsHandle(str(path), slots, width)
        self.handle.publish(0, (0,) * width)

    def __enter__(self) -> OrderedTotals:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the file (workers that mapped it keep their map until they exit)."""
        _attached.cache_clear()
        self.path.unlink(missing_ok=True)
