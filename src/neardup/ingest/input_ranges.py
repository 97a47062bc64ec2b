"""The one rule that cuts inputs into ranges a worker (or a Spark task) reads by itself.

Why: with one task per input, a crawl published as a few large files kept one core busy,
and with records framed in one process and sent to the others, that process was the limit
(issue 47). A range is a byte span of a local file that starts at a record boundary, so
any process can open the file, seek there and frame the records that start in the span.

Where a file is cut:
- a WARC with one gzip member per record (the published form): at a member that
  decompresses to `WARC/`, the first one at or after each multiple of the target size;
- a plain WARC: at a record start reached by following Content-Length from the file's start,
  with nothing else in between (a payload may hold a `WARC/1.0` line, so a line found by
  searching is no proof); where the chain breaks, the rest of the file is one range;
- a plain JSONL file: after the first newline at or after each multiple of the target.

Everything else is one range of the whole input, read by the input's own reader: a file
compressed as one gzip or zstd stream, which cannot be entered in the middle (`whole`
says so, for `-v`), ARC files, Parquet tables, HTML folders, URLs and stdin.

The records of a file's ranges, one range after another, are the records of the whole file,
record for record (offsets, lengths and reasons included), except that a JSONL range numbers
its lines from 0: the reader of the range adds the lines of the ranges before it.
"""

from __future__ import annotations

import io
import itertools
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from neardup.ingest.common import GZIP_MEMBER, ZSTD_MAGIC, read_head
from neardup.ingest.input_sizes import file_size, local_size
from neardup.ingest.limits import safe_text
from neardup.ingest.record import RawRecord
from neardup.ingest.remote import is_remote
from neardup.ingest.tables import LineBlock, iter_jsonl_stream_blocks
from neardup.ingest.warc_framing import (
    first_member_is_one_record,
    header_block,
    next_warc_member,
)
from neardup.ingest.warc_reader import to_raw_record
from neardup.ingest.warc_scan import WarcScan

# The bytes of input a range aims at, at most: big enough that a task's start-up and its
# part files stay small beside its work, small enough that a worker holds one range's tables
# (about the range's size again in text) and a 1 GB file still feeds 16 workers twice over.
RANGE_BYTES = 32 << 20
# ... and at least, when the inputs are small for the workers: each worker gets about
# TASKS_PER_WORKER tasks, so that one long task at the end does not leave the others idle
# (the docs-mirrors crawl, 91 MB, made 3 tasks of 32 MB for 2 workers, the last alone).
MIN_RANGE_BYTES = 1 << 20
TASKS_PER_WORKER = 8
RANGE_BYTES_VARIABLE = "NEARDUP_RANGE_BYTES"  # another target, for tests and measurements

_WARC_LINE = b"WARC/"


def range_bytes(total: int | None = None, workers: int = 1) -> int:
    """The target size of a range for `total` bytes of local input and `workers` workers:
    `RANGE_BYTES`, less where the inputs would make fewer than `TASKS_PER_WORKER` tasks a
    worker, never under `MIN_RANGE_BYTES`; `$NEARDUP_RANGE_BYTES` when set."""
    value = os.environ.get(RANGE_BYTES_VARIABLE, "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    if total is None:
        return RANGE_BYTES
    share = total // max(1, workers * TASKS_PER_WORKER)
    return max(MIN_RANGE_BYTES, min(RANGE_BYTES, share))


def target_for(inputs: list[tuple[str, str]], workers: int) -> int:
    """`range_bytes` for the checked inputs' local bytes and `workers` workers: the target
    the embedded scan cuts by, and `-v` reports."""
    return range_bytes(sum(local_size(path) for path, _ in inputs), workers)


@dataclass(frozen=True)
class InputRange:
    """A span of one input that a worker reads by itself.

    `stop` None: to the end of the input (a whole input, read by its own reader). `cut`
    names how the file was cut ("members", "records", "lines") or is "" for a whole input;
    `whole` says why a large input is not cut, for `-v`."""

    path: str
    kind: str
    start: int = 0
    stop: int | None = None
    cut: str = ""
    whole: str | None = None

    @property
    def first_of_input(self) -> bool:
        """Whether the range starts its input (JSONL line numbers start again at 0)."""
        return self.start == 0

    @property
    def size(self) -> int | None:
        """The range's bytes, when known without reading."""
        if self.stop is not None:
            return self.stop - self.start
        return None if is_remote(self.path) else file_size(self.path)


def plan_ranges(inputs: list[tuple[str, str]], target: int | None = None) -> list[InputRange]:
    """The ranges of the checked inputs (`readers.expand_inputs`), in input order, of
    about `target` bytes (default `range_bytes()`)."""
    target = range_bytes() if target is None else target
    ranges: list[InputRange] = []
    for path, kind in inputs:
        ranges.extend(_ranges_of(path, kind, target))
    return ranges


def group_ranges(
    ranges: list[InputRange], target: int | None = None
) -> list[tuple[InputRange, ...]]:
    """The ranges as tasks: each cut range alone, and runs of whole local inputs gathered
    until they reach `target` bytes, so that a folder of many small files makes tasks of a
    useful size (and part files of one), not one task and four part files per file. URLs
    and stdin stay alone: their size is unknown."""
    target = range_bytes() if target is None else target
    tasks: list[tuple[InputRange, ...]] = []
    group: list[InputRange] = []
    held = 0
    for rng in ranges:
        size = rng.size
        if rng.cut or size is None:
            if group:
                tasks.append(tuple(group))
                group, held = [], 0
            tasks.append((rng,))
            continue
        group.append(rng)
        held += size
        if held >= target:
            tasks.append(tuple(group))
            group, held = [], 0
    if group:
        tasks.append(tuple(group))
    return tasks


def _ranges_of(path: str, kind: str, target: int) -> list[InputRange]:
    """One input's ranges; a single whole range where the input cannot or need not be cut."""
    if is_remote(path) or kind not in ("warc", "jsonl") or not os.path.isfile(path):
        return [InputRange(path, kind)]
    size = file_size(path)
    if size <= target:
        return [InputRange(path, kind)]
    try:
        with open(path, "rb") as fh:
            fd = fh.fileno()
            cuts, cut, whole = _cuts(fd, path, kind, size, target)
    except OSError:
        return [InputRange(path, kind)]  # its reader reports the error, in its row
    if whole is not None or len(cuts) < 2:
        return [InputRange(path, kind, whole=whole)]
    bounds = [*cuts, size]
    return [InputRange(path, kind, start, stop, cut) for start, stop in itertools.pairwise(bounds)]


def _cuts(
    fd: int, path: str, kind: str, size: int, target: int
) -> tuple[list[int], str, str | None]:
    """(range starts beginning with 0, how cut, or why the file stays whole)."""
    head = os.pread(fd, 4, 0)
    if kind == "jsonl":
        if head.startswith(b"\x1f\x8b"):
            return [0], "", "a gzip stream: read whole, by one worker"
        return _line_cuts(fd, size, target), "lines", None
    if head.startswith(GZIP_MEMBER):
        if not _warc_content(path) or not first_member_is_one_record(fd, size):
            return [0], "", "one gzip stream, not a member per record: read whole, by one worker"
        return _member_cuts(fd, size, target), "members", None
    if head == ZSTD_MAGIC:
        return [0], "", "a zstd stream: read whole, by one worker"
    if not head.startswith(_WARC_LINE[:4]):
        return [0], "", None  # junk or ARC: its reader decides, once, from the start
    return _record_cuts(fd, size, target), "records", None


def _warc_content(path: str) -> bool:
    """Whether the gzip file holds WARC (not ARC) records, judged by its first bytes."""
    try:
        return read_head(path).startswith(_WARC_LINE)
    except (OSError, zlib.error):  # a damaged start: one range, whose reader reports it
        return False


def _line_cuts(fd: int, size: int, target: int) -> list[int]:
    """Starts of the lines that follow each multiple of `target`."""
    cuts = [0]
    at = target
    while at < size:
        end = _next_newline(fd, at - 1, size)
        if end is None or end + 1 >= size:
            break
        if end + 1 > cuts[-1]:
            cuts.append(end + 1)
        at = max(at + target, end + 1 + target // 2)
    return cuts


def _next_newline(fd: int, start: int, size: int) -> int | None:
    pos = start
    while pos < size:
        block = os.pread(fd, 1 << 16, pos)
        if not block:
            return None
        i = block.find(b"\n")
        if i != -1:
            return pos + i
        pos += len(block)
    return None


def _member_cuts(fd: int, size: int, target: int) -> list[int]:
    """Starts of the gzip members opening `WARC/` that follow each multiple of `target`."""
    cuts = [0]
    at = target
    while at < size:
        found = next_warc_member(fd, at, size)
        if found is None:
            break
        cuts.append(found)
        at = found + target
    return cuts


def _record_cuts(fd: int, size: int, target: int) -> list[int]:
    """Record starts of a plain WARC, by Content-Length from the start, one per `target`."""
    cuts = [0]
    pos = 0
    while pos < size:
        head = header_block(fd, pos, size)
        if head is None or head[1] is None:
            break
        end = pos + head[0] + head[1]
        nxt = _past_blank(fd, end, size)
        if nxt is None or nxt >= size or os.pread(fd, 5, nxt) != _WARC_LINE:
            break
        if nxt - cuts[-1] >= target:
            cuts.append(nxt)
        pos = nxt
    return cuts


def _past_blank(fd: int, end: int, size: int) -> int | None:
    """The first byte after the blank lines that close a record (at most 64 bytes)."""
    tail = os.pread(fd, 64, end)
    rest = tail.lstrip(b"\r\n")
    if not rest and end + len(tail) < size:
        return None
    return end + len(tail) - len(rest)


def iter_range_units(
    rng: InputRange,
    whole: Callable[[str, str], Iterator[RawRecord | LineBlock]],
    max_payload_bytes: int,
    on_lines: Callable[[int], None] | None = None,
) -> Iterator[RawRecord | LineBlock]:
    """The records of `rng` (a JSONL range's lines in blocks, numbered from 0 in the range).

    `whole(path, kind)` reads a whole input as the readers do. `on_lines(n)` hears the
    lines a JSONL range holds, once it is read: the next range of the file counts on."""
    if not rng.cut:
        yield from whole(rng.path, rng.kind)
        return
    stop = rng.stop if rng.stop is not None else file_size(rng.path)
    source = safe_text(rng.path)
    with open(rng.path, "rb") as fh:
        if rng.cut == "lines":
            counted = _Span(fh, rng.start, stop)
            for unit in iter_jsonl_stream_blocks(rng.path, counted, max_payload_bytes):
                unit.source = source
                yield unit
            if on_lines is not None:
                on_lines(counted.newlines)
            return
        scan = WarcScan(rng.path, fh, max_payload_bytes, to_raw_record, rng.start, stop)
        for rec in scan.records():
            rec.source = source
            yield rec


class _Span(io.RawIOBase):
    """Bytes [start, stop) of an open file as a stream, counting the newlines read."""

    def __init__(self, fh: io.BufferedReader, start: int, stop: int) -> None:
        self.fd = fh.fileno()
        self.pos = start
        self.stop = stop
        self.newlines = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read1(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def read1(self, size: int = -1) -> bytes:
        want = self.stop - self.pos if size < 0 else min(size, self.stop - self.pos)
        if want <= 0:
            return b""
        data = os.pread(self.fd, want, self.pos)
        self.pos += len(data)
        self.newlines += data.count(b"\n")
        return data
