"""JSONL (optionally gzipped) and Parquet tables of pages, one row per RawRecord.

A row needs a `url` and either a `text` column (already extracted text, used as is) or an
`html` column (parsed like a crawled page). Optional: `id`, `status`, `fetched_at`. Rows are
streamed (a line, or a Parquet batch, at a time) so a table never has to fit in memory, and a
bad row becomes a RawRecord with a skip reason instead of stopping the file: that includes
hostile values (deep nesting, numbers that fit no column, lone surrogates that cannot be
written as UTF-8) and lines longer than the payload cap, which are skipped unread.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pyarrow.parquet as pq

from neardup.config import DEFAULT_MAX_PAYLOAD_BYTES
from neardup.ingest.common import iso_utc
from neardup.ingest.limits import http_status, raw_cap, safe_text, too_large_reason
from neardup.ingest.record import RawRecord

COLUMNS = ("url", "text", "html", "id", "status", "fetched_at")
_BATCH_ROWS = 1024


def iter_jsonl(
    path: str,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    on_read: Callable[[int], None] | None = None,
) -> Iterator[RawRecord]:
    """One RawRecord per non-blank line; `offset` is the 0-based line number.

    `on_read(n)` hears, after each row, how many bytes of the file (compressed, for a .gz)
    have been read: a row number says nothing about how far into the file it is."""
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
        for rec in iter_jsonl_stream(path, fh, max_payload_bytes):
            if on_read is not None and not raw.closed:
                on_read(raw.tell())
            yield rec


def iter_jsonl_stream(
    path: str, fh: Any, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
) -> Iterator[RawRecord]:
    """The rows of an open (already decompressed) JSONL stream, which is closed at the end;
    shared by local files, URLs and stdin (`remote.py`), which have no path to reopen."""
    line_no = -1
    cap = raw_cap(max_payload_bytes)
    try:
        with fh:
            while True:
                line = fh.readline(cap + 1)
                if not line:
                    break
                line_no += 1
                if len(line) > cap and not line.endswith(b"\n"):
                    _skip_line(fh)
                    reason = too_large_reason(max_payload_bytes)
                    yield RawRecord(path, line_no, "row", skipped_reason=reason)
                elif line.strip():
                    yield _json_row(path, line_no, line, max_payload_bytes)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:  # truncated or corrupt .gz
        yield RawRecord(path, line_no + 1, "row", skipped_reason=f"unreadable file: {exc}")


def _skip_line(fh: Any) -> None:
    """Read past the rest of an over-long line in bounded pieces."""
    while True:
        piece = fh.readline(1 << 20)
        if not piece or piece.endswith(b"\n"):
            return


def _json_row(path: str, line_no: int, line: bytes, max_payload_bytes: int) -> RawRecord:
    """Parse one JSON line; anything but an object with the required keys is a skip."""
    try:
        row = json.loads(line)
    except RecursionError:
        return RawRecord(path, line_no, "row", skipped_reason="bad JSON line: nested too deeply")
    except (ValueError, UnicodeDecodeError) as exc:
        return RawRecord(path, line_no, "row", skipped_reason=f"bad JSON line: {exc}"[:160])
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
        if isinstance(value, str) and safe_text(value) is not value:
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
