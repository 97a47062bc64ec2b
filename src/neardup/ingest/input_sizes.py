"""The sizes of local inputs and the progress a reader makes through one, in bytes.

Kept apart from the readers so that the rule that cuts inputs into ranges
(`input_ranges.py`) and the readers count the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from neardup.ingest.html_dir import html_files
from neardup.ingest.record import RawRecord

# Called with the number of input bytes the readers have newly consumed.
OnBytes = Callable[[int], None]


def local_size(path: str) -> int:
    """The bytes of a local input: a file's size, an HTML folder's HTML files together;
    0 for an entry that cannot be read (it becomes one row and is read no further)."""
    if os.path.isdir(path):
        return sum(file_size(str(f)) for f in html_files(Path(path)))
    return file_size(path)


def file_size(path: str) -> int:
    """A regular file's size; 0 for anything else (a dangling link, a FIFO: never opened)."""
    try:
        return os.stat(path).st_size if os.path.isfile(path) else 0
    except OSError:
        return 0


class InputMeter:
    """How far the readers are into one input, passed on as increments to `on_bytes`.

    A reader shows its position in one of two ways: a stream's reader calls `reached` with
    the bytes read so far (URLs, stdin, JSONL), and every record with a `length` lies at
    byte `offset` of its `source`, so the input is read up to its end (the archives, whose
    offsets `dedup` copies by; an HTML folder's files, one source each, one after another).
    Credit never exceeds a known `size` and never goes back, and `finish` credits the rest
    of the size, so the increments add up to exactly the input's size.
    """

    def __init__(self, size: int | None, on_bytes: OnBytes | None) -> None:
        self.size = size
        self.on_bytes = on_bytes
        self.credited = 0  # what on_bytes has been told
        self.earlier = 0  # bytes of the input's sources before the current one
        self.source: str | None = None
        self.position = 0  # how far the current source is read

    def reached(self, position: int) -> None:
        """The input's single stream is read up to `position`."""
        self._credit(position)

    def record(self, rec: RawRecord) -> None:
        """A record was read: its source is read at least to the record's end."""
        if self.on_bytes is None or rec.length is None:
            return
        if rec.source != self.source:
            self.earlier += self.position
            self.source, self.position = rec.source, 0
        self.position = max(self.position, rec.offset + rec.length)
        self._credit(self.earlier + self.position)

    def finish(self) -> None:
        """The input is read to its end."""
        if self.size is not None:
            self._credit(self.size)

    def _credit(self, upto: int) -> None:
        if self.on_bytes is None:
            return
        if self.size is not None:
            upto = min(upto, self.size)
        if upto > self.credited:
            self.on_bytes(upto - self.credited)
            self.credited = upto
