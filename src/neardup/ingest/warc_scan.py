"""One pass over a WARC file with FastWARC, restarting after damage where the format allows.

`warc_reader.py` turns each FastWARC record into a RawRecord; this module decides where
reading starts and ends: it holds each record back until the next one's offset bounds it,
checks that bound against the record's own extent (`warc_framing.check_extent`), gives a
row to every stretch FastWARC skipped or could not read, and restarts FastWARC after a record
that swallowed others or after an error. Every restart lies after the start of the pass
that asked for it, so the passes move forward and the scan always ends.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable, Generator, Iterator
from typing import Any, BinaryIO

from fastwarc.stream_io import ZstdReader
from fastwarc.warc import WarcRecord

from neardup.ingest.common import GZIP_MEMBER, ZSTD_MAGIC
from neardup.ingest.limits import short_error
from neardup.ingest.record import RawRecord
from neardup.ingest.warc_framing import (
    archive_iterator,
    blank_between,
    check_extent,
    first_member_is_one_record,
    member_end,
    next_plain_start,
    next_warc_member,
)

# A FastWARC record, its file, its offset and the payload cap, as one RawRecord.
Convert = Callable[[WarcRecord, str, int, int], RawRecord]


class WarcScan:
    """One pass over a WARC file, restarting FastWARC after damage where the format allows."""

    def __init__(
        self,
        path: str,
        fh: BinaryIO,
        max_payload_bytes: int,
        convert: Convert,
        start: int = 0,
        stop: int | None = None,
    ) -> None:
        """A scan of the rows that start in [start, stop) (`input_ranges.py` cuts a file
        at record starts; `stop` None: the end of the file). The scan reads on past `stop`
        until it frames the next record, as a scan of the whole file does, so that the last
        record of the range is checked against the same bytes (a damaged gzip member shows
        its damage only as the next one is read), and drops what starts at `stop` or later:
        the next range's reader gives those rows, the same ones."""
        self.path = path
        self.convert = convert
        self.cap = max_payload_bytes
        self.fh = fh
        self.fd = fh.fileno()
        self.start = start
        self.size = os.fstat(self.fd).st_size
        self.stop = stop
        magic = os.pread(self.fd, 4, 0)
        self.gzip = magic.startswith(GZIP_MEMBER)
        # In a whole-file gzip stream or a zstd file FastWARC's stream_pos is the position of a
        # compressed block, shared by many records; there we decompress through a Python
        # stream and use positions in the decompressed data as offsets instead.
        self.single_stream = (
            self.gzip and not first_member_is_one_record(self.fd, self.size)
        ) or magic == ZSTD_MAGIC
        # Each record is held back until the next one's offset tells its length.
        self.pending: RawRecord | None = None
        # The last row made up for a damaged stretch: it has no length to check.
        self.placeholder: RawRecord | None = None

    def records(self) -> Iterator[RawRecord]:
        if self.stop is None:
            yield from self._records()
            return
        rows = self._records()
        try:
            for row in rows:
                if row.offset >= self.stop:
                    return
                yield row
        finally:
            rows.close()

    def _records(self) -> Iterator[RawRecord]:
        start: int | None = self.start
        while start is not None:
            start = yield from self._run_pass(start)
        if self.pending is not None:
            yield self._finish(self.pending, None)

    def _run_pass(self, pass_start: int) -> Generator[RawRecord, None, int | None]:
        """One FastWARC pass from `pass_start`; returns where the next pass starts, if any.

        Every restart lies after `pass_start`, so the passes move forward through the file.
        """
        records = self._pass(pass_start)
        framed = False
        try:
            for raw in records:
                if not framed and not self.single_stream:
                    yield from self._leading_gap(pass_start, raw.offset)
                framed = True
                rows, restart = self._check_held(raw.offset, pass_start)
                yield from rows
                if restart is not None:
                    return restart
                yield from self._push(raw)
        except Exception as exc:  # FastWARC raises OSError (or worse) on corrupt data
            damaged, start = self._resync(pass_start, exc)
            if damaged is not None:
                self.placeholder = damaged
                yield from self._push(damaged)
            return start if start is not None and start > pass_start else None
        finally:
            records.close()
        rows, restart = self._check_held(self.size, pass_start)
        yield from rows
        if restart is not None:
            return restart
        if not framed and pass_start > self.start:
            # A restart lands on what looks like a record start; if FastWARC reads nothing
            # there, that record is unreadable and still gets its row.
            damaged = RawRecord(
                self.path, pass_start, "unknown", skipped_reason="unreadable record: no record"
            )
            self.placeholder = damaged
            yield from self._push(damaged)
            return self._next_start(pass_start + 1)
        return None

    def _leading_gap(self, start: int, first: int) -> Iterator[RawRecord]:
        """A row for bytes FastWARC skipped before the first record of a pass, if any."""
        if first > start and not blank_between(self.fd, start, first):
            held, self.pending = self.pending, None
            if held is not None:
                yield self._finish(held, start)
            gap = RawRecord(self.path, start, "unknown", length=first - start)
            gap.skipped_reason = f"unreadable record: {first - start} bytes that are no WARC record"
            yield gap

    def _next_start(self, start: int) -> int | None:
        """The next record start at or after `start` (gzip member or `WARC/1.` line)."""
        if self.gzip:
            return next_warc_member(self.fd, start, self.size)
        return next_plain_start(self.fd, start, self.size)

    def _check_held(self, bound: int, pass_start: int) -> tuple[list[RawRecord], int | None]:
        """Check the held-back record against `bound` (the next record's offset or the file
        size): rows to yield now, and where to restart if FastWARC missed a record."""
        last = self.pending
        if last is None or last is self.placeholder or self.single_stream:
            return [], None
        cut = check_extent(self.fd, self.gzip, last.offset, bound)
        if cut is None:
            return [], None
        restart = cut.restart
        if restart is not None and restart <= pass_start:
            return [], None  # already read from there: never go back
        self.pending = None
        if cut.swallowed:
            where = "its gzip member" if self.gzip else "the record"
            last.payload = None
            last.redirect_to = None
            last.skipped_reason = f"unreadable record: Content-Length runs past the end of {where}"
        rows = [self._finish(last, cut.end)]
        if cut.gap is not None:
            start, stop = cut.gap
            gap = RawRecord(self.path, start, "unknown", length=stop - start)
            gap.skipped_reason = f"unreadable record: {stop - start} bytes that are no WARC record"
            rows.append(gap)
        return rows, restart

    def _pass(self, start: int) -> Iterator[RawRecord]:
        """Records from `start` until the end of the file or the first FastWARC error."""
        self.fh.seek(start)
        stream: Any = self.fh
        if self.single_stream and self.gzip:
            stream = gzip.GzipFile(fileobj=self.fh, mode="rb")
        elif self.single_stream:
            stream = _CountingReader(ZstdReader(self.fh))
        records = archive_iterator(stream, stream_detect=not self.single_stream)
        for rec in records:
            yield self.convert(rec, self.path, rec.stream_pos, self.cap)

    def _push(self, raw: RawRecord) -> Iterator[RawRecord]:
        """Yield the held-back record now that the next one's offset bounds it."""
        if self.pending is not None:
            yield self._finish(self.pending, raw.offset)
        self.pending = raw

    def _finish(self, raw: RawRecord, next_offset: int | None) -> RawRecord:
        """Fill in `length` where offsets are real file positions."""
        if raw.length is None and self._seekable(raw.offset):
            end = next_offset if next_offset is not None else self.size
            if next_offset is None or self._seekable(next_offset):
                raw.length = max(end - raw.offset, 0)
        return raw

    def _seekable(self, offset: int) -> bool:
        """A plain file's offsets always are; a gzip file's only at member starts."""
        if self.single_stream:
            return False
        if not self.gzip:
            return True
        return os.pread(self.fd, 3, offset) == GZIP_MEMBER

    def _resync(self, pass_start: int, error: Exception) -> tuple[RawRecord | None, int | None]:
        """A record for the damaged stretch, and where to restart (None: give up on the rest)."""
        reason = f"unreadable record: {short_error(error)}"
        last = self.pending
        if last is not None and last.offset < pass_start:
            last = None  # held over from an earlier pass
        if self.single_stream:
            # A single gzip or zstd stream cannot be entered in the middle: stop here.
            at = last.offset + 1 if last is not None else pass_start
            return RawRecord(
                self.path, at, "unknown", skipped_reason=reason + "; rest skipped"
            ), None
        if not self.gzip:
            return self._resync_plain(last, pass_start, reason)
        if last is None:
            damaged_at: int | None = pass_start
            search_from = pass_start + 1
        elif (last.skipped_reason or "").startswith("unreadable"):
            damaged_at = None  # that record already accounts for the damage
            search_from = last.offset + 1
        else:
            damaged_at = member_end(self.fd, last.offset, self.size)
            search_from = damaged_at + 1 if damaged_at is not None else last.offset + 1
        if damaged_at is not None and damaged_at >= self.size:
            return None, None
        restart = next_warc_member(self.fd, search_from, self.size)
        if damaged_at is None:
            return None, restart
        return RawRecord(self.path, damaged_at, "unknown", skipped_reason=reason), restart

    def _resync_plain(
        self, last: RawRecord | None, pass_start: int, reason: str
    ) -> tuple[RawRecord | None, int | None]:
        """In a plain file: restart at the next `WARC/1.` line after the last good record.

        If the pass failed before its first record, that record is the damaged one: it gets
        the row and the scan moves on past its start.
        """
        if last is not None:
            return None, next_plain_start(self.fd, last.offset + 1, self.size)
        damaged = RawRecord(self.path, pass_start, "unknown", skipped_reason=reason)
        return damaged, next_plain_start(self.fd, pass_start + 1, self.size)


class _CountingReader:
    """A decompressing FastWARC reader seen as a Python stream whose tell() counts
    decompressed bytes, so that FastWARC's stream_pos becomes a decompressed offset."""

    def __init__(self, inner: ZstdReader) -> None:
        self.inner = inner
        self.pos = 0

    def read(self, size: int = -1) -> bytes:
        data = self.inner.read(size if size and size > 0 else 1 << 20)
        self.pos += len(data)
        return data

    def tell(self) -> int:
        return self.pos

    def close(self) -> None:
        self.inner.close()
