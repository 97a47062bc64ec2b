"""JSONL (optionally gzipped) and Parquet tables of pages, one row per RawRecord.

A row needs a `url` and either a `text` column (already extracted text, used as is) or an
`html` column (parsed like a crawled page). Optional: `id`, `status`, `fetched_at`. Rows are
streamed (a line, or a Parquet batch, at a time) so a table never has to fit in memory, and a
bad row becomes a RawRecord with a skip reason instead of stopping the file: that includes
hostile values (deep nesting, numbers that fit no column, lone surrogates that cannot be
written as UTF-8) and lines longer than the payload cap, which are skipped unread.

A JSONL file is framed and parsed in two steps: `iter_jsonl_blocks` cuts it into `LineBlock`s
of whole lines (cheap, in the reading process), and `block_records` parses a block (the
expensive part, run where extraction runs, in worker processes). `iter_jsonl` is both steps
in one, and gives the same records. JSON is parsed by orjson, and by the standard library
wherever the two could disagree (see `_loads`), so every line gives what `json.loads` gives.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow.parquet as pq

from neardup.config import DEFAULT_MAX_PAYLOAD_BYTES
from neardup.ingest.common import iso_utc
from neardup.ingest.limits import http_status, raw_cap, safe_text, too_large_reason
from neardup.ingest.record import RawRecord

COLUMNS = ("url", "text", "html", "id", "status", "fetched_at")
_BATCH_ROWS = 1024
# Bytes of lines in one block: large enough that a block's trip to a worker costs little
# beside its parsing, small enough that a few blocks per worker in flight stay small.
BLOCK_BYTES = 1 << 20
# More brackets than this in a line and it may nest deeper than `json.loads` can follow
# (RecursionError, a skipped row) while orjson, whose limit is 1024, would parse it.
_MAX_FAST_BRACKETS = 512
_FAST_TYPES = (str, int, type(None))  # values both parsers give alike (bool is an int)
_FAILED = object()
_NEWLINE = ord("\n")


@dataclass(slots=True)
class LineBlock:
    """Whole lines of a JSONL input, read but not parsed (`block_records` parses them).

    `data` holds the lines, each ending in a newline except perhaps the input's last one;
    `first_line` is the 0-based line number of its first line. Blank lines are kept, since
    they count in the line numbers that are the records' offsets."""

    source: str
    first_line: int
    data: bytes
    # Where `data` starts in the file at `source` when that file can be read there again (a
    # local file that is not compressed), else None: see `LineSpan`.
    offset: int | None = None

    def span(self) -> LineSpan | LineBlock:
        """The block as a `LineSpan` when its file can be read again, else itself."""
        if self.offset is None:
            return self
        return LineSpan(self.source, self.first_line, self.offset, len(self.data))


@dataclass(slots=True, frozen=True)
class LineSpan:
    """A `LineBlock` named by its place in a local, uncompressed file instead of its bytes.

    Why: the scan's reading process cuts a file into blocks, and a worker parses each; sent
    as bytes, every byte of the input was pickled, written to a pipe and read back once more
    than it needed to be. A worker reads a span's bytes from the file itself (`block`)."""

    source: str
    first_line: int
    offset: int
    size: int

    def block(self) -> LineBlock:
        """The block's lines, read from the file (the bytes the reading process saw)."""
        with open(self.source, "rb") as fh:
            data = os.pread(fh.fileno(), self.size, self.offset)
        if len(data) != self.size:
            raise OSError(f"{self.source}: changed while it was read ({self.offset}+{self.size})")
        return LineBlock(self.source, self.first_line, data, self.offset)


def _records(items: Iterator[LineBlock | RawRecord], max_payload_bytes: int) -> Iterator[RawRecord]:
    """The records of a stream of blocks and reader-decided rows, in order."""
    for item in items:
        if isinstance(item, LineBlock):
            yield from block_records(item, max_payload_bytes)
        else:
            yield item


def iter_jsonl(
    path: str,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    on_read: Callable[[int], None] | None = None,
) -> Iterator[RawRecord]:
    """One RawRecord per non-blank line; `offset` is the 0-based line number.

    `on_read(n)` hears, as the file is read, how many bytes of it (compressed, for a .gz)
    have been read: a row number says nothing about how far into the file it is."""
    yield from _records(iter_jsonl_blocks(path, max_payload_bytes, on_read), max_payload_bytes)


def iter_jsonl_blocks(
    path: str,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    on_read: Callable[[int], None] | None = None,
) -> Iterator[LineBlock | RawRecord]:
    """The lines of a JSONL file in blocks, with a RawRecord wherever the reading itself
    decides a row (a file that cannot be opened or read on, a line over the cap): the
    records of `block_records` over the blocks, and these, in order, are `iter_jsonl`'s."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed below, across yields
    except OSError as exc:
        yield RawRecord(path, 0, "row", skipped_reason=f"cannot open: {exc}")
        return
    with raw:
        try:
            gzipped = raw.peek(2)[:2] == b"\x1f\x8b"
        except OSError as exc:
            yield RawRecord(path, 0, "row", skipped_reason=f"cannot open: {exc}")
            return
        fh = gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else raw
        for item in iter_jsonl_stream_blocks(path, fh, max_payload_bytes, not gzipped):
            if on_read is not None and not raw.closed:
                on_read(raw.tell())
            yield item


def iter_jsonl_stream(
    path: str, fh: Any, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
) -> Iterator[RawRecord]:
    """The rows of an open (already decompressed) JSONL stream, which is closed at the end;
    shared by local files, URLs and stdin (`remote.py`), which have no path to reopen."""
    yield from _records(iter_jsonl_stream_blocks(path, fh, max_payload_bytes), max_payload_bytes)


def iter_jsonl_stream_blocks(
    path: str,
    fh: Any,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    positions: bool = False,
) -> Iterator[LineBlock | RawRecord]:
    """`iter_jsonl_blocks` over an open, decompressed stream, which is closed at the end.
    With `positions` (the stream is the file at `path`, read from its start) each block
    carries its offset in it, until an over-long line is read past (blocks after it carry
    none: they are sent as bytes).

    The stream is read with `read1`, one underlying read at a time (a gzip stream gives
    some 20 KB a read; reads are gathered into blocks of about `BLOCK_BYTES`), so that when a
    read fails (a truncated .gz) every line completed before it is handed on, as a
    line-by-line reader would have: the error's row then follows the last whole line. A
    line longer than the cap is read past in bounded pieces, never held whole."""
    cap = raw_cap(max_payload_bytes)
    read = getattr(fh, "read1", fh.read)
    lines = _Gathered()
    line_no = 0  # number of the first line not yet handed on
    skipping = 0  # 1 while an over-long line is read past: a failure then counts it
    pos: int | None = 0 if positions else None  # the file offset of the first byte held
    try:
        with fh:
            chunk = read(BLOCK_BYTES)
            while chunk:
                lines.add(chunk)
                if lines.unended > cap:  # the lines before it, then the over-long line's row
                    if whole := lines.take_whole():
                        yield LineBlock(path, line_no, whole, pos)
                        line_no += _count_lines(whole)
                    lines = _Gathered()
                    pos = None
                    skipping = 1
                    chunk = _skip_line(read)
                    skipping = 0
                    reason = too_large_reason(max_payload_bytes)
                    yield RawRecord(path, line_no, "row", skipped_reason=reason)
                    line_no += 1
                    chunk = chunk or read(BLOCK_BYTES)
                    continue
                if lines.held >= BLOCK_BYTES and lines.unended < len(chunk):
                    whole = lines.take_whole()  # ends in the latest chunk: a copy of ~a block
                    yield LineBlock(path, line_no, whole, pos)
                    line_no += _count_lines(whole)
                    pos = None if pos is None else pos + len(whole)
                chunk = read(BLOCK_BYTES)
            if lines.held:
                yield LineBlock(path, line_no, lines.take_all(), pos)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:  # truncated or corrupt .gz
        if whole := lines.take_whole():
            yield LineBlock(path, line_no, whole)
            line_no += _count_lines(whole)
        reason = f"unreadable file: {exc}"
        yield RawRecord(path, line_no + skipping, "row", skipped_reason=reason)


class _Gathered:
    """Reads of a stream gathered until they make a block: whole lines, and the start of
    a line whose end is not read yet. Joined once, when taken."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.held = 0  # bytes in parts
        self.ended = 0  # bytes in parts up to the last newline

    @property
    def unended(self) -> int:
        """Bytes of the line whose end is not read yet."""
        return self.held - self.ended

    def add(self, chunk: bytes) -> None:
        newline = chunk.rfind(b"\n")
        if newline != -1:
            self.ended = self.held + newline + 1
        self.parts.append(chunk)
        self.held += len(chunk)

    def take_whole(self) -> bytes:
        """The whole lines gathered (b"" if none); the unended line stays."""
        if not self.ended:
            return b""
        data = self.take_all()
        whole = data[: self.ended] if self.ended < len(data) else data
        rest = data[self.ended :]
        self.parts, self.held, self.ended = ([rest] if rest else []), len(rest), 0
        return whole

    def take_all(self) -> bytes:
        """Everything gathered, as one bytes object (the parts are left in place)."""
        if len(self.parts) != 1:
            self.parts = [b"".join(self.parts)]
        return self.parts[0]


def _count_lines(data: bytes) -> int:
    """The newlines in `data`; numpy counts them several times faster than bytes.count,
    and this runs on every byte of the input in the reading process."""
    return int(np.count_nonzero(np.frombuffer(data, np.uint8) == _NEWLINE))


def _skip_line(read: Callable[[int], bytes]) -> bytes:
    """Read past the end of an over-long line in bounded pieces; what follows its newline
    (the start of the lines after it) is returned."""
    while piece := read(1 << 20):
        end = piece.find(b"\n")
        if end != -1:
            return piece[end + 1 :]
    return b""


def block_records(
    block: LineBlock, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
) -> list[RawRecord]:
    """The records of a block's lines: one per non-blank line, as `iter_jsonl` gives them."""
    cap = raw_cap(max_payload_bytes)
    lines = block.data.split(b"\n")
    last = len(lines) - 1  # the piece after the final newline: empty, or an unended line
    records = []
    for i, line in enumerate(lines):
        if i == last and not line:
            break
        line_no = block.first_line + i
        if len(line) > cap:
            reason = too_large_reason(max_payload_bytes)
            records.append(RawRecord(block.source, line_no, "row", skipped_reason=reason))
        elif line.strip():
            ended = i != last
            records.append(_json_row(block.source, line_no, line, max_payload_bytes, ended))
    return records


def _json_row(
    path: str, line_no: int, line: bytes, max_payload_bytes: int, ended: bool = False
) -> RawRecord:
    """Parse one JSON line; anything but an object with the required keys is a skip.

    `ended`: the line had a newline, which the standard parser is given back, since its
    error messages tell positions ("line 2 column 1" needs the newline)."""
    row = _loads(line)
    if row is not _FAILED:
        return _row_of(path, line_no, row, max_payload_bytes)
    if ended:
        line += b"\n"
    try:
        row = json.loads(line)
    except RecursionError:
        return RawRecord(path, line_no, "row", skipped_reason="bad JSON line: nested too deeply")
    except (ValueError, UnicodeDecodeError) as exc:
        return RawRecord(path, line_no, "row", skipped_reason=f"bad JSON line: {exc}"[:160])
    return _row_of(path, line_no, row, max_payload_bytes)


def _loads(line: bytes) -> Any:
    """The line parsed by orjson, or `_FAILED` where its value could differ from
    `json.loads`'s: orjson rejects what the standard parser takes (NaN, 1e400, lone
    surrogates, a byte order mark), turns integers beyond 64 bits into floats, and follows
    deeper nesting. So any failure, any float, list or object among the columns a row
    uses, and nesting that may be deep go to `json.loads`, which decides them (rare)."""
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        return _FAILED
    nested = isinstance(row, list)
    if isinstance(row, dict):
        for name in COLUMNS:
            if not isinstance(row.get(name), _FAST_TYPES):
                return _FAILED
        for value in row.values():
            if isinstance(value, (list, dict)):
                nested = True
                break
    if nested and line.count(b"[") + line.count(b"{") > _MAX_FAST_BRACKETS:
        return _FAILED  # the brackets bound the depth; the standard parser's may be less
    return row


def _row_of(path: str, line_no: int, row: Any, max_payload_bytes: int) -> RawRecord:
    """A parsed line as a record: anything but a JSON object is a skip."""
    if not isinstance(row, dict):
        return RawRecord(path, line_no, "row", skipped_reason="bad row: not a JSON object")
    return row_record(path, line_no, row, max_payload_bytes)


def row_record(
    path: str,
    row_no: int,
    row: Mapping[str, Any],
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> RawRecord:
    """A table row (JSON object or Parquet row) as a RawRecord; hostile values are skips."""
    raw = RawRecord(source=path, offset=row_no, record_type="row")
    url = row.get("url")
    text = row.get("text")
    html = row.get("html")
    if row.get("id") is not None:
        raw.record_id = _id_text(row["id"])
    status = row.get("status")
    raw.status = _int_or_none(status)
    fetched = row.get("fetched_at")
    if fetched is not None:
        raw.fetched_at = _timestamp(fetched)
    if not isinstance(url, str) or not url.strip():
        raw.skipped_reason = "bad row: no url"
        return raw
    problem = _hostile(row, max_payload_bytes)
    if problem is not None:
        raw.url = safe_text(url.strip())
        raw.skipped_reason = problem
        return raw
    raw.url = url.strip()
    if isinstance(text, str):
        raw.text = text
    if isinstance(html, (str, bytes)):
        raw.payload = html.encode("utf-8") if isinstance(html, str) else html
        raw.content_type = "text/html"
        raw.charset = "utf-8" if isinstance(html, str) else None
    if raw.text is None and raw.payload is None:
        raw.skipped_reason = "bad row: no text or html"
    return raw


def _hostile(row: Mapping[str, Any], max_payload_bytes: int) -> str | None:
    """Why a row's values cannot become a page (None: they can)."""
    status = row.get("status")
    number = isinstance(status, (int, float)) and not isinstance(status, bool)
    if number and http_status(status) is None:
        return f"bad row: status {_id_text(status)[:24]} is not an HTTP status"
    for name in ("url", "text", "html", "fetched_at"):
        value = row.get(name)
        # isascii() is O(1) in CPython; only other text is encoded to look for surrogates.
        if isinstance(value, str) and not value.isascii() and safe_text(value) is not value:
            return f"bad row: {name} is not valid UTF-8 (lone surrogate)"
        sized = name in ("text", "html") and isinstance(value, (str, bytes))
        if sized and len(value) > max_payload_bytes:
            return too_large_reason(max_payload_bytes)
    return None


def _id_text(value: Any) -> str:
    """A value as writable text: huge ints and lone surrogates cannot stop the row."""
    try:
        return safe_text(str(value))[:200]
    except ValueError:  # an int beyond the str() digit limit
        return f"<{type(value).__name__}>"


def _int_or_none(value: Any) -> int | None:
    """An HTTP status from a number or a numeric string; anything else is unknown."""
    return http_status(value)


def _timestamp(value: Any) -> str | None:
    """ISO 8601 UTC from a datetime (Parquet timestamp) or a string; None if not a date,
    so that the column stays castable to a timestamp like the WARC readers' one."""
    if hasattr(value, "isoformat"):
        value = value.isoformat()
    return iso_utc(str(value))


def iter_parquet(
    path: str, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES, source: Any = None
) -> Iterator[RawRecord]:
    """One RawRecord per row, read in batches of the columns we use.

    `source` is an open seekable file to read instead of `path` (a URL's, from `remote.py`):
    Parquet keeps its index at the end, so it is read in ranges, never streamed.
    """
    try:
        table = pq.ParquetFile(path if source is None else source)
        names = set(table.schema_arrow.names)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError ...
        yield RawRecord(path, 0, "row", skipped_reason=f"unreadable parquet file: {exc}"[:200])
        return
    wanted = [c for c in COLUMNS if c in names]
    if "url" not in names or not ({"text", "html"} & names):
        have = ", ".join(sorted(names)) or "none"
        reason = f"table needs a url column and a text or html column (columns: {have})"
        yield RawRecord(path, 0, "row", skipped_reason=reason[:300])
        return
    row_no = 0
    try:
        for batch in table.iter_batches(batch_size=_BATCH_ROWS, columns=wanted):
            for row in batch.to_pylist():
                yield row_record(path, row_no, row, max_payload_bytes)
                row_no += 1
    except Exception as exc:  # a corrupt page or row group: report it, keep what was read
        yield RawRecord(path, row_no, "row", skipped_reason=f"unreadable rows: {exc}"[:200])
