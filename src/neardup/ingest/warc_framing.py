"""Where WARC records start and end, checked against the bytes, for the WARC reader's resync.

FastWARC trusts a record's Content-Length: one that runs past the record reads the records
after it into its body and they are silently lost (in a gzip file it even decompresses on
into the following members). These functions let the reader notice that and restart at the
swallowed record: the next `WARC/1.` at a line start in a plain file, the next gzip member
that opens with `WARC/` in a gzip file. Every loop here reads forward and stops at the end
of the file, so no damage can make it spin.
"""

from __future__ import annotations

import mmap
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fastwarc.warc import ArchiveIterator, WarcRecordType

from neardup.ingest.common import GZIP_MEMBER, next_gzip_member

# A record start in a plain file: the version line at the start of a line.
_PLAIN_START = re.compile(rb"^WARC/[01]\.\d+\r?\n", re.M)
# ... and anywhere, in the bytes FastWARC skipped after a record (a damaged line break).
_LOOSE_START = re.compile(rb"WARC/[01]\.\d+\r?\n")
_HEAD_READ = 8192
_MAX_HEADER = 1 << 17
_WINDOW = 1 << 20


def next_plain_start(fd: int, start: int, end: int, loose: bool = False) -> int | None:
    """Offset of the first `WARC/1.x` line at or after `start` and before `end`
    (`loose`: the version line need not follow a line break)."""
    if start >= end:
        return None
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf:
        pattern = _LOOSE_START if loose else _PLAIN_START
        found = pattern.search(buf, start, min(end, len(buf)))
        return found.start() if found is not None else None


def next_warc_member(fd: int, start: int, end: int) -> int | None:
    """Offset of the next gzip member in [start, end) that decompresses to "WARC/"."""
    return next_gzip_member(fd, start, end, lambda head: head.startswith(b"WARC/"))


@dataclass(frozen=True)
class Cut:
    """What lies between a record and the next one FastWARC framed, when it is not blank.

    `gap`: a byte range that is no record (FastWARC skipped it silently); it gets a row of
    its own. `restart`: a record that FastWARC missed starts there, and reading restarts
    there; `swallowed` says whether the record before read it as body (its Content-Length
    runs past its end, so it is damaged).
    """

    restart: int | None = None
    swallowed: bool = False
    gap: tuple[int, int] | None = None

    @property
    def end(self) -> int:
        """Where the checked record ends."""
        if self.gap is not None:
            return self.gap[0]
        assert self.restart is not None
        return self.restart


def _skipped(fd: int, end: int, found: int | None, bound: int) -> Cut:
    """The Cut for a record ending at `end` and a missed record at `found` (or none before
    `bound`), with the bytes between them reported unless they are blank."""
    stop = bound if found is None else found
    gap = None if blank_between(fd, end, stop) else (end, stop)
    return Cut(restart=found, gap=gap)


def check_extent(fd: int, gzip: bool, offset: int, bound: int) -> Cut | None:
    """How the record at `offset` ends against `bound`, the offset of the next record FastWARC
    framed (or the file size); None when it ends where that record starts."""
    return _gzip_extent(fd, offset, bound) if gzip else _plain_extent(fd, offset, bound)


def _gzip_extent(fd: int, offset: int, bound: int) -> Cut | None:
    """`check_extent` in a per-record gzip file: member boundaries frame the records."""
    if not _magic_between(fd, offset + 1, bound):
        return None  # the member at `offset` is the only one before `bound`
    end = member_end(fd, offset, bound)
    start = offset + 1 if end is None else end
    if end is not None and blank_between(fd, end, bound):
        return None
    found = next_warc_member(fd, start, bound)
    if end is None:
        return Cut(restart=found, swallowed=True) if found is not None else None
    if found is not None and not _member_holds_record(fd, offset, found):
        return Cut(restart=found, swallowed=True)
    return _skipped(fd, end, found, bound)


def _plain_extent(fd: int, offset: int, bound: int) -> Cut | None:
    """`check_extent` in a plain file: the header block and Content-Length frame a record."""
    head = header_block(fd, offset, bound)
    if head is None:
        return None
    header_len, length = head
    body = offset + header_len
    if length is None:  # no Content-Length: the record is damaged; any record start ends it
        found = next_plain_start(fd, body, bound, loose=True)
        return Cut(restart=found, swallowed=True) if found is not None else None
    end = body + length
    if end <= bound and blank_between(fd, end, bound):
        return None  # Content-Length lands on the next record: consistent
    # A version line that starts before the declared end was read as body (the match may
    # reach past the end: a length a few bytes too long cuts the line itself).
    inside = next_plain_start(fd, body, min(end + 16, bound))
    if inside is not None and inside < end:
        return Cut(restart=inside, swallowed=True)
    # A version line anywhere: its line break may be damaged, or the header block's blank
    # line, which moves the declared end. Before the end it was read as body; after the end
    # FastWARC took it for junk.
    loose = next_plain_start(fd, body, bound, loose=True)
    if loose is not None and loose < end:
        return Cut(restart=loose, swallowed=True)
    if end >= bound:
        return None  # cut short by the end of the file: the record says "truncated"
    return _skipped(fd, end, loose, bound)


def _member_holds_record(fd: int, offset: int, end: int) -> bool:
    """True if the gzip member at `offset` decompresses to at least its record's declared
    extent (header + Content-Length): then the record did not run into the next member."""
    dec = zlib.decompressobj(31)
    head = b""
    total = 0
    pos = offset
    try:
        while not dec.eof and pos < end:
            chunk = os.pread(fd, min(1 << 16, end - pos), pos)
            if not chunk:
                break
            pos += len(chunk)
            data = chunk
            while data and not dec.eof:
                out = dec.decompress(data, 1 << 20)
                rest = dec.unconsumed_tail
                if not out and len(rest) >= len(data):
                    return False
                data = rest
                total += len(out)
                if len(head) < _MAX_HEADER:
                    head += out[: _MAX_HEADER - len(head)]
    except zlib.error:
        pass  # a damaged tail: judge by what was decompressed
    extent = _record_end(head)
    return extent is not None and total >= extent


def _magic_between(fd: int, start: int, end: int) -> bool:
    """True if gzip member magic occurs in [start, end) of the file."""
    pos = start
    while pos < end:
        block = os.pread(fd, min(_WINDOW + 2, end - pos), pos)
        if not block:
            return False
        if block.find(GZIP_MEMBER) != -1:
            return True
        pos += max(len(block) - 2, 1)
    return False


def header_block(fd: int, offset: int, bound: int) -> tuple[int, int | None] | None:
    """(length of the WARC header block, Content-Length or None) of the plain record at
    `offset`; None when no header block ends within reach."""
    want = _HEAD_READ
    while True:
        head = os.pread(fd, want, offset)
        sep = head.find(b"\r\n\r\n")
        skip = 4
        if sep < 0:
            sep = head.find(b"\n\n")
            skip = 2
        if sep >= 0:
            break
        if len(head) < want or want >= _MAX_HEADER:
            return None
        want *= 4
    for line in head[:sep].splitlines():
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return sep + skip, int(value)
    return sep + skip, None


def blank_between(fd: int, start: int, end: int) -> bool:
    """True if [start, end) holds only the blank lines (or padding) that may end a record."""
    if end - start > 64:
        return False
    return not os.pread(fd, end - start, start).strip(b"\r\n\0 ")


class _Stuck(Exception):
    """A decompression round that neither consumed input nor produced output."""


def _inflate(
    fd: int, offset: int, size: int, dec: Any, max_out: int
) -> Iterator[tuple[bytes, int]]:
    """The output of the gzip member at `offset`, in pieces of at most `max_out` bytes, each
    with the file position read up to so far; stops at the member's end.

    Each round must consume input or produce output, else `_Stuck`: a stream that stops
    making progress (zlib at eof with input left over) cannot loop for ever."""
    pos = offset
    while not dec.eof and pos < size:
        chunk = os.pread(fd, 1 << 16, pos)
        if not chunk:
            break
        pos += len(chunk)
        data = chunk
        while data and not dec.eof:
            out = dec.decompress(data, max_out)
            rest = dec.unconsumed_tail
            if not out and len(rest) >= len(data):
                raise _Stuck
            data = rest
            yield out, pos


def member_end(fd: int, offset: int, size: int) -> int | None:
    """End of the gzip member starting at `offset` (None if it cannot be decompressed).

    Output is bounded per round and the rounds must make progress (`_inflate`)."""
    dec = zlib.decompressobj(31)
    pos = offset
    try:
        for _, read_to in _inflate(fd, offset, size, dec, 1 << 16):
            pos = read_to
    except (zlib.error, _Stuck):
        return None
    return pos - len(dec.unused_data) if dec.eof else None


def first_member_is_one_record(fd: int, size: int) -> bool:
    """True when the file's first gzip member ends where its first WARC record ends.

    That is the layout the WARC standard asks for (one gzip member per record), and the only
    one in which record offsets point into the compressed file. Decompression stops as soon as
    the member runs past the record, so a whole-file gzip stream costs one record's worth.
    Undecidable starts (stuck or damaged streams, no readable first header) answer True: the
    normal pass then reports the damage record by record.
    """
    head = b""
    total = 0
    record_end: int | None = None
    try:
        for out, _ in _inflate(fd, 0, size, zlib.decompressobj(31), 1 << 20):
            total += len(out)
            if record_end is None:
                head += out[: (1 << 20) - len(head)]
                record_end = _record_end(head)
                if record_end is None and len(head) >= 1 << 20:
                    return True
            if record_end is not None and total > record_end + 16:
                return False
    except (zlib.error, _Stuck):
        return True
    return True


def archive_iterator(stream: Any, stream_detect: bool = True) -> ArchiveIterator:
    """FastWARC over `stream` as every WARC path reads it: every record type, HTTP headers
    parsed, bodies left encoded (our readers decode them under the size cap), quirks
    tolerated; `stream_detect` lets FastWARC find gzip or zstd itself."""
    return ArchiveIterator(
        stream,
        parse_http=True,
        record_types=WarcRecordType.any_type,
        quirks_mode=True,
        auto_decode="none",
        stream_detect=stream_detect,
    )


def _record_end(head: bytes) -> int | None:
    """Decompressed end of the first record (header + Content-Length), once the header is in."""
    end = head.find(b"\r\n\r\n")
    sep = 4
    if end < 0:
        end = head.find(b"\n\n")
        sep = 2
    if end < 0:
        return None
    for line in head[:end].splitlines():
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return end + sep + int(value)
    return 1 << 62  # no length: never conclude "more than one record"
