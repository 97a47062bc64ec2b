"""The index as `neardup serve` holds it: two copies in memory, so that a read never waits
for a batch.

A batch changes the index's state in place, under its lock, for as long as it takes to
compute (about 0.1 s for 1,000 pages at a million). With one copy, a read arriving then
waits for it. Here the writer's copy (`ServiceIndex`, holding the store's writer lock)
applies and commits each batch while every read goes to the other copy, opened read-only
on the same store; once the batch is committed the reads go to the writer's copy (now the
new version), the other copy applies the same batch in memory (`ServiceIndex.follow`: the
sketches are not made again, no file is written) and the reads come back to it. A read
takes whichever copy is not being changed, and sees the last committed version or the one
before, never half of a batch. The price is the in-memory state twice (the sketches and
the graph's arrays are shared through the page cache: they are mapped files) and each
batch computed twice.

A server without a token writes nothing and holds one copy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from neardup.index.service_index import ServiceIndex
from neardup.index.state.updates import BatchReport, PageUpdate, ServiceError

R = TypeVar("R")


class Served:
    """An open index and, when it writes, a second copy for the reads (see above)."""

    def __init__(self, index: ServiceIndex) -> None:
        self.index = index  # the writer's copy (or the one read-only copy)
        reader = index if index.writer is None else ServiceIndex(index.store, read_only=True)
        self._copies = (reader, index)
        self._reading = 0  # the copy reads go to
        self._readers = [0, 0]  # reads under way on each copy
        self._turn = threading.Lock()  # `_reading` and `_readers`
        self._writes = threading.Lock()  # one batch at a time

    def read(self, fn: Callable[[ServiceIndex], R], locked: bool = True) -> R:
        """`fn` of the copy no batch is changing. Reads of one copy take its lock between
        them (a read may fold a table it reads); a batch never holds it meanwhile. Not
        `locked`: `fn` takes the lock itself where it needs it (`check` sketches first)."""
        with self._turn:
            side = self._reading
            self._readers[side] += 1
        try:
            copy = self._copies[side]
            if not locked:
                return fn(copy)
            with copy.lock:
                return fn(copy)
        finally:
            with self._turn:
                self._readers[side] -= 1

    def apply(self, updates: Iterable[PageUpdate]) -> BatchReport:
        """One batch, as `ServiceIndex.apply`: committed by the writer's copy, followed by
        the other, the reads moved away from each copy while it changes."""
        t0 = time.perf_counter()
        writer = self.index
        prepared = writer.prepared(updates)
        reader = self._copies[0]
        if reader is writer:  # read-only: refused as the index refuses it
            return writer.apply_prepared(prepared, t0)
        with self._writes:
            try:
                report = writer.apply_prepared(prepared, t0)  # the reads are on the other copy
            except ServiceError:  # the batch refused: nothing committed, nothing to follow;
                # but the writer's copy read its last commit again and saved it if no save
                # held it: the other copy maps that save too, or the next batch's would not
                # be of its pages.
                self._point(1)
                reader.map_saved(writer.graph_meta)
                self._point(0)
                raise
            except BaseException:  # the files (a full disk, a merge, a save of the graph):
                self._point(1)  # the writer's copy holds its last commit, whichever it is;
                with reader.lock:  # the other copy reads that commit from the files
                    reader.refresh()
                self._point(0)
                raise
            self._point(1)  # the new version, for the reads, while the other copy follows
            reader.follow(prepared, writer.graph_meta)
            self._point(0)  # ready for the next batch on the writer's copy
        return report

    def _point(self, side: int) -> None:
        """Send new reads to copy `side`, then wait until none is left on the other (a read
        takes microseconds)."""
        with self._turn:
            self._reading = side
        while True:
            with self._turn:
                if not self._readers[1 - side]:
                    return
            time.sleep(0.0002)

    def close(self) -> None:
        reader, writer = self._copies
        if reader is not writer:
            reader.close()
        writer.close()
