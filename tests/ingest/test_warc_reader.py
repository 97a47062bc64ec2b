"""WARC reader on WARC files written by the test itself (warcio), plain and gzip.

Every written record must come out exactly once, at the offset it was written at, with the
fields the pipeline relies on; damage must turn into skip reasons, never into exceptions or
silently missing records.
"""

from __future__ import annotations

import gzip
import io
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fastwarc.stream_io import ZstdWriter
from pdfs import make_pdf
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from neardup.ingest import extract_page
from neardup.ingest.record import RawRecord
from neardup.ingest.warc_reader import REVISIT_REASON, iter_warc

HTML = (
    b"<html><head><title>Chunked page</title></head>"
    b"<body><p>Hello from a chunked and gzipped body.</p><a href='/next'>next</a></body></html>"
)


def chunked(data: bytes, size: int = 17) -> bytes:
    """`data` in HTTP/1.1 chunked transfer-encoding, with small chunks."""
    parts = [
        b"%x\r\n%s\r\n" % (len(data[i : i + size]), data[i : i + size])
        for i in range(0, len(data), size)
    ]
    return b"".join(parts) + b"0\r\n\r\n"


def http(status: str, headers: list[tuple[str, str]]) -> StatusAndHeaders:
    return StatusAndHeaders(status, headers, protocol="HTTP/1.1")


@dataclass
class Written:
    """What a test wrote: the file, each record's offset, and its WARC type."""

    path: Path
    offsets: list[int] = field(default_factory=list)
    types: list[str] = field(default_factory=list)


def write_sample_warc(path: Path, gz: bool) -> Written:
    """One record of every kind the reader must handle."""
    written = Written(path)
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=gz)

    def add(record: object, kind: str) -> None:
        written.offsets.append(buf.tell())
        written.types.append(kind)
        writer.write_record(record)

    add(writer.create_warcinfo_record("x.warc", {"software": "test"}), "warcinfo")
    body = chunked(gzip.compress(HTML))
    headers = [
        ("Content-Type", "text/html; charset=UTF-8"),
        ("Transfer-Encoding", "chunked"),
        ("Content-Encoding", "gzip"),
    ]
    add(
        writer.create_warc_record(
            "http://Example.com:80/a",
            "response",
            payload=io.BytesIO(body),
            http_headers=http("200 OK", headers),
            warc_headers_dict={"WARC-IP-Address": "192.0.2.1"},
        ),
        "response",
    )
    # Stored decoded but still labelled chunked + gzip, as many crawlers do.
    add(
        writer.create_warc_record(
            "http://example.com/decoded",
            "response",
            payload=io.BytesIO(HTML),
            http_headers=http("200 OK", headers),
        ),
        "response",
    )
    add(
        writer.create_warc_record(
            "http://example.com/a",
            "request",
            payload=io.BytesIO(b""),
            http_headers=StatusAndHeaders("GET /a HTTP/1.1", [("Host", "example.com")]),
        ),
        "request",
    )
    add(
        writer.create_revisit_record(
            "http://example.com/a",
            digest="sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            refers_to_uri="http://example.com/a",
            refers_to_date="2020-01-01T00:00:00Z",
            http_headers=http("200 OK", [("Content-Type", "text/html")]),
        ),
        "revisit",
    )
    add(
        writer.create_warc_record(
            "http://example.com/old/page",
            "response",
            payload=io.BytesIO(b""),
            http_headers=http("301 Moved Permanently", [("Location", "../new#top")]),
        ),
        "response",
    )
    add(
        writer.create_warc_record(
            "http://example.com/doc.pdf",
            "response",
            payload=io.BytesIO(make_pdf("Hello PDF world")),
            http_headers=http("200 OK", [("Content-Type", "application/octet-stream")]),
        ),
        "response",
    )
    add(
        writer.create_warc_record(
            "metadata://crawler/log.txt",
            "resource",
            payload=io.BytesIO(b"crawl log"),
            warc_content_type="text/plain",
        ),
        "resource",
    )
    path.write_bytes(buf.getvalue())
    return written


@pytest.fixture(params=[False, True], ids=["plain", "gzip"])
def sample(request: pytest.FixtureRequest, tmp_path: Path) -> Written:
    suffix = ".warc.gz" if request.param else ".warc"
    return write_sample_warc(tmp_path / f"sample{suffix}", request.param)


def by_url(records: list[RawRecord], url: str, kind: str = "response") -> RawRecord:
    return next(r for r in records if r.url == url and r.record_type == kind)


def test_every_record_once_at_its_offset(sample: Written) -> None:
    records = list(iter_warc(str(sample.path)))
    assert [r.offset for r in records] == sample.offsets
    assert [r.record_type for r in records] == sample.types
    # Lengths tile the file: each record runs to the next one.
    assert sum(r.length or 0 for r in records) == sample.path.stat().st_size
    assert all(r.source == str(sample.path) for r in records)


def test_chunked_gzip_body_is_decoded(sample: Written) -> None:
    rec = by_url(list(iter_warc(str(sample.path))), "http://Example.com:80/a")
    assert rec.payload == HTML
    assert rec.status == 200
    assert rec.content_type == "text/html"
    assert rec.charset == "UTF-8"
    assert rec.ip == "192.0.2.1"
    assert rec.fetched_at and rec.fetched_at.endswith("Z")
    assert rec.record_id and rec.record_id.startswith("<urn:uuid:")
    assert rec.payload_digest and rec.payload_digest.startswith("sha1:")
    assert rec.skipped_reason is None
    page = extract_page(rec)
    assert page.format == "html" and page.title == "Chunked page"
    assert "Hello from a chunked" in (page.text or "")
    assert page.links == ["http://example.com/next"]


def test_body_stored_decoded_despite_headers(sample: Written) -> None:
    rec = by_url(list(iter_warc(str(sample.path))), "http://example.com/decoded")
    assert rec.payload == HTML and rec.skipped_reason is None


def test_non_pages_have_reasons(sample: Written) -> None:
    records = list(iter_warc(str(sample.path)))
    reasons = {r.record_type: r.skipped_reason for r in records}
    assert reasons["warcinfo"] == "not a page: warcinfo record"
    assert reasons["request"] == "not a page: request record"
    assert reasons["resource"] == "not a page: metadata record"
    revisit = by_url(records, "http://example.com/a", "revisit")
    assert revisit.skipped_reason == REVISIT_REASON
    assert revisit.refers_to == "http://example.com/a"
    assert revisit.payload is None


def test_redirect_target_resolved(sample: Written) -> None:
    rec = by_url(list(iter_warc(str(sample.path))), "http://example.com/old/page")
    assert rec.status == 301
    assert rec.redirect_to == "http://example.com/new"
    assert extract_page(rec).skipped_reason == "empty text"


def test_pdf_sniffed_and_extracted(sample: Written) -> None:
    rec = by_url(list(iter_warc(str(sample.path))), "http://example.com/doc.pdf")
    page = extract_page(rec)
    assert page.format == "pdf"
    assert "Hello PDF world" in (page.text or "")


def test_warcio_chunked_sample_is_dechunked() -> None:
    """The same check on warcio's real chunked capture, when the shared data is there."""
    path = Path(__file__).resolve().parents[2].parent / "shared/data/warc/warcio-iana-chunked.warc"
    if not path.exists():
        pytest.skip("shared data not available")
    rec = next(r for r in iter_warc(str(path)) if r.record_type == "response")
    assert rec.payload is not None
    assert rec.payload.startswith(b"<!doctype html>") and rec.payload.rstrip().endswith(b"</html>")


def test_truncated_last_record(sample: Written, tmp_path: Path) -> None:
    """Cut the file in the middle of the PDF response (the second to last record)."""
    data = sample.path.read_bytes()
    cut = tmp_path / ("cut" + "".join(sample.path.suffixes))
    pdf, after = sample.offsets[-2], sample.offsets[-1]
    cut.write_bytes(data[: pdf + (after - pdf) // 2])
    records = list(iter_warc(str(cut)))
    assert [r.offset for r in records] == sample.offsets[:-1]
    assert (records[-1].skipped_reason or "").startswith("unreadable record")
    assert records[-1].payload is None
    assert not any("unreadable" in (r.skipped_reason or "") for r in records[:-1])


def test_truncated_body(tmp_path: Path) -> None:
    """A record whose block ends early (cut inside the payload) is unreadable, not short."""
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=False)
    record = writer.create_warc_record(
        "http://example.com/big",
        "response",
        payload=io.BytesIO(b"<p>" + b"x" * 5000 + b"</p>"),
        http_headers=http("200 OK", [("Content-Type", "text/html")]),
    )
    writer.write_record(record)
    path = tmp_path / "short.warc"
    path.write_bytes(buf.getvalue()[:-3000])
    (rec,) = list(iter_warc(str(path)))
    assert rec.skipped_reason is not None and "truncated" in rec.skipped_reason
    assert rec.payload is None


def test_corrupt_gzip_member_is_skipped_and_reading_goes_on(tmp_path: Path) -> None:
    sample = write_sample_warc(tmp_path / "ok.warc.gz", gz=True)
    data = bytearray(sample.path.read_bytes())
    damaged = 2  # damage the deflate data of the third member
    start = sample.offsets[damaged]
    data[start + 20 : start + 60] = b"\x00" * 40
    path = tmp_path / "bad.warc.gz"
    path.write_bytes(bytes(data))
    records = list(iter_warc(str(path)))
    offsets = [r.offset for r in records]
    assert offsets == sample.offsets  # nothing lost, nothing invented
    bad = records[damaged]
    assert bad.skipped_reason is not None and bad.skipped_reason.startswith("unreadable record")
    assert records[damaged + 1].record_type == "request"
    assert records[-1].record_type == "resource"


def test_whole_file_gzip_gives_decompressed_offsets(tmp_path: Path) -> None:
    sample = write_sample_warc(tmp_path / "plain.warc", gz=False)
    path = tmp_path / "whole.warc.gz"
    path.write_bytes(gzip.compress(sample.path.read_bytes()))
    records = list(iter_warc(str(path)))
    assert [r.offset for r in records] == sample.offsets
    assert all(r.length is None for r in records)
    assert by_url(records, "http://Example.com:80/a").payload == HTML


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"", "empty file"), (b"hello, I am no WARC\n", "not a WARC or ARC file")],
)
def test_unrecognised_file_is_one_skipped_record(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "x.warc"
    path.write_bytes(content)
    (rec,) = list(iter_warc(str(path)))
    assert rec.offset == 0 and rec.skipped_reason is not None
    assert rec.skipped_reason.startswith(reason)


def test_missing_file_is_one_skipped_record(tmp_path: Path) -> None:
    (rec,) = list(iter_warc(str(tmp_path / "nope.warc.gz")))
    assert rec.skipped_reason is not None and "cannot" in rec.skipped_reason


def test_arc_content_in_a_warc_name_goes_to_the_arc_reader(tmp_path: Path) -> None:
    path = tmp_path / "really-an-arc.warc.gz"
    block = b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<p>old</p>"
    header = b"filedesc://x.arc 0.0.0.0 20080101000000 text/plain 4\n1 0 \n"
    rec = b"http://example.com/ 192.0.2.1 20080101000000 text/html %d\n" % len(block) + block
    path.write_bytes(gzip.compress(header + b"\n" + rec + b"\n"))
    records = list(iter_warc(str(path)))
    assert [r.record_type for r in records] == ["arc", "arc"]
    assert records[1].payload == b"<p>old</p>"


def test_corrupt_first_member(tmp_path: Path) -> None:
    """Even the warcinfo member being damaged must not hide the rest of the file."""
    sample = write_sample_warc(tmp_path / "ok.warc.gz", gz=True)
    data = bytearray(sample.path.read_bytes())
    data[20:60] = b"\x00" * 40
    path = tmp_path / "bad-start.warc.gz"
    path.write_bytes(bytes(data))
    records = list(iter_warc(str(path)))
    assert [r.offset for r in records] == sample.offsets
    assert (records[0].skipped_reason or "").startswith("unreadable record")
    assert by_url(records, "http://Example.com:80/a").payload == HTML


def test_zstd_warc_gives_decompressed_offsets(tmp_path: Path) -> None:
    sample = write_sample_warc(tmp_path / "plain.warc", gz=False)
    path = tmp_path / "s.warc.zst"
    writer = ZstdWriter(str(path))
    writer.write(sample.path.read_bytes())
    writer.close()
    records = list(iter_warc(str(path)))
    assert [r.offset for r in records] == sample.offsets
    assert by_url(records, "http://Example.com:80/a").payload == HTML
