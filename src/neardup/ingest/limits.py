"""Bounds on what one input record may cost, shared by every reader.

Published crawls hold hostile and broken records: decompression bombs, multi-gigabyte bodies,
kilobyte-long redirect targets, status codes that do not fit a column, file names that are not
UTF-8. A reader must never let one of them take the memory of the scan or stop the file, so the
limits live here, once: a body is read in chunks up to a cap and a record over it becomes a row
with the reason "payload too large" instead of a buffer the size of the record.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

from neardup.config import DEFAULT_MAX_PAYLOAD_BYTES
from neardup.ingest.record import RawRecord
from neardup.ingest.urls import resolve

# The longest Location header kept as `redirect_to`; browsers and crawlers stop near 2-8 KiB.
MAX_REDIRECT_CHARS = 8192
_READ_CHUNK = 1 << 20


class BodyError(ValueError):
    """The body cannot be decoded; the message becomes part of a skip reason."""


class PayloadTooLarge(BodyError):
    """The body decodes to more than the cap: the record is a row with a skip reason."""


def raw_cap(max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> int:
    """Raw (still encoded) body bytes read before a record is declared too large.

    Chunked transfer-encoding adds framing to the decoded size, so the raw cap leaves room
    for it; the decoded size is checked against `max_payload_bytes` itself after decoding.
    """
    return max_payload_bytes + max_payload_bytes // 2 + 65536


def too_large_reason(max_payload_bytes: int) -> str:
    """The skip reason of a capped record (the prefix matches extract's own check)."""
    return f"payload too large (over {max_payload_bytes} bytes)"


def read_capped(read: Callable[[int], bytes], cap: int) -> tuple[bytes, bool]:
    """(up to `cap` bytes from `read`, whether there was more), reading in 1 MiB chunks.

    Only `cap` + 1 bytes are ever held, whatever the size of the body behind `read`.
    """
    parts = []
    total = 0
    while total <= cap:
        chunk = read(min(_READ_CHUNK, cap + 1 - total))
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
    data = b"".join(parts)
    if len(data) > cap:
        return data[:cap], True
    return data, False


def http_status(value: object) -> int | None:
    """An HTTP status code as an int in 0..999, None for anything else (huge, inf, text)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        status = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return None
    return status if 0 <= status <= 999 else None


def set_redirect(raw: RawRecord, location: str | None) -> None:
    """`raw.redirect_to` from a 3xx Location; an over-long one is a skip reason instead."""
    status = raw.status
    if status is None or not 300 <= status < 400 or not location:
        return
    if len(location) > MAX_REDIRECT_CHARS:
        raw.skipped_reason = f"redirect target too long ({len(location)} characters)"
        return
    raw.redirect_to = resolve(raw.url, location)


def safe_text(value: str) -> str:
    """`value` with lone surrogates (undecodable file-name bytes) as backslash escapes.

    Such strings cannot be written to Parquet or DuckDB; the escaped form can, and shows the
    bytes that were there.
    """
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        pass
    try:  # a file name's undecodable bytes, as os.fsdecode gives them
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # other lone surrogates (JSON "\ud800")
        return value.encode("utf-8", "backslashreplace").decode("utf-8")


def entry_problem(path: str) -> str | None:
    """Why a directory entry cannot be read as an input file (None: it is a regular file).

    Never opens the entry: opening a FIFO would block the scan for ever.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "unreadable entry: dangling symlink" if os.path.islink(path) else None
    except OSError as exc:
        return f"unreadable entry: {exc.strerror or exc}"
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return None
    kinds = (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    what = next((name for test, name in kinds if test(st.st_mode)), "not a regular file")
    return f"unreadable entry: {what}"


def short_error(error: BaseException) -> str:
    """A one-line, bounded, ASCII error message for a skip reason."""
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    return text[:120]
