"""ARC v1 files (the Internet Archive's pre-WARC format), plain or gzip, framed into RawRecords.

warcio reads well-formed ARCs. Old Common Crawl ARCs (2008-2010) are not well-formed: the
`filedesc://` header declares one byte more than it has, records are followed by zero or one
blank line, and HTTP headers announce chunking and gzip although the bodies were stored decoded.
warcio gives up on those at the second record. So we run warcio while its framing holds and
switch to a small lenient ARC parser from the last record it framed correctly: a record is the
header line `URL IP YYYYMMDDhhmmss content-type length` plus `length` bytes; blank lines between
records are skipped, and where the declared length does not land on a header line, the next
header line found in the data ends the record instead.

Offsets: the record's gzip member in a per-record gzip file, or the header line in a plain file.

Bodies are read up to a cap (`Settings.max_payload_bytes`, `ingest/limits.py`): a bigger record
is a row "payload too large" and is never held whole.
"""

from __future__ import annotations

import io
import mmap
import os
import re
import zlib
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any, BinaryIO

from neardup.config import DEFAULT_MAX_PAYLOAD_BYTES
from neardup.ingest.common import (
    GZIP_MEMBER,
    decode_body,
    iso_utc,
    next_gzip_member,
    split_content_type,
)
from neardup.ingest.limits import (
    BodyError,
    PayloadTooLarge,
    http_status,
    raw_cap,
    read_capped,
    set_redirect,
    too_large_reason,
)
from neardup.ingest.record import RawRecord

_NON_PAGE_SCHEMES = ("dns:", "filedesc:", "whois:", "metadata:")
FILE_HEADER_REASON = "not a page: ARC file header"
# URL IP-address Archive-date Content-type Archive-length. Version-2 lines have five more fields
# between type and length, which the lazy middle group absorbs.
_HEADER = (
    rb"(?P<url>[A-Za-z][A-Za-z0-9+.\-]*:\S*) (?P<ip>\S+) (?P<date>\d{14})"
    rb"(?: (?P<mime>[^\r\n]*?))? (?P<length>\d{1,12})\r?$"
)
# `match` at a known record start (which need not follow a line break: old Common Crawl ARCs
# start the next header right after a body that does not end in one) ...
_HEADER_AT = re.compile(_HEADER, re.M)
# ... and `search` for the next header line when resynchronising.
_HEADER_LINE = re.compile(rb"^" + _HEADER, re.M)
_BLANK = b"\r\n \t"


@cache
def _quiet_archive_iterator() -> type:
    """warcio's `ArchiveIterator`, quiet: warcio prints framing warnings to stderr; we count
    them (err_count) instead. Made on first use: warcio (and fsspec, which it imports) is
    only for ARC files, and importing it cost every command 30 ms."""
    from warcio.archiveiterator import ArchiveIterator

    class QuietArchiveIterator(ArchiveIterator):
        INC_RECORD = ""

    return QuietArchiveIterator


def iter_arc(path: str, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> Iterator[RawRecord]:
    """All records of the ARC file at `path`, each as one RawRecord, in file order."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed in the finally below, across yields
    except OSError as exc:
        yield RawRecord(path, 0, "file", skipped_reason=f"cannot open: {exc}")
        return
    try:
        resume = yield from _warcio_records(path, fh, max_payload_bytes)
        if resume is not None:
            yield from _lenient_records(path, fh, resume, max_payload_bytes)
    finally:
        fh.close()


def _warcio_records(path: str, fh: BinaryIO, cap: int) -> Iterator[RawRecord]:
    """Records as warcio frames them; returns the offset to continue leniently from, or None.

    A record is held back until warcio has framed the next one without complaint, since a
    wrong length only shows when reading what follows it.
    """
    pending: RawRecord | None = None
    resume = 0
    try:
        records = _quiet_archive_iterator()(fh, arc2warc=True)
        errors = records.err_count
        for rec in records:
            if records.err_count != errors:
                return pending.offset if pending is not None else resume
            raw = _from_warcio(path, rec, records, cap)
            if pending is not None:
                yield pending
            pending = raw
            resume = raw.offset + (raw.length or 0)
    except Exception:  # warcio raises ArchiveLoadFailed, zlib.error, ValueError ...
        return pending.offset if pending is not None else resume
    if pending is not None:
        yield pending
    return None


def _from_warcio(path: str, rec: Any, records: Any, cap: int) -> RawRecord:
    """A warcio (arc2warc) record as a RawRecord. Read errors propagate (framing is lost)."""
    stream = rec.raw_stream
    body, more = read_capped(stream.read, raw_cap(cap))
    complete = more or getattr(stream, "limit", 0) <= 0
    records.read_to_end(rec)
    headers = rec.rec_headers
    raw = RawRecord(
        source=path,
        offset=records.get_record_offset(),
        record_type="arc",
        length=records.get_record_length(),
        url=headers.get_header("WARC-Target-URI"),
        fetched_at=iso_utc(headers.get_header("WARC-Date")),
        ip=headers.get_header("WARC-IP-Address"),
    )
    if rec.rec_type == "warcinfo":
        raw.skipped_reason = FILE_HEADER_REASON
        return raw
    http = rec.http_headers
    status = http.get_statuscode() if http is not None else None
    get = http.get_header if http is not None else None
    if more:
        return _skip(raw, too_large_reason(cap))
    _fill_page(raw, status, get, None, body, complete, cap)
    return raw


def _fill_page(
    raw: RawRecord,
    status: str | None,
    get_header: Callable[[str], str | None] | None,
    arc_mime: str | None,
    body: bytes,
    complete: bool,
    cap: int,
) -> None:
    """Status, content type, redirect and decoded payload (or the reason there is none)."""
    if raw.url and raw.url.lower().startswith(_NON_PAGE_SCHEMES):
        raw.skipped_reason = f"not a page: {raw.url.split(':', 1)[0].lower()} record"
        return
    if not complete:
        raw.skipped_reason = "unreadable record: truncated"
        return
    if get_header is None:  # no HTTP header block (HTTP/0.9 or a non-HTTP capture)
        raw.content_type, raw.charset = split_content_type(arc_mime)
        if len(body) > cap:
            raw.skipped_reason = too_large_reason(cap)
            return
        raw.payload = body
        return
    raw.status = http_status(status)
    raw.content_type, raw.charset = split_content_type(get_header("Content-Type") or arc_mime)
    set_redirect(raw, get_header("Location"))
    if raw.skipped_reason:
        return
    try:
        raw.payload = decode_body(
            body, get_header("Transfer-Encoding"), get_header("Content-Encoding"), limit=cap
        )
    except PayloadTooLarge:
        raw.skipped_reason = too_large_reason(cap)
    except BodyError as exc:
        raw.skipped_reason = f"unreadable record: {exc}"


# --- lenient parser ------------------------------------------------------------------------


def _lenient_records(path: str, fh: BinaryIO, start: int, cap: int) -> Iterator[RawRecord]:
    """Records from `start` to the end with the lenient parser, plain or gzip."""
    fd = fh.fileno()
    size = os.fstat(fd).st_size
    if start >= size:
        return
    if os.pread(fd, 3, 0) == GZIP_MEMBER:
        yield from _lenient_gzip(path, fd, start, size, cap)
        return
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf:
        yield from _lenient_block(path, buf, start, 0, cap)


def _lenient_block(path: str, buf: Any, start: int, base: int, cap: int) -> Iterator[RawRecord]:
    """ARC records in the bytes-like `buf` from `start`; offsets are `base` + position."""
    n = len(buf)
    pos = _skip_blank(buf, start)
    while pos < n:
        header = _HEADER_AT.match(buf, pos)
        if header is None:
            found = _HEADER_LINE.search(buf, pos + 1)
            end = found.start() if found is not None else n
            yield RawRecord(
                path,
                base + pos,
                "arc",
                length=end - pos,
                skipped_reason=f"unreadable record: no ARC header line ({end - pos} bytes)",
            )
            pos = _skip_blank(buf, end)
            continue
        body_start = _line_end(buf, header.end())
        declared = int(header.group("length"))
        end = body_start + declared
        if end > n:
            reason = f"unreadable record: truncated ({n - body_start} of {declared} bytes)"
            yield _skip(_header_record(path, base + pos, header, n - pos), reason)
            return
        end = _true_end(buf, body_start, end)
        try:
            if end - body_start > raw_cap(cap):  # never copy a huge block out of the map
                raw = _header_record(path, base + pos, header, end - pos)
                raw.skipped_reason = too_large_reason(cap)
            else:
                block = bytes(buf[body_start:end])
                raw = _block_record(path, base + pos, end - pos, header, block, cap)
        except Exception as exc:  # a parser bug must not end the file for its neighbours
            raw = RawRecord(path, base + pos, "arc", end - pos)
            raw.skipped_reason = f"unreadable record: {type(exc).__name__}: {exc}"[:160]
        yield raw
        pos = _skip_blank(buf, end)


def _true_end(buf: Any, body_start: int, end: int) -> int:
    """`end` if the declared length lands on a blank line, a header line or EOF; else the
    start of the next header line after the body's start (the length was wrong)."""
    after = _skip_blank(buf, end)
    if after >= len(buf) or _HEADER_AT.match(buf, after):
        return end
    found = _HEADER_LINE.search(buf, body_start)
    if found is None:
        return end  # nothing to resync to: the junk after it becomes an unreadable record
    stop = found.start()
    if buf[stop - 1 : stop] == b"\n":
        stop -= 1  # the separator line break belongs to no record
    return stop


def _skip_blank(buf: Any, pos: int) -> int:
    """Position of the first byte at or after `pos` that is not blank-line whitespace."""
    n = len(buf)
    while pos < n and buf[pos : pos + 1] in (b"\n", b"\r", b" ", b"\t"):
        pos += 1
    return pos


def _line_end(buf: Any, pos: int) -> int:
    """Position just after the line break at `pos` (the header regex stops before it)."""
    if buf[pos : pos + 2] == b"\r\n":
        return pos + 2
    if buf[pos : pos + 1] == b"\n":
        return pos + 1
    return pos


def _skip(raw: RawRecord, reason: str) -> RawRecord:
    """`raw` with its skip reason set, for one-line returns."""
    raw.skipped_reason = reason
    return raw


def _header_record(path: str, offset: int, header: re.Match, length: int) -> RawRecord:
    """A record with the fields of an ARC header line filled in."""
    mime = (header.group("mime") or b"").split(b" ", 1)[0]
    return RawRecord(
        source=path,
        offset=offset,
        record_type="arc",
        length=length,
        url=header.group("url").decode("utf-8", "replace"),
        ip=header.group("ip").decode("ascii", "replace"),
        fetched_at=iso_utc(header.group("date").decode("ascii")),
        content_type=mime.decode("ascii", "replace").lower() or None,
    )


def _block_record(
    path: str, offset: int, length: int, header: re.Match, block: bytes, cap: int
) -> RawRecord:
    """Parse the block of one ARC record: the HTTP response inside, if there is one."""
    raw = _header_record(path, offset, header, length)
    if raw.url and raw.url.startswith("filedesc:"):
        raw.content_type = None
        return _skip(raw, FILE_HEADER_REASON)
    arc_mime = raw.content_type
    raw.content_type = None
    if not block.startswith(b"HTTP/"):
        _fill_page(raw, None, None, arc_mime, block, True, cap)
        return raw
    stream = io.BytesIO(block)
    try:
        from warcio.statusandheaders import StatusAndHeadersParser

        http = StatusAndHeadersParser([], verify=False).parse(stream)
    except Exception as exc:  # warcio raises StatusAndHeadersParserException and others
        return _skip(raw, f"unreadable record: bad HTTP header ({exc})"[:160])
    body = block[stream.tell() :]
    _fill_page(raw, http.get_statuscode(), http.get_header, arc_mime, body, True, cap)
    return raw


def _lenient_gzip(path: str, fd: int, start: int, size: int, cap: int) -> Iterator[RawRecord]:
    """Per-member lenient parsing of a gzip ARC; damaged members are reported and skipped."""
    pos = start
    while pos < size:
        data, end, error = _read_member(fd, pos, size, raw_cap(cap) + 65536)
        if error is not None and not data:
            restart = _next_arc_member(fd, pos + 1, size)
            stop = restart if restart is not None else size
            yield RawRecord(
                path, pos, "arc", length=stop - pos, skipped_reason=f"unreadable record: {error}"
            )
            pos = stop
            continue
        records = list(_lenient_block(path, data, 0, pos, cap))
        if len(records) == 1:
            records[0].length = end - pos
        else:
            for rec in records:
                rec.length = None  # several records share one member: no own byte range
        yield from records
        pos = end


def _read_member(fd: int, pos: int, size: int, limit: int) -> tuple[bytes, int, str | None]:
    """(decompressed data, end offset, error) of the gzip member at `pos`.

    A member that decompresses to more than `limit` bytes is reported, not held: its data
    is dropped and the error says so, with the end found by decompressing it to a sink.
    """
    dec = zlib.decompressobj(31)
    parts = []
    total = 0
    offset = pos
    try:
        while not dec.eof and offset < size:
            chunk = os.pread(fd, 1 << 16, offset)
            offset += len(chunk)
            data = chunk
            while data and not dec.eof:
                out = dec.decompress(data, 1 << 20)
                rest = dec.unconsumed_tail
                if not out and len(rest) >= len(data):
                    return b"", offset, "stuck gzip member"
                data = rest
                total += len(out)
                if total <= limit:
                    parts.append(out)
                elif parts:
                    parts = []  # over the limit: keep decompressing only to find the end
    except zlib.error as exc:
        return b"".join(parts), offset, f"bad gzip data: {exc}"
    end = offset - len(dec.unused_data) if dec.eof else offset
    if total > limit:
        return b"", end, f"gzip member too large ({total} bytes decompressed)"
    return b"".join(parts), end, None if dec.eof else "truncated gzip member"


def _next_arc_member(fd: int, start: int, size: int) -> int | None:
    """Offset of the next gzip member at or after `start` that opens with an ARC header line."""
    return next_gzip_member(
        fd, start, size, lambda head: bool(_HEADER_AT.match(head.lstrip(_BLANK)))
    )
