"""WARC files (plain, per-record gzip, whole-file gzip, zstd) framed into RawRecords with FastWARC.

Every record of the file becomes exactly one RawRecord, in file order, so that the pipeline can
account for all of them. Records that are not pages carry a `skipped_reason`; damage never
raises out of the iterator. Two FastWARC behaviours shape this module:

* with `auto_decode`, FastWARC aborts the whole iteration on a body that claims
  `Transfer-Encoding: chunked` but was stored de-chunked (common: pywb, Heritrix), so bodies are
  read raw and decoded by `common.decode_body`, which checks the bytes first;
* on a corrupt gzip member FastWARC raises and stops; we then restart at the next gzip member
  that starts a WARC record, after one "unreadable record" for the damaged stretch.

Offsets are FastWARC's `stream_pos`: the byte offset of the record's gzip member in the file,
or of the record itself in a plain file. A file compressed as one single gzip stream, and a
zstd file, have no per-record offsets we can check; there `offset` is the record's position in
the decompressed stream and `length` is None.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

from fastwarc.stream_io import ZstdReader
from fastwarc.warc import ArchiveIterator, WarcRecord, WarcRecordType

from neardup.ingest.common import (
    DAMAGED_START,
    GZIP_MEMBER,
    BodyError,
    decode_body,
    iso_utc,
    next_gzip_member,
    redirect_target,
    sniff_archive,
    split_content_type,
)
from neardup.ingest.record import RawRecord

_ZSTD_FRAME = b"\x28\xb5\x2f\xfd"
_PAGE_TYPES = ("response", "resource")
# URL schemes of records that crawlers write as response/resource but that are never pages.
_NON_PAGE_SCHEMES = ("dns:", "metadata:", "whois:", "filedesc:", "warcinfo:")
REVISIT_REASON = "revisit (duplicate marked by the crawler)"


def iter_warc(path: str) -> Iterator[RawRecord]:
    """All records of the WARC file at `path`, each as one RawRecord, in file order.

    ARC content (whatever the file is called) is handed to the ARC reader, because FastWARC
    silently yields nothing for it.
    """
    kind, problem = sniff_archive(path)
    if problem == DAMAGED_START:
        kind = "warc"  # the scan reports the damaged member and resumes at the next record
    if kind == "arc":
        from neardup.ingest.arc_reader import iter_arc

        yield from iter_arc(path)
        return
    if kind != "warc":
        yield RawRecord(source=path, offset=0, record_type="file", skipped_reason=problem)
        return
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed in the finally below, across yields
    except OSError as exc:
        yield RawRecord(
            source=path, offset=0, record_type="file", skipped_reason=f"cannot open: {exc}"
        )
        return
    try:
        yield from _WarcScan(path, fh).records()
    finally:
        fh.close()


class _WarcScan:
    """One pass over a WARC file, restarting FastWARC after damage where the format allows."""

    def __init__(self, path: str, fh: BinaryIO) -> None:
        self.path = path
        self.fh = fh
        self.fd = fh.fileno()
        self.size = os.fstat(self.fd).st_size
        magic = os.pread(self.fd, 4, 0)
        self.gzip = magic.startswith(GZIP_MEMBER)
        # In a whole-file gzip stream or a zstd file FastWARC's stream_pos is the position of a
        # compressed block, shared by many records; there we decompress through a Python
        # stream and use positions in the decompressed data as offsets instead.
        self.single_stream = (
            self.gzip and not _first_member_is_one_record(self.fd, self.size)
        ) or magic == _ZSTD_FRAME
        # Each record is held back until the next one's offset tells its length.
        self.pending: RawRecord | None = None

    def records(self) -> Iterator[RawRecord]:
        start: int | None = 0
        while start is not None:
            pass_start, start = start, None
            try:
                for raw in self._pass(pass_start):
                    yield from self._push(raw)
            except Exception as exc:  # FastWARC raises OSError (or worse) on corrupt data
                damaged, start = self._resync(pass_start, exc)
                if damaged is not None:
                    yield from self._push(damaged)
        if self.pending is not None:
            yield self._finish(self.pending, None)

    def _pass(self, start: int) -> Iterator[RawRecord]:
        """Records from `start` until the end of the file or the first FastWARC error."""
        self.fh.seek(start)
        stream: Any = self.fh
        if self.single_stream and self.gzip:
            stream = gzip.GzipFile(fileobj=self.fh, mode="rb")
        elif self.single_stream:
            stream = _CountingReader(ZstdReader(self.fh))
        records = ArchiveIterator(
            stream,
            parse_http=True,
            record_types=WarcRecordType.any_type,
            quirks_mode=True,
            auto_decode="none",
            stream_detect=not self.single_stream,
        )
        for rec in records:
            yield to_raw_record(rec, self.path, rec.stream_pos)

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
        reason = f"unreadable record: {_short(error)}"
        last = self.pending
        if last is not None and last.offset < pass_start:
            last = None  # held over from an earlier pass
        if not self.gzip or self.single_stream:
            # FastWARC resyncs plain files by itself, so an error there is an I/O failure;
            # a single gzip stream cannot be entered in the middle. Either way: stop here.
            at = last.offset + 1 if last is not None else pass_start
            return RawRecord(
                self.path, at, "unknown", skipped_reason=reason + "; rest skipped"
            ), None
        if last is None:
            damaged_at: int | None = pass_start
            search_from = pass_start + 1
        elif (last.skipped_reason or "").startswith("unreadable"):
            damaged_at = None  # that record already accounts for the damage
            search_from = last.offset + 1
        else:
            damaged_at = self._member_end(last.offset)
            search_from = damaged_at + 1 if damaged_at is not None else last.offset + 1
        if damaged_at is not None and damaged_at >= self.size:
            return None, None
        restart = _next_warc_member(self.fd, search_from, self.size)
        if damaged_at is None:
            return None, restart
        return RawRecord(self.path, damaged_at, "unknown", skipped_reason=reason), restart

    def _member_end(self, offset: int) -> int | None:
        """End of the gzip member starting at `offset` (None if it cannot be decompressed)."""
        dec = zlib.decompressobj(31)
        pos = offset
        try:
            while not dec.eof and pos < self.size:
                chunk = os.pread(self.fd, 1 << 16, pos)
                pos += len(chunk)
                dec.decompress(chunk, 1 << 16)
                while dec.unconsumed_tail:
                    dec.decompress(dec.unconsumed_tail, 1 << 16)
        except zlib.error:
            return None
        return pos - len(dec.unused_data) if dec.eof else None


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


def _first_member_is_one_record(fd: int, size: int) -> bool:
    """True when the file's first gzip member ends where its first WARC record ends.

    That is the layout the WARC standard asks for (one gzip member per record), and the only
    one in which record offsets point into the compressed file. Decompression stops as soon as
    the member runs past the record, so a whole-file gzip stream costs one record's worth.
    """
    dec = zlib.decompressobj(31)
    head = b""
    pos = 0
    record_end: int | None = None
    try:
        while not dec.eof and pos < size:
            chunk = os.pread(fd, 1 << 16, pos)
            pos += len(chunk)
            head += dec.decompress(chunk)
            if record_end is None:
                record_end = _record_end(head)
            if record_end is not None and len(head) > record_end + 16:
                return False
            if record_end is None and len(head) > 1 << 20:
                return True  # no readable first header: let the normal pass report it
    except zlib.error:
        return True
    return True


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


def _next_warc_member(fd: int, start: int, size: int) -> int | None:
    """Offset of the next gzip member at or after `start` that decompresses to "WARC/"."""
    return next_gzip_member(fd, start, size, lambda head: head.startswith(b"WARC/"))


def _short(error: BaseException) -> str:
    """A one-line, bounded error message for a skip reason."""
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    return text[:120]


def to_raw_record(rec: WarcRecord, path: str, offset: int) -> RawRecord:
    """One FastWARC record as a RawRecord; problems become a skip reason, never an exception."""
    raw = RawRecord(source=path, offset=offset, record_type="unknown")
    try:
        _fill_warc_fields(raw, rec)
        if raw.record_type == "revisit":
            raw.skipped_reason = REVISIT_REASON
            _fill_http_status(raw, rec)
        elif raw.record_type not in _PAGE_TYPES:
            raw.skipped_reason = f"not a page: {raw.record_type} record"
        elif raw.url and raw.url.lower().startswith(_NON_PAGE_SCHEMES):
            raw.skipped_reason = f"not a page: {raw.url.split(':', 1)[0].lower()} record"
        else:
            _fill_payload(raw, rec)
    except BodyError as exc:
        raw.payload = None
        raw.skipped_reason = f"unreadable record: {_short(exc)}"
    except Exception as exc:  # FastWARC raises OSError/ValueError on damaged records
        raw.payload = None
        raw.skipped_reason = f"unreadable record: {_short(exc)}"
    return raw


def _fill_warc_fields(raw: RawRecord, rec: WarcRecord) -> None:
    """Fields that come from the WARC header block alone."""
    headers = rec.headers
    warc_type = (headers.get("WARC-Type") or "").strip().lower()
    raw.record_type = warc_type or "unknown"
    raw.url = _strip_brackets(headers.get("WARC-Target-URI"))
    raw.fetched_at = iso_utc(headers.get("WARC-Date"))
    raw.record_id = headers.get("WARC-Record-ID")
    raw.concurrent_to = headers.get("WARC-Concurrent-To")
    raw.ip = headers.get("WARC-IP-Address")
    raw.payload_digest = headers.get("WARC-Payload-Digest")
    if warc_type == "revisit":
        raw.refers_to = _strip_brackets(
            headers.get("WARC-Refers-To-Target-URI") or headers.get("WARC-Refers-To")
        )


def _strip_brackets(value: str | None) -> str | None:
    """WARC 1.0 drafts and some writers put URIs in angle brackets."""
    if value is None:
        return None
    value = value.strip()
    if value.startswith("<") and value.endswith(">"):
        value = value[1:-1].strip()
    return value or None


def _fill_http_status(raw: RawRecord, rec: WarcRecord) -> None:
    """Status, content type and redirect target of an HTTP record, when it has them."""
    if not rec.is_http:
        return
    http = rec.http_headers
    raw.status = http.status_code
    raw.content_type, raw.charset = split_content_type(http.get("Content-Type"))
    raw.redirect_to = redirect_target(raw.url, raw.status, http.get("Location"))


def _fill_payload(raw: RawRecord, rec: WarcRecord) -> None:
    """Read and decode the body of a response/resource record, checking for truncation."""
    headers = rec.headers
    declared = headers.get("Content-Length")
    if declared is None or not declared.strip().isdigit():
        raw.skipped_reason = "unreadable record: no valid Content-Length (truncated header?)"
        return
    if rec.is_http:
        _fill_http_status(raw, rec)
        if raw.status is None:
            raw.skipped_reason = "unreadable record: malformed HTTP response header"
            return
    else:
        raw.content_type, raw.charset = split_content_type(headers.get("Content-Type"))
    expected = rec.content_length
    body = rec.reader.read()
    if len(body) < expected:
        raw.skipped_reason = f"unreadable record: truncated ({len(body)} of {expected} bytes)"
        return
    truncated = headers.get("WARC-Truncated")
    if truncated:
        raw.skipped_reason = f"truncated by the crawler ({truncated.strip()})"
        return
    if rec.is_http:
        http = rec.http_headers
        body = decode_body(body, http.get("Transfer-Encoding"), http.get("Content-Encoding"))
    raw.payload = body
