"""WARC files (plain, per-record gzip, whole-file gzip, zstd) framed into RawRecords with FastWARC.

Every record of the file becomes exactly one RawRecord, in file order, so that the pipeline can
account for all of them. Records that are not pages carry a `skipped_reason`; damage never
raises out of the iterator. Two FastWARC behaviours shape this module:

* with `auto_decode`, FastWARC aborts the whole iteration on a body that claims
  `Transfer-Encoding: chunked` but was stored de-chunked (common: pywb, Heritrix), so bodies are
  read raw and decoded by `common.decode_body`, which checks the bytes first;
* on a corrupt gzip member or an over-long header FastWARC raises and stops; we then restart
  at the next record start (gzip member opening `WARC/`, or `WARC/1.` at a line start in a
  plain file), after one "unreadable record" for the damaged stretch;
* FastWARC trusts Content-Length, so a length that runs past its record reads the following
  records as body. Each record is checked against the next one's offset
  (`warc_framing.check_extent`); a record that swallowed others is reported as unreadable
  and reading restarts at the first record it swallowed.

Bodies are read in chunks up to a cap (`Settings.max_payload_bytes`, `ingest/limits.py`): a
bigger record is a row "payload too large", never a buffer the size of the record.

Offsets are FastWARC's `stream_pos`: the byte offset of the record's gzip member in the file,
or of the record itself in a plain file. A file compressed as one single gzip stream, and a
zstd file, have no per-record offsets we can check; there `offset` is the record's position in
the decompressed stream and `length` is None.
"""

from __future__ import annotations

from collections.abc import Iterator

from fastwarc.warc import WarcRecord

from neardup.config import DEFAULT_MAX_PAYLOAD_BYTES
from neardup.ingest import commoncrawl
from neardup.ingest.common import (
    DAMAGED_START,
    decode_body,
    iso_utc,
    sniff_archive,
    split_content_type,
)
from neardup.ingest.limits import (
    BodyError,
    PayloadTooLarge,
    http_status,
    raw_cap,
    read_capped,
    set_redirect,
    short_error,
    too_large_reason,
)
from neardup.ingest.record import RawRecord
from neardup.ingest.warc_scan import WarcScan

_PAGE_TYPES = ("response", "resource")
# URL schemes of records that crawlers write as response/resource but that are never pages.
_NON_PAGE_SCHEMES = ("dns:", "metadata:", "whois:", "filedesc:", "warcinfo:")
REVISIT_REASON = "revisit (duplicate marked by the crawler)"


def iter_warc(path: str, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> Iterator[RawRecord]:
    """All records of the WARC file at `path`, each as one RawRecord, in file order.

    ARC content (whatever the file is called) is handed to the ARC reader, because FastWARC
    silently yields nothing for it.
    """
    kind, problem = sniff_archive(path)
    if problem == DAMAGED_START:
        kind = "warc"  # the scan reports the damaged member and resumes at the next record
    if kind == "arc":
        from neardup.ingest.arc_reader import iter_arc

        yield from iter_arc(path, max_payload_bytes)
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
        yield from WarcScan(path, fh, max_payload_bytes, to_raw_record).records()
    finally:
        fh.close()


def to_raw_record(
    rec: WarcRecord, path: str, offset: int, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
) -> RawRecord:
    """One FastWARC record as a RawRecord; problems become a skip reason, never an exception."""
    raw = RawRecord(source=path, offset=offset, record_type="unknown")
    try:
        fields = _warc_fields(rec)
        _fill_warc_fields(raw, fields)
        if raw.record_type == "revisit":
            raw.skipped_reason = REVISIT_REASON
            _fill_http_status(raw, rec)
        elif commoncrawl.claims(raw.record_type, _declared_type(fields)):
            # WET conversion (a page) or WAT metadata (a link source)
            _fill_payload(raw, rec, fields)
            commoncrawl.finish_record(raw)
        elif raw.record_type not in _PAGE_TYPES:
            raw.skipped_reason = f"not a page: {raw.record_type} record"
        elif raw.url and raw.url.lower().startswith(_NON_PAGE_SCHEMES):
            raw.skipped_reason = f"not a page: {raw.url.split(':', 1)[0].lower()} record"
        else:
            _fill_payload(raw, rec, fields, max_payload_bytes)
    except PayloadTooLarge:
        raw.payload = None
        raw.skipped_reason = too_large_reason(max_payload_bytes)
    except BodyError as exc:
        raw.payload = None
        raw.skipped_reason = f"unreadable record: {short_error(exc)}"
    except Exception as exc:  # FastWARC raises OSError/ValueError on damaged records
        raw.payload = None
        raw.skipped_reason = f"unreadable record: {short_error(exc)}"
    return raw


def _warc_fields(rec: WarcRecord) -> dict[str, str]:
    """The record's WARC header fields by lower-case name, the first of a repeated one (what
    FastWARC's `get` answers): one pass over the header instead of a `get` a field, each of
    which searched the whole header again (a fifth of the reading process's time for a
    WARC's fields)."""
    return {(k.lower() if k.isascii() else k): v for k, v in reversed(rec.headers.astuples())}


def _fill_warc_fields(raw: RawRecord, headers: dict[str, str]) -> None:
    """Fields that come from the WARC header block alone."""
    warc_type = (headers.get("warc-type") or "").strip().lower()
    raw.record_type = warc_type or "unknown"
    raw.url = _strip_brackets(headers.get("warc-target-uri"))
    raw.fetched_at = iso_utc(headers.get("warc-date"))
    raw.record_id = headers.get("warc-record-id")
    raw.concurrent_to = headers.get("warc-concurrent-to")
    raw.ip = headers.get("warc-ip-address")
    raw.payload_digest = headers.get("warc-payload-digest")
    if warc_type == "revisit":
        raw.refers_to = _strip_brackets(
            headers.get("warc-refers-to-target-uri") or headers.get("warc-refers-to")
        )


def _declared_type(headers: dict[str, str]) -> str | None:
    """The record block's media type from the WARC header."""
    return split_content_type(headers.get("content-type"))[0]


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
    raw.status = http_status(http.status_code)
    raw.content_type, raw.charset = split_content_type(http.get("Content-Type"))
    set_redirect(raw, http.get("Location"))


def _fill_payload(
    raw: RawRecord,
    rec: WarcRecord,
    headers: dict[str, str],
    cap: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> None:
    """Read and decode the body of a response/resource record, checking for truncation.

    At most `raw_cap(cap)` bytes are read; FastWARC skips the rest of a bigger body in
    chunks when it moves to the next record.
    """
    declared = headers.get("content-length")
    if declared is None or not declared.strip().isdigit():
        raw.skipped_reason = "unreadable record: no valid Content-Length (truncated header?)"
        return
    if rec.is_http:
        _fill_http_status(raw, rec)
        if raw.status is None:
            raw.skipped_reason = "unreadable record: malformed HTTP response header"
            return
        if raw.skipped_reason:
            return  # an over-long redirect target
    else:
        raw.content_type, raw.charset = split_content_type(headers.get("content-type"))
    expected = rec.content_length
    body, more = read_capped(rec.reader.read, raw_cap(cap))
    if more:
        raise PayloadTooLarge(too_large_reason(cap))
    if len(body) < expected:
        raw.skipped_reason = f"unreadable record: truncated ({len(body)} of {expected} bytes)"
        return
    truncated = headers.get("warc-truncated")
    if truncated:
        raw.skipped_reason = f"truncated by the crawler ({truncated.strip()})"
        return
    if rec.is_http:
        http = rec.http_headers
        body = decode_body(
            body, http.get("Transfer-Encoding"), http.get("Content-Encoding"), limit=cap
        )
    if len(body) > cap:
        raise PayloadTooLarge(too_large_reason(cap))
    raw.payload = body
