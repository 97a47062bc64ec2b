"""A folder of .html/.htm files (a mirrored site, a documentation tree) as RawRecords.

Files are visited in sorted relative-path order so that document ids are the same on every
machine. Each file's URL is `base_url` + its relative path, which lets two mirrored trees under
different base URLs be compared page by page and link by link.

An entry named .html that cannot be read (a dangling symlink, a FIFO) is a row with its
reason, never opened; a file above the payload cap is a row "payload too large", read no
further than the cap.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from neardup.config import DEFAULT_MAX_PAYLOAD_BYTES
from neardup.ingest.limits import entry_problem, read_capped, too_large_reason
from neardup.ingest.record import RawRecord

HTML_SUFFIXES = (".html", ".htm")
# Characters that may stay unescaped in a URL path (RFC 3986 pchar plus "/").
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def is_html_file(path: Path) -> bool:
    """True for names ending in .html or .htm, in any letter case."""
    return path.name.lower().endswith(HTML_SUFFIXES)


def html_files(root: Path) -> list[Path]:
    """All .html/.htm entries under `root` (files, and entries that are not readable files),
    sorted by their path relative to it."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in filenames:
            path = Path(dirpath, name)
            if is_html_file(path) and (path.is_file() or entry_problem(str(path))):
                found.append(path)
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def has_html_files(root: Path) -> bool:
    """True if there is at least one .html/.htm file anywhere under `root`."""
    for _dirpath, _dirnames, filenames in os.walk(root):
        if any(name.lower().endswith(HTML_SUFFIXES) for name in filenames):
            return True
    return False


def file_url(root: Path, path: Path, base_url: str | None) -> str:
    """`base_url` joined with the percent-encoded relative path, or a file:// URL."""
    if not base_url:
        return path.resolve().as_uri()
    rel = path.relative_to(root).as_posix() if path != root else path.name
    # Bytes, so that a file name that is not UTF-8 is percent-encoded byte by byte.
    return base_url.rstrip("/") + "/" + quote(os.fsencode(rel), safe=_PATH_SAFE)


def iter_html_dir(
    root: str, base_url: str | None = None, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
) -> Iterator[RawRecord]:
    """One RawRecord per HTML file under `root` (or for `root` itself if it is a file)."""
    top = Path(root)
    if top.is_file():
        yield _file_record(top.parent, top, base_url, max_payload_bytes)
        return
    for path in html_files(top):
        yield _file_record(top, path, base_url, max_payload_bytes)


def _file_record(root: Path, path: Path, base_url: str | None, cap: int) -> RawRecord:
    """The file's bytes as a text/html payload; an unreadable file gets a skip reason."""
    raw = RawRecord(
        source=str(path),
        offset=0,
        record_type="file",
        url=file_url(root, path, base_url),
        content_type="text/html",
    )
    problem = entry_problem(str(path))
    if problem is not None:
        raw.skipped_reason = problem
        return raw
    try:
        with open(path, "rb") as fh:
            stat = os.fstat(fh.fileno())
            payload, more = read_capped(fh.read, cap)
    except OSError as exc:
        raw.skipped_reason = f"unreadable file: {exc.strerror or exc}"
        return raw
    raw.length = stat.st_size
    if more:
        raw.skipped_reason = too_large_reason(cap)
        return raw
    raw.payload = payload
    raw.fetched_at = _mtime_iso(stat.st_mtime)
    return raw


def _mtime_iso(mtime: float) -> str:
    """A file's modification time as ISO 8601 UTC, to the second."""
    stamp = datetime.fromtimestamp(int(mtime), tz=timezone.utc).replace(tzinfo=None)
    return stamp.isoformat() + "Z"
