"""Helpers shared by the WARC and ARC readers: HTTP body decoding, header fields, dates.

Crawlers disagree about what they store. Some keep the body exactly as it came off the wire
(chunked, gzipped), others store it decoded but keep the original `Transfer-Encoding` and
`Content-Encoding` headers (old Common Crawl ARCs, pywb, many Heritrix WARCs). Decoding strictly
by the headers therefore fails on a large share of real records, so every step here checks the
bytes before undoing an encoding and leaves data alone that is evidently already decoded.
"""

from __future__ import annotations

import io
import os
import re
import zlib
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from functools import lru_cache

from fastwarc.stream_io import BrotliReader, ZstdReader

from neardup.config import DEFAULT_MAX_PAYLOAD_BYTES
from neardup.ingest.limits import BodyError, PayloadTooLarge

# Decoding stops beyond this size unless a caller gives its own cap (Settings.max_payload_bytes):
# a decompression bomb must not take a worker's memory.
MAX_DECODED_BYTES = DEFAULT_MAX_PAYLOAD_BYTES

_CHUNK_SIZE_LINE = re.compile(rb"[ \t]*([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?\r?\n")
_ISO_DATE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?)?$"
)
_ARC_DATE = re.compile(r"(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})$")


_GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_HTML_START = re.compile(
    rb"\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body|title|meta)\b", re.I | re.S
)


def read_head(path: str, size: int = 1 << 16) -> bytes:
    """Up to `size` leading bytes of the file, decompressed if it is gzip or zstd.

    Raises OSError when the file cannot be read and zlib.error when gzip data is corrupt.
    """
    with open(path, "rb") as fh:
        magic = fh.read(4)
        fh.seek(0)
        if magic.startswith(_GZIP_MAGIC):
            return _gunzip_head(fh.read(1 << 20), size)
        if magic == ZSTD_MAGIC:
            return ZstdReader(fh).read(size)
        return fh.read(size)


def _gunzip_head(data: bytes, size: int) -> bytes:
    """Decompress up to `size` bytes across gzip members (a first member may be tiny)."""
    out = b""
    while data.startswith(_GZIP_MAGIC) and len(out) < size:
        dec = zlib.decompressobj(31)
        try:
            out += dec.decompress(data, size - len(out))
        except zlib.error:
            if out:
                break  # damage further in is the reader's business, not the sniffer's
            raise
        if not dec.eof:
            break
        data = dec.unused_data
    return out


def sniff_kind(head: bytes) -> str | None:
    """The kind ("warc", "arc", "parquet", "jsonl", "html") of a file's first bytes, or None."""
    if head.startswith(b"PAR1"):
        return "parquet"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"WARC/"):
        return "warc"
    if text.startswith(b"filedesc://"):
        return "arc"
    if text.startswith(b"{"):
        return "jsonl"
    if _HTML_START.match(text, 0, 4096):
        return "html"
    if b"\nWARC/1." in head or b"\nWARC/0." in head:
        return "warc"  # junk before the first record; FastWARC skips to it
    return None


DAMAGED_START = "damaged gzip data at the start of the file"


def sniff_archive(path: str) -> tuple[str | None, str | None]:
    """("warc" or "arc", None), or (None, why the file is neither)."""
    try:
        head = read_head(path)
    except zlib.error:
        return None, DAMAGED_START
    except OSError as exc:
        return None, f"cannot read file: {exc}"
    if not head:
        return None, "empty file"
    kind = sniff_kind(head)
    if kind in ("warc", "arc"):
        return kind, None
    return None, f"not a WARC or ARC file (starts with {head[:32]!r})"


def split_content_type(value: str | None) -> tuple[str | None, str | None]:
    """(media type in lower case, charset) from a Content-Type value; None for what is absent."""
    if not value:
        return None, None
    media, _, params = value.partition(";")
    media = media.strip().lower() or None
    charset = None
    for param in params.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset":
            charset = val.strip().strip("\"'").strip() or None
            break
    return media, charset


@lru_cache(maxsize=4096)
def iso_utc(value: str | None) -> str | None:
    """ISO 8601 UTC ("2008-04-30T20:48:25Z") from a WARC-Date or a 14-digit ARC date.

    Returns None for dates that do not exist (ClueWeb09 writes "2009-03-65"), so that the
    column can be cast to a timestamp downstream without failing on one bad record. Cached:
    a fetch's request, response and metadata records carry one date, and a crawler writes
    many fetches a second.
    """
    if not value:
        return None
    value = value.strip()
    try:
        m = _ARC_DATE.match(value)
        if m:
            dt = datetime(*map(int, m.groups()), tzinfo=timezone.utc)
            return _format_utc(dt)
        m = _ISO_DATE.match(value)
        if not m:
            return None
        year, month, day, hour, minute, second, frac, zone = m.groups()
        micro = int((frac or "0")[:6].ljust(6, "0"))
        dt = datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            micro,
            tzinfo=_zone(zone),
        )
    except ValueError:
        return None
    return _format_utc(dt)


def _zone(zone: str | None) -> timezone:
    """tzinfo for "Z", "+01:00" or "-0800"; naive dates are taken as UTC (the WARC rule)."""
    if not zone or zone == "Z":
        return timezone.utc
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))


def _format_utc(dt: datetime) -> str:
    """Seconds precision unless the source carried sub-second detail."""
    dt = dt.astimezone(timezone.utc)
    spec = "microseconds" if dt.microsecond else "seconds"
    return dt.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def header_value(pairs: Iterable[tuple[str, str]], name: str) -> str | None:
    """First value of header `name` (case-insensitive) among (name, value) pairs."""
    name = name.lower()
    for key, value in pairs:
        if key.strip().lower() == name:
            return value.strip()
    return None


def decode_body(
    body: bytes,
    transfer_encoding: str | None,
    content_encoding: str | None,
    limit: int = MAX_DECODED_BYTES,
) -> bytes:
    """Undo chunked transfer-encoding and gzip/deflate/br/zstd content-encoding.

    Each step is skipped when the bytes show that it was already undone by the crawler.
    Raises BodyError when an encoding is evidently present but broken, and PayloadTooLarge
    as soon as a step would give more than `limit` bytes (never decoding further).
    """
    if transfer_encoding and "chunked" in transfer_encoding.lower() and looks_chunked(body):
        body = dechunk(body, limit)
    if content_encoding:
        codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
        for coding in reversed(codings):
            body = _undo_coding(body, coding, limit)
    if len(body) > limit:
        raise PayloadTooLarge("decoded body too large")
    return body


def looks_chunked(body: bytes) -> bool:
    """True when the body starts like chunked data: a size line, then that many bytes and EOL.

    Checking the line ending after the first chunk keeps plain text that happens to start with
    a hex-looking word ("add", "cafe") from being mistaken for a chunk header.
    """
    m = _CHUNK_SIZE_LINE.match(body, 0, 100)
    if m is None:
        return False
    end = m.end() + int(m.group(1), 16)
    return end >= len(body) or body[end : end + 1] in (b"\r", b"\n")


def dechunk(body: bytes, limit: int = MAX_DECODED_BYTES) -> bytes:
    """Join the chunks of a chunked body, keeping what precedes a malformed or cut-off chunk.

    Real records end early (truncated captures) or carry a wrong final chunk; the data read so
    far is still the page, so this only raises when not even the first size line is readable.
    """
    out = []
    pos = 0
    total = 0
    while True:
        m = _CHUNK_SIZE_LINE.match(body, pos)
        if m is None:
            if pos == 0:
                raise BodyError("malformed chunked body")
            break
        size = int(m.group(1), 16)
        if size == 0:
            break
        start = m.end()
        out.append(body[start : start + size])
        total += size
        if total > limit:
            raise PayloadTooLarge("chunked body too large")
        pos = start + size
        if body.startswith(b"\r\n", pos):
            pos += 2
        elif body.startswith(b"\n", pos):
            pos += 1
        if pos >= len(body):
            break
    return b"".join(out)


def _undo_coding(body: bytes, coding: str, limit: int) -> bytes:
    """Undo one content coding if the data is still encoded with it."""
    if not body or coding in ("identity", "none", "utf-8", "binary", "8bit", "7bit"):
        return body
    if coding in ("gzip", "x-gzip"):
        return _gunzip(body, limit) if body.startswith(_GZIP_MAGIC) else body
    if coding == "deflate":
        return _inflate(body, limit)
    if coding == "br":
        return _unbrotli(body, limit)
    if coding == "zstd":
        if body[:4] != ZSTD_MAGIC:
            return body
        return _read_all(ZstdReader(io.BytesIO(body)), limit)
    raise BodyError(f"unsupported content-encoding {coding!r}")


def _gunzip(body: bytes, limit: int) -> bytes:
    """Decompress gzip, including concatenated members; a cut-off stream keeps its prefix."""
    out = []
    total = 0
    data = body
    while data.startswith(_GZIP_MAGIC):
        dec = zlib.decompressobj(31)
        try:
            chunk = dec.decompress(data, limit + 1 - total)
        except zlib.error as exc:
            if out:
                break  # a damaged trailing member: keep the members before it
            raise BodyError(f"bad gzip body: {exc}") from None
        out.append(chunk)
        total += len(chunk)
        if total > limit:
            raise PayloadTooLarge("gzip body too large")
        if not dec.eof:
            if not total:
                raise BodyError("truncated gzip body")
            break  # truncated capture: keep what was decoded
        data = dec.unused_data.lstrip(b"\r\n\x00")
    return b"".join(out)


def _inflate(body: bytes, limit: int) -> bytes:
    """Deflate is zlib-wrapped per the RFC and raw in practice: try both, else keep the data."""
    for wbits in (15, -15):
        dec = zlib.decompressobj(wbits)
        try:
            out = dec.decompress(body, limit + 1)
        except zlib.error:
            continue
        if len(out) > limit:
            raise PayloadTooLarge("deflate body too large")
        if out:
            return out
    return body  # stored decoded despite the header


def _unbrotli(body: bytes, limit: int) -> bytes:
    """Brotli has no magic bytes: try it, and keep the data as is when it is not brotli."""
    try:
        out = _read_all(BrotliReader(io.BytesIO(body)), limit)
    except OSError:
        return body
    return out if out else body


def _read_all(reader: BrotliReader | ZstdReader, limit: int) -> bytes:
    """Read a FastWARC stream reader to the end, bounded by `limit`."""
    parts = []
    total = 0
    while True:
        chunk = reader.read(1 << 20)
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
        if total > limit:
            raise PayloadTooLarge("decoded body too large")
    return b"".join(parts)


GZIP_MEMBER = b"\x1f\x8b\x08"


def member_head(fd: int, offset: int, want: int) -> bytes:
    """The first `want` decompressed bytes of the gzip member at `offset` (b"" if it is none)."""
    try:
        return zlib.decompressobj(31).decompress(os.pread(fd, 8192, offset), want)
    except zlib.error:
        return b""


def next_gzip_member(
    fd: int, start: int, size: int, opens_record: Callable[[bytes], bool]
) -> int | None:
    """Offset of the next gzip member in [start, size) whose first decompressed bytes
    open a record, to resynchronise after a damaged member. Reads the file in 1 MiB windows."""
    window = 1 << 20
    pos = start
    while pos < size:
        block = os.pread(fd, window + 2, pos)
        if not block:
            return None
        i = block.find(GZIP_MEMBER)
        while i != -1 and pos + i < size:
            if opens_record(member_head(fd, pos + i, 4096)):
                return pos + i
            i = block.find(GZIP_MEMBER, i + 1)
        pos += window
    return None
