"""Inputs where the data lives: URLs (https://, s3://, gs://: whatever fsspec opens) and stdin.

fsspec gives one file interface over every store, as datatrove uses it, so no protocol is
written by hand here; s3:// and gs:// need the `neardup[remote]` extra (s3fs, gcsfs), which
fsspec finds by the protocol. Files are streamed front to back through FastWARC's stream
reader (a Python file object with `read` and `tell`), never downloaded whole and never
seeked, since an HTTP server need not serve byte ranges. A fetch that breaks (connection
reset or refused, a timeout, 5xx) is retried a few times with backoff and resumes at the byte
where it broke; one that still fails, or one another try cannot mend (a host name that does not
resolve, 404, 403), becomes one row with its reason and the scan goes on with the next input.

A failure is named in its own words (`fetch_reason`): fsspec's HTTP files turn every failed
open into FileNotFoundError, so the reason is read from the exceptions it wraps (aiohttp's
DNS, connection, timeout and status errors), never from the FileNotFoundError alone.

Local files keep their own readers (`readers.py`): they can be seeked, so damage is resynced
and every record gets its length, which `dedup` needs to copy records. Inputs read here have
neither: damage ends the file with one row, `length` is None, and dedup refuses them.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import socket
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from neardup.config import DEFAULT_MAX_PAYLOAD_BYTES
from neardup.ingest.limits import short_error
from neardup.ingest.record import RawRecord
from neardup.ingest.tables import iter_jsonl_stream, iter_parquet
from neardup.ingest.warc_framing import archive_iterator
from neardup.ingest.warc_reader import to_raw_record

STDIN = "-"
RETRIES = 4  # after the first try: 5 fetches in all
BACKOFF_S = 0.25  # doubled after each failure: 0.25 s, 0.5 s, 1 s, 2 s
CONNECT_TIMEOUT_S = 30.0  # to open a connection to an HTTP server
READ_TIMEOUT_S = 120.0  # an HTTP server silent for this long is given up on (then retried)
_CHUNK = 1 << 20
_GZIP = b"\x1f\x8b"
# Failures that another try cannot mend (when nothing they wrap says otherwise).
_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)
# HTTP statuses worth another try: timeouts, rate limits and server errors.
_TRANSIENT_STATUS = frozenset({408, 425, 429})
_NO_LISTING = ("http", "https")
# The characters that make a path or URL a glob (for remote listings and local paths alike).
GLOB_CHARS = frozenset("*?[")


def is_remote(path: str) -> bool:
    """Whether `path` is read here (a URL, or `-` for stdin) rather than as a local file."""
    return path == STDIN or "://" in path


def url_name(url: str) -> str:
    """The path part of a URL (no query or fragment), whose suffix names the input's kind."""
    return urlsplit(url).path


def expand_remote(url: str, error: Callable[[str], Exception]) -> list[str]:
    """The URL itself, or the sorted matches of a glob on a store that can list (s3, gs).

    HTTP has no listing, so a glob there is refused with `error` (the caller's InputError):
    a paths file is how a published crawl names its files.
    """
    if url == STDIN or not (GLOB_CHARS & set(url_name(url))):
        return [url]
    scheme = urlsplit(url).scheme.lower()
    if scheme in _NO_LISTING:
        raise error(
            f"{url}: a glob is not possible over {scheme}:// (HTTP cannot list files);"
            " name the files, or give a paths file"
        )
    try:
        import fsspec  # only for remote inputs (and its import cost every command 27 ms)

        fs, pattern = fsspec.core.url_to_fs(url)
        matches = sorted(fs.glob(pattern))
    except Exception as exc:  # the store's own error, in one line
        raise error(f"{url}: cannot list: {short_error(exc)}") from None
    if not matches:
        raise error(f"{url}: pattern matches no files")
    return [fs.unstrip_protocol(m) for m in matches]


def _url_fs(url: str) -> tuple[Any, str]:
    """fsspec's file system for `url` and the path on it. HTTP gets timeouts for connecting
    and for a server that stops answering (`CONNECT_TIMEOUT_S`, `READ_TIMEOUT_S`), where
    aiohttp alone would wait five minutes, for the size asked first as for the data."""
    import fsspec  # only for remote inputs

    if urlsplit(url).scheme.lower() not in _NO_LISTING:
        return fsspec.core.url_to_fs(url)
    import aiohttp  # fsspec's HTTP client, loaded only for HTTP inputs

    timeout = aiohttp.ClientTimeout(
        total=None, sock_connect=CONNECT_TIMEOUT_S, sock_read=READ_TIMEOUT_S
    )
    return fsspec.core.url_to_fs(url, client_kwargs={"timeout": timeout})


def _open_url(url: str) -> Any:
    """An fsspec file on `url`; HTTP is streamed (no HEAD, no ranges) as one GET."""
    fs, path = _url_fs(url)
    if urlsplit(url).scheme.lower() in _NO_LISTING:
        return fs.open(path, "rb", block_size=0)
    return fs.open(path, "rb")


class FetchError(OSError):
    """A URL that cannot be fetched; its message is the reason in a few words."""


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and the exceptions it wraps, outermost first."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _failure(exc: BaseException, url: str) -> tuple[str, bool]:
    """(what went wrong in a few words, whether another try could mend it).

    The wrapped exceptions decide first: a DNS failure, a refused connection, a timeout or
    an HTTP status is named as such, whatever fsspec raised around it."""
    from aiohttp import ClientResponseError, ConnectionTimeoutError  # fsspec[http] brings it

    parts = urlsplit(url)
    host = parts.hostname or url
    port = parts.port or {"https": 443, "http": 80}.get(parts.scheme.lower())
    where = f"{host}:{port}" if port else host
    for inner in _chain(exc):
        if isinstance(inner, socket.gaierror):
            return f"cannot resolve host {host}", inner.errno == socket.EAI_AGAIN
        if isinstance(inner, ClientResponseError):
            status = inner.status
            if status == 404:
                return "not found (HTTP 404)", False
            words = f"HTTP {status} {inner.message}".strip()
            return words, status >= 500 or status in _TRANSIENT_STATUS
        if isinstance(inner, ConnectionRefusedError):
            return f"connection refused by {where}", True
        if isinstance(inner, ConnectionTimeoutError):
            return f"no connection to {where} within {CONNECT_TIMEOUT_S:g} s", True
        if isinstance(inner, TimeoutError):
            return f"no answer from {where} within {READ_TIMEOUT_S:g} s", True
    if isinstance(exc, FileNotFoundError):
        return "not found", False
    if isinstance(exc, PermissionError):
        return "permission denied", False
    return short_error(exc), not isinstance(exc, _PERMANENT)


def remote_size(url: str) -> int | None:
    """The size in bytes of the file at `url` as its store reports it (a HEAD on HTTP, the
    object's metadata on S3), or None: stdin, a server that does not say, or any failure,
    since a size only feeds a progress bar and must never stop a scan."""
    if url == STDIN:
        return None
    try:
        fs, path = _url_fs(url)
        size = fs.size(path)
    except Exception:  # the store's own errors; a failed fetch is reported when it is read
        return None
    return int(size) if size is not None else None


class _Counting:
    """A byte stream seen through `read` and a `tell` that counts what was read: FastWARC
    asks for both, and a pipe or an HTTP stream has no `tell` of its own. `on_read`, when
    given, hears the count after every read, so a progress bar can follow the stream."""

    def __init__(self, inner: Any, on_read: Callable[[int], None] | None = None) -> None:
        self.inner = inner
        self.pos = 0
        self.on_read = on_read

    def read(self, size: int = -1) -> bytes:
        data = self._read(size if size and size > 0 else _CHUNK)
        self.pos += len(data)
        if self.on_read is not None:
            self.on_read(self.pos)
        return data

    def _read(self, size: int) -> bytes:
        return bytes(self.inner.read(size))

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def close(self) -> None:
        if self.inner is not None:
            with contextlib.suppress(Exception):  # closing a broken connection may fail too
                self.inner.close()
            self.inner = None

    @property
    def closed(self) -> bool:
        return self.inner is None

    def __enter__(self) -> _Counting:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RetryingReader(_Counting):
    """A URL read front to back; a failed fetch or read is retried (`RETRIES`, with backoff)
    on a fresh connection that skips to where the last one broke. Raises FetchError (an
    OSError) with the reason when the tries are spent, and at once for a failure another
    try cannot mend (a host that does not resolve, 404, 403)."""

    def __init__(
        self,
        url: str,
        opener: Callable[[str], Any] = _open_url,
        on_read: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(None, on_read)
        self.url = url
        self.opener = opener
        self._retrying(lambda _f: None)  # the first fetch: a missing file fails here

    def _read(self, size: int) -> bytes:
        return self._retrying(lambda f: bytes(f.read(size)))

    def _retrying(self, action: Callable[[Any], Any]) -> Any:
        failures = 0
        while True:
            try:
                if self.inner is None:
                    self.inner = self._reopened()
                return action(self.inner)
            except FetchError:
                self.close()
                raise
            except Exception as exc:  # aiohttp, botocore ... raise their own
                self.close()
                reason, transient = _failure(exc, self.url)
                if not transient:
                    raise FetchError(reason) from exc
                failures += 1
                if failures > RETRIES:
                    raise FetchError(f"fetch failed {failures} times: {reason}") from exc
                time.sleep(BACKOFF_S * 2 ** (failures - 1))

    def _reopened(self) -> Any:
        """A fresh file on the URL, at the byte the last one stopped at."""
        fh = self.opener(self.url)
        todo = self.pos
        while todo > 0:  # no seek: the server need not serve ranges
            got = len(fh.read(min(todo, _CHUNK)))
            if got == 0:
                raise OSError("the file is shorter than before")
            todo -= got
        return fh

    def close(self) -> None:
        if self.inner is not None:
            _Counting.close(self)


def fetch_head(url: str, size: int = 1 << 16) -> bytes:
    """Up to `size` leading bytes of a URL or of stdin (left unread there), gunzipped."""
    if url == STDIN:
        data = sys.stdin.buffer.peek(size)[:size]
    else:
        reader = RetryingReader(url)
        try:
            data = reader.read(size)
        finally:
            reader.close()
    if data.startswith(_GZIP):
        try:
            return zlib.decompressobj(31).decompress(data, size)
        except zlib.error:
            return b""
    return data


def iter_remote(
    url: str,
    kind: str,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    on_read: Callable[[int], None] | None = None,
) -> Iterator[RawRecord]:
    """Every record of a URL (or of stdin) of the given kind, in order; never raises.

    `on_read(n)` hears how many bytes of the stream have been read so far, as they are read
    (a progress bar's position; Parquet, read in ranges, reports none)."""
    if kind == "parquet" and url != STDIN:
        yield from _parquet_records(url, max_payload_bytes)
        return
    if kind not in ("warc", "jsonl"):
        reason = f"cannot read {kind} input from {'stdin' if url == STDIN else 'a URL'}"
        yield RawRecord(url, 0, "file", skipped_reason=reason)
        return
    try:
        stream: _Counting = (
            _Counting(sys.stdin.buffer, on_read)
            if url == STDIN
            else RetryingReader(url, on_read=on_read)
        )
    except Exception as exc:  # any failed fetch is this input's one row
        yield RawRecord(url, 0, "file", skipped_reason=f"cannot fetch: {fetch_reason(exc, url)}")
        return
    try:
        if kind == "warc":
            yield from _warc_records(url, stream, max_payload_bytes)
        else:
            yield from iter_jsonl_stream(url, _maybe_gunzip(url, stream), max_payload_bytes)
    finally:
        if url != STDIN:
            stream.close()


def _parquet_records(url: str, cap: int) -> Iterator[RawRecord]:
    """Parquet keeps its index at the end, so it is read in byte ranges, not streamed."""
    try:
        fs, path = _url_fs(url)
        fh = fs.open(path, "rb")
    except Exception as exc:  # any failed fetch is this input's one row
        yield RawRecord(url, 0, "file", skipped_reason=f"cannot fetch: {fetch_reason(exc, url)}")
        return
    with fh:
        yield from iter_parquet(url, cap, source=fh)


def fetch_reason(exc: BaseException, url: str = "") -> str:
    """A failed fetch of `url` in a few words, one line: `cannot resolve host H`,
    `connection refused by H:P`, `no answer from H:P within N s`, `not found (HTTP 404)`,
    `HTTP 503 Service Unavailable` (after the retries: `fetch failed 5 times: ...`)."""
    if isinstance(exc, FetchError):
        return str(exc)
    return _failure(exc, url)[0]


def _maybe_gunzip(url: str, stream: _Counting) -> Any:
    """The stream as lines can be read from it: gunzipped when the name or the first bytes
    say gzip, else buffered (the JSONL reader asks for `readline`, which a bare stream has
    not). Closing what is returned leaves `stream` open: `iter_remote` closes it."""
    head = sys.stdin.buffer.peek(2)[:2] if url == STDIN else b""
    if url_name(url).endswith(".gz") or head == _GZIP:
        return gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[arg-type]
    return io.BufferedReader(_RawView(stream), _CHUNK)


class _RawView(io.RawIOBase):
    """`stream` as a raw binary file (`readinto`), for `io.BufferedReader`; closing the view
    does not close the stream."""

    def __init__(self, stream: _Counting) -> None:
        super().__init__()
        self.stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not len(buffer):
            return 0
        data = self.stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _warc_records(url: str, stream: _Counting, cap: int) -> Iterator[RawRecord]:
    """FastWARC over the stream (it finds gzip or zstd itself); damage or a fetch that
    cannot be mended ends the file with one row, since a stream cannot be resynced."""
    records = archive_iterator(stream)
    last = 0
    try:
        for rec in records:
            last = rec.stream_pos
            yield to_raw_record(rec, url, rec.stream_pos, cap)
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # FastWARC (a Rust panic is no Exception)
        reason = f"unreadable record: {short_error(exc)}; rest skipped"
        yield RawRecord(url, last + 1, "unknown", skipped_reason=reason)


__all__ = [
    "STDIN",
    "FetchError",
    "RetryingReader",
    "expand_remote",
    "fetch_head",
    "fetch_reason",
    "is_remote",
    "iter_remote",
    "remote_size",
    "url_name",
]
